"""`start` and `stop` of the test node, run on the host.

start: build (or find) the binaries, decide names and addresses, write certificates and
configurations, make the cgroup root, start the node's init process in its namespaces, give it
its veth, follow its progress, then check through the API server, from the host, what a user of
the node relies on (node Ready, the default ServiceAccount, a pod placed by the scheduler runs
and its log reads back, a runsc pod runs where the shim exists, a namespace deletes fully), and
write DIR/node.json. Every wait is bounded and a failure names the component and its log.

stop: end every process of the node (its PID namespace), delete the veth, remove the cgroup
root from every hierarchy, and the node's state; it works as well on a node that crashed or
never finished starting, and says what, if anything, it could not remove.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import api, configs
from .layout import K8S_VERSION, POD_SUBNET, SHADOWED, Node, choose_addresses, make_pki, tag_of, write_file

TOOLS = Path(__file__).resolve().parents[2]
START_TIMEOUT = 900.0
"""Upper bound of the whole start (each step has its own, smaller, bound)."""
PROBE_NS = "vbk8s-probe"
STATE_DIRS = ("data", "run", "etc", "sysctl", "state", "work")


class StartError(Exception):
    pass


class InputError(StartError):
    """Bad input: said in one line, exit 2, before anything starts."""


def log(text: str) -> None:
    print(f"start-kubernetes: {text}", file=sys.stderr, flush=True)


def _run(argv: list[str], check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and res.returncode:
        raise StartError(f"{' '.join(argv)}: {(res.stderr or res.stdout).strip()[-300:]}")
    return res


def lock(directory: Path) -> int:
    """An exclusive lock on DIR/.lock (held until the process exits); waits for another holder."""
    import fcntl

    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / ".lock", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log(f"another start or stop of {directory} is under way: waiting for it")
        fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def check_dir(directory: Path) -> None:
    for top in SHADOWED:
        if directory == Path(top) or Path(top) in directory.parents:
            raise InputError(f"{directory}: the node mounts its own {top}; give a directory elsewhere "
                             "(e.g. /var/lib/virtbench-test/k8s-node)")


# -- processes and namespaces ---------------------------------------------------------------------
def _ns(pid: int, kind: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def node_pids(node: Node) -> list[int]:
    """Every process of the node: those in its PID namespace, and its unshare."""
    ids = _ids(node)
    pidns = ids.get("pidns")
    marker = ["_init", node.dir]
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        argv = _cmdline(pid)
        if (pidns and _ns(pid, "pid") == pidns) or argv[-3:-1] == marker or argv[-2:] == marker:
            out.append(pid)
    return out


def _ids(node: Node) -> dict[str, Any]:
    try:
        ids: dict[str, Any] = json.loads(node.path("state", "ids.json").read_text())
    except (OSError, ValueError):
        return {}
    return ids


def _init_alive(node: Node) -> bool:
    ids = _ids(node)
    pid = ids.get("init")
    return isinstance(pid, int) and _ns(pid, "pid") == ids.get("pidns")


# -- cgroups --------------------------------------------------------------------------------------
def cgroup_mounts() -> list[Path]:
    """Mount points of every cgroup hierarchy (v1 controllers, named ones, the v2 one)."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        pre, _, post = line.partition(" - ")
        if post.split(" ")[0] in ("cgroup", "cgroup2"):
            out.append(Path(pre.split(" ")[4]))
    return out


def make_cgroup_root(node: Node) -> None:
    for mnt in cgroup_mounts():
        if (mnt / "cgroup.controllers").exists():
            continue  # the v2 hierarchy: the kubelet uses the v1 ones here (runc may add to it)
        d = mnt / node.cgroup_root.lstrip("/")
        d.mkdir(exist_ok=True)
        for f in ("cpuset.cpus", "cpuset.mems"):  # a new cpuset is empty: give it the parent's
            if (d / f).exists() and not (d / f).read_text().strip():
                (d / f).write_text((mnt / f).read_text())


def remove_cgroup_root(node: Node, timeout: float = 20) -> list[str]:
    """rmdir the cgroup root's tree, deepest first, in every hierarchy; what stays, by path."""
    deadline = time.monotonic() + timeout
    while True:
        left = []
        for mnt in cgroup_mounts():
            top = mnt / node.cgroup_root.lstrip("/")
            if not top.is_dir():
                continue
            for d, _, _ in sorted(os.walk(top, topdown=False), key=lambda w: -w[0].count("/")):
                try:
                    os.rmdir(d)
                except FileNotFoundError:
                    pass
                except OSError:
                    left.append(d)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.3)


# -- stop -----------------------------------------------------------------------------------------
def host_mounts_under(directory: Path) -> list[str]:
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        target = line.split(" ")[4]
        if target == str(directory) or target.startswith(f"{directory}/"):
            out.append(target)
    return out


def stop(directory: Path, quiet: bool = False) -> list[str]:
    """Take the node down and remove what it made; the list of what could not be removed."""
    node = Node.load(directory)
    if node is None:
        return []
    say = (lambda _t: None) if quiet else log
    init = _ids(node).get("init")
    if init and _init_alive(node):
        say(f"stopping node {node.name}")
        os.kill(init, signal.SIGTERM)  # its init stops the components in order (about 10 s)
        deadline = time.monotonic() + 60
        while _init_alive(node) and time.monotonic() < deadline:
            time.sleep(0.2)
    deadline = time.monotonic() + 30
    while pids := node_pids(node):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    left = [f"process {pid} ({' '.join(_cmdline(pid))[:80]})" for pid in node_pids(node)]
    if Path(f"/sys/class/net/{node.veth_host}").exists():
        _run(["ip", "link", "delete", node.veth_host], check=False)
    for _ in range(50):  # the pair goes with the namespace, asynchronously
        if not Path(f"/sys/class/net/{node.veth_host}").exists():
            break
        time.sleep(0.1)
    else:
        left.append(f"veth {node.veth_host}")
    left += [f"cgroup {d}" for d in remove_cgroup_root(node)]
    mounts = host_mounts_under(directory)
    left += [f"mount {m}" for m in mounts]
    if not mounts and not left:
        for name in STATE_DIRS:
            shutil.rmtree(directory / name, ignore_errors=True)
        for name in ("node.json", "kubeconfig"):
            (directory / name).unlink(missing_ok=True)
        shutil.rmtree(directory / "pki", ignore_errors=True)
        shutil.rmtree(directory / "ssh", ignore_errors=True)
    for item in left:
        log(f"error: left behind: {item}")
    if not left:
        say(f"node {node.name} stopped; its logs stay in {directory / 'log'}")
    return left


# -- start ----------------------------------------------------------------------------------------
def build() -> Path:
    res = subprocess.run([str(TOOLS / "build-kubernetes")], stdout=subprocess.PIPE, text=True)
    if res.returncode:
        raise StartError(f"tools/build-kubernetes failed (exit {res.returncode}): see its output above")
    return Path(res.stdout.strip().splitlines()[-1])


def _prepare(directory: Path, bin_dir: Path) -> Node:
    host_ip, node_ip = choose_addresses(tag_of(directory))
    node = Node(dir=str(directory), bin_dir=str(bin_dir), tag=tag_of(directory), host_ip=host_ip, node_ip=node_ip)
    if Path(f"/sys/class/net/{node.veth_host}").exists():
        raise StartError(f"interface {node.veth_host} exists already: another node of {directory}? "
                         f"(fix: tools/start-kubernetes stop {directory})")
    for name in (*STATE_DIRS, "pki", "ssh", "log"):
        shutil.rmtree(directory / name, ignore_errors=True)
    for sub in ("data/containerd", "data/kubelet", "data/etcd", "data/opt", "run/containerd", "state",
                "sysctl", "work", "log/var"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    node.save()
    return node


def _spawn_init(node: Node) -> None:
    argv = ["unshare", "--mount", "--net", "--pid", "--uts", "--fork", "--mount-proc", "--propagation", "private",
            "--kill-child=SIGTERM", "--", sys.executable, str(TOOLS / "start-kubernetes"), "_init", node.dir]
    with open(node.log("node"), "ab") as out:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                             cwd="/")
    own_net = _ns(os.getpid(), "net")
    deadline = time.monotonic() + 15
    init = None
    while time.monotonic() < deadline:
        children = Path(f"/proc/{p.pid}/task/{p.pid}/children")
        kids = children.read_text().split() if children.exists() else []
        if kids and _ns(p.pid, "net") != own_net:
            init = int(kids[0])
            break
        if p.poll() is not None:
            break
        time.sleep(0.05)
    if init is None:
        raise StartError(f"unshare did not start the node's init (log: {node.log('node')})")
    write_file(node.path("state", "ids.json"), json.dumps({
        "unshare": p.pid, "init": init, "pidns": _ns(init, "pid"), "netns": _ns(init, "net"),
        "mntns": _ns(init, "mnt")}))


def _network(node: Node) -> None:
    ids = _ids(node)
    inside = ["nsenter", f"--net=/proc/{ids['init']}/ns/net", "ip"]
    _run(["ip", "link", "add", node.veth_host, "type", "veth", "peer", "name", node.veth_node,
          "netns", str(ids["init"])])
    for argv in (["ip", "addr", "add", f"{node.host_ip}/30", "dev", node.veth_host],
                 ["ip", "link", "set", node.veth_host, "up"],
                 [*inside, "link", "set", node.veth_node, "name", "eth0"],
                 [*inside, "addr", "add", f"{node.node_ip}/30", "dev", "eth0"],
                 [*inside, "link", "set", "eth0", "up"],
                 [*inside, "link", "set", "lo", "up"]):
        _run(argv)
    write_file(node.path("state", "net.ready"), "")


def _follow_init(node: Node, deadline: float) -> None:
    status_file, stage = node.path("state", "status.json"), ""
    while True:
        try:
            status = json.loads(status_file.read_text())
        except (OSError, ValueError):
            status = {}
        if status.get("stage") != stage and status.get("state") == "starting":
            stage = str(status.get("stage"))
            log(f"starting {stage}")
        if status.get("state") == "running":
            return
        if status.get("state") == "failed":
            raise StartError(f"{status.get('component')} failed: {status.get('message')} (log: {status.get('log')})")
        if not _init_alive(node):
            raise StartError(f"the node's init process died at stage {stage or 'mounts'} (log: {node.log('node')})")
        if time.monotonic() > deadline:
            raise StartError(f"the node did not start within {START_TIMEOUT:.0f} s, at stage {stage} "
                             f"(log: {node.log(stage) if stage else node.log('node')})")
        time.sleep(0.3)


def _probe(a: api.Api, node: Node, name: str, image: str, runtime_class: str | None, timeout: float) -> str | None:
    """Run one probe pod to its end; None if it ran and printed, else why not."""
    text = f"virtbench-node-probe-{name}"
    a.create(f"/api/v1/namespaces/{PROBE_NS}/pods", api.probe_pod(name, image, text, runtime_class))
    try:
        outcome = api.wait_for(f"pod {name}", lambda: api.pod_outcome(a, PROBE_NS, name), timeout)
    except TimeoutError as exc:
        return f"{exc}: {api.pod_story(a, PROBE_NS, name)}"
    if outcome != "Succeeded":
        return f"{outcome}: {api.pod_story(a, PROBE_NS, name)}"
    pod = a.get(f"/api/v1/namespaces/{PROBE_NS}/pods/{name}")
    if pod["spec"].get("nodeName") != node.name:
        return f"pod {name} ran on {pod['spec'].get('nodeName')!r}, not on {node.name}"
    logs = a.call("GET", f"/api/v1/namespaces/{PROBE_NS}/pods/{name}/log", raw=True)
    if logs.strip() != text:
        return f"pod {name}'s log through the API server reads {logs.strip()[:100]!r}, not {text!r}"
    return None


def _check_api(node: Node, manifest: dict[str, Any]) -> dict[str, Any]:
    a = api.Api(node)
    kubelet_log = f"(log: {node.log('kubelet')})"
    log("waiting for the node to be Ready")
    api.wait_for(f"node {node.name} Ready {kubelet_log}", lambda: api.node_ready(a, node.name), 180)
    a.create("/apis/node.k8s.io/v1/runtimeclasses", {
        "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "runc"}, "handler": "runc"})
    sa_log = f"(log: {node.log('kube-controller-manager')})"
    api.wait_for(f"the default ServiceAccount {sa_log}",
                 lambda: a.exists("/api/v1/namespaces/default/serviceaccounts/default"), 120)
    a.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PROBE_NS}})
    api.wait_for(f"ServiceAccount default in {PROBE_NS} {sa_log}",
                 lambda: a.exists(f"/api/v1/namespaces/{PROBE_NS}/serviceaccounts/default"), 120)
    busybox = manifest["images"]["busybox"]
    log("running a probe pod (runc)")
    failure = _probe(a, node, "runc", busybox, None, 180)
    if failure:
        raise StartError(f"a pod does not run: {failure} {kubelet_log}")
    runsc: dict[str, Any] = {"available": False, "reason": manifest["runsc_shim"]["reason"]}
    if manifest["runsc_shim"]["available"]:
        a.create("/apis/node.k8s.io/v1/runtimeclasses", {
            "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "runsc"},
            "handler": "runsc"})
        log("running a probe pod (runsc)")
        failure = _probe(a, node, "runsc", busybox, "runsc", 180)
        if failure:
            log(f"runsc pods unavailable: {failure}")
            # a sandbox runsc could not start stays 'created' and cannot be killed: the pod would
            # never go and the namespace never finish deleting. Removed from the API at once; the
            # node's stop ends whatever is left of it with the node's PID namespace.
            a.delete(f"/api/v1/namespaces/{PROBE_NS}/pods/runsc", {"gracePeriodSeconds": 0})
            a.delete("/apis/node.k8s.io/v1/runtimeclasses/runsc")
            runsc = {"available": False, "reason": f"the runsc probe pod did not run: {failure}"}
        else:
            runsc = {"available": True, "reason": None, "gvisor_module": manifest["runsc_shim"]["gvisor_module"],
                     "runsc": configs.runsc_binary(node), "runsc_debian": manifest["debian"].get("runsc")}
    log(f"deleting namespace {PROBE_NS}")
    a.delete(f"/api/v1/namespaces/{PROBE_NS}")
    api.wait_for(f"namespace {PROBE_NS} gone {sa_log}", lambda: not a.exists(f"/api/v1/namespaces/{PROBE_NS}"), 180)
    return runsc


def _node_json(node: Node, manifest: dict[str, Any], runsc: dict[str, Any], seconds: float) -> dict[str, Any]:
    d = Path(node.dir)
    return {
        "format": 1,
        "name": node.name,
        "kubernetes_version": K8S_VERSION,
        "api_server": node.api_url,
        "kubeconfig": str(d / "kubeconfig"),
        "context": f"admin@{node.name}",
        "node_ip": node.node_ip,
        "host_ip": node.host_ip,
        "ssh": {"name": node.name, "address": node.node_ip, "port": 22, "user": "root",
                "key": str(d / "ssh" / "client_key"), "known_hosts": str(d / "ssh" / "known_hosts"),
                "work_dir": str(d / "work")},
        "containerd": {"socket": configs.CONTAINERD_SOCKET, "host_socket": str(d / "run" / "containerd" / "containerd.sock"),
                       "namespace": "k8s.io", "version": manifest["debian"].get("containerd")},
        "runtime_classes": ["runc", "runsc"] if runsc["available"] else ["runc"],
        "runsc": runsc,
        "images": manifest["images"],
        "cgroup_root": node.cgroup_root,
        "pod_subnet": POD_SUBNET,
        "logs": str(d / "log"),
        "binaries": node.bin_dir,
        "init_pid": _ids(node).get("init"),
        "start_seconds": round(seconds, 1),
    }


def running(directory: Path) -> bool:
    node = Node.load(directory)
    return bool(node) and (directory / "node.json").exists() and _init_alive(node)  # type: ignore[arg-type]


def start(directory: Path) -> Path:
    """Start the node of `directory` (or find it running); the path of its node.json."""
    check_dir(directory)
    node = Node.load(directory)
    info = directory / "node.json"
    if node and info.exists() and _init_alive(node):
        log(f"node {node.name} is running already")
        return info
    if node:
        log("removing what a previous node of this directory left")
        if stop(directory, quiet=True):
            raise StartError(f"cannot clean up the previous node of {directory} (see above)")
    directory.mkdir(parents=True, exist_ok=True)
    if mounts := host_mounts_under(directory):
        raise StartError(f"{mounts[0]} is mounted below {directory}: give the node a directory of its own")
    t0 = time.monotonic()
    bin_dir = build()
    manifest = json.loads((bin_dir / "manifest.json").read_text())
    node = _prepare(directory, bin_dir)
    log(f"node {node.name}: API server {node.api_url}, host end {node.host_ip} ({node.veth_host}), "
        f"cgroup root {node.cgroup_root}")
    try:
        make_pki(node)
        configs.make_ssh_keys(node)
        configs.write_all(node, manifest["images"]["pause"], runsc=manifest["runsc_shim"]["available"])
        make_cgroup_root(node)
        _spawn_init(node)
        _network(node)
        _follow_init(node, t0 + START_TIMEOUT)
        runsc = _check_api(node, manifest)
    except (StartError, TimeoutError, api.ApiError, OSError, subprocess.SubprocessError) as exc:
        log(f"error: {exc}")
        log("taking the half-started node down")
        stop(directory, quiet=True)
        raise StartError(f"the node did not start: {exc}") from None
    write_file(info, json.dumps(_node_json(node, manifest, runsc, time.monotonic() - t0), indent=1))
    log(f"node {node.name} is Ready after {time.monotonic() - t0:.0f} s "
        f"(runtime classes: {', '.join(['runc'] + (['runsc'] if runsc['available'] else []))})")
    return info

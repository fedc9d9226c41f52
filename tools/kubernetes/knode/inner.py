"""The node's init process: PID 1 of its PID namespace, inside its own mount, network and UTS ones.

`start` runs it under `unshare --mount --net --pid --uts --fork --mount-proc --propagation
private --kill-child=SIGTERM`. It makes the node's mounts (seen by nothing outside), waits for
the network `start` gives it (one veth end), then starts each component in order and waits until
that one answers before the next, writing its progress to DIR/state/status.json for `start` to
follow. Once all run, it supervises them: if one exits, the node is taken down and the status
names the component and its log. On SIGTERM (`stop`) it stops them in the reverse order; when it
exits, the kernel kills whatever is left in the PID namespace (containers, shims, sandboxes), and
the mounts go with the mount namespace.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from . import configs
from .layout import COMPONENTS, KUBELET_SYSCTLS, Node

READY_TIMEOUT = {"sshd": 20, "containerd": 60, "etcd": 60, "kube-apiserver": 180,
                 "kube-controller-manager": 90, "kube-scheduler": 90, "kubelet": 120}
"""Seconds each component gets to answer once started (generous: the machine is shared)."""
STOP_GRACE = 10.0


class Failed(Exception):
    def __init__(self, component: str, message: str) -> None:
        super().__init__(message)
        self.component = component


class Init:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.exited: dict[int, int] = {}  # pid -> wait status, of every child reaped
        self.stopping = False
        self.status: dict[str, object] = {"state": "starting", "stage": "mounts", "pid": os.getpid()}
        # the state directory as it is before any mount: written through this descriptor, the
        # status reaches `start` even from a failure half-way through setup_mounts
        self.state_fd = os.open(node.path("state"), os.O_RDONLY | os.O_DIRECTORY)

    # -- status ---------------------------------------------------------------------------------
    def report(self, **fields: object) -> None:
        self.status.update(fields, updated=time.time())
        fd = os.open(".status.json.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=self.state_fd)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(self.status, indent=1))
        os.rename(".status.json.tmp", "status.json", src_dir_fd=self.state_fd, dst_dir_fd=self.state_fd)

    def say(self, text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} node: {text}", flush=True)

    # -- processes ------------------------------------------------------------------------------
    def reap(self) -> None:
        """PID 1 inherits every orphan (shims daemonize): reap them all, note our own."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.exited[pid] = status

    def dead(self, component: str) -> str | None:
        """How a component ended, or None while it runs."""
        self.reap()
        p = self.procs.get(component)
        if p is None:
            return None
        if p.pid in self.exited:
            return f"exited with status {os.waitstatus_to_exitcode(self.exited[p.pid])}"
        if p.returncode is not None:  # reaped by Popen itself (send_signal and kill poll first)
            return f"exited with status {p.returncode}"
        return None

    def spawn(self, component: str, env: dict[str, str] | None = None) -> None:
        log = open(self.node.log(component), "ab")  # noqa: SIM115 (the child keeps it)
        path = f"{self.node.bin_dir}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        argv = configs.argv(self.node, component)
        try:
            self.procs[component] = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env={"PATH": path, "HOME": "/root", **(env or {})}, cwd="/")
        except OSError as exc:
            raise Failed(component, f"cannot start {argv[0]}: {exc.strerror}") from None
        finally:
            log.close()
        self.say(f"{component} started (pid {self.procs[component].pid} in the node)")

    def wait_ready(self, component: str, check: object) -> None:
        deadline = time.monotonic() + READY_TIMEOUT[component]
        last = ""
        while True:
            how = self.dead(component)
            if how:
                raise Failed(component, f"{component} {how} while starting")
            try:
                if check():  # type: ignore[operator]
                    self.say(f"{component} ready")
                    return
            except Exception as exc:  # noqa: BLE001 (any failure of a probe means: not yet)
                last = str(exc)[:200]
            if time.monotonic() > deadline:
                raise Failed(component, f"{component} did not answer within {READY_TIMEOUT[component]} s"
                             + (f" (last: {last})" if last else ""))
            time.sleep(0.3)

    def stop_all(self) -> None:
        for component in reversed(COMPONENTS):
            p = self.procs.get(component)
            if p is None or self.dead(component):
                continue
            self.say(f"stopping {component}")
            p.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE
            while not self.dead(component) and time.monotonic() < deadline:
                time.sleep(0.1)
            if not self.dead(component):
                p.kill()
                while not self.dead(component):
                    time.sleep(0.05)

    # -- start ----------------------------------------------------------------------------------
    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        try:
            setup_mounts(self.node)
            self.report(stage="network")
            wait_network(self.node)
            subprocess.run(["hostname", self.node.name], check=True)
            self.start_components()
        except Failed as exc:
            self.say(f"FAILED: {exc}")
            log = exc.component if exc.component in COMPONENTS else "node"
            self.report(state="failed", component=exc.component, message=str(exc),
                        log=str(self.node.log(log)))
            self.stop_all()
            return 1
        except Exception as exc:  # noqa: BLE001 (reported, then the node goes down)
            self.say(f"FAILED: {exc!r}")
            self.report(state="failed", component="init", message=repr(exc), log=str(self.node.log("node")))
            self.stop_all()
            return 1
        self.report(state="running", stage="running")
        while not self.stopping:
            for component in COMPONENTS:
                how = self.dead(component)
                if how and not self.stopping:
                    self.say(f"{component} {how}: taking the node down")
                    self.report(state="failed", component=component, message=f"{component} {how}",
                                log=str(self.node.log(component)))
                    self.stop_all()
                    return 1
            time.sleep(0.5)
        return 0

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self.stopping:
            return
        self.stopping = True
        self.say(f"signal {signum}: stopping")
        self.report(state="stopping")
        self.stop_all()
        self.report(state="stopped")
        os._exit(0)  # the kernel kills what is left in the PID namespace

    def start_components(self) -> None:
        node = self.node
        for component in COMPONENTS:
            if self.stopping:
                return
            self.report(stage=component)
            self.spawn(component)
            self.wait_ready(component, lambda c=component: ready(node, c))
            if component == "containerd":
                self.import_images()

    def import_images(self) -> None:
        for tar in sorted(Path(self.node.bin_dir, "images").glob("*.tar")):
            res = subprocess.run(["ctr", "--address", configs.CONTAINERD_SOCKET, "-n", "k8s.io", "images",
                                  "import", str(tar)], capture_output=True, text=True, timeout=300)
            if res.returncode:
                raise Failed("containerd", f"ctr images import {tar.name}: {res.stderr.strip()[-300:]}")
            self.say(f"imported {tar.name}")


# -- readiness ------------------------------------------------------------------------------------
def _https_ok(node: Node, url: str, client: bool = True) -> bool:
    ctx = ssl.create_default_context(cafile=str(node.pki / "ca.crt"))
    if client:
        ctx.load_cert_chain(str(node.pki / "admin.crt"), str(node.pki / "admin.key"))
    else:  # the controller manager's and scheduler's self-signed serving certificates
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with urllib.request.urlopen(url, context=ctx, timeout=5) as r:
        return bool(r.status == 200 and r.read().strip() == b"ok")


def ready(node: Node, component: str) -> bool:
    if component == "sshd":
        with socket.create_connection((node.node_ip, 22), timeout=2) as s:
            return bool(s.recv(4).startswith(b"SSH-"))
    if component == "containerd":
        res = subprocess.run(["ctr", "--address", configs.CONTAINERD_SOCKET, "version"],
                             capture_output=True, timeout=10)
        return res.returncode == 0
    if component == "etcd":
        with urllib.request.urlopen("http://127.0.0.1:2379/health", timeout=5) as r:
            return bool(json.loads(r.read()).get("health") == "true")
    if component == "kube-apiserver":
        return _https_ok(node, "https://127.0.0.1:6443/readyz")
    if component == "kube-controller-manager":
        return _https_ok(node, "https://127.0.0.1:10257/healthz", client=False)
    if component == "kube-scheduler":
        return _https_ok(node, "https://127.0.0.1:10259/healthz", client=False)
    if component == "kubelet":
        with urllib.request.urlopen("http://127.0.0.1:10248/healthz", timeout=5) as r:
            return bool(r.read().strip() == b"ok")
    raise ValueError(component)


# -- mounts and network ---------------------------------------------------------------------------
def _mount(*args: str) -> None:
    res = subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)
    if res.returncode:
        raise RuntimeError(f"mount {' '.join(args)}: {res.stderr.strip()}")


def detach_foreign_mounts() -> None:
    """Drop the copies of the host's other mounts that the new mount namespace got (other
    programs' image builds, loop-mounted disks, container roots): held here, they would keep
    those filesystems busy on the host for as long as the node runs. Kept: /, and what lies
    below /proc, /sys and /dev."""
    keep = ("/proc", "/sys", "/dev")
    for _ in range(5):  # stacked mounts come off one layer a pass
        targets = set()
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            target = line.split(" ")[4].replace("\\040", " ")
            if target != "/" and not any(target == k or target.startswith(k + "/") for k in keep):
                targets.add(target)
        if not targets:
            return
        for target in sorted(targets, key=lambda t: -t.count("/")):
            subprocess.run(["umount", "--lazy", target], capture_output=True, timeout=30)


def setup_mounts(node: Node) -> None:
    """The node's own /run (tmpfs), /var/log, a copy-on-write /var/lib (an overlay whose upper
    layer is a tmpfs: the CNI plugins' cache lands there, not on the host), its data directories
    bound at the standard places, and files holding the kubelet's sysctl values bound over
    /proc/sys (the kubelet sees them set and writes nothing global: vm.overcommit_memory=1,
    kernel.panic=10, kernel.panic_on_oops=1 on the host otherwise)."""
    d = Path(node.dir)
    detach_foreign_mounts()
    _mount("-t", "tmpfs", "-o", "mode=755,size=64m", "vbk8s-run", "/run")
    keep, varlib = Path("/run/vbk8s/dir"), Path("/run/vbk8s/varlib")
    keep.mkdir(parents=True)
    varlib.mkdir()
    # the node's directory, reachable whatever is mounted over its path (it may be below /var/lib)
    _mount("--bind", str(d), str(keep))
    _mount("-t", "tmpfs", "-o", "mode=755,size=256m", "vbk8s-varlib", str(varlib))
    for sub in ("upper", "work"):
        (varlib / sub).mkdir()
    _mount("-t", "overlay", "-o", f"lowerdir=/var/lib,upperdir={varlib}/upper,workdir={varlib}/work",
           "vbk8s-varlib", "/var/lib")
    for name in ("containerd", "kubelet", "etcd"):
        Path("/var/lib", name).mkdir(exist_ok=True)
        _mount("--bind", str(keep / "data" / name), f"/var/lib/{name}")
    _mount("--bind", str(keep / "log" / "var"), "/var/log")
    for sub in ("containerd", "netns", "sshd", "lock"):
        Path("/run", sub).mkdir(mode=0o755)
    _mount("--bind", str(keep / "run" / "containerd"), "/run/containerd")
    _mount("--bind", str(keep), str(d))  # the directory itself again, over the overlay
    for key, value in KUBELET_SYSCTLS.items():
        f = d / "sysctl" / key.replace("/", ".")
        f.write_text(value + "\n")
        _mount("--bind", str(f), f"/proc/sys/{key}")


def wait_network(node: Node, timeout: float = 30) -> None:
    """`start` moves the veth's node end in and configures it, then writes state/net.ready."""
    flag = node.path("state", "net.ready")
    deadline = time.monotonic() + timeout
    while not flag.exists():
        if time.monotonic() > deadline:
            raise Failed("network", f"no network from start-kubernetes within {timeout:.0f} s")
        time.sleep(0.1)


def main(directory: str) -> int:
    node = Node.load(Path(directory))
    if node is None:
        print(f"node: no {directory}/state/config.json", file=sys.stderr)
        return 2
    return Init(node).run()

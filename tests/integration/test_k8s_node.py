"""The test Kubernetes node (tools/start-kubernetes): a real cluster that leaves the host as it was.

The node is what the kubernetes platform's tests point virtbench at, through the kubeconfig it
writes, exactly as a user points virtbench at a cluster; these tests check the node itself:
Ready, pods placed by the scheduler and run from virtbench's own image imported over SSH, logs
read through the API server, runsc pods where the shim was built, and after stop (orderly, or
after a crash half-way through the start) no process, mount, veth, cgroup or network namespace
of it left, and no sysctl of the host changed.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostsupport.k8s_node import K8sNode, build, go_available, k8s_node
from virtbench.images.oci import oci_archive
from virtbench.remote.inventory import HostSpec
from virtbench.remote.ssh import SSHExecutor

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "kubernetes"))
from knode.outer import cgroup_mounts  # noqa: E402 - the tool's own reading of the hierarchies

pytestmark = pytest.mark.integration
k8s = pytest.importorskip("kubernetes", reason="the kubernetes extra (pip install 'virtbench[kubernetes]')")

__all__ = ["k8s_node"]  # the session's node, shared with the kubernetes platform's tests

KUBELET_SYSCTLS = ("vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
                   "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes")
VOLATILE = re.compile(r"^(kernel\.random\.|kernel\.ns_last_pid|kernel\.pty\.nr|kernel\.perf_event_max_sample_rate"
                      r"|kernel\.tainted|fs\.(dentry-state|inode-nr|inode-state|file-nr|aio-nr|quota\.)"
                      r"|fs\.binfmt_misc|net\.netfilter\.nf_conntrack_count"
                      r"|net\.ipv[46]\.(conf|neigh)\.(?!all\.|default\.))")
"""Sysctls the kernel or other programs change by themselves (counters, per-interface entries)."""


# -- the host, before and after -------------------------------------------------------------------
def sysctls() -> dict[str, str]:
    out = subprocess.run(["sysctl", "-a"], capture_output=True, text=True, timeout=60).stdout
    pairs = (line.split(" = ", 1) for line in out.splitlines() if " = " in line)
    return {k: v for k, v in pairs if not VOLATILE.match(k)}


def ns_holders(inode: str) -> list[str]:
    """Processes in, and nsfs mounts of, a namespace ('net:[4026532181]')."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            for kind in ("pid", "net", "mnt"):
                try:
                    if os.readlink(f"/proc/{entry}/ns/{kind}") == inode:
                        found.append(f"process {entry}")
                except OSError:
                    pass
    number = inode.split("[")[1].rstrip("]")
    found += [f"mount {line}" for line in Path("/proc/self/mountinfo").read_text().splitlines()
              if " - nsfs " in line and number in line]
    return found


def assert_nothing_left(node: K8sNode, tag: str, ids: dict[str, Any], before: dict[str, str]) -> None:
    for kind in ("pidns", "netns", "mntns"):
        assert not ns_holders(ids[kind]), f"the node's {kind} is still held: {ns_holders(ids[kind])}"
    assert not [p for p in os.listdir("/proc") if p.isdigit() and str(node.dir) in _cmdline(p)], "a process of the node"
    assert not [n for n in os.listdir("/sys/class/net") if tag in n], "the node's veth is still there"
    left = [str(m / f"vbk8s-{tag}") for m in cgroup_mounts() if (m / f"vbk8s-{tag}").exists()]
    assert not left, f"cgroups left: {left}"
    mounts = [line.split(" ")[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    assert not [m for m in mounts if m.startswith(str(node.dir))], "a mount below the node's directory"
    after = sysctls()
    changed = {k: (v, after.get(k)) for k, v in before.items() if k in after and after[k] != v}
    assert not changed, f"host sysctls changed: {changed}"
    for key in KUBELET_SYSCTLS:
        assert after[key] == before[key]


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# -- clients --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def core(k8s_node) -> Iterator[Any]:
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=k8s_node["kubeconfig"])
    yield client.CoreV1Api(api)
    api.close()


@pytest.fixture(scope="module")
def node_ssh(k8s_node, tmp_path_factory) -> Iterator[SSHExecutor]:
    with SSHExecutor(HostSpec(**k8s_node["ssh"]), tmp_path_factory.mktemp("k8s-ssh")) as ex:
        yield ex


@pytest.fixture(scope="module")
def imported(image, node_ssh) -> Iterator[str]:
    """virtbench's own image, imported over SSH into the node's containerd (namespace k8s.io)."""
    archive = oci_archive(image)
    node_ssh.run(["ctr", "-n", "k8s.io", "images", "import", str(archive)], timeout=600)
    assert image.tag in node_ssh.run(["ctr", "-n", "k8s.io", "images", "ls", "-q"]).stdout.split()
    yield image.tag
    node_ssh.run(["ctr", "-n", "k8s.io", "images", "rm", image.tag], check=False)


@pytest.fixture
def namespace(core) -> Iterator[str]:
    from kubernetes import client

    name = f"vbtest-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    _wait(lambda: _exists(lambda: core.read_namespaced_service_account("default", name)), 120, "ServiceAccount")
    yield name
    core.delete_namespace(name)
    _wait(lambda: not _exists(lambda: core.read_namespace(name)), 180, f"namespace {name} deleted")


def _exists(read: Any) -> bool:
    from kubernetes.client.rest import ApiException

    try:
        read()
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _wait(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.5)
    return result


def run_pod(core: Any, ns: str, image: str, command: list[str], runtime_class: str | None = None) -> Any:
    """A pod the scheduler places, run to its end; (pod, its log read through the API server)."""
    from kubernetes import client

    name = f"p{uuid.uuid4().hex[:6]}"
    core.create_namespaced_pod(ns, client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(restart_policy="Never", runtime_class_name=runtime_class,
                              termination_grace_period_seconds=1,
                              containers=[client.V1Container(name="c", image=image, image_pull_policy="Never",
                                                             command=command)])))

    def ended() -> Any:
        pod = core.read_namespaced_pod(name, ns)
        return pod if pod.status.phase in ("Succeeded", "Failed") else None

    pod = _wait(ended, 300, f"pod {name}")
    return pod, core.read_namespaced_pod_log(name, ns)


# -- a node of its own: start, stop, crash --------------------------------------------------------
@pytest.fixture
def own_node() -> Iterator[K8sNode]:
    if not go_available():
        pytest.skip("no Go toolchain here: the test Kubernetes node is built from Go modules")
    build()
    node = K8sNode()
    yield node
    node.stop()
    node.remove()


def test_stop_leaves_the_host_as_it_was(own_node):
    from kubernetes import client, config

    before = sysctls()
    info = own_node.start()
    ids = json.loads((own_node.dir / "state" / "ids.json").read_text())
    tag = info["name"].removeprefix("vbk8s-")
    assert Path(f"/sys/class/net/vbk8s{tag}h").exists()
    assert all((m / f"vbk8s-{tag}").is_dir() for m in cgroup_mounts() if not (m / "cgroup.controllers").exists())
    for key in KUBELET_SYSCTLS:  # the kubelet ran and set them, inside the node only
        assert sysctls()[key] == before[key]
    with config.new_client_from_config(config_file=info["kubeconfig"]) as api:  # a pod still running at stop
        core = client.CoreV1Api(api)
        _wait(lambda: _exists(lambda: core.read_namespaced_service_account("default", "default")), 120, "SA")
        core.create_namespaced_pod("default", client.V1Pod(
            metadata=client.V1ObjectMeta(name="sleeper"),
            spec=client.V1PodSpec(containers=[client.V1Container(
                name="c", image=info["images"]["busybox"], image_pull_policy="Never", command=["sleep", "3600"])])))
        _wait(lambda: core.read_namespaced_pod("sleeper", "default").status.phase == "Running", 180, "pod Running")
    assert [c for c in cgroup_mounts() if list((c / f"vbk8s-{tag}").glob("kubepods*/**/pod*"))]
    res = own_node.stop()
    assert res.returncode == 0, res.stderr
    assert_nothing_left(own_node, tag, ids, before)


def test_stop_cleans_up_a_node_that_crashed_while_starting(own_node):
    before = sysctls()
    starting = subprocess.Popen(["tools/start-kubernetes", "start", str(own_node.dir)], cwd=Path(__file__).parents[2],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    status = own_node.dir / "state" / "status.json"

    def kubelet_stage() -> bool:
        """The kubelet started (stage kubelet, then running while the start waits for Ready and
        its probe pods): on a quiet machine the kubelet stage alone lasts less than a poll (the
        start went from it to Ready in 22 s, unseen)."""
        try:
            return json.loads(status.read_text()).get("stage") in ("kubelet", "running")
        except (OSError, ValueError):
            return False

    try:
        _wait(lambda: kubelet_stage() or starting.poll() is not None, 600, "the start reaching the kubelet")
        assert starting.poll() is None, starting.stderr.read() if starting.stderr else ""
        ids = json.loads((own_node.dir / "state" / "ids.json").read_text())
        tag = json.loads((own_node.dir / "state" / "config.json").read_text())["tag"]
        starting.kill()  # the start dies with its node half-way up: the node crashes too
        os.kill(ids["init"], signal.SIGKILL)
    finally:
        starting.kill()
        starting.wait(timeout=60)
    res = own_node.stop()
    assert res.returncode == 0, res.stderr
    assert_nothing_left(own_node, tag, ids, before)


# -- the session's node ---------------------------------------------------------------------------
def test_node_is_ready_and_reachable_as_node_json_says(k8s_node, core):
    node = core.read_node(k8s_node["name"])
    ready = [c for c in node.status.conditions if c.type == "Ready"]
    assert ready and ready[0].status == "True"
    assert node.status.node_info.kubelet_version == "v1.34.4" == k8s_node["kubernetes_version"]
    assert node.status.node_info.container_runtime_version.startswith("containerd://1.6")
    assert not node.spec.taints, "the controller manager lifts the not-ready taint once Ready"
    addresses = {a.type: a.address for a in node.status.addresses}
    assert addresses["InternalIP"] == k8s_node["node_ip"]
    assert k8s_node["api_server"] == f"https://{k8s_node['node_ip']}:6443"
    assert core.read_namespaced_service_account("default", "default").metadata.name == "default"
    from kubernetes import client, config

    with config.new_client_from_config(config_file=k8s_node["kubeconfig"]) as api:
        classes = {rc.metadata.name: rc.handler for rc in client.NodeV1Api(api).list_runtime_class().items}
    assert classes.get("runc") == "runc"
    assert sorted(classes) == sorted(k8s_node["runtime_classes"])


def test_ssh_reaches_the_node_and_its_own_containerd(k8s_node, node_ssh):
    assert node_ssh.run(["hostname"]).stdout.strip() == k8s_node["name"]
    out = node_ssh.run(["ctr", "version"]).stdout
    assert "Server:" in out and re.search(r"Server:\s+Version:\s+1\.6", out)
    names = node_ssh.run(["ctr", "-n", "k8s.io", "images", "ls", "-q"]).stdout.split()
    assert k8s_node["images"]["pause"] in names  # the node's containerd, not the host's
    ps = node_ssh.run(["ps", "-e", "-o", "comm="]).stdout.split()
    assert "kubelet" in ps and "kube-apiserver" in ps  # inside the node's PID namespace


def test_pod_from_virtbench_image_runs_and_its_log_reads_back(k8s_node, core, imported, namespace):
    pod, log = run_pod(core, namespace, imported, ["sh", "-c", "openssl version; cat /etc/debian_version"])
    assert pod.status.phase == "Succeeded", pod.status
    assert pod.spec.node_name == k8s_node["name"]  # placed by the scheduler: the spec named no node
    assert log.startswith("OpenSSL 3.") and re.search(r"^12\.\d+$", log, re.M), log


def test_runsc_pod_runs_in_gvisor(k8s_node, core, imported, namespace):
    if "runsc" not in k8s_node["runtime_classes"]:
        reason = k8s_node["runsc"]["reason"] or ""
        if "probe pod" in reason:
            pytest.fail(f"the runsc shim was built, but a runsc pod does not run: {reason}")
        pytest.skip(f"no runsc pods on this node: {reason}")
    pod, log = run_pod(core, namespace, imported, ["dmesg"], runtime_class="runsc")
    assert pod.status.phase == "Succeeded", pod.status
    assert "Starting gVisor" in log, log

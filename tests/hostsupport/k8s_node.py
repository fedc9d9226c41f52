"""The test Kubernetes node for integration tests: built once per machine, started once per session.

tools/build-kubernetes builds the binaries (cached by recipe; a build already under way, such as
the one CI starts in the background early, is waited for through its lock) and
tools/start-kubernetes starts a real single-node cluster in its own namespaces and writes
DIR/node.json (its header documents every field). Tests get that node.json as a dict:

    from hostsupport.k8s_node import k8s_node      # a session fixture; use it by name

    def test_pods(k8s_node):
        config.load_kube_config(k8s_node["kubeconfig"])        # the PyPI kubernetes client
        host = HostSpec(**k8s_node["ssh"])                     # the node as an SSH host

Every module that imports the fixture gets the same node, started on first use and stopped after
the last test of their xdist group (`k8snode`, tests/hostsupport/schedule.py: one node per run,
not one per worker that happens to get such a module) or when the session ends; the stop checks
that nothing of it is left on the host (processes, mounts, the veth, cgroups) and fails that
test's teardown if something is. While its worker waits for a measuring test elsewhere, every
process of the node is stopped (SIGSTOP) and continued afterwards, as the reference guest is
paused: an idle node's apiserver, etcd and kubelet still take a few per cent of a core. `K8sNode` starts a
node of its own for a test that must see one start and stop (tests/integration/test_k8s_node.py).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from hostsupport import schedule

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "kubernetes"))
from knode.layout import Node  # noqa: E402 - the tool's own view of a node
from knode.outer import node_pids  # noqa: E402

BUILD = ROOT / "tools" / "build-kubernetes"
START = ROOT / "tools" / "start-kubernetes"
BASE = Path("/var/lib/virtbench-test")
BUILD_TIMEOUT = 3600
"""A cold build on 2 busy cores (kubelet alone took 548 s at load 5-6); it normally is cached."""
START_TIMEOUT = 1200
"""start-kubernetes bounds itself at 900 s; this only catches a hang of the tool itself."""


def go_available() -> bool:
    return shutil.which("go") is not None or Path("/usr/local/go/bin/go").exists()


def build() -> Path:
    """The directory of the node's binaries, built now if this machine has none for this recipe."""
    res = subprocess.run([str(BUILD)], capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    if res.returncode:
        raise RuntimeError(f"tools/build-kubernetes failed (exit {res.returncode}):\n{res.stderr[-3000:]}")
    return Path(res.stdout.strip().splitlines()[-1])


class K8sNode:
    """One node in its own directory under /var/lib/virtbench-test."""

    def __init__(self, directory: Path | None = None) -> None:
        self.dir = directory or BASE / f"k8s-node-{uuid.uuid4().hex[:6]}"
        self.info: dict[str, Any] = {}
        self.output = ""

    def start(self) -> dict[str, Any]:
        res = subprocess.run([str(START), "start", str(self.dir)], capture_output=True, text=True,
                             timeout=START_TIMEOUT)
        self.output = res.stderr
        if res.returncode:
            raise RuntimeError(f"tools/start-kubernetes start {self.dir} failed (exit {res.returncode}):\n"
                               f"{res.stderr[-4000:]}")
        self.info = json.loads(Path(res.stdout.strip().splitlines()[-1]).read_text())
        return self.info

    def stop(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(START), "stop", str(self.dir)], capture_output=True, text=True, timeout=300)

    def remove(self) -> None:
        """The directory (logs included), once stopped with nothing left."""
        shutil.rmtree(self.dir, ignore_errors=True)


_shared: K8sNode | None = None
_unregister: list[Any] = []


def _signal_node(sig: signal.Signals) -> None:
    """sig to every process of the session's node, as tools/start-kubernetes finds them."""
    node = _shared and Node.load(_shared.dir)
    for pid in node_pids(node) if node else []:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def stop_after(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """The session's node stopped once the next test is not of its group (see the docstring)."""
    if _shared is not None and (nextitem is None or schedule.group_of(nextitem) != schedule.group_of(item)):
        _stop_shared()


def _stop_shared() -> None:
    global _shared
    while _unregister:
        _unregister.pop()()
    node, _shared = _shared, None
    if node is None:
        return
    res = node.stop()
    if res.returncode:
        raise RuntimeError(f"the session's Kubernetes node left something behind (logs in {node.dir / 'log'}):\n"
                           f"{res.stderr[-3000:]}")
    node.remove()


@pytest.fixture(scope="module")
def k8s_node(request: pytest.FixtureRequest) -> dict[str, Any]:
    """node.json of the session's node (see the module's docstring), started when none runs: a
    module after its group's last test (which stopped it) gets a node again, not a stale node.json
    (module scope: test_k8s_node's module fixtures build on it)."""
    global _shared
    if _shared is None:
        if not go_available():
            pytest.skip("no Go toolchain here: the test Kubernetes node is built from Go modules "
                        "(install Go >= 1.24)")
        build()
        node = K8sNode()
        try:
            node.start()
        except RuntimeError:
            node.stop()
            raise
        _shared = node
        _unregister.append(schedule.while_waiting(lambda: _signal_node(signal.SIGSTOP),
                                                  lambda: _signal_node(signal.SIGCONT)))
        request.config.add_cleanup(_stop_shared)
    return _shared.info

"""A pod's lifecycle timed by watched events, on watch lines recorded from a real node
(tests/data/kubernetes, tools/record-kubernetes): each step is the arrival of the first event
that shows it, the API's whole-second stamps kept beside as a cross-check (issue #38)."""
from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from virtbench.errors import InputError
from virtbench.platforms.kubernetes import events, kexec, preflight
from virtbench.platforms.kubernetes.events import Timeline

DATA = Path(__file__).parents[1] / "data" / "kubernetes"


def _load(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


def _ready(obj: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def test_each_step_is_the_first_event_that_shows_it():
    recorded = _load("pod-watch.jsonl")
    meta = json.loads((DATA / "pod-watch.meta.json").read_text())
    tl = Timeline(t0=0.0, wall0=meta["wall_create"])
    for e in recorded:
        if e["t"] >= meta["delete"] and tl.stop_t0 is None:
            tl.stop_t0 = meta["delete"]
        tl.feed(e["type"], e["object"], e["t"])
    s = tl.steps
    assert 0 < s["scheduled"] <= s["running"] <= s["ready"] < meta["delete"]
    assert s["ready"] == next(e["t"] for e in recorded if _ready(e["object"]))
    assert 0 < s["stopped"] <= s["gone"]
    assert s["gone"] == pytest.approx(next(e["t"] for e in recorded if e["type"] == "DELETED") - meta["delete"])
    assert tl.terminated.get("exitCode") == 0 and tl.failure is None
    # the API's own stamps are whole seconds: ours fall within the second they name, plus clock
    # skew and, after it, the kubelet's status update on its way to the watch (the container's
    # startedAt is stamped before the kubelet reports it: 1.09 and 1.51 s after the stamp's
    # offset in two recordings on the test node)
    offsets = tl.offsets()
    for step in ("scheduled", "running", "ready"):
        assert offsets[step] - 1.5 <= s[step] <= offsets[step] + 2.5, (step, offsets[step], s[step])
    assert [e["type"] for e in tl.events][-1] == "DELETED"


@pytest.mark.parametrize("name, needle", [("pod-watch-unschedulable.jsonl", "unschedulable:"),
                                          ("pod-watch-never-pull.jsonl", "ErrImageNeverPull")])
def test_a_pod_that_will_not_start_says_why(name: str, needle: str):
    tl = Timeline(t0=0.0, wall0=0.0)
    for e in _load(name):
        tl.feed(e["type"], e["object"], e["t"])
    assert tl.failure is not None and tl.failure.startswith(needle), tl.failure
    assert "ready" not in tl.steps


class _Recorded:
    """The raw watch response as the API server sent it (the recorded lines), in arbitrary chunks."""

    def __init__(self, lines: list[dict[str, Any]], size: int) -> None:
        data = "".join(json.dumps({"type": e["type"], "object": e["object"]}) + "\n" for e in lines).encode()
        self.buf, self.size, self.closed = io.BytesIO(data), size, threading.Event()

    def stream(self, amt: Any = None, decode_content: bool = False) -> Any:
        while chunk := self.buf.read(self.size):
            yield chunk

    def close(self) -> None:
        self.closed.set()

    def release_conn(self) -> None:
        pass


@pytest.mark.parametrize("size", [7, 4096, 1 << 20])
def test_the_watcher_reads_whole_events_across_chunks(size: int):
    tl = Timeline(t0=0.0, wall0=0.0)
    w = events.Watcher(_Recorded(_load("pod-watch.jsonl"), size), tl)
    assert w.wait("ready", 10)
    w.thread.join(10)
    w.close()
    assert w.ended and {"scheduled", "running", "ready", "gone"} <= set(tl.steps)


def test_a_failed_start_ends_the_wait_at_once():
    tl = Timeline(t0=0.0, wall0=0.0)
    w = events.Watcher(_Recorded(_load("pod-watch-never-pull.jsonl"), 4096), tl)
    assert not w.wait("ready", 30) and tl.failure
    w.close()


def test_recorded_exec_status_channels():
    """The stream's status channel as the node's kubelet wrote it, read by the exec helper."""
    doc = json.loads((DATA / "exec-status.json").read_text())
    assert kexec.exit_status(doc["ok"]["channel"]) == (0, "")
    assert kexec.exit_status(doc["exit3"]["channel"])[0] == 3
    code, message = kexec.exit_status(doc["notfound"]["channel"])
    assert code == kexec.NOT_EXECUTED and "nosuch-command" in message


def test_a_recorded_node_is_ready_and_its_allocatable_read():
    node = json.loads((DATA / "node.json").read_text())
    assert preflight.ready(node)
    alloc = node["status"]["allocatable"]
    assert preflight.quantity(alloc["cpu"]) >= 1 and preflight.quantity(alloc["memory"]) > 2**30
    with pytest.raises(Exception, match="more than node"):
        preflight._fits("platform pod", node, preflight.quantity(alloc["cpu"]) + 1, None)


def test_a_node_under_disk_pressure_is_refused_with_its_taint():
    """Recorded from the test node in a fresh CI run whose disk had 8.4 GB free (of 252): Ready,
    but tainted disk-pressure, so a pod would stay Pending until ready_timeout."""
    node = json.loads((DATA / "node-disk-pressure.json").read_text())
    assert preflight.ready(node)
    assert preflight.blocking_taints(node) == ["node.kubernetes.io/disk-pressure:NoSchedule"]
    assert preflight.blocking_taints(json.loads((DATA / "node.json").read_text())) == []

    class One:
        def node(self, _name):
            return node

    with pytest.raises(InputError, match=r"takes no new pods: tainted node.kubernetes.io/disk-pressure:NoSchedule "
                                         r"\(DiskPressure: kubelet has disk pressure\)"):
        preflight._node("platform pod", One(), node["metadata"]["name"])

"""The suite's schedule (tests/hostsupport/schedule.py) on real pytest-xdist workers: a test marked
`measures` runs with no other test beside it, the others run side by side, a module's tests stay
on one worker in its own order."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from hostsupport import schedule

def pytest_configure(config):
    config.pluginmanager.register(schedule, "virtbench-schedule")
"""

MODULE = """
import json, os, time
import pytest

pytestmark = [pytest.mark.integration{extra}]

def _record(name):
    start = time.time()
    time.sleep(0.4)
    record = {{"name": name, "start": start, "end": time.time(), "worker": os.environ.get("PYTEST_XDIST_WORKER")}}
    with open(os.environ["LOG"], "a") as f:
        f.write(json.dumps(record) + "\\n")

{tests}
"""


def _module(path: Path, names: list[str], extra: str = "", measured: tuple[str, ...] = ()) -> None:
    tests = "\n".join(("@pytest.mark.measures\n" if n in measured else "") + f"def test_{n}():\n    _record({n!r})\n"
                      for n in names)
    path.write_text(MODULE.format(extra=extra, tests=tests))


def test_measuring_tests_run_alone_and_the_rest_side_by_side(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    _module(tmp_path / "test_a.py", ["a1", "a2", "a3"])
    _module(tmp_path / "test_b.py", ["b1", "b2", "b3"])
    _module(tmp_path / "test_m.py", ["m1", "m2"], extra=", pytest.mark.measures")
    _module(tmp_path / "test_c.py", ["c1", "c2", "c3"], measured=("c2",))
    log = tmp_path / "log.jsonl"
    env = dict(os.environ, LOG=str(log), VIRTBENCH_TEST_LOCK_DIR=str(tmp_path / "locks"))
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                          "--dist", "loadgroup", "--no-loadscope-reorder", "--rootdir", str(tmp_path), str(tmp_path)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(r["name"] for r in runs) == sorted(["a1", "a2", "a3", "b1", "b2", "b3", "m1", "m2", "c1", "c2", "c3"])
    alone = {"m1", "m2", "c2"}
    for r in runs:
        if r["name"] in alone:
            beside = [o["name"] for o in runs if o is not r and o["start"] < r["end"] and r["start"] < o["end"]]
            assert not beside, f"{r['name']} ran beside {beside}"
    workers = {m: {r["worker"] for r in runs if r["name"][0] == m and r["name"] != "c2"} for m in "abcm"}
    assert all(len(w) == 1 for w in workers.values()), workers  # a module is one group: one worker
    start = {r["name"]: r["start"] for r in runs}
    assert start["c1"] < start["c3"], runs  # a group's order kept (c2 is queued with the measuring groups)


class _Item:
    """What assign_groups and order read of a pytest item."""

    def __init__(self, nodeid: str, fixtures: tuple[str, ...] = ()) -> None:
        import pytest

        self.nodeid, self.name, self.fixturenames = nodeid, nodeid.split("::")[-1], list(fixtures)
        self.own_markers = [pytest.mark.integration.mark]

    def get_closest_marker(self, name):
        return next((m for m in self.own_markers if m.name == name), None)

    def add_marker(self, marker) -> None:
        self.own_markers.append(marker.mark)


def test_the_kubernetes_modules_are_one_late_group():
    """One node per run: both modules that use the session's node on one worker, one after the
    other, after the ordinary groups (their build runs in the background meanwhile)."""
    from hostsupport import schedule

    items = [_Item("tests/integration/test_k8s_node.py::test_node_is_ready", ("k8s_node",)),
             _Item("tests/integration/test_k8s_node.py::test_own_node_stops"),
             _Item("tests/integration/test_kubernetes.py::test_a_campaign", ("k8s_node",)),
             _Item("tests/integration/test_runner.py::test_x")]
    schedule.assign_groups(items)
    assert {schedule.group_of(i) for i in items[:3]} == {"k8snode"}
    assert [i.nodeid for i in schedule.order(items)][0] == "tests/integration/test_runner.py::test_x"

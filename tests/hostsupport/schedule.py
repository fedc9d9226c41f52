"""How the suite runs side by side: groups, order and the suite lock (a pytest plugin).

- **Groups** (pytest-xdist `--dist loadgroup`, by pytest_xdist_make_scheduler below): every
  integration module is one group, so its module-scoped fixtures (an engine's imported image, a
  namespace host, a guest) are made once, on one worker. Modules that would contend for
  something only one can hold at a time share a group and so run one after the other:
  CONTENDING below, and every test that uses the shared reference guest (the `refhost`
  fixture), which boots once per run.
- **Order** (kept by `--no-loadscope-reorder`): the groups that take longest first (FIRST), so
  that the other worker fills the time beside them; then the others longest first (DURATIONS:
  a measuring test waits for the tests under way on the other worker, so the last of them
  should be short); those waiting for a background build late (LATE); the groups holding a
  `measures` test last, where they find the machine quiet (the builds done). The durations
  table in tests/README.md is where FIRST comes from.
- **The suite lock** (suitelock.py): each test holds it shared, a `measures` test exclusive, so
  a measuring test has nothing of the suite beside it, on any worker or lane; what a worker keeps
  running between its tests (the reference guest) is paused while it waits (`while_waiting`).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from hostsupport import suitelock

MEASURES = "measures"

FIRST = ("refhost",)
"""The longest groups (tests/README.md, the durations table): started first, on their own
worker, while the other worker takes the rest. refhost: the reference guest under TCG (its image
and disk are built in the background from the start, prebuild.py), then five campaigns on it."""
LATE = ("integration/test_arm_fresh.py", "k8snode")
"""Groups that wait for a background build (the emulated arm64 board; the Kubernetes node): after
the other groups, so that their build is done or nearly by the time they start."""

DURATIONS = Path(__file__).with_name("durations.json")
"""Each integration test's seconds in a fresh machine's `make test` (its JUnit XML:
`PYTHONPATH=tests .venv/bin/python -m hostsupport.schedule JUNIT` rewrites it). In the fresh CI run before it was used, the
groups went in collection order: the last long group (a study campaign, 11 minutes) was still
running when the other worker reached the measuring tests, whose first waited 17 minutes."""
UNKNOWN_S = 30.0
"""A test not in DURATIONS yet (a new one)."""

CONTENDING = {
    # Benchmarks with servers on the host's own ports on `native` (iperf3 5201, sockperf 11111,
    # nginx 8080, mariadb 3306): two such campaigns at once would take each other's ports.
    "integration/test_suite.py": "hostports",
    "integration/test_study_cli.py": "hostports",
    # The Kubernetes node's tests: one session node (hostsupport/k8s_node.py: 1.5 GB, a minute or
    # two to start) for both modules, on one worker, stopped after the group's last test (two
    # workers each started one, kept until their session ended, beside the measuring tests).
    "integration/test_k8s_node.py": "k8snode",
    "integration/test_kubernetes.py": "k8snode",
}


def _module(item: pytest.Item) -> str:
    """`integration/test_x.py`: the item's module, relative to tests/."""
    parts = item.nodeid.split("::")[0].split("/")
    return "/".join(parts[-2:])


def is_integration(item: pytest.Item) -> bool:
    """Marked `integration` (real runtimes, root): what the integration lane runs."""
    return item.get_closest_marker("integration") is not None


def group_of(item: pytest.Item) -> str:
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    return _module(item)


def measures(item: pytest.Item) -> bool:
    return item.get_closest_marker(MEASURES) is not None


def assign_groups(items: list[pytest.Item]) -> None:
    """The group of every integration test without an explicit `xdist_group` mark: its module's,
    CONTENDING's, or `refhost`. A module whose tests only partly measure has those in a group of
    their own (`MODULE::measures`, run with the measuring groups at the end, when the builds are
    done), so that its other tests run early, beside everything else; its module fixtures are
    then made once more, for them. The reference guest's tests stay one group (one boot)."""
    chosen: dict[pytest.Item, str] = {}
    for item in items:
        if not is_integration(item) or item.get_closest_marker("xdist_group") is not None:
            continue
        module = _module(item)
        chosen[item] = "refhost" if "refhost" in getattr(item, "fixturenames", ()) else CONTENDING.get(module, module)
    mixed = {g for g in set(chosen.values()) if g not in FIRST
             and len({measures(i) for i, gi in chosen.items() if gi == g}) == 2}
    for item, name in chosen.items():
        if name in mixed and measures(item):
            name = f"{name}::measures"
        item.add_marker(pytest.mark.xdist_group(name))


def order(items: list[pytest.Item]) -> list[pytest.Item]:
    """Integration groups contiguous, FIRST first, groups with a measuring test last; within a
    group, and for the unit and web tests, the collection order (pytest's own: it keeps the
    tests of one parameter of a module-scoped fixture together)."""
    first_index: dict[str, int] = {}
    measuring: set[str] = set()
    seconds: dict[str, float] = {}
    known = _durations()
    for i, item in enumerate(items):
        if is_integration(item):
            g = group_of(item)
            first_index.setdefault(g, i)
            seconds[g] = seconds.get(g, 0.0) + known.get(duration_key(item), UNKNOWN_S)
            if measures(item):
                measuring.add(g)

    def key(pair: tuple[int, pytest.Item]) -> tuple[int, float, int, int]:
        i, item = pair
        if not is_integration(item):
            return (1, 0.0, i, i)
        g = group_of(item)
        if g in FIRST:
            rank = FIRST.index(g) - len(FIRST)
        else:
            rank = 3 if g in measuring else 2 if g in LATE else 1
        return (rank, -seconds[g], first_index[g], i)

    return [item for _, item in sorted(enumerate(items), key=key)]


def duration_key(item: pytest.Item) -> str:
    """`integration/test_x.py::test_name[param]`, as DURATIONS has it."""
    return f"{_module(item)}::{item.name}"


def _durations() -> dict[str, float]:
    try:
        return {k: float(v) for k, v in json.loads(DURATIONS.read_text()).items()}
    except (OSError, ValueError):
        return {}


def record_durations(junit: Path, out: Path = DURATIONS) -> None:
    """DURATIONS from a run's JUnit XML (classname tests.integration.test_x, name test[param])."""
    import xml.etree.ElementTree as ET

    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")
        found["/".join(parts[1:-1] + [parts[-1] + ".py"]) + "::" + case.get("name", "")] = \
            round(float(case.get("time") or 0))
    out.write_text(json.dumps(dict(sorted(found.items())), indent=0) + "\n")


GROUPS_ENV = "VIRTBENCH_TEST_GROUPS"
"""Where the workers tell the controller each test's group (a directory; set by the controller)."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    assign_groups(items)
    items[:] = order(items)
    where = os.environ.get(GROUPS_ENV)
    if where and hasattr(config, "workerinput"):  # an xdist worker: the controller groups by these
        tmp = Path(where) / f".{config.workerinput['workerid']}.json"
        tmp.write_text(json.dumps({item.nodeid: group_of(item) for item in items if is_integration(item)}))
        tmp.rename(Path(where) / tmp.name[1:])


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and config.getoption("numprocesses", None):
        where = tempfile.mkdtemp(prefix="virtbench-test-groups-")
        os.environ[GROUPS_ENV] = where  # the workers, started after this, inherit it
        config.add_cleanup(lambda: shutil.rmtree(where, ignore_errors=True))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """--dist loadgroup by the groups above. xdist's own loadgroup marks the group in the test's
    node id, which pytest 9 no longer lets a plugin change (Node.nodeid comes from Node._id):
    its scheduler then sees no group at all. This one reads them from the workers instead."""
    if config.getvalue("dist") != "loadgroup" or not os.environ.get(GROUPS_ENV):
        return None
    from xdist.scheduler import LoadScopeScheduling

    where = Path(os.environ[GROUPS_ENV])

    class GroupScheduling(LoadScopeScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # every worker has collected (and written) by the time this is asked
                found = sorted(where.glob("*.json"))
                self.groups = json.loads(found[0].read_text()) if found else {}
            return self.groups.get(nodeid, nodeid)

    return GroupScheduling(config, log)


_held: list[suitelock.Held] = []
_idle: list[tuple[Callable[[], None], Callable[[], None]]] = []


def while_waiting(pause: Callable[[], None], resume: Callable[[], None]) -> Callable[[], None]:
    """Register what to pause while this worker waits for the suite lock (a guest it keeps
    between its tests: a measuring test on another worker must not have it running beside it);
    returns the call that unregisters it."""
    hooks = (pause, resume)
    _idle.append(hooks)
    return lambda: _idle.remove(hooks) if hooks in _idle else None


def _release() -> None:
    while _held:
        _held.pop().release()


def _acquire(exclusive: bool) -> suitelock.Held | None:
    paused: list[Callable[[], None]] = []

    def pause() -> None:
        for stop, go in list(_idle):
            stop()
            paused.append(go)

    try:
        return suitelock.acquire(exclusive, on_wait=pause)
    except PermissionError:  # not root, no /run/virtbench-test: nothing of the host's to share
        return None
    finally:
        for go in paused:
            go()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """The suite lock around each test (setup, call, teardown), exclusive for a `measures` test.
    It is kept from one test to the next of the same kind while no measuring test waits, and
    given back as soon as one does: a measuring test waits for the tests under way, not for
    whole modules."""
    exclusive = measures(item)
    if _held and _held[0].exclusive != exclusive:
        _release()
    if not _held:
        held = _acquire(exclusive)
        if held is not None:
            _held.append(held)
            if held.waited >= 1:
                item.user_properties.append(("suite_lock_wait_s", round(held.waited, 1)))
    try:
        return (yield)
    finally:
        if nextitem is None or measures(nextitem) != exclusive or (not exclusive and suitelock.writer_waiting()):
            _release()


if __name__ == "__main__":
    import sys

    record_durations(Path(sys.argv[1]))

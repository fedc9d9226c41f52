"""How the suite runs side by side: groups, order and the suite lock (a pytest plugin).

- **Groups** (pytest-xdist `--dist loadgroup`): every integration module is one group, so its
  module-scoped fixtures (an engine's imported image, a namespace host, a guest) are made once,
  on one worker. Modules that would contend for something only one can hold at a time share a
  group and so run one after the other: CONTENDING below, and every test that uses the shared
  reference guest (the `refhost` fixture), which boots once per run.
- **Order**: the groups that take longest (guests, emulated builds) first, so that the other
  worker fills the time beside them; the groups holding a `measures` test last, where they find
  the machine quiet. The durations table in tests/README.md is where FIRST comes from.
- **The suite lock** (suitelock.py): each test holds it shared, a `measures` test exclusive,
  from the first test of its group to the last (a group's module fixtures live that long), so a
  measuring test has nothing of the suite beside it, on any worker or lane.
"""
from __future__ import annotations

import pytest

from hostsupport import suitelock

MEASURES = "measures"

FIRST = ("refhost", "integration/test_arm_fresh.py")
"""The longest groups (tests/README.md, the durations table): started first, on their own
worker, while the other worker takes the rest. refhost: the reference guest under TCG;
test_arm_fresh: the emulated arm64 board (its image is built in the background from the start)."""

CONTENDING = {
    # Benchmarks with servers on the host's own ports on `native` (iperf3 5201, sockperf 11111,
    # nginx 8080, mariadb 3306): two such campaigns at once would take each other's ports.
    "integration/test_suite.py": "hostports",
    "integration/test_study_cli.py": "hostports",
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
    for item in items:
        if not is_integration(item) or item.get_closest_marker("xdist_group") is not None:
            continue
        module = _module(item)
        name = "refhost" if "refhost" in getattr(item, "fixturenames", ()) else CONTENDING.get(module, module)
        item.add_marker(pytest.mark.xdist_group(name))


def order(items: list[pytest.Item]) -> list[pytest.Item]:
    """Integration groups contiguous, FIRST first, groups with a measuring test last; within a
    group, and for unit and web tests, the collection order."""
    first_index: dict[str, int] = {}
    measuring: set[str] = set()
    for i, item in enumerate(items):
        if is_integration(item):
            g = group_of(item)
            first_index.setdefault(g, i)
            if measures(item):
                measuring.add(g)

    def key(pair: tuple[int, pytest.Item]) -> tuple[int, int, int]:
        i, item = pair
        if not is_integration(item):
            return (1, i, i)
        g = group_of(item)
        rank = FIRST.index(g) - len(FIRST) if g in FIRST else (2 if g in measuring else 1)
        return (rank, first_index[g], i)

    return [item for _, item in sorted(enumerate(items), key=key)]


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    assign_groups(items)
    items[:] = order(items)


_held: list[tuple[tuple[str, bool], suitelock.Held]] = []


def _lock_key(item: pytest.Item) -> tuple[str, bool]:
    return (group_of(item) if is_integration(item) else _module(item), measures(item))


def _release() -> None:
    while _held:
        _held.pop()[1].release()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    key = _lock_key(item)
    if not _held or _held[0][0] != key:
        _release()
        try:
            held = suitelock.acquire(key[1])
        except PermissionError:  # not root, no /run/virtbench-test: nothing of the host to share
            held = None
        if held is not None:
            _held.append((key, held))
            if held.waited >= 1:
                item.user_properties.append(("suite_lock_wait_s", round(held.waited, 1)))
    try:
        return (yield)
    finally:
        if nextitem is None or _lock_key(nextitem) != key:
            _release()

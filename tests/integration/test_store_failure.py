"""A results database that cannot be written in the middle of a unit (another process holds
it locked) stops the run cleanly: the instance is removed, nothing stays mounted, the run is
`interrupted`, and `resume` completes it with no execution lost or written twice.

A real run on the native platform (a chroot with bind mounts: cheap, and a leak shows as
mounts); the lock is real too: a second SQLite connection holds an exclusive transaction.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from virtbench.config import load_yaml, parse_campaign
from virtbench.errors import StoreError
from virtbench.platforms.base import Paths
from virtbench.runner import execute
from virtbench.store.db import Store

pytestmark = pytest.mark.integration

CAMPAIGN = """
name: store-failure
repetitions: 2
warmups: 0
platforms: [native]
benchmarks:
  - {name: sysbench-cpu, time: 1}
  - {name: sqlite, rows: 2000}
"""
EXECUTIONS = 2 * 1 * (2 + 1)  # rounds x platforms x (benchmarks + lifecycle)


class LockedMidUnit(Store):
    """From its second execution on, another process holds the database locked until the run
    marks its status: every write of the unit in between fails as it would in production
    (after a 0.2 s wait instead of 10 s)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.engine.dispose()
        event.listen(self.engine, "connect", lambda conn, _rec: conn.execute("PRAGMA busy_timeout=200"))
        self.file = url.removeprefix("sqlite:///")
        self.records = 0
        self.holder: sqlite3.Connection | None = None

    def record(self, **kwargs: Any) -> int:
        self.records += 1
        if self.records == 2 and self.holder is None:
            self.holder = sqlite3.connect(self.file, isolation_level=None)
            self.holder.execute("BEGIN EXCLUSIVE")
        return super().record(**kwargs)

    def set_status(self, run_id: str, status: str, error: str = "") -> None:
        if self.holder is not None:  # the other process is done now
            self.holder.close()
            self.holder = None
        super().set_status(run_id, status, error)


def mounts_under(path: Path) -> list[str]:
    return [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if line.split()[4].startswith(str(path))]


def test_write_failure_mid_unit_stops_cleanly_and_resume_completes(tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    paths = Paths(state=Path("/var/lib/virtbench-test") / tmp_path.name, runtime=tmp_path / "run")
    campaign = parse_campaign(load_yaml(CAMPAIGN, "campaign"), "campaign")
    store = LockedMidUnit(url)
    try:
        with pytest.raises(StoreError) as info:
            execute.start(store, campaign, paths, run_id="20260101-000000-lock")
        assert "is locked" in info.value.message and "--resume 20260101-000000-lock" in (info.value.fix or "")
        assert mounts_under(paths.state) == [], "the unit's instance was left mounted"
        assert not paths.instances.exists() or list(paths.instances.iterdir()) == []
        fresh = Store(url)
        run = fresh.run("20260101-000000-lock")
        assert run.status == "interrupted" and "locked" in run.error
        before = {(e.round, e.platform, e.benchmark, e.started_at) for e in fresh.executions(run.id)}
        assert len(before) == 1 and all(e.status == "ok" for e in fresh.executions(run.id)), \
            "the execution whose write failed is not stored, not even as a failure"
        outcome = execute.resume(fresh, run.id, paths)
        assert not outcome.interrupted and outcome.failed == 0
        after = fresh.executions(run.id)
        assert len(after) == EXECUTIONS and len({(e.round, e.platform, e.benchmark) for e in after}) == EXECUTIONS
        assert before <= {(e.round, e.platform, e.benchmark, e.started_at) for e in after}
        assert fresh.run(run.id).status == "finished"
        assert mounts_under(paths.state) == []
    finally:
        execute.cleanup(paths, "20260101-000000-lock")

"""A run's measured values and executions as plain tuples, for reports and exports.

Reports read 100,000 samples in well under a second: no ORM objects, one query each. On
SQLite the DB-API cursor is used directly (twice as fast as SQLAlchemy's row processing);
other databases go through a Core select. Only each execution's own value (instance 0) is
read: with several instances at once, instance 0 holds the per-instance mean of that round,
so statistics count rounds, never instances as if they were repetitions.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select

from .db import Store
from .models import Execution, Sample

SampleTuple = tuple[str, str, str, float, str, bool | int, str, int, bool | int]
"""(benchmark, metric, platform, value, unit, higher_is_better, category, round, warmup); the two
flags are bools, or 0/1 on SQLite (truthy either way)."""
_COLUMNS = (Sample.benchmark, Sample.metric, Sample.platform, Sample.value, Sample.unit, Sample.higher_is_better,
            Sample.category, Sample.round, Sample.warmup)


def samples(store: Store, run_id: str, host: str | None = None) -> list[SampleTuple]:
    """Measured and warm-up values of the run's executions (instance 0), in the order stored;
    host: only those one host of a multi-host run measured."""
    if store.engine.dialect.name == "sqlite":
        raw = store.engine.raw_connection()
        try:
            cur = raw.cursor()
            where, args = ("AND host = ? ", (run_id, host)) if host is not None else ("", (run_id,))
            cur.execute("SELECT benchmark, metric, platform, value, unit, higher_is_better, category, round, warmup "
                        f"FROM samples WHERE run_id = ? AND instance = 0 {where}ORDER BY id", args)
            return list(cur.fetchall())  # booleans as SQLite stores them (0/1): converting 100,000 costs 0.2 s
        finally:
            raw.close()
    with store.engine.connect() as conn:
        q = select(*_COLUMNS).where(Sample.run_id == run_id, Sample.instance == 0)
        if host is not None:
            q = q.where(Sample.host == host)
        result = conn.execute(q.order_by(Sample.id))
        return [tuple(row) for row in result]  # type: ignore[misc]


ValueTuple = tuple[int, str, str, str, float, int, bool | int]
"""(sample id, benchmark, metric, platform, value, round, warmup): a sample without what its
metric declares."""
Meta = dict[tuple[str, str], tuple[str, bool, str]]
"""(benchmark, metric) -> (unit, higher_is_better, category) of its first sample."""


def sample_values(store: Store, run_id: str, host: str | None = None) -> tuple[list[ValueTuple], Meta]:
    """samples() in two parts, for reports: every value (instance 0) in the order stored with
    the columns that vary, and each metric's unit, direction and category once (those of its
    first value, read by primary key). Three string columns fewer per value, and the DB-API
    cursor on every database (SQLAlchemy's row processing doubled the client's work)."""
    sqlite = store.engine.dialect.name == "sqlite"
    mark = "?" if sqlite else "%s"  # the drivers' own parameter styles (sqlite3, psycopg)
    where = f"run_id = {mark} AND instance = 0" + (f" AND host = {mark}" if host is not None else "")
    raw = store.engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute(f"SELECT id, benchmark, metric, platform, value, round, warmup FROM samples WHERE {where} "
                    "ORDER BY id", (run_id, host) if host is not None else (run_id,))
        values = list(cur.fetchall())
        first: dict[tuple[str, str], int] = {}
        for sid, bench, metric, *_ in values:
            if (bench, metric) not in first:
                first[(bench, metric)] = sid
        meta: Meta = {}
        if first:
            ids = list(first.values())
            cur.execute("SELECT benchmark, metric, unit, higher_is_better, category FROM samples WHERE id IN "
                        f"({', '.join([mark] * len(ids))})", ids)
            meta = {(b, m): (u, bool(h), c) for b, m, u, h, c in cur.fetchall()}
        return values, meta
    finally:
        raw.close()


def samples_with_times(store: Store, run_id: str
                       ) -> list[tuple[int, int, bool, str, str, str, float, str, bool, str, datetime | None, int]]:
    """Every sample for exports: (execution_id, round, warmup, platform, benchmark, metric, value,
    unit, higher_is_better, category, execution start, instance); per-instance values included."""
    cols = (Sample.execution_id, Sample.round, Sample.warmup, Sample.platform, Sample.benchmark, Sample.metric,
            Sample.value, Sample.unit, Sample.higher_is_better, Sample.category, Execution.started_at,
            Sample.instance)
    with store.session() as s:
        return [tuple(r) for r in s.execute(select(*cols).join(Execution, Execution.id == Sample.execution_id)
                                            .where(Sample.run_id == run_id).order_by(Sample.id))]


def executions(store: Store, run_id: str) -> list[tuple[Any, ...]]:
    """(id, round, warmup, platform, benchmark, status, exit_code, error, started_at, duration_s) per execution."""
    cols = (Execution.id, Execution.round, Execution.warmup, Execution.platform, Execution.benchmark,
            Execution.status, Execution.exit_code, Execution.error, Execution.started_at, Execution.duration_s)
    with store.session() as s:
        return [tuple(r) for r in s.execute(select(*cols).where(Execution.run_id == run_id).order_by(Execution.id))]

"""Computed reports, kept: in memory (LRU) and, for runs that stopped, in the store's report_cache.

Computing a run's statistics (bootstrap intervals, tests, quality flags) takes seconds for
tens of thousands of samples; the pages must answer in milliseconds. So a report is
computed once, when the run ends (the worker calls precompute), on first view, or by the
Warmer thread for runs that have none (made by `virtbench run`), and kept under a key of
what it depends on: the run's status, finish time and execution count, and the analysis
code itself. Anything else is recomputed; the table is a pure cache.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from ..analysis.summary import Row
from ..report import builder
from ..report import cache as report_cache
from ..report.model import Report
from ..store import browse, reports
from ..store.db import Store
from ..store.models import Run
from . import queries

PERSISTED = report_cache.PERSISTED


class ReportCache:
    """Reports of runs, in memory (LRU) and, for runs that stopped, in the store's report_cache.

    The key is what the report depends on: the run's status, finish time and execution
    count, and the analysis code. A page over a finished run of 50,000 samples is then a
    lookup, also after a restart, and the worker stores the report when a run ends.
    """

    def __init__(self, size: int = 48) -> None:
        self.size = size
        self._data: OrderedDict[tuple[str, str], tuple[tuple, Any]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(store: Store, run_id: str) -> tuple:
        return browse.report_key(store, run_id)

    def _memo(self, name: tuple[str, str], key: tuple, compute: Callable[[], Any]) -> Any:
        with self._lock:
            hit = self._data.get(name)
            if hit and hit[0] == key:
                self._data.move_to_end(name)
                return hit[1]
        value = compute()
        with self._lock:
            self._data[name] = (key, value)
            while len(self._data) > self.size:
                self._data.popitem(last=False)
        return value

    def report(self, store: Store, run_id: str, key: tuple | None = None) -> Report:
        """The run's report without its sections (results.full_report adds them), kept as the
        report model itself; key: the run's report key when the caller read it already (see keys)."""
        key = key or self.key(store, run_id)
        return self._memo((run_id, "report"), key, lambda: self._stored_or_built(store, run_id, key))

    def rows(self, store: Store, run_id: str, key: tuple | None = None) -> tuple[list[Row], list[dict[str, Any]]]:
        """The report's rows and failures (pooling several runs reads only these)."""
        report = self.report(store, run_id, key)
        return report.rows, report.failures

    def _stored_or_built(self, store: Store, run_id: str, key: tuple) -> Report:
        got = report_cache.load(store, run_id, key)
        if got is not None:
            return Report(queries.get_run(store, run_id), *got)
        return builder.build(store, run_id, sections=False)  # stored there when the run has stopped

    @staticmethod
    def keys(store: Store, runs: Sequence[Run]) -> dict[str, tuple]:
        """Run id -> key of several runs, read in one statement (a pool of ten runs needs all)."""
        return browse.report_keys(store, [r.id for r in runs])

    def pooled(self, store: Store, runs: Sequence[Run], what: str, compute: Callable[[dict[str, tuple]], Any]) -> Any:
        """A result over several runs, reused while none of them changes (memory only); compute
        gets the runs' keys (run id -> key), so reading their reports asks the store no more."""
        keys = self.keys(store, runs)
        key = tuple((r.id, keys.get(r.id)) for r in runs)
        return self._memo(("+".join(r.id for r in runs), what), key, lambda: compute(keys))

    def clear(self, run_id: str) -> None:
        with self._lock:
            for k in [k for k in self._data if run_id in k[0].split("+")]:
                del self._data[k]


def precompute(store: Store, run_id: str) -> None:
    """Compute and store a stopped run's report now (the worker calls it when a run ends)."""
    if report_cache.key(store, run_id)[0] in PERSISTED:
        builder.build(store, run_id, sections=False)


class Warmer(threading.Thread):
    """Stores the reports of stopped runs that have none (runs made by `virtbench run`, or
    before an upgrade), newest first, a few at a time, so their pages open at once too."""

    def __init__(self, store: Store, cache: ReportCache, every_s: float = 30.0, batch: int = 3) -> None:
        super().__init__(name="report-warmer", daemon=True)
        self.store, self.cache, self.every_s, self.batch = store, cache, every_s, batch
        self.stop = threading.Event()

    def run(self) -> None:
        delay = 2.0
        while not self.stop.wait(delay):
            delay = self.every_s
            try:
                self.once()
            except Exception:  # noqa: BLE001 - a cache warmer must never take the server down
                pass

    def once(self) -> list[str]:
        ids = reports.runs_without(self.store, PERSISTED, self.batch)
        for run_id in ids:
            if self.stop.is_set():
                break
            self.cache.report(self.store, run_id)
        return ids

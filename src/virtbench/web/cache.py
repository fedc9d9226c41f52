"""Computed reports, kept: in memory (LRU) and, for runs that stopped, in the store's report_cache.

Computing a run's statistics (bootstrap intervals, tests, quality flags) takes seconds for
tens of thousands of samples; the pages must answer in milliseconds. So a report is
computed once, when the run ends (the worker calls precompute), on first view, or by the
Warmer thread for runs that have none (made by `virtbench run`), and kept under a key of
what it depends on: the run's status, finish time and execution count, and the analysis
code itself. Anything else is recomputed; the table is a pure cache.
"""
from __future__ import annotations

import hashlib
import json
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..analysis.summary import Row
from ..report import summary
from ..store import browse, reports
from ..store.db import Store
from ..store.models import Run
from . import queries


def _analysis_fingerprint() -> str:
    """Hash of the code that computes a report: a cached report from other code is recomputed."""
    from .. import analysis

    h = hashlib.sha256()
    files = sorted(Path(analysis.__file__).parent.glob("*.py")) + [Path(summary.__file__)]
    for f in files:
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:16]


FINGERPRINT = _analysis_fingerprint()
PERSISTED = ("finished", "failed", "interrupted", "cancelled")
"""Only reports of runs that stopped are stored; a running run's changes with every execution."""


def encode(rows: list[Row], failures: list[dict[str, Any]]) -> bytes:
    doc = {"rows": [asdict(r) for r in rows], "failures": failures}
    return zlib.compress(json.dumps(doc, default=str).encode(), 6)


def decode(data: bytes) -> tuple[list[Row], list[dict[str, Any]]]:
    doc = json.loads(zlib.decompress(data))
    return [Row(**r) for r in doc["rows"]], doc["failures"]


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

    def report(self, store: Store, run_id: str) -> tuple[Run, list[Row], list[dict[str, Any]]]:
        rows, failures = self.rows(store, run_id)
        return queries.get_run(store, run_id), rows, failures

    def rows(self, store: Store, run_id: str) -> tuple[list[Row], list[dict[str, Any]]]:
        """The report's rows and failures without loading the run itself (pooling has it)."""
        key = self.key(store, run_id)
        return self._memo((run_id, "report"), key, lambda: self._stored_or_built(store, run_id, key))

    def _stored_or_built(self, store: Store, run_id: str, key: tuple) -> tuple[list[Row], list[dict[str, Any]]]:
        version = version_of(key)
        data = reports.load(store, run_id, version)
        if data is not None:
            try:
                return decode(data)
            except (ValueError, TypeError, KeyError, zlib.error):
                pass  # written by other code: computed again below
        _, rows, failures = summary.build(store, run_id)
        if key[0] in PERSISTED:
            save(store, run_id, version, rows, failures)
        return rows, failures

    def pooled(self, store: Store, runs: Sequence[Run], what: str, compute: Callable[[], Any]) -> Any:
        """A result over several runs, reused while none of them changes (memory only)."""
        key = tuple((r.id, self.key(store, r.id)) for r in runs)
        return self._memo(("+".join(r.id for r in runs), what), key, compute)

    def clear(self, run_id: str) -> None:
        with self._lock:
            for k in [k for k in self._data if run_id in k[0].split("+")]:
                del self._data[k]


def version_of(key: tuple) -> str:
    status, finished, n = key
    return f"{status}|{finished.isoformat() if finished else '-'}|{n}|{FINGERPRINT}"


def save(store: Store, run_id: str, version: str, rows: list[Row], failures: list[dict[str, Any]]) -> None:
    """Store a run's report (replacing an older one); a failure to store only costs speed later."""
    reports.save(store, run_id, version, encode(rows, failures))


def precompute(store: Store, run_id: str) -> None:
    """Compute and store a stopped run's report now (the worker calls it when a run ends)."""
    key = ReportCache.key(store, run_id)
    if key[0] in PERSISTED:
        _, rows, failures = summary.build(store, run_id)
        save(store, run_id, version_of(key), rows, failures)


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

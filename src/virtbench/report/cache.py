"""A stopped run's report rows, stored in the store's report_cache: computed once, read after.

Computing a run's statistics (bootstrap intervals, rank tests, quality checks, and importing
scipy for them) takes seconds for 100,000 samples; a report is read far more often than a run
changes. So the rows and failures of a run that stopped are stored under a version made of
what they depend on (the run's status, finish time and execution count, and a hash of the
code that computes them) and read back while it holds. `summary.build` uses it for the
default statistics settings, so `virtbench report`, the web pages and exports all share it;
the runner's callers store it when a run ends (precompute).
"""
from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import asdict
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from ..analysis.summary import Row
from ..store import browse, reports
from ..store.db import Store

PERSISTED = ("finished", "failed", "interrupted", "cancelled")
"""Only reports of runs that stopped are stored; a running run's changes with every execution."""

Key = tuple[str, datetime | None, int]


@cache
def fingerprint() -> str:
    """Hash of the code that computes a report: a report stored by other code is recomputed."""
    from .. import analysis
    from . import summary

    h = hashlib.sha256()
    for f in sorted(Path(analysis.__file__).parent.glob("*.py")) + [Path(summary.__file__), Path(__file__)]:
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:16]


def key(store: Store, run_id: str) -> Key:
    return browse.report_key(store, run_id)


def version_of(k: Key) -> str:
    status, finished, n = k
    return f"{status}|{finished.isoformat() if finished else '-'}|{n}|{fingerprint()}"


def encode(rows: list[Row], failures: list[dict[str, Any]]) -> bytes:
    doc = {"rows": [asdict(r) for r in rows], "failures": failures}
    return zlib.compress(json.dumps(doc, default=str).encode(), 6)


def decode(data: bytes) -> tuple[list[Row], list[dict[str, Any]]]:
    doc = json.loads(zlib.decompress(data))
    return [Row(**r) for r in doc["rows"]], doc["failures"]


def load(store: Store, run_id: str, k: Key) -> tuple[list[Row], list[dict[str, Any]]] | None:
    """The stored rows and failures of this version of the run, or None."""
    if k[0] not in PERSISTED:
        return None
    data = reports.load(store, run_id, version_of(k))
    if data is None:
        return None
    try:
        return decode(data)
    except (ValueError, TypeError, KeyError, zlib.error):
        return None  # written by other code: computed again by the caller


def save(store: Store, run_id: str, k: Key, rows: list[Row], failures: list[dict[str, Any]]) -> None:
    """Store a stopped run's rows (replacing older ones); a failure to store only costs speed later."""
    if k[0] in PERSISTED:
        reports.save(store, run_id, version_of(k), encode(rows, failures))

"""A stopped run's report rows, stored in the store's report_cache: computed once, read after.

Computing a run's statistics (bootstrap intervals, rank tests, quality checks, verdicts)
takes about half a second of CPU for 100,000 samples, reading them from the store another
0.15 s; a report is read far more often than a run changes. So the rows and failures of a
run that stopped are stored under a version made of what they depend on (the run's status,
finish time and execution count, and a hash of the code that computes them) and read back
while it holds. `result_rows.run_rows` (so `summary.build`) uses it for the default statistics
settings, so `virtbench report`, the web pages and exports all share it; the runner's callers
store it when a run ends (the web worker's precompute, `virtbench run`).
"""
from __future__ import annotations

import hashlib
import json
import struct
import zlib
from dataclasses import fields
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

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

    h = hashlib.sha256()
    here = Path(__file__).parent  # the files that compute the rows, read, not imported (result_rows.py imports this)
    for f in sorted(Path(analysis.__file__).parent.glob("*.py")) + [here / n for n in (
            "result_rows.py", "runinfo.py", "boards.py", "cache.py")]:
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:16]


def key(store: Store, run_id: str) -> Key:
    return browse.report_key(store, run_id)


def version_of(k: Key) -> str:
    status, finished, n = k
    return f"{status}|{finished.isoformat() if finished else '-'}|{n}|{fingerprint()}"


_ARRAYS = ("values", "rounds", "warmup_values", "warmup_rounds")
_FIELDS = tuple(f.name for f in fields(Row) if f.name not in _ARRAYS)
_HEAD = struct.Struct("<Q")


def encode(rows: list[Row], failures: list[dict[str, Any]]) -> bytes:
    """The rows' fields as JSON, their values and rounds as packed float64/int64 arrays after it.

    Parsing 100,000 values from JSON text costs a page tens of milliseconds; numpy reads
    them in one. (dataclasses.asdict would also deep-copy every value first.) tolist() gives
    back the very floats and ints that were stored.
    """
    lengths = [[len(getattr(r, a)) for a in _ARRAYS] for r in rows]
    doc = {"rows": [{f: getattr(r, f) for f in _FIELDS} for r in rows], "lengths": lengths, "failures": failures}
    head = zlib.compress(json.dumps(doc, default=str).encode(), 1)
    floats = _packed(rows, ("values", "warmup_values"), "<f8")
    ints = _packed(rows, ("rounds", "warmup_rounds"), "<i8")
    return _HEAD.pack(len(head)) + head + zlib.compress(floats.tobytes() + ints.tobytes(), 1)


def _packed(rows: list[Row], attrs: tuple[str, str], dtype: str) -> np.ndarray:
    """The rows' lists of these attributes, row after row, as one array (numpy converts each
    list at once: a loop over 100,000 values cost a report a tenth of a second)."""
    parts = [np.asarray(getattr(r, a), dtype=dtype) for r in rows for a in attrs]
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)


def decode(data: bytes) -> tuple[list[Row], list[dict[str, Any]]]:
    (n,) = _HEAD.unpack_from(data)
    doc = json.loads(zlib.decompress(data[_HEAD.size:_HEAD.size + n]))
    arrays = zlib.decompress(data[_HEAD.size + n:])
    lengths = doc["lengths"]
    n_floats = sum(v + w for v, _, w, _ in lengths)
    floats = np.frombuffer(arrays, dtype="<f8", count=n_floats).tolist()
    ints = np.frombuffer(arrays, dtype="<i8", offset=8 * n_floats).tolist()
    rows, fi, ii = [], 0, 0
    for fields_, (nv, nr, nwv, nwr) in zip(doc["rows"], lengths):
        rows.append(Row(**fields_, values=floats[fi:fi + nv], warmup_values=floats[fi + nv:fi + nv + nwv],
                        rounds=ints[ii:ii + nr], warmup_rounds=ints[ii + nr:ii + nr + nwr]))
        fi, ii = fi + nv + nwv, ii + nr + nwr
    return rows, doc["failures"]


def load(store: Store, run_id: str, k: Key) -> tuple[list[Row], list[dict[str, Any]]] | None:
    """The stored rows and failures of this version of the run, or None."""
    if k[0] not in PERSISTED:
        return None
    data = reports.load(store, run_id, version_of(k))
    if data is None:
        return None
    try:
        return decode(data)
    except (ValueError, TypeError, KeyError, zlib.error, struct.error):
        return None  # written by other code: computed again by the caller


def save(store: Store, run_id: str, k: Key, rows: list[Row], failures: list[dict[str, Any]]) -> None:
    """Store a stopped run's rows (replacing older ones); a failure to store only costs speed later."""
    if k[0] in PERSISTED:
        reports.save(store, run_id, version_of(k), encode(rows, failures))

"""Raw samples, executions and summaries as files pandas loads as they are.

Three flat tables per run: samples (every measured and warm-up value with its unit,
direction, round and platform kind), executions (status, exit code, error and timing of
each, failed ones included, raw output left in the store) and summary (one line per
platform and metric, intervals split into _low/_high columns). Formats: csv
(pd.read_csv), json (a list of records: pd.read_json) and parquet (pd.read_parquet, needs
pyarrow).
"""
from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..analysis.summary import Row
from ..errors import InputError
from ..extras import require
from ..store import results
from ..store.db import Store
from ..store.models import Run
from . import builder as S
from . import runinfo
from .model import FORMAT_VERSION
from .targets import writable_dir

FORMATS = ("csv", "json", "parquet")
COLUMNS = {
    "samples": ("run_id", "host", "execution_id", "round", "warmup", "instance", "platform", "platform_type", "platform_kind",
                "inside", "benchmark", "benchmark_name", "metric", "value", "unit", "higher_is_better", "category",
                "started_at"),
    "executions": ("run_id", "host", "execution_id", "round", "warmup", "platform", "benchmark", "status",
                   "exit_code", "error", "started_at", "duration_s"),
}
"""Columns of the tables that can be empty (every execution failed), so the header is still written."""


def samples_table(store: Store, run: Run, host: str) -> list[dict[str, Any]]:
    kinds = {p.name: (p.type, p.kind or (p.config or {}).get("kind", ""), (p.config or {}).get("inside") or "")
             for p in run.platforms}
    names = {b.key: b.name for b in run.benchmarks}
    out = []
    for ex_id, rnd, warm, platform, bench, metric, value, unit, hib, cat, started, instance in \
            results.samples_with_times(store, run.id):
        ptype, kind, inside = kinds.get(platform, ("", "", ""))
        out.append({"run_id": run.id, "host": host, "execution_id": ex_id, "round": rnd, "warmup": bool(warm),
                    "instance": instance, "platform": platform, "platform_type": ptype, "platform_kind": kind,
                    "inside": inside, "benchmark": bench, "benchmark_name": names.get(bench, bench), "metric": metric,
                    "value": value, "unit": unit, "higher_is_better": bool(hib), "category": cat,
                    "started_at": started.isoformat() if started else None})
    return out


def executions_table(store: Store, run: Run, host: str) -> list[dict[str, Any]]:
    return [{"run_id": run.id, "host": host, "execution_id": i, "round": rnd, "warmup": bool(w), "platform": p,
             "benchmark": b, "status": st, "exit_code": code, "error": err,
             "started_at": t.isoformat() if t else None, "duration_s": d}
            for i, rnd, w, p, b, st, code, err, t, d in results.executions(store, run.id)]


def _split(name: str, ci: Sequence[float] | None) -> dict[str, float | None]:
    return {f"{name}_low": ci[0] if ci else None, f"{name}_high": ci[1] if ci else None}


def summary_table(run: Run, rows: Iterable[Row], host: str) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        out.append({"run_id": run.id, "host": host, "benchmark": r.benchmark, "metric": r.metric, "unit": r.unit,
                    "higher_is_better": r.higher_is_better, "category": r.category, "platform": r.platform,
                    "n": r.n, "failed": r.failed, "mean": r.mean, **_split("mean_ci95", r.ci95),
                    **_split("mean_boot_ci95", r.mean_boot_ci95), "median": r.median,
                    **_split("median_ci95", r.median_ci95), "stdev": r.stdev, "cv": r.cv, "relative": r.relative,
                    **_split("relative_ci95", r.relative_ci95), "p_value": r.p_value,
                    "verdict": r.verdict, "ratio_of_means": r.ratio_of_means,
                    "quality": "; ".join(f"{f['check']}: {f['message']}" for f in r.quality)})
    return out


def _clean(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def write_table(records: list[dict[str, Any]], path: Path, fmt: str, columns: Sequence[str] = ()) -> Path:
    """One table as a file; every record carries `format_version` first, so a reader of any one
    file (or of files concatenated across virtbench versions) knows the layout it has."""
    records = [{"format_version": FORMAT_VERSION, **r} for r in records]
    columns = list(records[0]) if records else ["format_version", *columns]
    if fmt == "csv":
        with path.open("w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=columns)
            w.writeheader()
            w.writerows(records)
    elif fmt == "json":
        path.write_text(json.dumps([{k: _clean(v) for k, v in r.items()} for r in records], allow_nan=False),
                        encoding="utf-8")
    elif fmt == "parquet":
        require("parquet", "parquet export (or use --format csv)")
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pylist(records) if records else pa.table({c: pa.array([]) for c in columns})
        pq.write_table(table, path)
    else:
        raise InputError(f"unknown export format {fmt!r}", f"use one of {', '.join(FORMATS)}")
    return path


def export(store: Store, run_ref: str, directory: Path, fmt: str = "csv") -> list[Path]:
    """Write <run>-samples, <run>-executions and <run>-summary in the format; returns the files."""
    if fmt not in FORMATS:
        raise InputError(f"unknown export format {fmt!r}", f"use one of {', '.join(FORMATS)}")
    writable_dir(directory, "-o")
    report = S.build(store, run_ref)
    run, rows = report.run, report.rows
    host = runinfo.host_labels([run])[0]
    tables = {"samples": samples_table(store, run, host), "executions": executions_table(store, run, host),
              "summary": summary_table(run, rows, host)}
    written = [write_table(records, directory / f"{run.id}-{name}.{fmt}", fmt, COLUMNS.get(name, ()))
               for name, records in tables.items()]
    log = histogram_log(store, run)
    if log is not None:
        path = directory / f"{run.id}-histograms.hlog"
        path.write_text(log, encoding="utf-8")
        written.append(path)
    return written


HDR_MEDIA_TYPE = "application/x-hdrhistogram"


def histogram_log(store: Store, run: Run) -> str | None:
    """Every stored HDR histogram of the run as one HdrHistogram log (format 1.3, what
    HistogramLogProcessor and HdrHistogram's readers take): one tagged line per histogram,
    `Tag=<platform>/<point>/<name>/r<round>`, values in ns (the max column in ms, as usual)."""
    atts = [a for a in store.attachments(run.id) if a.media_type == HDR_MEDIA_TYPE]
    if not atts:
        return None
    from hdrh.histogram import HdrHistogram

    execs = {e.id: e for e in store.executions(run.id)}
    lines = ["#[Histogram log format version 1.3]", f"#[virtbench run {run.id}: one-way latency in ns]",
             f"#[StartTime: {run.created_at.timestamp():.3f} (seconds since epoch), {run.created_at.isoformat()}]",
             '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"']
    for a in atts:
        ex = execs[a.execution_id]
        tag = re.sub(r"[^A-Za-z0-9_.@=/-]+", "_", f"{ex.platform}/{ex.benchmark}/{a.name}/r{ex.round}")
        encoded = a.data.decode() if isinstance(a.data, bytes) else str(a.data)
        hist = HdrHistogram.decode(encoded)
        start = (ex.started_at - run.created_at).total_seconds()
        lines.append(f"Tag={tag},{start:.3f},{ex.duration_s:.3f},{hist.get_max_value() / 1e6:.3f},{encoded}")
    return "\n".join(lines) + "\n"

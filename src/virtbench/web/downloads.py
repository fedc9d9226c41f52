"""Report files for download, made by the report package (report/html.py, report/export.py).

Sent as attachments: the HTML report embeds its own scripts and is meant to be saved and
opened offline, never rendered inside this site (whose CSP forbids inline scripts).
"""
from __future__ import annotations

import importlib.util
import json
import math
import tempfile
from pathlib import Path
from typing import Any

from fastapi import HTTPException
from fastapi.responses import Response

from ..errors import InputError
from ..report import builder, runinfo
from ..store.db import Store
from . import cache

TABLES = ("samples", "executions", "summary")
MEDIA = {"html": "text/html; charset=utf-8", "csv": "text/csv; charset=utf-8", "json": "application/json",
         "parquet": "application/vnd.apache.parquet"}


def clean(value: Any) -> Any:
    """NaN and infinities as null: JSON has none (and browsers reject them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def available(run_id: str) -> list[dict[str, str]]:
    """The download links of a run, only for what this installation can make."""
    links = [{"label": "report (JSON)", "format": "json", "table": "report",
              "url": f"/api/runs/{run_id}/download/json?table=report"}]
    if _has("virtbench.report.html") and _has("plotly"):
        links.insert(0, {"label": "HTML report", "format": "html", "table": "report",
                         "url": f"/api/runs/{run_id}/download/html"})
    if _has("virtbench.report.export"):
        for fmt in ("csv", "json", "parquet"):
            if fmt == "parquet" and not _has("pyarrow"):
                continue
            for table in TABLES:
                links.append({"label": f"{table} ({fmt.upper()})", "format": fmt, "table": table,
                              "url": f"/api/runs/{run_id}/download/{fmt}?table={table}"})
    return links


def response(store: Store, reports: cache.ReportCache, run_id: str, fmt: str, table: str = "report"
             ) -> Response:
    from .results import full_report

    if table not in ("report", *TABLES):
        raise HTTPException(400, f"unknown table {table!r}; one of report, {', '.join(TABLES)}")
    report = full_report(store, reports, run_id)
    run, rows = report.run, report.rows
    name = f"virtbench-{run.id}"
    try:
        if fmt == "html":
            from ..report import html

            body: bytes = html.render([report]).encode()
            filename = f"{name}.html"
        elif table == "report":
            if fmt != "json":
                raise HTTPException(400, "the report document is JSON; use table=samples|executions|summary")
            body = json.dumps(clean(builder.report_json(report)), indent=1, default=str).encode()
            filename = f"{name}-report.json"
        else:
            body, filename = _table(store, run, rows, table, fmt), f"{name}-{table}.{fmt}"
    except InputError as exc:
        raise HTTPException(501, exc.message) from None
    except ImportError as exc:
        raise HTTPException(501, f"this installation cannot make {fmt} files: {exc}") from None
    return Response(body, media_type=MEDIA[fmt],
                    headers={"content-disposition": f'attachment; filename="{filename}"'})


def _table(store: Store, run: Any, rows: list, table: str, fmt: str) -> bytes:
    from ..report import export

    host = runinfo.host_labels([run])[0]
    records = {"samples": lambda: export.samples_table(store, run, host),
               "executions": lambda: export.executions_table(store, run, host),
               "summary": lambda: export.summary_table(run, rows, host)}[table]()
    with tempfile.TemporaryDirectory(prefix="virtbench-dl-") as tmp:
        path = export.write_table(records, Path(tmp) / f"out.{fmt}", fmt, export.COLUMNS.get(table, ()))
        return path.read_bytes()

"""Report parts of experiment kinds: one section builder per kind, looked up by the kind's name.

A kind's results are ordinary samples (so the main tables, statistics and verdicts show
them), but a kind also has its own views: the line's NDR/PDR per length and HDR plots, the
density curve, migration times. Its builder reads the stored run and returns one
`ReportSection`: the JSON key and value of `report --json` (`line`, `density`, ...), tables
for the terminal and HTML, figures (the `FigureSpec`s every renderer draws) and notes.

Builders register under the entry-point group `virtbench.report_sections`, named like the
kind (the report sits above the runner and the plugins, so the kind cannot carry it):

    [project.entry-points."virtbench.report_sections"]
    mykind = "mypackage.mykind_report:build"      # (store, run) -> ReportSection | None
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..registry import Registry
from ..store.db import Store
from ..store.models import Run
from .figures import FigureSpec


@dataclass
class SectionTable:
    title: str
    columns: list[str]
    rows: list[list[Any]]


@dataclass
class ReportSection:
    key: str
    """Top-level key of `report --json` (the kind's name)."""
    title: str
    data: Any
    """The JSON value under `key`."""
    tables: list[SectionTable] = field(default_factory=list)
    figures: list[FigureSpec] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


SectionBuilder = Callable[[Store, Run], "ReportSection | None"]
SECTIONS: Registry[Any] = Registry("virtbench.report_sections", "report section")


def experiment_of(run: Run) -> str:
    return str((run.campaign or {}).get("experiment") or "benchmarks")


def sections(store: Store, run: Run) -> list[ReportSection]:
    """The run's experiment sections (none for a benchmarks campaign)."""
    builder = dict(SECTIONS.items()).get(experiment_of(run))
    if builder is None:
        return []
    section = builder(store, run)
    return [section] if section is not None else []


def add_to_json(doc: dict[str, Any], secs: list[ReportSection]) -> dict[str, Any]:
    for s in secs:
        doc[s.key] = s.data
        if s.notes:
            doc.setdefault("notes", {})[s.key] = s.notes
    return doc


def cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e6 else f"{v:,.0f}"
    return str(v)


def render_text(secs: list[ReportSection], console: Console) -> None:
    for s in secs:
        for t in s.tables:
            table = Table(title=f"{s.title}: {t.title}", title_justify="left")
            for c in t.columns:
                table.add_column(escape(c))
            for row in t.rows:
                table.add_row(*[escape(cell(v)) for v in row])
            console.print(table)
        for note in s.notes:
            console.print(f"[dim]note: {escape(note)}[/dim]")

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
from typing import Any

from rich.console import Console

from ..errors import InputError
from ..notation import number
from ..registry import Registry
from ..store.db import Store
from ..store.models import Run
from .model import Section as ReportSection
from .model import Table as SectionTable
from .runinfo import in_main_table, kind_of

__all__ = ["SECTIONS", "ReportSection", "SectionTable", "add_to_json", "in_main_table", "render_text", "sections"]
"""ReportSection and SectionTable are the report model's Section and Table (report/model.py);
in_main_table is runinfo's, where a run's kind is read once."""


SectionBuilder = Callable[[Store, Run], "ReportSection | None"]
SECTIONS: Registry[Any] = Registry("virtbench.report_sections", "report section")


CORRECTIONS: Registry[Any] = Registry("virtbench.report_corrections", "report correction")
"""A kind's replacements for results its run judged disturbed and measured again, under the
kind's name: `(store, run) -> {(benchmark key, metric, platform): value}` (the line's re-measured
implausible points), applied to the main rows so every surface carries one number."""


def corrections(store: Store, run: Run) -> dict[tuple[str, str, str], float]:
    kind = kind_of(run)
    if kind not in CORRECTIONS.known():
        return {}
    try:
        return dict(CORRECTIONS.get(kind)(store, run))
    except InputError:
        return {}  # a plugin that fails to import: the report goes on without its corrections


def sections(store: Store, run: Run) -> list[ReportSection]:
    """The run's sections: its experiment kind's, then those of report parts for every run.

    A builder registered under an experiment kind's name is asked for runs of that kind only;
    one under any other name (energy, pressure) is asked for every run and returns None when
    the run has nothing for it.
    """
    names = sorted(SECTIONS.known())  # only the builders asked are imported (other kinds' import hdrh, ...)
    if not names:
        return []
    from ..registry import EXPERIMENTS

    kinds = EXPERIMENTS.known()  # names only (entry points): which builders are a kind's, nothing imported
    kind = kind_of(run)
    out = []
    for name in names:
        if name in kinds and name != kind:
            continue
        try:
            builder = SECTIONS.get(name)
        except InputError:
            continue  # a plugin that fails to import: doctor names it, the report goes on without it
        section = builder(store, run)
        if section is not None:
            out.append(section)
    return out


def add_to_json(doc: dict[str, Any], secs: list[ReportSection]) -> dict[str, Any]:
    """Each section's data under its key, its notes under `notes`, its row fields on every result row."""
    for s in secs:
        for name, by_pair in s.row_fields.items():
            for row in doc.get("results", []):
                row[name] = by_pair.get(f"{row.get('benchmark')}|{row.get('platform')}", by_pair["*"])
    for s in secs:
        doc[s.key] = s.data
        if s.notes:
            doc.setdefault("notes", {})[s.key] = s.notes
    return doc


def cell(v: Any) -> str:
    """A plain table cell as text, in the report's one notation (notation.py)."""
    if v is None or isinstance(v, int | float):
        return number(v)
    return str(v)


def render_text(secs: list[ReportSection], console: Console) -> None:
    """The sections in the terminal, laid out like every part of the report (report/text.py)."""
    from .text import render_sections

    render_sections(secs, console)

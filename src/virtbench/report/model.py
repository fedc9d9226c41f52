"""The one report model: what a run's report says, built once (summary.build) and rendered
four ways: JSON (summary.report_json), terminal text (text.render), the HTML file (html) and
the web pages, each laying out `layout.of(report)`.

A `Report` holds the run as stored, its rows (one cell per benchmark, metric and platform:
statistics, verdict and its reason, quality flags), the failed executions and the
**sections** that experiment kinds and report parts add. A section is built by the builder
registered under the kind's name (report/sections.py, entry-point group
`virtbench.report_sections`); its `key` is a top-level key of `report --json`, its tables and
figures appear in the terminal report and the HTML file, its notes beside them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .figures import FigureSpec

if TYPE_CHECKING:
    from ..analysis.summary import Row
    from ..store.models import Run

FORMAT_VERSION = 3
"""Version of the `report --json` document and of exports. 1: before the field existed;
2: verdicts slower/faster/same/inconclusive with `verdict_reason`, the headline, experiment
sections as top-level keys, samples of several instances summarized per round; 3: `relative`
is the verdict's estimate (inside `relative_ci95`), `p_value` the p of the test that decided,
`ratio_of_means` the old `relative`, no `p_holm`, `effect_size` or `relative_boot_ci95`."""


@dataclass
class Table:
    """A table as data: each renderer lays it out (the terminal keeps to 100 columns).

    A cell is a plain value (text, number, None) or a `Comparison`; every renderer knows how
    to show both, so a new table or column needs no renderer code."""

    title: str
    columns: list[str]
    rows: list[list[Any]]
    key_columns: int = 0
    """Leading columns that name a row: a table too wide for the terminal is split into parts
    by the columns after them, each part repeating these."""
    empty: str = ""
    """What to say instead of an empty table ('' leaves it out)."""
    main: bool = False
    """The report's principal table (HTML gives it a search box)."""


@dataclass(frozen=True)
class Comparison:
    """A cell that compares a platform with the baseline: its ratio, the verdict read from the
    interval, the reason, quality warnings and failed executions."""

    relative: float | None
    verdict: str | None
    reason: str | None = None
    ci: tuple[float, float] | None = None
    warnings: tuple[str, ...] = ()
    failed: int = 0

    @classmethod
    def of(cls, row: Row) -> Comparison:
        return cls(row.relative, row.verdict, row.verdict_reason,
                   tuple(row.relative_ci95) if row.relative_ci95 else None,  # type: ignore[arg-type]
                   tuple(f["message"] for f in row.quality if f.get("severity") == "warn"), row.failed)


@dataclass(frozen=True)
class Mark:
    """A short text standing for a verdict (a headline cell: '▼7%', '? -3% [-8..+2]'): renderers
    colour it by the verdict."""

    text: str
    verdict: str | None = None

    def __str__(self) -> str:
        return self.text


@dataclass
class Section:
    """One experiment kind's (or report part's) share of a report."""

    key: str
    """Top-level key of `report --json` (the kind's name: 'line', 'density', 'migration'...)."""
    title: str
    data: Any
    """The JSON value under `key`: the section's machine-readable content."""
    tables: list[Table] = field(default_factory=list)
    figures: list[FigureSpec] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Sentences for the reader: method and caveats."""
    in_json: bool = True
    """False for the report's own parts (report/layout.py): their data is in the document already."""
    detail: bool = False
    """Shown on request: the terminal's --detail, a folded part of the HTML file."""
    row_fields: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Fields the section adds to every result row of `report --json`: field name ->
    {"benchmark|platform": the value for that pair's rows, "*": the value for every other row}
    (the energy probe's `energy`)."""


@dataclass
class Report:
    """One run's report: what every renderer (text, JSON, HTML, the web) and the web's cache
    take; `layout.of(report)` is everything it shows, in order."""

    run: Run
    rows: list[Row]
    failures: list[dict[str, Any]]
    sections: list[Section] = field(default_factory=list)

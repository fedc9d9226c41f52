"""The one report model: what a run's report says, built once (summary.build) and rendered
four ways: JSON (summary.report_json), terminal text (text.render), the HTML file (html) and
the web pages.

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

FORMAT_VERSION = 2
"""Version of the `report --json` document and of exports. 1: before the field existed;
2: verdicts slower/faster/same/inconclusive with `verdict_reason`, the headline, experiment
sections as top-level keys, samples of several instances summarized per round."""


@dataclass
class Table:
    """A table as data: each renderer lays it out (the terminal keeps to 100 columns)."""

    title: str
    columns: list[str]
    rows: list[list[Any]]


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


@dataclass
class Report:
    """One run's report. Iterating and indexing give (run, rows, failures), the triple
    callers used before the model existed."""

    run: Run
    rows: list[Row]
    failures: list[dict[str, Any]]
    sections: list[Section] = field(default_factory=list)

    def __iter__(self) -> Any:
        return iter((self.run, self.rows, self.failures))

    def __getitem__(self, i: int) -> Any:
        return (self.run, self.rows, self.failures)[i]

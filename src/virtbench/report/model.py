"""The one report model: what a run's report says, built once and rendered four ways
(JSON, terminal text, HTML file, web pages).

Experiment kinds (line, density, migration) and report parts that are not one kind's
(energy, pressure) add **sections**. A section builder is a function registered under a
name, through the entry-point group `virtbench.report_sections` (as the built-ins do) or
`register_section` at run time. Every registered builder is asked for every run and returns
None when the run has nothing for it (a density builder on a benchmark run), so a builder
decides from the stored run alone, never from a global flag. The builder gets the store,
the stored run and its summary rows; it reads what else it needs (attachments) through
`store/` functions. Its section's `key` is a top-level key of `report --json`, its tables
and figures appear in the terminal report and the HTML file, its notes beside them.

Everything a section holds must survive `json.dumps`: the JSON document is the contract.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..analysis.summary import Row
    from ..store.db import Store
    from ..store.models import Run
    from .figures import FigureSpec

FORMAT_VERSION = 2
"""Version of the `report --json` document and of exports. 1: before the field existed (no
verdict_reason, no sections); 2: verdicts slower/faster/same/inconclusive with their reason,
headline, experiment sections as top-level keys."""
SECTION_GROUP = "virtbench.report_sections"
log = logging.getLogger(__name__)


@dataclass
class Table:
    """A table as data: each renderer lays it out (the terminal splits it at 100 columns)."""

    title: str
    columns: list[str]
    rows: list[list[Any]]
    note: str = ""

    def public(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Section:
    """One experiment kind's (or report part's) share of a report."""

    key: str
    """Top-level key in `report --json` ('line', 'density', 'migration', 'energy'...)."""
    title: str
    data: dict[str, Any] = field(default_factory=dict)
    """The section's machine-readable content: what `report --json` carries under `key`."""
    tables: list[Table] = field(default_factory=list)
    figures: list[FigureSpec] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Sentences for the reader: method, caveats ('-l is the write size, not a packet size')."""

    def public(self) -> dict[str, Any]:
        """The JSON form: data first, then the tables and notes the renderers show."""
        return {**self.data, "title": self.title, "tables": [t.public() for t in self.tables],
                "notes": list(self.notes)}


@dataclass(frozen=True)
class SectionInput:
    """What a section builder gets: the store (for attachments), the stored run, its rows."""

    store: Store
    run: Run
    rows: Sequence[Row]

    @property
    def experiment(self) -> str:
        """The run's experiment kind ('benchmarks' when the campaign names none)."""
        return str((self.run.campaign or {}).get("experiment") or "benchmarks")


SectionBuilder = Callable[[SectionInput], "Section | None"]
_builders: dict[str, SectionBuilder] | None = None
broken: dict[str, str] = {}
"""Section builders that failed to import: name -> error."""


def _load() -> dict[str, SectionBuilder]:
    global _builders
    if _builders is None:
        found: dict[str, SectionBuilder] = {}
        for ep in entry_points(group=SECTION_GROUP):
            try:
                found[ep.name] = ep.load()
            except Exception as exc:  # noqa: BLE001 - one broken plugin must not hide the report
                broken[ep.name] = f"{type(exc).__name__}: {exc}"
        _builders = dict(sorted(found.items()))
    return _builders


def register_section(name: str, builder: SectionBuilder | None = None) -> Any:
    """Register a section builder at run time (tests, notebooks); entry points are the normal route.

    Usable as a decorator: `@register_section("line")`.
    """
    if builder is None:
        return lambda fn: register_section(name, fn)
    _load()[name] = builder
    return builder


def unregister_section(name: str) -> None:
    _load().pop(name, None)


def section_names() -> list[str]:
    return list(_load())


def build_sections(store: Store, run: Run, rows: Sequence[Row]) -> list[Section]:
    """Every registered builder's section for this run, in name order; None answers are skipped.

    A builder that raises loses its own section only: the report says so in a section of its
    own rather than failing the whole report (the run's data stays in the store).
    """
    inp = SectionInput(store, run, rows)
    out: list[Section] = []
    for name, builder in _load().items():
        try:
            section = builder(inp)
        except Exception as exc:  # noqa: BLE001 - a broken section must not hide the rest of the report
            log.warning("report section %s failed: %s", name, exc)
            section = Section(key=name, title=name, data={"error": f"{type(exc).__name__}: {exc}"},
                              notes=[f"the {name} section could not be built: {type(exc).__name__}: {exc}"])
        if section is not None:
            out.append(section)
    for name, error in broken.items():
        out.append(Section(key=name, title=name, data={"error": error},
                           notes=[f"the {name} section failed to load: {error}"]))
    return out


@dataclass
class Report:
    """One run's report: its rows (cells with verdicts and quality flags), failures and sections.

    Iterating and indexing give (run, rows, failures), the triple callers used before the
    model existed.
    """

    run: Run
    rows: list[Row]
    failures: list[dict[str, Any]]
    sections: list[Section] = field(default_factory=list)

    def __iter__(self) -> Any:
        return iter((self.run, self.rows, self.failures))

    def __getitem__(self, i: int) -> Any:
        return (self.run, self.rows, self.failures)[i]

"""The report's `probes` section, gathered from one report part per probe.

Probe data lives in the attachments of each execution (kind `probe:<name>`). Each probe's
share of the report is its own module, registered under the probe's name (the name of its
`virtbench.probes` entry point) in the entry-point group `virtbench.probe_reports`:

    [project.entry-points."virtbench.probe_reports"]
    myprobe = "mypackage.myprobe_report:part"     # (ProbeRecords) -> ProbePart

so a third-party probe adds its part with one module and one entry point, without editing
report/. The built-in parts are this package's energy.py (the same statistics and verdicts
as performance), perf.py (counters) and pressure.py (a plot and noisy-neighbour warnings).

The parts share one section rather than each being a `virtbench.report_sections` builder:
`report --json` keeps its contract of one `probes` key holding each probe's value under its
name. For a run that had probes, each probe with a part adds, in the order of the probes'
names: its value under `probes.<name>`, its tables, figures and notes, and fields on every
result row (`ProbePart.row_fields`). A probe without a part (or whose part fails to import)
is stored and left out of the report.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...analysis import stats
from ...errors import InputError
from ...registry import Registry
from ...store.db import Store
from ...store.models import Attachment, Execution, Run
from ..figures import FigureSpec
from ..sections import ReportSection, SectionTable


@dataclass
class ProbeRecords:
    """What a probe's part reads: the run and its store, and each of this probe's attachments
    with the execution it watched (warm-up ones included; `Execution.warmup` tells)."""

    store: Store
    run: Run
    items: list[tuple[Execution, Attachment]]
    alpha: float = stats.ALPHA
    min_effect: float = stats.MIN_EFFECT


@dataclass
class ProbePart:
    """A probe's share of the `probes` section."""

    data: Any
    """The JSON value under `probes.<probe name>` of `report --json`."""
    tables: list[SectionTable] = field(default_factory=list)
    figures: list[FigureSpec] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Sentences for the reader, each starting with the probe's name."""
    row_fields: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Fields on every result row (report/model.py's `Section.row_fields`)."""


ProbeReport = Callable[[ProbeRecords], ProbePart]
PARTS: Registry[Any] = Registry("virtbench.probe_reports", "probe report part")


def probe_names(run: Run) -> list[str]:
    return [p if isinstance(p, str) else p.get("name", "") for p in (run.campaign or {}).get("probes") or []]


def build(store: Store, run: Run, *, alpha: float = stats.ALPHA,
          min_effect: float = stats.MIN_EFFECT) -> ReportSection | None:
    """The `probes` section of a run that had probes; None otherwise."""
    names = probe_names(run)
    if not names:
        return None
    execs = {e.id: e for e in store.executions(run.id)}
    by_probe: dict[str, list[tuple[Execution, Attachment]]] = defaultdict(list)
    for att in store.attachments(run.id, kind="probe:"):
        ex = execs.get(att.execution_id)
        if ex is not None:
            by_probe[att.kind.removeprefix("probe:")].append((ex, att))
    section = ReportSection(key="probes", title="Probes", data={})
    for name in sorted(set(names) & PARTS.known()):  # only the parts of the run's probes are imported
        try:
            part: ProbeReport = PARTS.get(name)
        except InputError:
            continue  # a part that fails to import: the report goes on without it
        got = part(ProbeRecords(store, run, by_probe[name], alpha, min_effect))
        section.data[name] = got.data
        section.tables += got.tables
        section.figures += got.figures
        section.notes += got.notes
        section.row_fields.update(got.row_fields)
    return section

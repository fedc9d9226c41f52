"""Report parts: the kind's section (its counts per platform, `virtbench.report_sections`) and
the probe's share of the probes section (mean seconds, `virtbench.probe_reports`)."""
from __future__ import annotations

from statistics import fmean

from virtbench.report.probes import ProbePart, ProbeRecords
from virtbench.report.sections import ReportSection, SectionTable
from virtbench.store.db import Store
from virtbench.store.models import Run


def count(store: Store, run: Run) -> ReportSection | None:
    per: dict[str, list[float]] = {}
    for s in store.samples(run.id):
        per.setdefault(s.platform, []).append(s.value)
    rows = [[p, len(v), max(v)] for p, v in sorted(per.items())]
    return ReportSection(key="toy-count", title="Toy counts", data={"counted": {p: max(v) for p, v in per.items()}},
                         tables=[SectionTable(title="counted", columns=["platform", "executions", "largest"], rows=rows)])


def stopwatch(rec: ProbeRecords) -> ProbePart:
    seconds = [att.json()["seconds"] for _, att in rec.items if att.status == "ok"]
    mean = fmean(seconds) if seconds else None
    return ProbePart(data={"executions": len(seconds), "mean_seconds": mean},
                     tables=[SectionTable(title="Toy stopwatch", columns=["executions", "mean s"],
                                          rows=[[len(seconds), mean]])])

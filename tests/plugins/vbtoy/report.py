"""Report parts: the kind's section (its counts per platform) and the probe's (mean seconds)."""
from __future__ import annotations

from statistics import fmean

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


def stopwatch(store: Store, run: Run) -> ReportSection | None:
    seconds = [a.json()["seconds"] for a in store.attachments(run.id, kind="probe:toy-stopwatch") if a.status == "ok"]
    if not seconds:
        return None
    return ReportSection(key="toy-stopwatch", title="Toy stopwatch",
                         data={"executions": len(seconds), "mean_seconds": fmean(seconds)},
                         tables=[SectionTable(title="Toy stopwatch", columns=["executions", "mean s"],
                                              rows=[[len(seconds), fmean(seconds)]])])

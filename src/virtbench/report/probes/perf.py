"""The perf probe's report part: counters per benchmark and platform, mean per execution,
and the events this host could not count, with the reason."""
from __future__ import annotations

from collections import defaultdict

from ..sections import SectionTable
from . import ProbePart, ProbeRecords


def part(rec: ProbeRecords) -> ProbePart:
    """The measured rounds' counters averaged per benchmark and platform."""
    per: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    unsupported: dict[str, str] = {}
    failed, hardware_reason = [], ""
    for ex, att in rec.items:
        if ex.warmup:
            continue
        if att.status != "ok":
            failed.append(att.error)
            continue
        data = att.json()
        hardware_reason = data.get("hardware_reason", hardware_reason)
        for event, v in data["events"].items():
            if v["value"] is None:
                unsupported[event] = v["reason"]
            else:
                per[(ex.benchmark, ex.platform)][event].append(float(v["value"]))
        per[(ex.benchmark, ex.platform)]["interrupts"].append(float(data["interrupts_total"]))
        per[(ex.benchmark, ex.platform)]["softirqs"].append(float(data["softirqs_total"]))
    events = sorted({e for d in per.values() for e in d})
    rows = [[b, p, *[(sum(d[e]) / len(d[e])) if d.get(e) else None for e in events]] for (b, p), d in sorted(per.items())]
    out = ProbePart(data={"events": events, "mean_per_execution": [dict(zip(["benchmark", "platform", *events], r))
                                                                   for r in rows],
                          "unavailable": unsupported, "hardware_reason": hardware_reason or None,
                          "failed": failed})
    if rows:
        out.tables.append(SectionTable("perf counters, mean per execution (system-wide unless scope: instance)",
                                       ["benchmark", "platform", *events], rows))
    if unsupported:
        out.notes.append("perf: unavailable here: " + ", ".join(f"{e} ({r})" for e, r in sorted(unsupported.items()))
                         + (f"; {hardware_reason}" if hardware_reason else ""))
    if failed:
        out.notes.append(f"perf: {len(failed)} executions without counters: {failed[0]}")
    return out

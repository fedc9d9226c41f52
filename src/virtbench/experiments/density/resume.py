"""An interrupted density search's state, read back from the store: where it goes on."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .judge import STOP_REASONS, Stop


@dataclass
class Resumed:
    """What an interrupted run had measured of one platform's search (read from the store)."""

    probe_no: int = 0
    good: int = 0
    """The highest healthy count."""
    failing: int | None = None
    """The lowest failing count above `good` (None: none failed yet)."""
    stop: Stop | None = None
    totals: dict[int, float] = field(default_factory=dict)
    points: dict[int, dict] = field(default_factory=dict)


def resumed(executions: list[Any], samples: list[Any], platform: str, metric: str) -> Resumed:
    """The search state of `platform` from its stored `density[count=N]` executions: healthy
    counts (with their aggregate and memory, for the collapse reference and the summary) and
    the lowest failing count above them, with the stored error as its stop."""
    out = Resumed()
    mine = [(int(m.group(1)), e) for e in executions if e.platform == platform
            and (m := re.match(r"^density\[count=(\d+)\]$", e.benchmark))]
    by_exec: dict[int, dict[str, float]] = {}
    per_instance: dict[int, list[float]] = {}
    for smp in samples:
        if smp.instance == 0:
            by_exec.setdefault(smp.execution_id, {})[smp.metric] = smp.value
        elif smp.metric == metric:
            per_instance.setdefault(smp.execution_id, []).append(smp.value)
    for count, e in mine:
        out.probe_no = max(out.probe_no, e.round)
        if e.status == "ok" and not e.error:
            values = by_exec.get(e.id, {})
            out.good = max(out.good, count)
            if f"{metric}_total" in values:
                out.totals[count] = values[f"{metric}_total"]
            out.points[count] = {"per_instance": per_instance.get(e.id, []),
                                 "memory_per_instance": values.get("memory_per_instance"),
                                 "available_drop_per_instance": values.get("mem_available_drop_per_instance")}
    for count, e in sorted(mine, key=lambda ce: ce[0]):
        if count > out.good and not (e.status == "ok" and not e.error):
            reason, _, detail = (e.error or "workload_failure: failed").partition(": ")
            out.failing = count
            out.stop = Stop(reason if reason in STOP_REASONS else "workload_failure", detail or e.error, count,
                            {"resumed": "read back from the stored execution", "error": e.error})
            break
    return out

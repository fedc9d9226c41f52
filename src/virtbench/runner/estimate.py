"""An estimate of a run's duration, for `virtbench run --dry-run`: the kind's plan (what would
run: platforms, benchmarks, sweeps, rounds, the adaptive cap) timed, without running anything.

The estimate is honest about where its numbers come from: each execution of the plan says
(experiments/planning.py: the median of that benchmark's past executions in the store, else the
time its parameters ask for plus start-up, else an assumption), and the hosts of a run across
hosts add up unless they measure at the same time.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..config import Campaign
from ..experiments.planning import Past, Plan, plan_of


@dataclass
class Estimate:
    plan: Plan
    declared_s: float = 0.0
    max_s: float = 0.0
    """With adaptive rounds: the longest the run may take (its caps); else declared_s."""
    notes: list[str] = field(default_factory=list)


def past_durations(store: Any | None) -> Past:
    """Benchmark name -> durations of its successful measured executions in the store."""
    out: dict[str, list[float]] = defaultdict(list)
    if store is None:
        return out
    for run in store.runs()[:20]:  # the recent ones: machines and defaults change
        for ex in store.executions(run.id, status="ok"):
            if not ex.warmup:
                out[ex.benchmark.split("[", 1)[0]].append(float(ex.duration_s))
    return out


def estimate(campaign: Campaign, store: Any | None = None) -> Estimate:
    """The plan of a validated campaign and its duration; store (optional) lends past durations."""
    plan = plan_of(campaign, past=past_durations(store))
    out = Estimate(plan, plan.declared_s(), plan.max_s(), list(plan.notes))
    if len(campaign.hosts) > 1:
        out.notes.append(f"{len(campaign.hosts)} hosts" + (" measured at the same time" if campaign.parallel
                                                           else ", one after another (times add up)"))
        if not campaign.parallel:
            out.declared_s *= len(campaign.hosts)
            out.max_s *= len(campaign.hosts)
    return out


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"

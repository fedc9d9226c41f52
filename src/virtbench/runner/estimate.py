"""A campaign's plan and an estimate of its duration, for `virtbench run --dry-run`: what would
run (platforms, benchmarks, sweeps, rounds, the adaptive cap) without running anything.

The estimate is honest about where its numbers come from: an execution of a benchmark takes
the median of that benchmark's past executions in the store when there are some, else the
time its parameters ask for (seconds, runtime, ...) plus start-up, else an assumed
DEFAULT_EXECUTION_S; each instance's life adds a start/stop cost by the platform's kind.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import Campaign
from ..experiments.benchmarks.plan import noise_rounds

TIME_PARAMS = ("seconds", "runtime", "time", "duration", "ramp_time")
"""Benchmark parameters that are a duration in seconds of the tool's own run."""
STARTUP_S = 2.0
"""Added to a duration a benchmark's parameters ask for: the tool's start, set-up and parsing."""
DEFAULT_EXECUTION_S = 10.0
"""An execution with no history and no duration parameter: an assumption, and said to be one."""
INSTANCE_S = {"baseline": 0.2, "container": 1.0, "sandbox": 2.0, "vm": 30.0}
"""Creating and removing one instance, by platform kind (a container 0.03-0.5 s here, a VM's boot)."""


@dataclass
class Plan:
    campaign: Campaign
    platforms: list[tuple[str, str, str]]
    """(name, type, kind)."""
    benchmarks: list[tuple[str, float, str]]
    """(key, seconds per execution, where that number comes from)."""
    sweeps: dict[str, list[str]] = field(default_factory=dict)
    """benchmark name -> the swept parameters' points (keys), for a benchmark given several times."""
    round_s: float = 0.0
    """One round of every platform: instance lives and every benchmark once."""
    declared_s: float = 0.0
    max_s: float = 0.0
    """With adaptive rounds: the longest the run may take (its caps); else declared_s."""
    notes: list[str] = field(default_factory=list)


def _past_durations(store: Any | None) -> Mapping[str, list[float]]:
    """Benchmark name -> durations of its successful measured executions in the store."""
    out: dict[str, list[float]] = defaultdict(list)
    if store is None:
        return out
    for run in store.runs()[:20]:  # the recent ones: machines and defaults change
        for ex in store.executions(run.id, status="ok"):
            if not ex.warmup:
                out[ex.benchmark.split("[", 1)[0]].append(float(ex.duration_s))
    return out


def _execution_s(name: str, params: Mapping[str, Any], past: Mapping[str, list[float]]) -> tuple[float, str]:
    if past.get(name):
        return statistics.median(past[name]), f"median of {len(past[name])} past executions"
    asked = [float(v) for k, v in params.items() if k in TIME_PARAMS and isinstance(v, (int, float))]
    if asked:
        return sum(asked) + STARTUP_S, "its duration parameters + start-up"
    return DEFAULT_EXECUTION_S, "assumed (no past execution in the store)"


def plan(campaign: Campaign, store: Any | None = None) -> Plan:
    """The plan of a validated campaign; store (optional) lends past durations."""
    from ..experiments.registry import EXPERIMENTS
    from ..registry import PLATFORMS

    past = _past_durations(store)
    node_types = EXPERIMENTS.get(campaign.experiment).node_types  # nodes the kind builds itself (line's netns)
    platforms: list[tuple[str, str, str]] = [
        (p.name, p.type, "node" if p.type in node_types else PLATFORMS.get(p.type).kind) for p in campaign.platforms]
    benchmarks = []
    for b in campaign.benchmarks:
        seconds, source = _execution_s(b.name, b.params, past)
        benchmarks.append((b.key, seconds, source))  # several instances run at once
    sweeps: dict[str, list[str]] = defaultdict(list)
    for b in campaign.benchmarks:
        if b.sweep:
            sweeps[b.name].append(b.key)
    per_round_benchmarks = sum(s for _, s, _ in benchmarks)
    round_s = sum(INSTANCE_S.get(kind, 1.0) + per_round_benchmarks for _, _, kind in platforms)
    rounds = campaign.warmups + campaign.repetitions
    noise_s = noise_rounds(campaign) * (INSTANCE_S["baseline"] + per_round_benchmarks)  # the baseline alone
    total_s = round_s * rounds + noise_s
    out = Plan(campaign, platforms, benchmarks, dict(sweeps), round_s, total_s, total_s)
    if campaign.adaptive is not None:
        a = campaign.adaptive
        cap_rounds = campaign.warmups + max(a.max_repetitions, campaign.repetitions)
        # extra rounds stop at max_minutes after the start; the round under way finishes
        out.max_s = max(out.declared_s, min(round_s * cap_rounds + noise_s, a.max_minutes * 60 + round_s))
    tcg = [p.name for p in campaign.platforms if p.options.get("accel") == "tcg"]
    if tcg:
        out.notes.append(f"{', '.join(tcg)}: a TCG guest emulates the CPU (10-50x slower): its executions "
                         "take longer than estimated")
    from ..experiments.registry import DEFAULT

    if campaign.experiment != DEFAULT:
        out.notes.append(f"experiment {campaign.experiment}: its own schedule; the duration below counts "
                         "one round of its benchmarks per platform and round only")
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

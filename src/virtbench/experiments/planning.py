"""A run's plan: what it will measure, worked out from the campaign alone, before anything is built.

Every experiment kind answers `Experiment.plan(campaign, seed, done)` with a `Plan`: the work of
one round (each execution with its platform, benchmark key, instances, host and expected
seconds), the rounds (`Rounds`, virtbench/rounds.py: the one place where warm-ups, the noise
check, repetitions and the adaptive cap are added up), and, where the kind knows its order in advance, the whole
schedule. Whatever needs the plan reads it: the campaign's budget (config/budget.py), `run
--dry-run` (an estimate for every kind), the progress bar and its ETA (report/progress.py),
resume's count of what is done, and the executions a lost host never reached (runner/hosts.py).
"""
from __future__ import annotations

import statistics
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..rounds import Rounds

if TYPE_CHECKING:
    from ..config import Campaign

Done = Collection[tuple[int, str, str]]
"""(round, platform, benchmark key) already stored: what a resumed run skips."""


def rounds_of(campaign: Campaign) -> Rounds:
    """The campaign's rounds (virtbench/rounds.py: the one place they are added up)."""
    return Rounds.of(campaign)


@dataclass(frozen=True)
class Work:
    """One execution the plan expects."""

    platform: str
    benchmark: str
    """The benchmark key the execution is stored under (`fio[bs=4k]`, `density[count=8]`)."""
    round: int = 0
    warmup: bool = False
    instances: int = 1
    host: str = ""
    """The inventory name of the host that measures it ("" on a one-host run)."""
    expected_s: float = 0.0
    source: str = ""
    """Where expected_s comes from (past executions, the parameters, an assumption)."""
    lifecycle: bool = False
    """The execution that records an instance's life (created, started, stopped, removed), not a benchmark."""

    @property
    def key(self) -> tuple[int, str, str]:
        return (self.round, self.platform, self.benchmark)


@dataclass
class Plan:
    """What a run of a campaign will measure (see the module)."""

    kind: str
    rounds: Rounds
    platforms: list[tuple[str, str, str]]
    """(name, type, what it is: baseline, container, vm, a kind's own node...) of every platform."""
    round: list[Work]
    """The executions of one round of every platform (round 0, the template of each round)."""
    noise: list[Work] = field(default_factory=list)
    """The executions of one noise-check round (the baseline alone)."""
    budget: tuple[int, str] = (0, "")
    """What one round asks of each platform, as the budget counts it (instances, nodes, moves)."""
    open_ended: bool = False
    """The kind decides as it goes how much it measures (density ramps until a count fails):
    `round` is then what it measures at most, and there is no schedule to mark unreached."""
    schedule: Callable[[], list[Work]] | None = None
    """Every declared execution in the order the run measures them (a pure function of the
    seed), when the kind knows it in advance; built only when asked (it may be long)."""
    notes: list[str] = field(default_factory=list)
    sweeps: dict[str, list[str]] = field(default_factory=dict)
    """Benchmark name -> the keys of its points, for a benchmark given several times."""
    order: str = "platforms in a random order each round"
    """How the rounds go, as `run --dry-run` says it."""
    in_rounds: bool = True
    """The round repeats in the campaign's rounds (warm-ups, repetitions); False: once, in the
    kind's own order (density's search)."""
    done: frozenset[tuple[int, str, str]] = frozenset()

    def benchmarks(self) -> list[Work]:
        """The first execution of each benchmark key of a round (not the instances' lives)."""
        seen: dict[str, Work] = {}
        for w in self.round:
            if not w.lifecycle:
                seen.setdefault(w.benchmark, w)
        return list(seen.values())

    def per_round(self) -> int:
        return len(self.round)

    def times(self) -> int:
        """How many times the round runs (noise check apart)."""
        return self.rounds.repeated if self.in_rounds else 1

    def declared(self) -> int:
        """Executions of the declared rounds (what the schedule holds, counted without building it)."""
        return self.times() * len(self.round) + self.rounds.noise * len(self.noise)

    def at_cap(self) -> int:
        """Executions if the adaptive rule grows the run to its round cap."""
        if not self.in_rounds:
            return len(self.round)
        return self.rounds.at_cap * len(self.round) + self.rounds.noise * len(self.noise)

    def round_s(self) -> float:
        return sum(w.expected_s for w in self.round)

    def noise_s(self) -> float:
        return sum(w.expected_s for w in self.noise)

    def declared_s(self) -> float:
        return self.round_s() * self.times() + self.rounds.noise * self.noise_s()

    def max_s(self) -> float:
        """The longest the run may take: the declared rounds, or with an adaptive rule its caps
        (extra rounds stop at max_minutes after the start; the round under way finishes)."""
        declared = self.declared_s()
        if self.rounds.cap is None or self.rounds.max_minutes is None:
            return declared
        capped = self.round_s() * self.rounds.at_cap + self.rounds.noise * self.noise_s()
        return max(declared, min(capped, self.rounds.max_minutes * 60 + self.round_s()))

    def unreached(self, done: Done | None = None) -> list[Work]:
        """The scheduled executions not stored (`done`, else what was done when the plan was
        made): a lost host's rest. None for an open-ended plan, whose extent nobody knows."""
        if self.open_ended or self.schedule is None:
            return []
        stored = self.done if done is None else done
        return [w for w in self.schedule() if w.key not in stored]

    def summary(self) -> dict[str, Any]:
        """What a run records of its plan (the report reads it, not today's kinds)."""
        return {"kind": self.kind, "rounds": {"warmups": self.rounds.warmups, "repetitions": self.rounds.repetitions,
                                              "noise": self.rounds.noise, "cap": self.rounds.cap},
                "per_round": self.per_round(), "declared": self.declared(), "at_cap": self.at_cap(),
                "open_ended": self.open_ended, "in_rounds": self.in_rounds,
                "benchmarks": sorted({w.benchmark for w in self.round})}


TIME_PARAMS = ("seconds", "runtime", "time", "duration", "ramp_time")
"""Benchmark parameters that are a duration in seconds of the tool's own run."""
STARTUP_S = 2.0
"""Added to a duration a benchmark's parameters ask for: the tool's start, set-up and parsing."""
DEFAULT_EXECUTION_S = 10.0
"""An execution with no history and no duration parameter: an assumption, and said to be one."""
INSTANCE_S = {"baseline": 0.2, "container": 1.0, "sandbox": 2.0, "vm": 30.0}
"""Creating and removing one instance, by platform kind (a container 0.03-0.5 s here, a VM's boot)."""

Past = Mapping[str, Sequence[float]]
"""Benchmark name (a key's part before `[`) -> durations of its past measured executions."""


def execution_s(name: str, params: Mapping[str, Any], past: Past | None = None) -> tuple[float, str]:
    """The seconds one execution of a benchmark is expected to take, and where that comes from:
    the median of its past executions in the store, else the duration its parameters ask for
    plus start-up, else an assumed DEFAULT_EXECUTION_S."""
    if past and past.get(name):
        return statistics.median(past[name]), f"median of {len(past[name])} past executions"
    asked = [float(v) for k, v in params.items() if k in TIME_PARAMS and isinstance(v, (int, float))
             and not isinstance(v, bool)]
    if asked:
        return sum(asked) + STARTUP_S, "its duration parameters + start-up"
    return DEFAULT_EXECUTION_S, "assumed (no past execution in the store)"


def instance_s(kind: str) -> float:
    """Creating and removing one instance of a platform of this kind."""
    return INSTANCE_S.get(kind, 1.0)


def platform_kinds(campaign: Campaign, node_types: tuple[str, ...] = ()) -> list[tuple[str, str, str]]:
    """(name, type, what it is) of the campaign's platforms; a kind's own node types are nodes."""
    from ..registry import PLATFORMS

    return [(p.name, p.type, "node" if p.type in node_types else PLATFORMS.get(p.type).kind)
            for p in campaign.platforms]


def each_round(work: Sequence[Work], rounds: Rounds) -> Callable[[], list[Work]]:
    """A schedule that runs the same work in every declared round (in the order given; the
    kind shuffles as it measures, which changes no count)."""
    def scheduled() -> list[Work]:
        return [Work(w.platform, w.benchmark, round=r, warmup=r < rounds.warmups, instances=w.instances,
                     expected_s=w.expected_s) for r in range(rounds.declared) for w in work]

    return scheduled


def plan_of(campaign: Campaign, seed: int = 0, done: Done = frozenset(), past: Past | None = None) -> Plan:
    """The plan of a validated campaign, by its experiment kind."""
    from ..registry import EXPERIMENTS

    plan: Plan = EXPERIMENTS.get(campaign.experiment).plan(campaign, seed, done, past)
    return plan

"""The order of a campaign: rounds of platforms in a fresh random order each round.

Interleaving spreads slow drift (thermal throttling, background load, cache warm-up) over
every platform alike instead of letting it land on whichever ran last. The benchmarks run in
one order per round, the same for every platform of the round: a benchmark's position in its
instance (what ran before it) moves its value (sqlite's CPU time third in the instance, after
openssl and fio, averaged 12 % more than first or second in the quick run of 2026-11-25), and
the verdicts pair each platform with the baseline round by round, so both sides of a pair
must share it. The order is a pure function of the seed, which is stored, so a resumed run
continues the same schedule.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...constants import LIFECYCLE
from ..planning import rounds_of

if TYPE_CHECKING:
    from ...config import Campaign

__all__ = ["LIFECYCLE", "Unit", "extra_round", "noise_rounds", "schedule", "unmeasured_rounds", "without"]


@dataclass(frozen=True)
class Unit:
    """One instance's life: created, every benchmark run inside it once, removed."""

    round: int
    warmup: bool
    platform: str
    benchmarks: tuple[str, ...]

    def keys(self) -> list[tuple[int, str, str]]:
        return [(self.round, self.platform, b) for b in (*self.benchmarks, LIFECYCLE)]


def noise_rounds(campaign: Campaign) -> int:
    """Rounds of the baseline alone after the warm-up (the adaptive rule's noise check)."""
    return rounds_of(campaign).noise


def unmeasured_rounds(campaign: Campaign) -> int:
    """Rounds before the first measured one: the warm-up, then the noise check."""
    return rounds_of(campaign).unmeasured


def schedule(campaign: Campaign, seed: int) -> list[Unit]:
    """The declared rounds. The noise check's rounds run the baseline alone, stored as warm-ups
    (never in a verdict), spread over the last warm-up round: their spread is the A/A noise of
    executions as far apart as a round's pairs are. (Back to back they said +-1.4 % for fio
    while its round-paired noise was +-10 %: disturbances here last seconds, so executions
    seconds apart differ far more than neighbours.)"""
    rng = random.Random(seed)
    platforms = [p.name for p in campaign.platforms]
    benchmarks = [b.key for b in campaign.benchmarks]
    counted = rounds_of(campaign)
    first = counted.unmeasured
    units: list[Unit] = []
    for rnd in range(counted.declared):
        order, benches = platforms[:], benchmarks[:]
        if campaign.shuffle:
            rng.shuffle(order)
            rng.shuffle(benches)
        if campaign.warmups <= rnd < first:
            continue  # placed below
        units += [Unit(round=rnd, warmup=rnd < first, platform=name, benchmarks=tuple(benches)) for name in order]
    checks = [Unit(round=rnd, warmup=True, platform=campaign.baseline, benchmarks=tuple(benchmarks))
              for rnd in range(campaign.warmups, first)]
    if checks:  # after the last warm-up round's first unit, then evenly through it, one at its end
        warm = [i for i, u in enumerate(units) if u.round == campaign.warmups - 1] or [-1]
        start, size = warm[0] + 1, len(warm)
        for k, unit in reversed(list(enumerate(checks))):
            units.insert(min(start + (k * size) // len(checks), warm[-1] + 1), unit)
    return units


def extra_round(campaign: Campaign, seed: int, entry: dict) -> list[Unit]:
    """An adaptive extra round: only the listed platforms (and, when the entry names them, only
    their undecided benchmarks), in a seeded random order."""
    rng = random.Random(seed * 100003 + entry["round"])
    order = [p.name for p in campaign.platforms if p.name in entry["platforms"]]
    benchmarks = [b.key for b in campaign.benchmarks]
    only: dict[str, list[str]] = entry.get("benchmarks") or {}
    if campaign.shuffle:
        rng.shuffle(order)
        rng.shuffle(benchmarks)  # one order for the round (see the module)
    units = []
    for name in order:
        benches = [b for b in benchmarks if b in only[name]] if name in only else benchmarks[:]
        units.append(Unit(round=entry["round"], warmup=False, platform=name, benchmarks=tuple(benches)))
    return units


def without(campaign: Campaign, keys: set[str]) -> Campaign:
    """The campaign's own part for one host: without the pairs measured across hosts (the
    controller runs those); the image stays the full campaign's, the same on every host."""
    if not keys:
        return campaign
    return campaign.model_copy(update={"benchmarks": [b for b in campaign.benchmarks if b.key not in keys]})

"""What a run can decide at the host's noise, before measuring: the verdict rate to expect.

A comparison is decided when its interval leaves 1 (slower or faster) or fits inside the
margin (the same). At a round-paired noise of s (the standard deviation of one round's log
ratio) and R rounds, the interval's half-width is about t * s / sqrt(R). So R rounds decide
every difference beyond `beyond` (at the adaptive rule's stopping confidence) and call the
same every platform within `within` of the baseline; a platform whose true cost lies between
the two stays undecided. Where they cross, every comparison decides.

The noise comes from an A/A check: the baseline measured back to back a few times; the log
ratio of two such executions has sqrt(2) times the spread of one. It is a lower bound of a
real pair's noise (a platform's own instance adds its own), and with three executions a rough
one, so the forecast is said as "about".

The expected share needs the platforms' costs, which are what the run is about to measure:
it assumes them spread evenly between 0 and SPREAD, and says so.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .stats import t_quantile

SPREAD = 0.10
"""Costs assumed spread evenly over 0 to 10 % for the expected share (containers' costs in the
quick campaign measured on this project's machines lie between 0 and 10 %)."""
DIFFERENCE_CONFIDENCE = 0.99
"""The adaptive rule's stopping confidence for a difference (experiments.benchmarks.adaptive.STOP_CONFIDENCE)."""
NOISY = 0.7
"""Below this expected share of decided comparisons the host is called too noisy for the caps."""
SAME_CONFIDENCE = 0.95
"""Its stopping interval for the same (experiments.benchmarks.adaptive.STOP_EQUIVALENCE)."""


@dataclass(frozen=True)
class Reach:
    """What R rounds decide at one metric's noise."""

    pair_noise: float
    """The standard deviation of an A/A pair's log ratio."""
    rounds: int
    beyond: float
    """Differences larger than this come out slower or faster."""
    within: float
    """Platforms closer than this to the baseline come out the same (0: 'same' is out of reach)."""

    @property
    def share(self) -> float:
        """The share of comparisons expected to decide, costs spread evenly over 0 to SPREAD."""
        if self.within >= self.beyond:
            return 1.0
        return min(1.0, (self.within + max(0.0, SPREAD - self.beyond)) / SPREAD)

    def describe(self) -> str:
        same = f"the same within +-{self.within * 100:.1f} %" if self.within > 0 else "never the same"
        if self.within >= self.beyond:
            return f"noise +-{self.pair_noise * 100:.1f} % a pair: {self.rounds} rounds decide every comparison"
        return (f"noise +-{self.pair_noise * 100:.1f} % a pair: {self.rounds} rounds decide differences beyond "
                f"{self.beyond * 100:.1f} % and {same}")


def pair_noise(values: Sequence[float]) -> float | None:
    """An A/A pair's log-ratio spread from back-to-back executions of one platform (None: fewer
    than two positive values)."""
    logs = [math.log(v) for v in values if v > 0]
    if len(logs) < 2:
        return None
    return float(np.std(logs, ddof=1)) * math.sqrt(2)


def reach(noise: float, rounds: int, margin: float) -> Reach:
    """What `rounds` paired rounds decide at an A/A pair noise of `noise` (margin: the 'same' band)."""
    rounds = max(2, rounds)
    se = noise / math.sqrt(rounds)
    beyond = t_quantile(0.5 + DIFFERENCE_CONFIDENCE / 2, rounds - 1) * se
    within = max(0.0, math.log1p(margin) - t_quantile(0.5 + SAME_CONFIDENCE / 2, rounds - 1) * se)
    return Reach(noise, rounds, math.expm1(beyond), math.expm1(within))


def rounds_within(budget_s: float, round_s: float, declared: int, cap: int) -> int:
    """Measured rounds a run can expect: the declared ones, then as many as fit in the time
    left at the duration of a full round (extra rounds run only what is undecided, so this
    errs short), up to the cap."""
    if round_s <= 0:
        return cap
    return max(declared, min(cap, int(budget_s // round_s)))


def note_lines(note: dict[str, Any]) -> list[str]:
    """The noise check for the terminal and the report: the expected verdict rate, then per metric."""
    cells, expected = note["cells"], note["expected_decided"]
    head = (f"host noise (A/A check): expect about {expected} of {cells} comparisons decided in about "
            f"{note['rounds']} rounds (if the platforms' costs spread evenly over 0-{note['spread']:.0%})")
    if cells and expected < NOISY * cells:
        head += ": this host is too noisy for the time cap now; a quieter moment decides more"
    elif cells and expected < cells:
        head += "; a cost close to the margin of 'same' may stay undecided"
    return [head, *[f"  {name}: {m['describe']}" for name, m in note["metrics"].items()]]

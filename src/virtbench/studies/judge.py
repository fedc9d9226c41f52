"""A paper's value against this host's, decided by this host's own interval.

The rule is the run's verdict rule turned on the paper: this host's value is an Estimate with
its 95 % interval (a report row's, a category's geometric mean's, or the t interval over
repeated runs or rounds); the paper states a band (its value +- a tolerance, Table 7's range,
a claim's bound). The paper's value

- **agrees** when the whole interval lies inside the band,
- **differs** when the whole interval lies outside it,
- is **undecided at this scale** otherwise, or when there is no interval (one observation),
  with what would decide it: about how many repetitions would shrink the interval past the
  band's nearest edge (its half-width falls as 1/sqrt(n)), or runs to repeat.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..analysis.stats import t_quantile

AGREES, DIFFERS, UNDECIDED, NOT_MEASURED = "agrees", "differs", "undecided at this scale", "not measured here"
VERDICTS = (AGREES, DIFFERS, UNDECIDED, NOT_MEASURED)
MAX_ADVICE = 1000
"""Beyond this many repetitions the advice is that the noise dominates, not a number."""


@dataclass(frozen=True)
class Estimate:
    value: float
    ci: tuple[float, float] | None = None
    """The 95 % interval (None: one observation, nothing to decide with)."""
    n: int = 1
    """Repetitions (or runs, or rounds) behind the interval."""
    what: str = ""
    """Where the interval comes from, for the reader ('3 rounds paired', '2 runs')."""

    def span(self, fmt: str = ".3g") -> str:
        return f"[{self.ci[0]:{fmt}}-{self.ci[1]:{fmt}}]" if self.ci else "(no interval)"


def of_values(values: Sequence[float], what: str = "runs") -> Estimate | None:
    """The mean of repeated observations with its 95 % t interval (one: the value alone)."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not vals:
        return None
    mean = statistics.fmean(vals)
    if len(vals) < 2:
        return Estimate(mean, None, 1, f"1 {what.rstrip('s')}")
    half = t_quantile(0.975, len(vals) - 1) * statistics.stdev(vals) / math.sqrt(len(vals))
    return Estimate(mean, (mean - half, mean + half), len(vals), f"{len(vals)} {what}")


def geomean(parts: Sequence[Estimate]) -> Estimate | None:
    """The geometric mean of ratios with an interval from theirs: each interval's log half-width
    taken as its own noise, independent, so the mean's is sqrt(sum h^2) / k (an approximation: the
    ratios share the baseline; it is as wide as the rows make it, never narrower)."""
    if not parts or any(p.value <= 0 for p in parts):
        return None
    if len(parts) == 1:
        return parts[0]
    k = len(parts)
    g = math.exp(sum(math.log(p.value) for p in parts) / k)
    if any(p.ci is None or p.ci[0] <= 0 for p in parts):
        return Estimate(g, None, min(p.n for p in parts), f"{k} cells, one without an interval")
    halves = [(math.log(p.ci[1]) - math.log(p.ci[0])) / 2 for p in parts if p.ci]
    h = math.sqrt(sum(x * x for x in halves)) / k
    return Estimate(g, (g * math.exp(-h), g * math.exp(h)), min(p.n for p in parts), f"{k} cells")


def ratio(a: Estimate, b: Estimate) -> Estimate | None:
    """a / b with an interval from both (log half-widths added in quadrature)."""
    if a.value <= 0 or b.value <= 0:
        return None
    r = a.value / b.value
    if a.ci is None or b.ci is None or a.ci[0] <= 0 or b.ci[0] <= 0:
        return Estimate(r, None, min(a.n, b.n), "one side without an interval")
    h = math.hypot(math.log(a.ci[1] / a.ci[0]) / 2, math.log(b.ci[1] / b.ci[0]) / 2)
    return Estimate(r, (r * math.exp(-h), r * math.exp(h)), min(a.n, b.n), f"{a.what} / {b.what}")


def decide(est: Estimate, low: float | None, high: float | None) -> str:
    """agrees / differs / undecided for a band [low, high] (None: unbounded on that side)."""
    lo_band = -math.inf if low is None else low
    hi_band = math.inf if high is None else high
    if est.ci is None:
        return UNDECIDED
    lo, hi = est.ci
    if lo_band <= lo and hi <= hi_band:
        return AGREES
    if hi < lo_band or lo > hi_band:
        return DIFFERS
    return UNDECIDED


def needed_repetitions(est: Estimate, low: float | None, high: float | None) -> int | None:
    """About how many repetitions would shrink the interval past the band's nearest edge (its
    half-width falls as 1/sqrt(n)); None where none would: no interval, or the value on an edge."""
    edges = [e for e in (low, high) if e is not None]
    if est.ci is None or not edges:
        return None
    half = (est.ci[1] - est.ci[0]) / 2
    margin = min(abs(est.value - e) for e in edges)
    if margin <= 0 or half <= 0:
        return None
    return max(math.ceil(est.n * (half / margin) ** 2), est.n + 1)


def to_decide(est: Estimate, low: float | None, high: float | None, paper_scale: int | None = None) -> str:
    """What would decide an undecided comparison, in one phrase."""
    if est.ci is None:
        return ("one observation, no interval: repeat the part (3 runs or more, each given to `study report`) "
                "or run it at --scale paper")
    needed = needed_repetitions(est, low, high)
    half = (est.ci[1] - est.ci[0]) / 2
    if needed is None:
        return "this host's value sits on the paper's edge: no number of repetitions decides it"
    if needed > MAX_ADVICE:
        margin = min(abs(est.value - e) for e in (low, high) if e is not None)
        return f"the noise dominates (+-{half:.3g} against a margin of {margin:.3g})"
    scale = f" (the paper scale runs {paper_scale})" if paper_scale and paper_scale >= needed else ""
    return f"about {needed} repetitions would decide it{scale}"


def band_text(low: float | None, high: float | None) -> str:
    if low is None:
        return f"below {high:.3g}"
    if high is None:
        return f"above {low:.3g}"
    return f"{low:.3g}-{high:.3g}"


def banded(out: dict[str, Any], est: Estimate, low: float | None, high: float | None, text: str,
           repetitions: int | None = None) -> dict[str, Any]:
    """Fill a comparison's result from an estimate against the paper's band: yours, its interval, the
    verdict, the reason and (undecided) what would decide it."""
    out["yours"], out["ci"] = est.value, list(est.ci) if est.ci else None
    out["verdict"] = decide(est, low, high)
    out["estimate"], out["band"] = est, (low, high)  # what a study's adaptive aim reads (studies/aim.py)
    where = f" [95 % {est.ci[0]:.3g}-{est.ci[1]:.3g}, {est.what}]" if est.ci else f" ({est.what})"
    out["detail"] = f"{text}{where}; the paper's band {band_text(low, high)}"
    if out["verdict"] == UNDECIDED:
        out["detail"] += ": " + to_decide(est, low, high, repetitions)
    return out

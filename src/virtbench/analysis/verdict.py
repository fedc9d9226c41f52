"""The verdict of one comparison: slower, faster, same or inconclusive, each with its number.

The rule (README, "Reading the verdicts"): the direction-aware ratio (1.0 = as the baseline)
gets a 95 % t interval on the log scale:

- **paired by round** when the rounds are known and at least MIN_PAIRS rounds measured both
  the platform and the baseline: the log of each round's ratio, then a one-sample t interval
  of their mean (k - 1 degrees of freedom), centred on the geometric mean of the per-round
  ratios. Every round runs every platform in a fresh random order, so load that drifts from
  round to round (other work on the machine, thermal state) moves both sides of a round's
  ratio alike and cancels, where an unpaired test counts it as noise;
- **unpaired** otherwise (rounds unknown, or too few common rounds): the ratio of means with
  a Welch t interval (delta method: the variance of the log of a mean is CV^2 / n;
  Welch-Satterthwaite degrees of freedom).

Then, in this order:

- **same** when the 90 % interval (same pairing) lies inside 1 +- min_effect (default 2 %):
  an equivalence verdict, the two one-sided tests (TOST) at the usual 5 % level each, so a
  platform truly 2 % off is called the same at most 5 % of the time;
- **slower** when the interval lies below 1, **faster** when it lies above 1 (a two-sided
  test at 5 %: on identical platforms "slower" comes out at most 2.5 % of the time);
- **inconclusive** otherwise, with the noise (the interval's half-width) and about how many
  repetitions per side would decide it at that noise.

Why not a rank test: with 3 against 3 repetitions an exact Mann-Whitney test cannot go below
p = 0.1, so a quick comparison could never say anything. Why not the bootstrap interval: with
3 values it is far too narrow (it ignores that the spread itself is estimated), and identical
platforms would be called different about a third of the time. The error rates of this rule
were measured by simulation (`benchmarks/verdict_rates.py`, figures in the README), with
and without a shared round effect and with the quick campaign's adaptive rounds.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..constants import VERDICT_CONFIDENCE, VERDICT_EQUIVALENCE
from ..notation import change, change_interval
from .special import t_sf
from .stats import MIN_EFFECT, t_quantile

CONFIDENCE = VERDICT_CONFIDENCE
EQUIVALENCE = VERDICT_EQUIVALENCE
"""The interval of the 'same' verdict: TOST at 5 % each side (a 1 - 2 alpha interval). Both are
constants.py's, so the CLI's help states them without importing the statistics."""
MIN_PAIRS = 3
"""Fewer common rounds than this: the unpaired interval (a paired one on 2 pairs has 1 degree of freedom)."""
MAX_ADVICE = 100
"""Beyond this many repetitions per side the advice is 'the noise dominates', not a number."""
VERDICTS = ("slower", "faster", "same", "inconclusive")


@dataclass(frozen=True)
class Verdict:
    verdict: str
    """slower, faster, same or inconclusive."""
    reason: str
    """One sentence with the number: 'slower by 7.1 % [-11.0, -3.2], 3 rounds paired', or why undecided and what would decide."""
    ci: tuple[float, float] | None = None
    """The ratio's interval the verdict was read from."""
    needed: int | None = None
    """Inconclusive: about how many repetitions per side would decide it (None: more than MAX_ADVICE)."""
    ratio: float | None = None
    """The point estimate the interval is centred on: the geometric mean of the per-round ratios when
    paired, else the ratio of means (also with fewer than two values, where there is no interval).
    Every surface shows this number as the cell's `relative`, so it always lies inside `ci`."""
    p: float | None = None
    """The p-value of the test that decided, and only then: for slower/faster the two-sided t test of
    ratio = 1 (below 0.05 exactly when the 95 % interval excludes 1), for same the TOST p (below 0.05
    exactly when the 90 % interval lies within the margin); None while inconclusive."""


def combine(verdicts: Sequence[str | None]) -> str:
    """A category's verdict from its metrics' verdicts: slower when one is slower and none
    faster, faster the other way, mixed for both, same when one is the same and none differs,
    else inconclusive (the README's rule for the headline)."""
    seen = {v or "inconclusive" for v in verdicts}
    if "slower" in seen and "faster" in seen:
        return "mixed"
    for v in ("slower", "faster", "same"):
        if v in seen:
            return v
    return "inconclusive"


def _t(df: float, confidence: float) -> float:
    return t_quantile(0.5 + confidence / 2, df)


Moments = tuple[int, float, float]
"""(n, mean, sample standard deviation) of a sample (_moments)."""


def _moments(values: Sequence[float]) -> Moments:
    arr = np.asarray(values, dtype=float)
    n = arr.size
    return n, float(arr.mean()) if n else math.nan, float(arr.std(ddof=1)) if n > 1 else math.nan


def log_ratio_interval(values: Sequence[float], base: Sequence[float], higher_is_better: bool,
                       confidence: float = CONFIDENCE, moments: tuple[Moments, Moments] | None = None
                       ) -> tuple[float, float, float, float] | None:
    """(ratio, low, high, half-width on the log scale) of the direction-aware ratio of means.

    None when a side has fewer than two values or a mean is not positive (a log ratio needs
    both). Zero spread on both sides gives the exact ratio as a zero-width interval. moments:
    _moments() of values and base, when the caller has them.
    """
    (nx, mx, sx), (nb, mb, sb) = moments or (_moments(values), _moments(base))
    if nx < 2 or nb < 2 or not (mx > 0 and mb > 0):
        return None
    log_r = math.log(mx / mb) if higher_is_better else math.log(mb / mx)
    vx, vb = (sx / mx) ** 2 / nx, (sb / mb) ** 2 / nb
    se = math.sqrt(vx + vb)
    if se == 0:
        r = math.exp(log_r)
        return r, r, r, 0.0
    df = (vx + vb) ** 2 / (vx ** 2 / (nx - 1) + vb ** 2 / (nb - 1))
    half = _t(df, confidence) * se
    return math.exp(log_r), math.exp(log_r - half), math.exp(log_r + half), half


def per_round(values: Sequence[float], rounds: Sequence[int]) -> dict[int, float]:
    """Round -> the mean of the round's values (one value per round but for multi-instance reruns).
    Sums in the order given, like sum() per round: the same floats, computed in numpy."""
    found, means = round_means(values, rounds)
    return dict(zip(found.tolist(), means.tolist()))


def round_means(values: Sequence[float], rounds: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """per_round() as two arrays (the rounds in order, each round's mean), for pairing in numpy:
    the same floats (a round of one value is 0.0 + value, divided by 1)."""
    found, where = np.unique(np.asarray(rounds, dtype=np.int64), return_inverse=True)
    sums = np.bincount(where, weights=np.asarray(values, dtype=float), minlength=found.size)
    return found, sums / np.bincount(where, minlength=found.size)


def paired_log_ratios(values: Sequence[float], rounds: Sequence[int] | None, base: Sequence[float],
                      base_rounds: Sequence[int] | None, higher_is_better: bool, *,
                      base_means: tuple[np.ndarray, np.ndarray] | None = None) -> list[float] | None:
    """The direction-aware log ratio of every round that measured both sides, in round order.

    None when the rounds are unknown, do not match the values, fewer than MIN_PAIRS rounds are
    common, or a value is not positive (a log ratio needs both positive). base_means: the
    baseline's round_means(), when the caller pairs many platforms with one baseline. The rounds
    are paired in numpy; the logs are math.log's (numpy's may differ in the last bit).
    """
    if rounds is None or base_rounds is None or len(rounds) != len(values) or len(base_rounds) != len(base):
        return None
    mine_r, mine = round_means(values, rounds)
    theirs_r, theirs = base_means if base_means is not None else round_means(base, base_rounds)
    common, ia, ib = np.intersect1d(mine_r, theirs_r, assume_unique=True, return_indices=True)
    if common.size < MIN_PAIRS:
        return None
    a, b = mine[ia], theirs[ib]
    if (a <= 0).any() or (b <= 0).any():
        return None
    logs = list(map(math.log, (a / b).tolist()))
    return logs if higher_is_better else [-x for x in logs]


def paired_interval(logs: Sequence[float], confidence: float = CONFIDENCE, moments: Moments | None = None
                    ) -> tuple[float, float, float, float]:
    """(ratio, low, high, half-width on the log scale) from per-round log ratios: a t interval
    of their mean with len(logs) - 1 degrees of freedom (moments: their _moments(), if known)."""
    k, m, sd = moments or _moments(logs)
    if sd == 0:
        r = math.exp(m)
        return r, r, r, 0.0
    half = _t(k - 1, confidence) * sd / math.sqrt(k)
    return math.exp(m), math.exp(m - half), math.exp(m + half), half


def paired_repetitions_needed(logs: Sequence[float], target: float, confidence: float = CONFIDENCE,
                              moments: Moments | None = None) -> int | None:
    """Rounds for a paired half-width below target at the spread of the round ratios seen so far."""
    k, _, sd = moments or _moments(logs)
    if target <= 0 or k < 2:
        return None
    for n in range(max(k, 2), MAX_ADVICE + 1):
        if _t(n - 1, confidence) * sd / math.sqrt(n) < target:
            return n
    return None


def _pct(x: float) -> str:
    return f"{abs(x) * 100:.1f} %"


def repetitions_needed(values: Sequence[float], base: Sequence[float], target: float,
                       confidence: float = CONFIDENCE, moments: tuple[Moments, Moments] | None = None) -> int | None:
    """Repetitions per side for a log-scale half-width below target, at the noise seen so far.

    The same CVs are assumed on both sides as measured; None beyond MAX_ADVICE.
    """
    (nx, mx, sx), (nb, mb, sb) = moments or (_moments(values), _moments(base))
    if target <= 0 or nx < 2 or nb < 2:
        return None
    cv2 = (sx / mx) ** 2 + (sb / mb) ** 2
    for n in range(max(nx, nb, 2), MAX_ADVICE + 1):
        if _t(2 * n - 2, confidence) * math.sqrt(cv2 / n) < target:
            return n
    return None


def _interval(values: Sequence[float], base: Sequence[float], higher_is_better: bool, logs: list[float] | None,
              confidence: float, moments: Any) -> tuple[float, float, float, float] | None:
    return paired_interval(logs, confidence, moments) if logs is not None else log_ratio_interval(
        values, base, higher_is_better, confidence, moments)


def _log_se(values: Sequence[float], base: Sequence[float], logs: list[float] | None, moments: Any
            ) -> tuple[float, float]:
    """(standard error, degrees of freedom) of the log ratio the interval is built on."""
    if logs is not None:
        k, _, sd = moments
        return sd / math.sqrt(k), k - 1
    (nx, mx, sx), (nb, mb, sb) = moments
    vx, vb = (sx / mx) ** 2 / nx, (sb / mb) ** 2 / nb
    if vx + vb == 0:
        return 0.0, 1.0
    return math.sqrt(vx + vb), (vx + vb) ** 2 / (vx ** 2 / (nx - 1) + vb ** 2 / (nb - 1))


def _tail(t: float, df: float) -> float:
    return (0.0 if t > 0 else 1.0) if math.isinf(t) else t_sf(t, df)


def p_value(log_r: float, se: float, df: float, verdict: str, margin: float) -> float | None:
    """The p of the test behind the verdict (see Verdict.p): two-sided t for slower/faster, TOST for same."""
    if verdict in ("slower", "faster"):
        return 0.0 if se == 0 else min(1.0, 2 * _tail(abs(log_r) / se, df))
    if verdict == "same":
        if se == 0:
            return 0.0
        return max(_tail((log_r + margin) / se, df), _tail((margin - log_r) / se, df))
    return None


def ratio_of_means(values: Sequence[float], base: Sequence[float], higher_is_better: bool) -> float | None:
    """The direction-aware ratio of the means (None when a mean is zero or a side is empty)."""
    if not len(values) or not len(base):
        return None
    mx, mb = float(np.mean(values)), float(np.mean(base))
    num, den = (mx, mb) if higher_is_better else (mb, mx)
    return num / den if den else None


def decide(values: Sequence[float], base: Sequence[float], higher_is_better: bool, *,
           min_effect: float = MIN_EFFECT, confidence: float = CONFIDENCE, equivalence: float = EQUIVALENCE,
           rounds: Sequence[int] | None = None, base_rounds: Sequence[int] | None = None,
           base_means: tuple[np.ndarray, np.ndarray] | None = None) -> Verdict:
    """The verdict of a platform's values against the baseline's (see the module's rule).

    confidence: the interval of slower/faster; equivalence: the interval of 'same' (TOST).
    rounds/base_rounds: the round of each value; given both, the interval is paired by round
    where enough rounds are common (the reason then says "k rounds paired"); base_means: the
    baseline's round_means(), computed once by a caller that decides many platforms against it."""
    if not len(values):
        return Verdict("inconclusive", "no values: every execution failed or none ran")
    if not len(base):
        return Verdict("inconclusive", "the baseline has no values to compare with")
    if len(values) < 2 or len(base) < 2:
        return Verdict("inconclusive", f"{min(len(values), len(base))} repetition on one side: "
                       "an interval needs at least 2, better 3",
                       ratio=ratio_of_means(values, base, higher_is_better))
    logs = paired_log_ratios(values, rounds, base, base_rounds, higher_is_better, base_means=base_means)
    # each side's mean and spread once (the two intervals and the advice below all read them)
    moments: Any = _moments(logs) if logs is not None else (_moments(values), _moments(base))
    iv = _interval(values, base, higher_is_better, logs, confidence, moments)
    eq = _interval(values, base, higher_is_better, logs, equivalence, moments)
    if iv is None or eq is None:
        return Verdict("inconclusive", "a mean is zero or negative: the ratio is undefined",
                       ratio=ratio_of_means(values, base, higher_is_better))
    ratio, lo, hi, half = iv
    se, df = _log_se(values, base, logs, moments)
    log_r, margin = math.log(ratio), math.log1p(min_effect)
    paired = f", {len(logs)} rounds paired" if logs is not None else ""
    span = f"{change_interval(lo, hi)}{paired}"
    if eq[1] >= 1 / (1 + min_effect) and eq[2] <= 1 + min_effect:
        eq_span = f"{change_interval(eq[1], eq[2])}, {equivalence * 100:.0f} % interval{paired}"
        return Verdict("same", f"same within +-{min_effect:.0%}: {change(ratio)} {eq_span}", (lo, hi),
                       ratio=ratio, p=p_value(log_r, se, df, "same", margin))
    if hi < 1:
        return Verdict("slower", f"slower by {_pct(1 - ratio)} {span}", (lo, hi), ratio=ratio,
                       p=p_value(log_r, se, df, "slower", margin))
    if lo > 1:
        return Verdict("faster", f"faster by {_pct(ratio - 1)} {span}", (lo, hi), ratio=ratio,
                       p=p_value(log_r, se, df, "faster", margin))
    effect = abs(math.log(ratio))
    # Deciding needs the interval off 1 (a real difference) or the equivalence one inside the margin,
    # whichever comes first: an effect inside the margin but away from 1 (-1.5 % against +-2 %) is
    # shown a difference long before it is shown the same (seen: such cells left without rounds).
    goals = [(effect, confidence)] + ([(margin - effect, equivalence)] if effect < margin else [])
    if logs is not None:
        counts = [paired_repetitions_needed(logs, t, c, moments) for t, c in goals]
        n = len(logs)
    else:
        counts = [repetitions_needed(values, base, t, c, moments) for t, c in goals]
        n = min(len(values), len(base))
    needed = min((c for c in counts if c is not None), default=None)
    advice = (f"needs about {needed} repetitions" if needed is not None and needed > n
              else f"more than {MAX_ADVICE} repetitions at this noise: the noise dominates" if needed is None
              else "one more repetition may decide it")
    return Verdict("inconclusive", f"noise +-{half * 100:.1f} % ({change(ratio)} {span}): {advice}",
                   (lo, hi), needed, ratio=ratio)

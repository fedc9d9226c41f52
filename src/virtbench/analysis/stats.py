"""Inferential statistics: bootstrap intervals, the rank test, Holm's correction, precision.

Bootstrap resamples are drawn as count matrices (how often each of the n observations is
picked in each of B resamples), cached per sample size and seed stream. One matrix then
serves every platform and metric with that many repetitions: the resampled means are a
matrix-vector product and, because the counts are exchangeable, the resampled medians are
read off the sorted values at positions that depend on the counts alone. A report over
100,000 samples therefore costs milliseconds instead of seconds, and is reproducible.

A ratio to the baseline resamples the two sides independently (streams 0 and 1): they are
different instances measured at different times, not pairs.

`precision` and `needs_more` are for adaptive repetition in the runner: repeat until the
ratio's interval is narrow enough, always capped in count (and by the runner in time).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import special

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20240611
CACHE_LIMIT = 4_000_000
"""Largest count matrix (B x n cells) kept in memory; larger samples are resampled in chunks."""
ALPHA = 0.05
MIN_EFFECT = 0.02
"""Differences of the ratio from 1.0 below this are called negligible even when significant."""


@lru_cache(maxsize=64)
def _counts(n: int, stream: int, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(counts as float64 (B, n), index of the lower and of the upper median in sorted order)."""
    rng = np.random.default_rng([seed, stream, n])
    idx = rng.integers(0, n, size=(resamples, n))
    flat = (idx + n * np.arange(resamples)[:, None]).ravel()
    counts = np.bincount(flat, minlength=resamples * n).reshape(resamples, n)
    cum = np.cumsum(counts, axis=1)
    lo = np.argmax(cum >= (n + 1) // 2, axis=1)
    hi = np.argmax(cum >= n // 2 + 1, axis=1)
    counts = counts.astype(float)
    counts.setflags(write=False)
    return counts, lo, hi


def resampled(values: Sequence[float], *, stream: int = 0, resamples: int = BOOTSTRAP_RESAMPLES,
              seed: int = BOOTSTRAP_SEED) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap distributions (means, medians) of a sample, deterministic for (seed, stream, n)."""
    s = np.sort(np.asarray(values, dtype=float))
    n = s.size
    if n == 0:
        raise ValueError("cannot resample an empty sample")
    if s[0] == s[-1]:  # zero variance: exact, without rounding noise from the sums
        return np.full(resamples, s[0]), np.full(resamples, s[0])
    if n * resamples <= CACHE_LIMIT:
        counts, lo, hi = _counts(n, stream, resamples, seed)
        return counts @ s / n, (s[lo] + s[hi]) / 2
    rng = np.random.default_rng([seed, stream, n])
    means, medians = np.empty(resamples), np.empty(resamples)
    chunk = max(1, CACHE_LIMIT // n)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        draw = s[rng.integers(0, n, size=(stop - start, n))]
        means[start:stop] = draw.mean(axis=1)
        medians[start:stop] = np.median(draw, axis=1)
    return means, medians


def resampled_many(samples: Sequence[Sequence[float]], *, stream: int = 0, resamples: int = BOOTSTRAP_RESAMPLES,
                   seed: int = BOOTSTRAP_SEED) -> list[tuple[np.ndarray, np.ndarray] | None]:
    """resampled() of many samples at once, with the very same resamples; None for empty ones.

    Samples of equal size share one count matrix, so their means are one matrix product
    (B x n times n x k) instead of k memory-bound matrix-vector products: for a report of
    a few hundred metrics and platforms this is the difference between 0.1 s and 2 s.
    """
    out: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(samples)
    by_n: dict[int, list[int]] = {}
    for i, values in enumerate(samples):
        by_n.setdefault(len(values), []).append(i)
    for n, idx in by_n.items():
        if n == 0:
            continue  # stays None: nothing to resample
        if n * resamples > CACHE_LIMIT or len(idx) == 1:
            for i in idx:
                out[i] = resampled(samples[i], stream=stream, resamples=resamples, seed=seed)
            continue
        counts, lo, hi = _counts(n, stream, resamples, seed)
        sorted_ = np.sort(np.asarray([samples[i] for i in idx], dtype=float), axis=1)  # (k, n)
        means = (counts @ sorted_.T) / n  # (B, k)
        medians = (sorted_[:, lo] + sorted_[:, hi]) / 2  # (k, B)
        for j, i in enumerate(idx):
            s = sorted_[j]
            if s[0] == s[-1]:
                out[i] = (np.full(resamples, s[0]), np.full(resamples, s[0]))
            else:
                out[i] = (np.ascontiguousarray(means[:, j]), medians[j])
    return out


def percentile_ci(dist: np.ndarray, confidence: float) -> list[float] | None:
    dist = dist[np.isfinite(dist)]
    if dist.size == 0:
        return None
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(dist, [alpha, 1 - alpha])
    return [float(lo), float(hi)]


def percentile_cis(dists: Sequence[np.ndarray | None], confidence: float = 0.95) -> list[list[float] | None]:
    """percentile_ci() of many bootstrap distributions of one length in a single np.quantile call."""
    out: list[list[float] | None] = [None] * len(dists)
    idx = [i for i, d in enumerate(dists) if d is not None]
    if not idx:
        return out
    # (k, B): one distribution per row, so each is partitioned in contiguous memory (the same
    # order statistics, hence the same quantiles, as column by column, at a third of the cost)
    stack = np.stack([d for d in dists if d is not None], axis=0)
    finite = np.isfinite(stack).all(axis=1)
    alpha = (1 - confidence) / 2
    if finite.all():  # the usual case: partitioned in place (the stack is ours), no copy of B x k values
        q = np.quantile(stack, [alpha, 1 - alpha], axis=1, overwrite_input=True)
        return [None if d is None else [float(q[0, j]), float(q[1, j])]
                for d, j in zip(dists, np.cumsum([d is not None for d in dists]) - 1)]
    if finite.any():
        q = np.quantile(stack[finite], [alpha, 1 - alpha], axis=1)
        for j, i in enumerate(np.asarray(idx)[finite]):
            out[i] = [float(q[0, j]), float(q[1, j])]
    for k in np.flatnonzero(~finite).tolist():
        out[idx[k]] = percentile_ci(stack[k], confidence)
    return out


def mean_ci_boot(values: Sequence[float], confidence: float = 0.95) -> list[float] | None:
    """Percentile bootstrap interval of the mean; None below two observations."""
    if len(values) < 2:
        return None
    return percentile_ci(resampled(values)[0], confidence)


def median_ci(values: Sequence[float], confidence: float = 0.95) -> list[float] | None:
    """Percentile bootstrap interval of the median; None below two observations."""
    if len(values) < 2:
        return None
    return percentile_ci(resampled(values)[1], confidence)


def ratio_distribution(values: Sequence[float], base: Sequence[float], higher_is_better: bool) -> np.ndarray:
    """Bootstrap distribution of the direction-aware ratio of means (1.0 = as the baseline)."""
    return ratio_of(resampled(values, stream=0)[0], resampled(base, stream=1)[0], higher_is_better)


def ratio_of(means: np.ndarray, base_means: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Ratio of already resampled means (stream 0 for the platform, stream 1 for the baseline).

    Lets a report resample the baseline once per metric instead of once per platform.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return means / base_means if higher_is_better else base_means / means


def ratio_ci(values: Sequence[float], base: Sequence[float], higher_is_better: bool,
             confidence: float = 0.95) -> list[float] | None:
    """Percentile bootstrap interval of the ratio; None when either side has fewer than two values."""
    if len(values) < 2 or len(base) < 2:
        return None
    return percentile_ci(ratio_distribution(values, base, higher_is_better), confidence)


def median(arr: np.ndarray) -> float:
    """float(np.median(arr)) of a 1-d array, from one sort: the middle value, or the two middle
    ones added and halved as np.median does (the same float), nan when a value is nan. np.median's
    own overhead is most of its cost on the few hundred values of a report row."""
    n = arr.size
    if n == 0:
        return math.nan
    s = np.sort(arr)
    if s[-1] != s[-1]:  # nan sorts last
        return math.nan
    mid = n // 2
    return float(s[mid]) if n % 2 else float((s[mid - 1] + s[mid]) / 2)


def cv(values: Sequence[float]) -> float | None:
    """Coefficient of variation (sample stdev / |mean|); None when undefined."""
    if len(values) < 2:
        return None
    arr = np.asarray(values, dtype=float)
    m = float(arr.mean())
    return float(arr.std(ddof=1)) / abs(m) if m else None


@dataclass(frozen=True)
class RankTest:
    p: float
    effect: float
    """Rank-biserial correlation in [-1, 1]: +1 when every value exceeds every baseline value."""


def rank_test(values: Sequence[float], base: Sequence[float]) -> RankTest | None:
    """Two-sided Mann-Whitney U test; None when a side is empty.

    Identical constant samples get p = 1 (scipy's normal approximation divides by a zero
    variance there). The effect is derived from scipy's U of the first sample.
    """
    return rank_tests([(values, base)])[0]


def rank_tests(pairs: Sequence[tuple[Sequence[float], Sequence[float]]]) -> list[RankTest | None]:
    """rank_test() of many (values, baseline) pairs, batched where that gives the same p-values.

    Pairs with the same baseline object, the same sizes and the same answer to "any ties?"
    go through one vectorized test (analysis.special.mannwhitneyu, scipy's method without
    importing scipy.stats): the exact or the asymptotic method is chosen from the sizes and
    from ties anywhere in the batch, so grouping by ties keeps every p-value what a call per
    pair would give.
    """
    out: list[RankTest | None] = [None] * len(pairs)
    groups: dict[tuple[int, int, int, bool], list[int]] = {}
    for i, (x, y) in enumerate(pairs):
        if len(x) == 0 or len(y) == 0:
            continue
        both = np.concatenate([np.asarray(x, dtype=float), np.asarray(y, dtype=float)])
        if np.ptp(both) == 0:
            out[i] = RankTest(1.0, 0.0)
            continue
        ties = np.unique(both).size < both.size
        groups.setdefault((id(y), len(x), len(y), ties), []).append(i)
    for idx in groups.values():
        xs = np.asarray([pairs[i][0] for i in idx], dtype=float)
        ys = np.asarray(pairs[idx[0]][1], dtype=float)
        u1, pvalues = special.mannwhitneyu(xs, ys)
        for i, u, p in zip(idx, u1, pvalues):
            effect = 2.0 * float(u) / (xs.shape[1] * ys.size) - 1.0
            out[i] = RankTest(float(p) if math.isfinite(p) else 1.0, effect)
    return out


def min_attainable_p(n1: int, n2: int) -> float:
    """Smallest two-sided exact Mann-Whitney p for these sizes (no ties): 2 / C(n1+n2, n1).

    With 3 vs 3 repetitions it is 0.1, so nothing can ever be significant at 0.05; reports
    say so instead of calling every difference "not significant" without a reason.
    """
    if n1 < 1 or n2 < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values, in input order; None/NaN entries are not counted.

    Sorted ascending, the i-th (0-based) of m p-values is multiplied by (m - i), capped at 1,
    and made monotone with a running maximum, so adjusted p < alpha reproduces Holm's
    step-down decisions at every alpha.
    """
    valid = [i for i, p in enumerate(pvalues) if p is not None and not math.isnan(p)]
    m = len(valid)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(sorted(valid, key=lambda i: pvalues[i])):  # type: ignore[arg-type, return-value]
        running = max(running, min(1.0, (m - rank) * float(pvalues[i])))  # type: ignore[arg-type]
        out[i] = running
    return out


def verdict(ratio: float | None, p_adjusted: float | None, *, alpha: float = ALPHA,
            min_effect: float = MIN_EFFECT) -> str:
    """'better' / 'worse' only when significant after correction and at least min_effect away from 1.

    Otherwise says why not: 'not significant', 'negligible' (significant but small), or
    'no data' when there is nothing to test.
    """
    if ratio is None or p_adjusted is None:
        return "no data"
    if p_adjusted >= alpha:
        return "not significant"
    if abs(ratio - 1.0) < min_effect:
        return "negligible"
    return "better" if ratio > 1.0 else "worse"


def precision(values: Sequence[float], base_values: Sequence[float], higher_is_better: bool,
              confidence: float = 0.95) -> float | None:
    """Half-width of the ratio's bootstrap interval relative to the ratio (0.02 = +-2%).

    For the runner's adaptive repetition; None while either side has fewer than two values
    or the ratio is undefined. Called with the baseline's own values on both sides it
    tells how precisely any platform could be compared with it.
    """
    ci = ratio_ci(values, base_values, higher_is_better, confidence)
    if ci is None or len(values) == 0 or len(base_values) == 0:
        return None
    mx, mb = float(np.mean(values)), float(np.mean(base_values))
    ratio = (mx / mb if mb else math.nan) if higher_is_better else (mb / mx if mx else math.nan)
    if not math.isfinite(ratio) or ratio == 0:
        return None
    return (ci[1] - ci[0]) / 2 / abs(ratio)


@dataclass(frozen=True)
class Need:
    """needs_more's answer: truthy when another repetition is wanted, with the reason to record."""

    more: bool
    reason: str
    precision: float | None

    def __bool__(self) -> bool:
        return self.more


def needs_more(values: Sequence[float], base_values: Sequence[float], higher_is_better: bool, *,
               target: float = 0.02, min_n: int = 3, max_n: int = 30, confidence: float = 0.95) -> Need:
    """Should the runner add a repetition of this platform and metric?

    Yes while either side has fewer than min_n values or the ratio's relative half-width
    exceeds target; never once this platform has max_n values (the runner adds its own
    time cap). The reason goes into the run's log beside each extra repetition.
    """
    n, nb = len(values), len(base_values)
    if n >= max_n:
        p = precision(values, base_values, higher_is_better, confidence)
        return Need(False, f"cap of {max_n} repetitions reached", p)
    if n < min_n or nb < min_n:
        return Need(True, f"fewer than {min_n} repetitions ({n} here, {nb} on the baseline)", None)
    p = precision(values, base_values, higher_is_better, confidence)
    if p is None:
        return Need(False, "ratio undefined (zero mean); more repetitions cannot help", None)
    if p > target:
        return Need(True, f"ratio interval +-{p:.1%} wider than the +-{target:.1%} target", p)
    return Need(False, f"ratio interval +-{p:.1%} within the +-{target:.1%} target", p)


def t_quantile(q: float, df: float) -> float:
    """Student's t quantile (scipy.stats.t.ppf), computed without importing scipy and cached
    (analysis.special): a report asks for the same few degrees of freedom hundreds of times."""
    return special.t_ppf(float(q), float(df))

"""The few distribution functions a report needs, in numpy and the standard library.

Importing scipy.stats costs about 0.75 s of CPU and scipy.special about 0.2 s: more than a
whole stored report takes to print, and most of the 1 s a cold `virtbench report` over
100,000 samples may take. A report needs only Student's t quantile (verdict and mean
intervals), the regularized incomplete beta function (t and Pearson tail areas), average
ranks, and the Mann-Whitney U test. Each is computed here the way scipy computes it
(method, corrections and edge cases), and tests/unit/test_special.py checks every one
against scipy itself (scipy stays a dependency: figures and the tests use it).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from statistics import NormalDist

import numpy as np

_EPS = 1e-16
_TINY = 1e-300
_MAX_ITER = 2000


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes 6.4)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_ITER + 1):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function I_x(a, b) (scipy.special.betainc), a, b > 0."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """Upper tail area of Student's t (scipy.stats.t.sf)."""
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def _t_pdf(t: float, df: float) -> float:
    return math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
                    - (df + 1) / 2 * math.log1p(t * t / df))


@lru_cache(maxsize=4096)
def t_ppf(q: float, df: float) -> float:
    """Student's t quantile (scipy.stats.t.ppf, scipy.special.stdtrit) by safeguarded Newton
    steps on the upper tail from the normal quantile; relative error about 1e-13."""
    if not 0.0 < q < 1.0:
        return -math.inf if q <= 0 else math.inf
    if q == 0.5:
        return 0.0
    if q < 0.5:
        return -t_ppf(1.0 - q, df)
    p = 1.0 - q  # the upper tail to reach, > 0
    if df >= 1e4:  # Cornish-Fisher expansion about the normal quantile: lgamma's cancellation below loses digits
        z = NormalDist().inv_cdf(q)
        z2 = z * z
        return z * (1 + (z2 + 1) / (4 * df) + (5 * z2 * z2 + 16 * z2 + 3) / (96 * df ** 2)
                    + (3 * z2 ** 3 + 19 * z2 * z2 + 17 * z2 - 15) / (384 * df ** 3))
    lo, hi = 0.0, math.inf
    t = max(NormalDist().inv_cdf(q), 1e-3)
    for _ in range(200):
        f = t_sf(t, df) - p  # decreasing in t
        if f > 0:
            lo = t
        else:
            hi = t
        step = f / _t_pdf(t, df)
        new = t + step
        if not lo < new < hi or not math.isfinite(new):
            new = (lo + hi) / 2 if math.isfinite(hi) else 2 * t + 1
        if abs(new - t) <= 1e-14 * max(1.0, abs(new)):
            return new
        t = new
    return t


def norm_sf(z: float) -> float:
    """Upper tail area of the standard normal (scipy.special.ndtr(-z))."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def rankdata(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Average ranks (1-based) along the last axis of a 2-D array (scipy.stats.rankdata
    'average'), and for every value the size of its group of ties (1 when untied), in one
    pass of numpy over the whole batch."""
    a = np.atleast_2d(np.asarray(a, dtype=float))
    k, n = a.shape
    order = np.argsort(a, axis=1, kind="mergesort")
    s = np.take_along_axis(a, order, axis=1)
    pos = np.broadcast_to(np.arange(n), (k, n))
    first = np.ones((k, n), dtype=bool)
    first[:, 1:] = s[:, 1:] != s[:, :-1]  # a group of equal values starts here
    last = np.ones((k, n), dtype=bool)
    last[:, :-1] = first[:, 1:]  # ... and ends here
    start = np.maximum.accumulate(np.where(first, pos, 0), axis=1)
    end = np.minimum.accumulate(np.where(last, pos, n - 1)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty((k, n))
    np.put_along_axis(ranks, order, (start + end + 2) / 2.0, axis=1)  # mean of ranks start+1 .. end+1
    sizes = np.empty((k, n))
    np.put_along_axis(sizes, order, (end - start + 1).astype(float), axis=1)
    return ranks, sizes


class _Exact:
    """The exact null distribution of U for sizes (m, n) without ties, as counts of the
    C(m+n, m) equally likely arrangements (scipy's _MWU, in exact integers)."""

    @staticmethod
    @lru_cache(maxsize=64)
    def counts(m: int, n: int) -> np.ndarray:
        # f(i, j)[u]: arrangements of i x's and j y's with U = u. The largest value is an x
        # (beating all j y's: f(i-1, j) shifted by j) or a y (f(i, j-1)). In floats, like
        # scipy once the counts pass 2**64: exact below 2**53, relative 1e-16 above.
        prev = [np.ones(1) for _ in range(n + 1)]  # i = 0: U = 0 only
        for i in range(1, m + 1):
            cur = [np.ones(1)]  # j = 0: U = 0 only
            for j in range(1, n + 1):
                out = np.zeros(i * j + 1)
                out[j:] += prev[j]
                out[:cur[j - 1].size] += cur[j - 1]
                cur.append(out)
            prev = cur
        counts = prev[n]
        counts.setflags(write=False)
        return counts

    @classmethod
    def sf(cls, u: int, m: int, n: int) -> float:
        """P(U >= u) under the null."""
        m, n = min(m, n), max(m, n)
        counts = cls.counts(m, n)
        return float(counts[u:].sum() / math.comb(m + n, m))


def mannwhitneyu(xs: np.ndarray, y: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided Mann-Whitney U of each row of xs against y (scipy.stats.mannwhitneyu with
    method 'auto', continuity correction, axis=1): (U of each row, p of each row).

    Like scipy's batched call the method is chosen once for the batch: exact when a side
    has at most 8 values and no row has ties, else the normal approximation with the tie
    correction."""
    xs = np.atleast_2d(np.asarray(xs, dtype=float))
    yv = np.asarray(y, dtype=float)
    k, n1 = xs.shape
    n2 = yv.size
    both = np.concatenate([xs, np.broadcast_to(yv, (k, n2))], axis=1)
    ranks, sizes = rankdata(both)
    u1 = ranks[:, :n1].sum(axis=1) - n1 * (n1 + 1) / 2
    u = np.maximum(u1, n1 * n2 - u1)
    exact = not (n1 > 8 and n2 > 8) and not bool((sizes > 1).any())
    p = np.empty(k)
    if exact:
        for i in range(k):
            p[i] = _Exact.sf(int(u[i]), n1, n2)
    else:
        n = n1 + n2
        tie_term = (sizes ** 2 - 1).sum(axis=1)  # sum of t^3 - t over groups = sum of t^2 - 1 over values
        s = np.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (u - n1 * n2 / 2 - 0.5) / s
        p = np.array([norm_sf(float(v)) if not math.isnan(v) else math.nan for v in z])
    return u1, np.clip(p * 2, 0.0, 1.0)


def pearson_p(r: np.ndarray, n: int) -> np.ndarray:
    """Two-sided p of Pearson's r with n pairs (scipy.stats.pearsonr's exact test: r follows
    a beta distribution on [-1, 1] with both shapes n/2 - 1 under the null)."""
    a = n / 2 - 1
    out = np.empty(len(r))
    for i, v in enumerate(np.asarray(r, dtype=float)):
        if not math.isfinite(v):
            out[i] = math.nan
            continue
        x = (1 - abs(v)) / 2  # P(R >= |r|) = P(B <= (1 - |r|) / 2) by symmetry
        out[i] = min(1.0, 2 * betainc(a, a, x)) if x > 0 else 0.0
    return out

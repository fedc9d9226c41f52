"""Per platform and metric: descriptive statistics and performance relative to the baseline.

`relative` is direction-aware so that 1.0 always means "as the baseline" and 0.5 "half as
good": mean/baseline_mean for higher-is-better metrics, baseline_mean/mean for lower-is-better.
Its 95% interval is a percentile bootstrap over both samples (independent resampling),
seeded so a report is reproducible.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Iterable, Sequence

import numpy as np
from scipy import stats

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20240611


@dataclass
class Row:
    benchmark: str
    metric: str
    unit: str
    higher_is_better: bool
    category: str
    platform: str
    n: int
    failed: int
    mean: float | None = None
    median: float | None = None
    stdev: float | None = None
    ci95: list[float] | None = None
    relative: float | None = None
    relative_ci95: list[float] | None = None
    values: list[float] = field(default_factory=list, repr=False)

    def public(self) -> dict:
        d = asdict(self)
        d.pop("values")
        d.pop("category")
        return d


@dataclass(frozen=True)
class SampleView:
    """The columns analysis needs; store rows and plain tuples both fit."""

    benchmark: str
    metric: str
    platform: str
    value: float
    unit: str
    higher_is_better: bool
    category: str


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> list[float] | None:
    """Student-t interval of the mean; None when it is undefined (n < 2)."""
    n = len(values)
    if n < 2:
        return None
    arr = np.asarray(values, dtype=float)
    sd = float(arr.std(ddof=1))
    m = float(arr.mean())
    if sd == 0.0:
        return [m, m]
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return [m - half, m + half]


def relative(mean: float, base_mean: float, higher_is_better: bool) -> float | None:
    if higher_is_better:
        return mean / base_mean if base_mean else None
    return base_mean / mean if mean else None


def relative_ci(values: Sequence[float], base: Sequence[float], higher_is_better: bool,
                confidence: float = 0.95) -> list[float] | None:
    """Percentile bootstrap of the direction-aware ratio of means."""
    if len(values) < 2 or len(base) < 2:
        return None
    x = np.asarray(values, dtype=float)
    y = np.asarray(base, dtype=float)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    xm = rng.choice(x, size=(BOOTSTRAP_RESAMPLES, len(x))).mean(axis=1)
    ym = rng.choice(y, size=(BOOTSTRAP_RESAMPLES, len(y))).mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = xm / ym if higher_is_better else ym / xm
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return None
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(ratios, [alpha, 1 - alpha])
    return [float(lo), float(hi)]


def summarize(samples: Iterable[SampleView], failures: dict[tuple[str, str], int], platforms: Sequence[str],
              baseline: str, metrics_of: dict[str, list[tuple[str, str, bool, str]]] | None = None) -> list[Row]:
    """Rows in (benchmark, metric, platform) order.

    failures: (platform, benchmark) -> failed executions. metrics_of: benchmark -> declared
    (metric, unit, higher_is_better, category), so a platform whose every execution failed
    still gets a row with n=0 and its failure count instead of disappearing.
    """
    grouped: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    meta: dict[tuple[str, str], tuple[str, bool, str]] = {}
    for s in samples:
        grouped[(s.benchmark, s.metric, s.platform)].append(s.value)
        meta[(s.benchmark, s.metric)] = (s.unit, s.higher_is_better, s.category)
    for bench, declared in (metrics_of or {}).items():
        for metric, unit, hib, category in declared:
            meta.setdefault((bench, metric), (unit, hib, category))
    rows: list[Row] = []
    for (bench, metric), (unit, hib, category) in sorted(meta.items()):
        base_values = grouped.get((bench, metric, baseline), [])
        base_mean = float(np.mean(base_values)) if base_values else None
        for platform in platforms:
            values = grouped.get((bench, metric, platform), [])
            row = Row(bench, metric, unit, hib, category, platform, n=len(values),
                      failed=failures.get((platform, bench), 0), values=values)
            if values:
                arr = np.asarray(values, dtype=float)
                row.mean = float(arr.mean())
                row.median = float(np.median(arr))
                row.stdev = float(arr.std(ddof=1)) if len(values) > 1 else None
                row.ci95 = mean_ci(values)
                if base_mean is not None and category != "lifecycle":
                    row.relative = relative(row.mean, base_mean, hib)
                    row.relative_ci95 = ([1.0, 1.0] if platform == baseline and len(values) > 1
                                         else relative_ci(values, base_values, hib))
            rows.append(row)
    return rows

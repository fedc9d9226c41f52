"""Per platform and metric: descriptive statistics and performance relative to the baseline.

`relative` is direction-aware so that 1.0 always means "as the baseline" and 0.5 "half as
good". It is the verdict's own estimate (analysis.verdict): the geometric mean of the
per-round ratios where the rounds pair, else the ratio of the means; `relative_ci95` is the
verdict's 95 % t interval around it, so every surface shows one number per cell and that
number lies inside its interval. `p_value` is the p of the test that decided (None while
inconclusive), never another test's. The plain ratio of means stays as `ratio_of_means`, a
descriptive statistic.

Beyond that each row carries bootstrap intervals of its own mean and median (seeded, so a
report is reproducible) and quality flags (analysis.quality). Warm-up samples are kept
apart: they feed the warm-up check and the trend plot only.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import NamedTuple

import numpy as np

from . import quality as q
from . import stats as st
from . import verdict as vd
from .stats import ALPHA, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, MIN_EFFECT  # noqa: F401 - re-exported


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
    """The verdict's point estimate (analysis.verdict.Verdict.ratio): the geometric mean of the per-round
    ratios where the rounds pair, else the ratio of means; 1.0 for the baseline's own cells."""
    relative_ci95: list[float] | None = None
    """The interval the verdict is read from: 95 % t interval of the log ratio, paired by round where the
    rounds allow, else Welch (analysis.verdict). `relative` always lies inside it."""
    values: list[float] = field(default_factory=list, repr=False)
    rounds: list[int] = field(default_factory=list, repr=False)
    warmup_values: list[float] = field(default_factory=list, repr=False)
    warmup_rounds: list[int] = field(default_factory=list, repr=False)
    mean_boot_ci95: list[float] | None = None
    median_ci95: list[float] | None = None
    cv: float | None = None
    p_value: float | None = None
    """The p of the test that decided the verdict (analysis.verdict.Verdict.p): the two-sided t test for
    slower/faster, TOST for same; None while inconclusive and for the baseline."""
    verdict: str | None = None
    """slower, faster, same or inconclusive against the baseline; 'baseline' for the baseline's
    own cells; None where nothing is compared (lifecycle)."""
    verdict_reason: str | None = None
    """The verdict's number ('slower by 7.1 % [...]'), or why it is inconclusive and what would decide it."""
    repetitions_needed: int | None = None
    """Inconclusive: about how many repetitions per side would decide it at the noise seen."""
    ratio_of_means: float | None = None
    """Descriptive: the direction-aware ratio of the means (not the verdict's estimate when rounds pair)."""
    quality: list[dict] = field(default_factory=list)
    host: str = ""
    """Inventory name of the host that measured, in a multi-host run ('' otherwise, and not in the JSON)."""

    def public(self) -> dict:
        """The JSON fields: everything but the raw values (asdict would deep-copy them first)."""
        out = {name: getattr(self, name) for name in _PUBLIC}
        if not self.host:
            del out["host"]
        return out


_PUBLIC = tuple(f.name for f in fields(Row) if f.name not in ("values", "category", "rounds", "warmup_values",
                                                                "warmup_rounds"))


class SampleView(NamedTuple):
    """The columns analysis needs; store rows and plain tuples both fit.

    A NamedTuple rather than a frozen dataclass: a report builds one per sample, and for
    100,000 samples that is ten times faster.
    """

    benchmark: str
    metric: str
    platform: str
    value: float
    unit: str
    higher_is_better: bool
    category: str
    round: int = 0
    warmup: bool = False


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
    half = st.t_quantile(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n)
    return [m - half, m + half]




def relative(mean: float, base_mean: float, higher_is_better: bool) -> float | None:
    if higher_is_better:
        return mean / base_mean if base_mean else None
    return base_mean / mean if mean else None


def summarize(samples: Iterable[SampleView | tuple], failures: dict[tuple[str, str], int], platforms: Sequence[str],
              baseline: str, metrics_of: dict[str, list[tuple[str, str, bool, str]]] | None = None, *,
              alpha: float = ALPHA, min_effect: float = MIN_EFFECT) -> list[Row]:
    """Rows in (benchmark, metric, platform) order.

    failures: (platform, benchmark) -> failed executions. metrics_of: benchmark -> declared
    (metric, unit, higher_is_better, category), so a platform whose every execution failed
    still gets a row with n=0 and its failure count instead of disappearing. Samples with
    warmup=True only feed the warm-up check and trend plots.
    """
    rows = samples if isinstance(samples, list) else list(samples)
    meta: dict[tuple[str, str], tuple[str, bool, str]] = {}
    for bench, metric, _, _, unit, hib, category, _, _ in rows:  # tuples or SampleViews
        if (bench, metric) not in meta:
            meta[(bench, metric)] = (unit, bool(hib), category)
    grouped, warm = group([(0, b, m, p, v, r, w) for b, m, p, v, _, _, _, r, w in rows])
    return summarize_grouped(grouped, warm, meta, failures, platforms, baseline, metrics_of,
                             alpha=alpha, min_effect=min_effect)


def summarize_values(values: Iterable[tuple[int, str, str, str, float, int, bool | int]],
                     meta: dict[tuple[str, str], tuple[str, bool, str]], failures: dict[tuple[str, str], int],
                     platforms: Sequence[str], baseline: str,
                     metrics_of: dict[str, list[tuple[str, str, bool, str]]] | None = None, *,
                     alpha: float = ALPHA, min_effect: float = MIN_EFFECT) -> list[Row]:
    """summarize() of (id, benchmark, metric, platform, value, round, warmup) tuples with each
    metric's (unit, higher_is_better, category) given once in meta (store.results.sample_values):
    the same rows, three columns fewer to read per value. Metrics without values stay out of meta."""
    grouped, warm = group(values)
    seen = {k[:2] for k in grouped} | {k[:2] for k in warm}
    return summarize_grouped(grouped, warm, {k: v for k, v in meta.items() if k in seen}, failures, platforms,
                             baseline, metrics_of, alpha=alpha, min_effect=min_effect)


def group(values: Iterable[tuple[int, str, str, str, float, int, bool | int]]) -> tuple[Group, Group]:
    """(measured, warm-up) Groups of (id, benchmark, metric, platform, value, round, warmup)
    tuples, in order (the id is the store's, unused here)."""
    grouped: Group = defaultdict(new_group)
    warm: Group = defaultdict(new_group)
    for _, bench, metric, platform, value, rnd, warmup in values:
        rounds, vals = (warm if warmup else grouped)[(bench, metric, platform)]
        rounds.append(rnd)
        vals.append(value)
    return grouped, warm


Group = dict[tuple[str, str, str], tuple[list[int], list[float]]]
"""(benchmark, metric, platform) -> (rounds, values), in the order measured: two lists, not a
list of pairs, so rows and pooled reports take them over without unzipping 100,000 pairs."""


def new_group() -> tuple[list[int], list[float]]:
    """An empty (rounds, values) entry of a Group (the default of a defaultdict)."""
    return [], []


def summarize_grouped(grouped: Group, warm: Group, meta: dict[tuple[str, str], tuple[str, bool, str]],
                      failures: dict[tuple[str, str], int], platforms: Sequence[str], baseline: str,
                      metrics_of: dict[str, list[tuple[str, str, bool, str]]] | None = None, *,
                      alpha: float = ALPHA, min_effect: float = MIN_EFFECT, inference: bool = True,
                      bootstrap: bool = True) -> list[Row]:
    """summarize() of samples already grouped (meta: (benchmark, metric) -> unit, direction,
    category): pooling reports that are grouped already need not take them apart first.

    inference=False leaves out what only a full table shows (bootstrap intervals and quality
    flags: those fields stay None/empty) for views that show the ratio, its verdict interval
    and the verdict alone, like hosts side by side: half the work. bootstrap=False leaves out
    the bootstrap intervals (mean_boot_ci95, median_ci95 stay None) but the lifecycle rows',
    for views that show the flags and the lifecycle figure's error bars but no other."""
    for bench, declared in (metrics_of or {}).items():
        for metric, unit, hib, category in declared:
            meta.setdefault((bench, metric), (unit, hib, category))
    keys = sorted(meta.items())
    empty: tuple[list[int], list[float]] = ([], [])
    base_of = {bm: grouped.get((*bm, baseline), empty)[1] for bm, _ in keys}
    base_rounds = {bm: grouped.get((*bm, baseline), empty)[0] for bm, _ in keys}
    rows: list[Row] = []
    for (bench, metric), (unit, hib, category) in keys:
        for platform in platforms:
            rounds, values = grouped.get((bench, metric, platform), empty)
            wrounds, wvalues = warm.get((bench, metric, platform), empty)
            row = Row(bench, metric, unit, hib, category, platform, n=len(values),
                      failed=failures.get((platform, bench), 0), values=list(values),
                      rounds=list(rounds), warmup_values=list(wvalues), warmup_rounds=list(wrounds))
            if values:
                _describe(row)
                base_values = base_of[(bench, metric)]
                if base_values and category != "lifecycle":
                    row.ratio_of_means = relative(row.mean, float(np.mean(base_values)), hib)  # type: ignore[arg-type]
                    if platform == baseline:
                        row.relative = 1.0
                        row.relative_ci95 = [1.0, 1.0] if len(values) > 1 else None
                        row.verdict = "baseline"
            rows.append(row)
    if inference:
        _infer(rows, bootstrap)
    base_means: dict[tuple[str, str], tuple[np.ndarray, np.ndarray] | None] = {}  # per metric, for every platform
    for row in rows:
        if row.category != "lifecycle" and row.platform != baseline:
            bm = (row.benchmark, row.metric)
            if bm not in base_means:
                b, br = base_of[bm], base_rounds[bm]
                base_means[bm] = vd.round_means(b, br) if len(b) == len(br) else None
            v = vd.decide(row.values, base_of[bm], row.higher_is_better, min_effect=min_effect, rounds=row.rounds,
                          base_rounds=base_rounds[bm], base_means=base_means[bm])
            row.verdict, row.verdict_reason, row.repetitions_needed = v.verdict, v.reason, v.needed
            if row.failed and not row.values:
                row.verdict_reason = f"no values: all {row.failed} executions failed (see the failures)"
            row.relative_ci95 = list(v.ci) if v.ci else None
            row.relative, row.p_value = v.ratio if v.ratio is not None else row.ratio_of_means, v.p
    return rows


def _describe(row: Row) -> None:
    """Descriptive statistics of the row's own values (the batched work is in _infer)."""
    arr = np.asarray(row.values, dtype=float)
    n = arr.size
    row.mean = m = float(arr.mean())
    row.median = st.median(arr)
    if n < 2:
        row.stdev = row.ci95 = row.cv = None
        return
    # mean_ci() and stats.cv() of the same array, computed once (the same floats: tests check it)
    row.stdev = sd = float(arr.std(ddof=1))
    half = st.t_quantile(0.5 + 0.95 / 2, n - 1) * sd / math.sqrt(n)
    row.ci95 = [m, m] if sd == 0.0 else [m - half, m + half]
    row.cv = sd / abs(m) if m else None


def _infer(rows: Sequence[Row], bootstrap: bool = True) -> None:
    """Bootstrap intervals and quality flags of every row, each kind in one batch.

    A report has hundreds of platform-metric rows; one numpy call per kind instead of one per
    row keeps a report over 100,000 samples within seconds.
    """
    withdata = [r for r in rows if r.values]
    # without bootstrap: the lifecycle figure's error bars are shown, those few rows only (the same intervals)
    _bootstrap(withdata if bootstrap else [r for r in withdata if r.category == "lifecycle"])
    flags = q.check_many([(r.values, r.rounds, r.warmup_values, r.higher_is_better, r.category) for r in withdata])
    for r, fl in zip(withdata, flags):
        r.quality = [f.public() for f in fl]


def _bootstrap(withdata: Sequence[Row]) -> None:
    """The rows' bootstrap intervals of mean and median, in one batch each."""
    boots = st.resampled_many([r.values if r.n > 1 else [] for r in withdata])
    cis = st.percentile_cis([b[0] if b else None for b in boots] + [b[1] if b else None for b in boots])
    k = len(withdata)
    for j, r in enumerate(withdata):
        r.mean_boot_ci95, r.median_ci95 = cis[j], cis[k + j]

"""Before/after: the same platforms and metrics in two runs (a kernel or runtime upgrade).

Each platform is compared with itself, run B against run A, by the verdict rule of
analysis.verdict (B slower, faster, the same or inconclusive against A), the rule `report`
uses within a run. Two runs taken minutes apart on a shared host differ by the host's state
(two quick runs 11 minutes apart came out "slower by about 2 %" on every platform, native
included), so by default (`relative`) each platform is compared **relative to its own run's
baseline**: its per-round ratios to the baseline (the report's estimate: paired by round, so
the host's drift between the runs cancels within each run) in B against those in A. The
baseline itself is compared in absolute terms, and when it moved the comparison says so
(`baseline_moved`): that is the host, not the change under test. `absolute` compares raw
values, as before, every row flagged while the baseline moved.

The two runs' rounds are not paired with each other: the interval is the unpaired one (Welch
t of the log ratio of means), its point the ratio of the means, its p the t test that
decided. Every row shows the statistic the report shows for it: the mean, and for lifecycle
steps the median (in ms). Rows come in one order for every surface: benchmarks, lifecycle last.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..constants import LIFECYCLE
from . import stats as st
from .tables import geomean
from .verdict import decide

MODES = ("relative", "absolute")


@dataclass
class CompareRow:
    benchmark: str
    metric: str
    platform: str
    unit: str
    higher_is_better: bool
    category: str
    n_a: int
    n_b: int
    value_a: float | None
    """What A measured, as the report shows it: the mean (the median for a lifecycle step); in
    relative mode a platform's ratio to its run's baseline (geometric mean of the rounds' ratios)."""
    value_b: float | None
    ratio: float | None
    """Run B relative to run A (1.0 = unchanged, above 1 = B better): the verdict's estimate."""
    ratio_ci95: list[float] | None
    """The verdict's 95 % interval of the ratio; `ratio` lies inside it."""
    p_value: float | None = None
    """The p of the test that decided (analysis.verdict.Verdict.p); None while inconclusive."""
    verdict: str = "inconclusive"
    """B against A: slower, faster, same, inconclusive (or 'unit changed': not comparable)."""
    verdict_reason: str = ""
    unit_changed: bool = False
    statistic: str = "mean"
    """What value_a/value_b are: mean, median (lifecycle) or ratio to the baseline (relative mode)."""
    basis: str = "absolute"
    """How this row compares: 'absolute' (raw values) or 'relative to BASELINE' (ratios to each run's baseline)."""
    baseline_moved: str | None = None
    """The baseline's own verdict (B against A) for this metric when it moved (slower/faster): the host changed."""

    def public(self) -> dict[str, Any]:
        return asdict(self)


def order(rows: Sequence[CompareRow], platforms: Sequence[str] = ()) -> list[CompareRow]:
    """The one order of compare's rows on every surface: benchmarks by name, lifecycle last,
    metrics by name, platforms in the run's order (the baseline first)."""
    pos = {p: i for i, p in enumerate(platforms)}
    return sorted(rows, key=lambda r: (r.benchmark == LIFECYCLE, r.benchmark, r.metric,
                                       pos.get(r.platform, len(pos)), r.platform))


def ratios_to_baseline(row: Any, base: Any) -> list[float]:
    """The row's direction-aware ratios to its run's baseline, round by round where the rounds
    pair (the report's estimate), else each value against the baseline's mean."""
    if base is None or not row.values or not base.values:
        return []
    by_round = dict(zip(base.rounds, base.values))
    pairs = [(v, by_round[r]) for v, r in zip(row.values, row.rounds) if r in by_round]
    if len(pairs) < 2:
        mean = sum(base.values) / len(base.values)
        pairs = [(v, mean) for v in row.values]
    out = []
    for v, b in pairs:
        if v > 0 and b > 0:
            out.append(v / b if row.higher_is_better else b / v)
    return out


def _center(row: Any) -> float | None:
    return row.median if row.category == LIFECYCLE else row.mean


def compare(rows_a: Sequence[Any], rows_b: Sequence[Any], *, baseline: str | None = None, mode: str = "relative",
            min_effect: float = st.MIN_EFFECT, platforms: Sequence[str] = ()) -> list[CompareRow]:
    """Rows (analysis.summary.Row) present in both runs, B against A, in order(). mode
    'relative': every platform but the baseline by its ratios to its own run's baseline
    (lifecycle steps, which have no ratio, absolute); 'absolute': raw values throughout.
    baseline: the platform both runs compare with (its rows are always absolute, and say
    whether it moved)."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")
    a = {(r.benchmark, r.metric, r.platform): r for r in rows_a}
    b_rows = {(r.benchmark, r.metric, r.platform): r for r in rows_b}
    out: list[CompareRow] = []
    moved: dict[tuple[str, str], str] = {}
    for key, rb in b_rows.items():
        ra = a.get(key)
        if ra is None:
            continue
        relative = (mode == "relative" and baseline is not None and rb.platform != baseline
                    and rb.category != LIFECYCLE)
        base_a, base_b = a.get((*key[:2], baseline or "")), b_rows.get((*key[:2], baseline or ""))
        if relative and (base_a is None or base_b is None):
            relative = False
        row = CompareRow(rb.benchmark, rb.metric, rb.platform, rb.unit, rb.higher_is_better, rb.category,
                         ra.n, rb.n, _center(ra), _center(rb), None, None, unit_changed=ra.unit != rb.unit,
                         statistic="median" if rb.category == LIFECYCLE else "mean")
        if row.unit_changed:
            row.verdict, row.verdict_reason = "unit changed", f"not compared: unit {ra.unit} in A, {rb.unit} in B"
            out.append(row)
            continue
        if relative:
            va, vb = ratios_to_baseline(ra, base_a), ratios_to_baseline(rb, base_b)
            row.value_a, row.value_b = geomean(va), geomean(vb)
            row.statistic, row.basis = "ratio", f"relative to {baseline}"
            v = decide(vb, va, True, min_effect=min_effect)
        else:
            v = decide(rb.values, ra.values, rb.higher_is_better, min_effect=min_effect)
        row.verdict, row.verdict_reason, row.ratio, row.p_value = v.verdict, v.reason, v.ratio, v.p
        row.ratio_ci95 = list(v.ci) if v.ci else None
        if rb.platform == baseline and v.verdict in ("slower", "faster"):
            moved[key[:2]] = v.verdict
        out.append(row)
    for row in out:
        row.baseline_moved = moved.get((row.benchmark, row.metric))
    return order(out, platforms)


def baseline_drift(rows: Sequence[CompareRow], baseline: str | None) -> dict[str, Any] | None:
    """How far the baseline itself moved between the runs (None when it did not): the metrics
    it was slower or faster in, with the geometric mean of those changes."""
    base = [r for r in rows if r.platform == baseline and r.category != LIFECYCLE and r.ratio]
    moved = [r for r in base if r.verdict in ("slower", "faster")]
    if not moved:
        return None
    return {"platform": baseline, "moved": len(moved), "of": len(base),
            "change": geomean([r.ratio for r in moved if r.ratio]),
            "metrics": [f"{r.benchmark} {r.metric}" for r in moved]}

"""Before/after: the same platforms and metrics in two runs (a kernel or runtime upgrade).

Each platform is compared with itself: run B against run A with the verdict rule of
analysis.verdict (B slower, faster, the same or inconclusive against A), the rule `report`
uses within a run. The two runs' rounds are not paired: round 3 of A and round 3 of B ran
at different times on a host in a different state, so nothing they share cancels in their
ratio; the interval is the unpaired one (Welch t of the log ratio of means), its point the
ratio of the means, its p the t test that decided. Lifecycle times are compared too: an
upgrade that slows container start-up is exactly what this should show.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from . import stats as st
from .verdict import decide


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
    mean_a: float | None
    mean_b: float | None
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

    def public(self) -> dict[str, Any]:
        return asdict(self)


def compare(rows_a: Sequence[Any], rows_b: Sequence[Any], *, min_effect: float = st.MIN_EFFECT) -> list[CompareRow]:
    """Rows (analysis.summary.Row) present in both runs, in (benchmark, metric, platform) order."""
    a = {(r.benchmark, r.metric, r.platform): r for r in rows_a}
    out: list[CompareRow] = []
    for rb in rows_b:
        ra = a.get((rb.benchmark, rb.metric, rb.platform))
        if ra is None:
            continue
        row = CompareRow(rb.benchmark, rb.metric, rb.platform, rb.unit, rb.higher_is_better, rb.category,
                         ra.n, rb.n, ra.mean, rb.mean, None, None, unit_changed=ra.unit != rb.unit)
        if row.unit_changed:
            row.verdict, row.verdict_reason = "unit changed", f"not compared: unit {ra.unit} in A, {rb.unit} in B"
        else:
            v = decide(rb.values, ra.values, rb.higher_is_better, min_effect=min_effect)
            row.verdict, row.verdict_reason, row.ratio, row.p_value = v.verdict, v.reason, v.ratio, v.p
            row.ratio_ci95 = list(v.ci) if v.ci else None
        out.append(row)
    return sorted(out, key=lambda r: (r.benchmark, r.metric, r.platform))

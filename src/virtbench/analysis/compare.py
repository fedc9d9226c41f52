"""Before/after: the same platforms and metrics in two runs (a kernel or runtime upgrade).

Each platform is compared with itself: the ratio is run B's mean over run A's,
direction-aware (above 1.0: B is better), with the verdict of analysis.verdict (B slower,
faster, the same or inconclusive against A) and, for information, the Mann-Whitney test with
Holm's correction over every comparison shown. Lifecycle times are compared too:
an upgrade that slows container start-up is exactly what this should show.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from . import stats as st
from .summary import Row, relative
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
    """Run B relative to run A (1.0 = unchanged, above 1 = B better)."""
    ratio_ci95: list[float] | None
    p_value: float | None = None
    p_holm: float | None = None
    effect_size: float | None = None
    verdict: str = "inconclusive"
    """B against A: slower, faster, same, inconclusive (or 'unit changed': not comparable)."""
    verdict_reason: str = ""
    unit_changed: bool = False

    def public(self) -> dict[str, Any]:
        return asdict(self)


def compare(rows_a: Sequence[Row], rows_b: Sequence[Row], *, alpha: float = st.ALPHA,
            min_effect: float = st.MIN_EFFECT) -> list[CompareRow]:
    """Rows present in both runs, in (benchmark, metric, platform) order."""
    a = {(r.benchmark, r.metric, r.platform): r for r in rows_a}
    out: list[CompareRow] = []
    for rb in rows_b:
        ra = a.get((rb.benchmark, rb.metric, rb.platform))
        if ra is None:
            continue
        row = CompareRow(rb.benchmark, rb.metric, rb.platform, rb.unit, rb.higher_is_better, rb.category,
                         ra.n, rb.n, ra.mean, rb.mean, None, None, unit_changed=ra.unit != rb.unit)
        if ra.values and rb.values and not row.unit_changed:
            row.ratio = relative(rb.mean, ra.mean, rb.higher_is_better)  # type: ignore[arg-type]
            test = st.rank_test(rb.values, ra.values)
            if test is not None:
                row.p_value, row.effect_size = test.p, test.effect
        if row.unit_changed:
            row.verdict, row.verdict_reason = "unit changed", f"not compared: unit {ra.unit} in A, {rb.unit} in B"
        else:
            v = decide(rb.values, ra.values, rb.higher_is_better, min_effect=min_effect)
            row.verdict, row.verdict_reason = v.verdict, v.reason
            row.ratio_ci95 = list(v.ci) if v.ci else None
        out.append(row)
    tested = [r for r in out if r.p_value is not None]
    for row, adj in zip(tested, st.holm([r.p_value for r in tested])):
        row.p_holm = adj
    return sorted(out, key=lambda r: (r.benchmark, r.metric, r.platform))

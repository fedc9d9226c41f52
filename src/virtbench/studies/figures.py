"""The study report's figures: the paper's numbers beside this host's on the same axes and units."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..report.figures import FigureSpec, Series, slug
from . import paper as P
from .model import Study


def figures(values: Sequence[P.PaperValue], judged: dict[str, dict[str, Any]], study: Study) -> list[FigureSpec]:
    """The paper's numbers beside this host's: ratios to the baseline, Table 7 ranges, values."""
    out = []
    rel = [v for v in values if v.kind == "relative" and isinstance(judged[v.id]["yours"], float)]
    if rel:
        xs = [v.id for v in rel]
        cis = [judged[v.id]["ci"] or [None, None] for v in rel]
        out.append(FigureSpec(
            slug("study", study.id, "relative"), "bar", f"Study {study.id}: relative to the baseline, paper and this host",
            "", "relative to the baseline (higher is better)",
            [Series("paper", xs, [judged[v.id]["paper"] for v in rel], style="bar"),
             Series("this host", xs, [judged[v.id]["yours"] for v in rel], lo=[c[0] for c in cis],
                    hi=[c[1] for c in cis], style="bar")],
            group="study", refline=1.0, note="The paper's ratio from its published values; this host's from its runs "
                                             "(whiskers: its 95% interval). " + "; ".join(f"{v.id}: {v.label()}" for v in rel)))
    for of in ("container", "vm"):
        rng = [v for v in values if v.kind == "range" and v.of == of]
        if not rng:
            continue
        xs = [v.category or v.id for v in rng]
        lo = [judged[v.id]["paper"][0] for v in rng]
        hi = [judged[v.id]["paper"][1] for v in rng]
        out.append(FigureSpec(
            slug("study", study.id, "table7", of), "bar", f"Study {study.id} Table 7: best {of} relative to bare metal",
            "category", "performance availability (1 = bare metal)",
            [Series("paper (range over 3 machines)", xs, [(a + b) / 2 for a, b in zip(lo, hi)], lo=lo, hi=hi,
                    style="bar"),
             Series("this host", xs, [judged[v.id]["yours"] for v in rng], style="bar",
                    lo=[(judged[v.id]["ci"] or [None, None])[0] for v in rng],
                    hi=[(judged[v.id]["ci"] or [None, None])[1] for v in rng])],
            group="study", refline=1.0, note="Bars of the paper: the middle of its range, whiskers its ends; "
                                             "this host's whiskers: its 95 % interval."))
    by_unit: dict[str, list[P.PaperValue]] = {}
    for v in values:
        if v.kind == "value" and isinstance(judged[v.id]["yours"], float):
            by_unit.setdefault(v.unit, []).append(v)
    for unit, vs in by_unit.items():
        xs = [v.id for v in vs]
        ys = [judged[v.id]["yours"] for v in vs] + [judged[v.id]["paper"] for v in vs]
        spread = max(ys) / max(min(y for y in ys if y) or 1, 1e-12)
        out.append(FigureSpec(
            slug("study", study.id, "values", unit), "bar", f"Study {study.id}: published values and this host's ({unit})",
            "", unit, [Series("paper", xs, [judged[v.id]["paper"] for v in vs], style="bar"),
                       Series("this host", xs, [judged[v.id]["yours"] for v in vs], style="bar")],
            group="study", ylog=spread > 50, note="Absolute values on different hardware: context, not a test. "
                                                  + "; ".join(f"{v.id}: {v.label()}" for v in vs)))
    return out

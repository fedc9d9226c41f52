"""A study run's adaptive aim (`adaptive: {until: decided, aim: study}`): more rounds for the
cells of the paper values still undecided, not only for the run's own undecided comparisons.

The adaptive rule decides each cell against its own margin (the same within 5 %), and stops
measuring a cell once decided; a paper value such as Table 7's memory row, the geometric
mean of a category's metrics of the best container against the paper's range 0.61-0.91, can
need a narrower interval than any of its cells. Study 003 at quick scale (2026-11-30) left 6
of 11 compared values undecided, each about 11-16 repetitions from a decision, while its
rounds went to cells the paper compares with nothing. After each round this judges the
study's values from the run so far, exactly as `study report` does, and asks for more rounds
of the cells behind every undecided one.

A value stops asking only when decided at the adaptive rule's stopping level (99 %, where the
report states 95 %): the values are looked at after every round, and stopping at the first
95 % decision would let a value on an edge be decided by a lucky look (the reason the cells
stop at 99 %, experiments/benchmarks/adaptive.py). Whether a value is within reach is judged
at the report's 95 %: the rounds it needs there, against the rounds its cells can still get.
"""
from __future__ import annotations

import math
import re
from typing import Any

from ..analysis.stats import t_quantile
from ..experiments.benchmarks.adaptive import STOP_CONFIDENCE, Aimed
from ..report import builder
from ..store.db import Store
from . import compare as C
from . import judge as J
from . import paper as P
from . import verdicts as V
from .registry import STUDIES
from .report import part_runs

CAMPAIGN = re.compile(r"study(?P<id>\d{3})-.+-[a-z]+")


def paper_values(sink: Any, campaign: Any, run_id: str) -> list[Aimed]:
    """The undecided paper values of the study whose campaign this run is, with their cells
    ([] for another campaign, or a run whose results are not in a store here)."""
    match = CAMPAIGN.fullmatch(campaign.name)
    study = next((s for s in STUDIES if match and s.id == match["id"]), None)
    if study is None or not isinstance(sink, Store):
        return []
    report = builder.build(sink, run_id, sections=False, cached=False)
    matcher = C.Matcher(part_runs(study, [report]))
    pv = P.load(study.id)
    out = []
    for v in pv.values:
        cells = feeding(v, matcher, pv.categories)
        if not cells:
            continue
        j = V.judge(v, matcher, {}, pv.categories, pv.repetitions)
        est, band = j.get("estimate"), j.get("band")
        if est is None or band is None or est.ci is None:
            continue
        needed = J.needed_repetitions(est, *band)
        if J.decide(at_stop(est), *band) != J.UNDECIDED or needed is None:
            continue
        out.append(Aimed(f"{v.where} {v.label()}", frozenset(cells), needed,
                         f"{est.value:.3g} {est.span()} against {J.band_text(*band)}, about {needed} rounds"))
    return out


def feeding(v: P.PaperValue, m: C.Matcher, cats: dict[str, P.CategorySpec]) -> set[tuple[str, str]]:
    """(platform, benchmark key) of the rows a paper value is computed from: a category's rows
    of every candidate of the kind (the best may change), a relative or absolute value's rows,
    an overall claim's every row of the kind. Section values (density, migration, lines) are
    not made of rounds: none."""
    y = v.yours
    if y is None or y.section:
        return set()
    if v.kind in ("range", "best") and v.of and v.category in cats:
        groups = list(m.category_rows(cats[v.category], v.of, y).values())
    elif v.kind == "claim" and y.overall:
        groups = list(m.category_rows(m.everything(), y.overall).values())
    elif v.kind in ("relative", "value"):
        groups = [m.rows(y)]
    else:
        return set()
    return {(r.platform, r.benchmark) for rows in groups for r in rows if r.relative is not None}


def at_stop(est: J.Estimate) -> J.Estimate:
    """The estimate with its 95 % interval widened to the stopping level (t quantiles, log scale)."""
    if est.ci is None or est.n < 2 or est.ci[0] <= 0 or est.value <= 0:
        return est
    k = t_quantile(1 - (1 - STOP_CONFIDENCE) / 2, est.n - 1) / t_quantile(0.975, est.n - 1)
    lo, hi = (est.value * math.exp(k * math.log(c / est.value)) for c in est.ci)
    return J.Estimate(est.value, (lo, hi), est.n, est.what)

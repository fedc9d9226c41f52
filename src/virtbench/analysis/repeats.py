"""Repeated runs of one campaign on one host, pooled into one verdict per cell.

Three identical quick runs gave lxc application ▼, = and ?, side by side with nothing that
pooled them or said they disagreed. Raw rounds of several runs cannot simply be pooled: the
host's state moves between runs (minutes apart on a shared VM), and that drift would land in
every comparison. What each run measures well is its platforms' ratios to its own baseline,
round by round (the report's estimate): those ratios are pooled, and the verdict rule
(analysis/verdict.py) reads their mean log ratio, one ratio per round of every run. Each run's
own verdict stays beside the pooled one, and a cell whose runs decided differently (slower in
one, same or faster in another) is flagged.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..constants import LIFECYCLE
from . import stats as st
from .compare import ratios_to_baseline
from .tables import geomean
from .verdict import decide

DECIDED = ("slower", "faster", "same")


@dataclass
class PooledCell:
    benchmark: str
    metric: str
    platform: str
    unit: str
    higher_is_better: bool
    category: str
    runs: list[str]
    verdicts: list[str | None]
    """Each run's own verdict for the cell, in the runs' order (None: the run lacks the cell)."""
    relative: float | None = None
    """The pooled estimate: the geometric mean of every run's per-round ratios to its own baseline."""
    relative_ci95: list[float] | None = None
    verdict: str = "inconclusive"
    verdict_reason: str = ""
    disagree: bool = False
    """The runs decided differently (one slower, another same or faster...)."""
    ratios: list[float] = field(default_factory=list, repr=False)

    def public(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("ratios")
        return out


def repeat_key(run: Any) -> tuple[Any, ...]:
    """What makes runs repetitions of one another: the host, the campaign's name, platforms (with
    their settings), benchmarks (with their parameters) and baseline."""
    host = run.host.hostname if getattr(run, "host", None) else (run.host_facts or {}).get("hostname")
    return (host, run.name, run.baseline, tuple(sorted((p.name, repr(sorted((p.config or {}).items())))
                                                      for p in run.platforms)),
            tuple(sorted((b.key, repr(sorted((b.params or {}).items()))) for b in run.benchmarks)))


def disagree(verdicts: Sequence[str | None]) -> bool:
    """Whether decided verdicts differ (undecided runs do not count against a decided one)."""
    return len({v for v in verdicts if v in DECIDED}) > 1


def pool(runs: Sequence[tuple[str, Sequence[Any]]], baseline: str, *, min_effect: float = st.MIN_EFFECT
         ) -> list[PooledCell]:
    """runs: (run id, its report's rows) of repetitions of one campaign. One cell per benchmark
    metric and platform other than the baseline (lifecycle steps have no ratio: left out)."""
    ids = [rid for rid, _ in runs]
    by_run = [{(r.benchmark, r.metric, r.platform): r for r in rows} for _, rows in runs]
    keys = list(dict.fromkeys(k for rows in by_run for k, r in rows.items()
                              if r.category != LIFECYCLE and k[2] != baseline))
    out = []
    for key in keys:
        present = [rows.get(key) for rows in by_run]
        first = next(r for r in present if r is not None)
        cell = PooledCell(*key, first.unit, first.higher_is_better, first.category, ids,
                          [r.verdict if r is not None else None for r in present])
        for rows, r in zip(by_run, present):
            if r is not None:
                cell.ratios += ratios_to_baseline(r, rows.get((*key[:2], baseline)))
        n = len(cell.ratios)
        if n:
            v = decide(cell.ratios, [1.0] * n, True, min_effect=min_effect, rounds=list(range(n)),
                       base_rounds=list(range(n)))
            cell.relative = v.ratio if v.ratio is not None else geomean(cell.ratios)
            cell.relative_ci95 = list(v.ci) if v.ci else None
            cell.verdict = v.verdict
            cell.verdict_reason = v.reason.replace(f"{n} rounds paired",
                                                   f"{n} rounds of {len(ids)} runs, each against its own baseline")
        else:
            cell.verdict_reason = "no values in any run"
        cell.disagree = disagree(cell.verdicts)
        out.append(cell)
    return out


def by_category(cells: Sequence[PooledCell]) -> dict[str, dict[str, dict[str, Any]]]:
    """platform -> category -> the pooled cells' combined verdict (the headline's rule), the
    geometric mean of their estimates, and how many of them the runs disagreed on."""
    from .tables import CATEGORIES
    from .verdict import combine

    grouped: dict[str, dict[str, list[PooledCell]]] = {}
    for c in cells:
        grouped.setdefault(c.platform, {}).setdefault(c.category, []).append(c)
    order = {cat: i for i, cat in enumerate(CATEGORIES)}
    return {p: {cat: {"verdict": combine([c.verdict for c in cs]), "relative": geomean(c.relative for c in cs
                                                                                        if c.relative),
                      "cells": len(cs), "disagree": sum(c.disagree for c in cs)}
                for cat, cs in sorted(cats.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))}
            for p, cats in grouped.items()}

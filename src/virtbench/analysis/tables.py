"""Aggregate tables in the style of the LSBS study, computed from summary rows.

- per category (cpu, memory, storage, network, application): geometric mean of each
  platform's relative performance, and across hosts its range (Table 7 style);
- the best hypervisor (kind 'vm') and the best container runtime (kind 'container') per
  category (Tables 5 and 6 style), stacked platforms left out as in the study;
- stack prediction (Fig. 4): for a platform declared `inside` another, the product of the
  layers' relative performances against the measured one.

A geometric mean, because ratios compose by multiplication: 0.5 and 2.0 average to 1.0.
Each (benchmark, metric) counts once, so a benchmark reporting eight metrics weighs eight
times one reporting a single metric; the per-platform table shows how many went in.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .summary import Row
from .verdict import combine

CATEGORIES = ("cpu", "memory", "storage", "network", "kernel", "application")
TIE = 0.005
"""Category means closer than this (relative) are a tie where ratios alone are compared (studies)."""


@dataclass(frozen=True)
class PlatformInfo:
    """What the tables need to know of a platform besides its rows."""

    name: str
    type: str
    kind: str
    """baseline, container or vm (the plugin's kind, stored in the run's platform config)."""
    inside: str | None = None
    """Name of the outer platform this one runs in, for stacked platforms."""
    config: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, name: str, ptype: str, config: Mapping[str, Any]) -> PlatformInfo:
        kind = str(config.get("kind") or ("baseline" if ptype == "native" else "container"))
        inside = config.get("inside") or None
        return cls(name, ptype, kind, str(inside) if inside else None, dict(config))


@dataclass
class CategoryCell:
    geomean: float
    metrics: int
    low: float
    high: float
    """Smallest and largest relative performance among the metrics that went in."""
    verdict: str = "inconclusive"
    """The category's verdict from its metrics' (analysis.verdict.combine)."""


def geomean(values: Iterable[float]) -> float | None:
    """What scipy.stats.gmean computes, with the C library's log and exp: numpy's own (SIMD on
    AVX-512 CPUs) differ in the last bit from one CPU to another, and a stored run must report
    the same bytes on every machine."""
    logs = [math.log(v) for v in values if v is not None and v > 0]
    return math.exp(float(np.mean(logs))) if logs else None


def category_table(rows: Sequence[Row]) -> dict[str, dict[str, CategoryCell]]:
    """category -> platform -> geometric mean of relative performance over its metrics."""
    rel: dict[tuple[str, str], list[float]] = defaultdict(list)
    verdicts: dict[tuple[str, str], list[str | None]] = defaultdict(list)
    for r in rows:
        if r.relative is not None and r.relative > 0 and r.category != "lifecycle":
            rel[(r.category, r.platform)].append(r.relative)
            verdicts[(r.category, r.platform)].append(r.verdict)
    out: dict[str, dict[str, CategoryCell]] = {}
    order = {c: i for i, c in enumerate(CATEGORIES)}
    for (cat, platform), values in sorted(rel.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0][0])):
        out.setdefault(cat, {})[platform] = CategoryCell(geomean(values) or 0.0, len(values), min(values), max(values),
                                                         combine(verdicts[(cat, platform)]))
    return out


def category_ranges(tables: Mapping[str, Mapping[str, Mapping[str, CategoryCell]]]) -> dict[str, dict[str, Any]]:
    """Across hosts: category -> platform -> {per host geomean, min, max}. tables: host -> category table."""
    out: dict[str, dict[str, Any]] = {}
    for host, table in tables.items():
        for cat, cells in table.items():
            for platform, cell in cells.items():
                out.setdefault(cat, {}).setdefault(platform, {"hosts": {}})["hosts"][host] = cell.geomean
    for per_platform in out.values():
        for entry in per_platform.values():
            vals = list(entry["hosts"].values())
            entry["min"], entry["max"] = min(vals), max(vals)
    return out


@dataclass
class BestRow:
    category: str
    values: dict[str, float]
    best: str | None
    """None on a tie (the same verdict for all), an undecided one, or fewer than two candidates."""
    worst: str | None
    decided: bool = True
    """Whether every candidate's category verdict is decided (slower, faster or same)."""


_LEVEL = {"slower": 0, "same": 1, "faster": 2}


def best_of_kind(table: Mapping[str, Mapping[str, CategoryCell]], platforms: Iterable[PlatformInfo],
                 kind: str) -> list[BestRow]:
    """Per category, the best platform of one kind, not stacked (Tables 5/6).

    Named from the verdicts, not the raw ratios: the best is the one platform whose category
    verdict is above every other's (faster > same > slower), the worst the one below every
    other's; while a candidate is undecided (or mixed) none is named, since its ratio alone
    may be noise. Platforms with the same verdict tie (LSBS's '--')."""
    names = [p.name for p in platforms if p.kind == kind and not p.inside]
    out = []
    for cat, cells in table.items():
        values = {n: cells[n].geomean for n in names if n in cells}
        levels = {n: _LEVEL.get(cells[n].verdict) for n in values}
        decided = all(v is not None for v in levels.values())
        best = worst = None
        if values and decided:
            ranks = sorted({v for v in levels.values() if v is not None})
            top = [n for n, v in levels.items() if v == ranks[-1]]
            bottom = [n for n, v in levels.items() if v == ranks[0]]
            if len(top) == 1:
                best = top[0]
            if len(values) > 1 and len(bottom) == 1:
                worst = bottom[0]
        out.append(BestRow(cat, values, best, worst, decided))
    return out


def availability(tables: Mapping[str, Mapping[str, Mapping[str, CategoryCell]]],
                 platforms: Mapping[str, Iterable[PlatformInfo]],
                 kinds: Sequence[str] = ("container", "vm")) -> list[dict[str, Any]]:
    """Table 7: per category and kind, the range over hosts of the best platform of that kind.

    tables and platforms are keyed by host. With one host the range is a single value.
    """
    cats: list[str] = []
    for table in tables.values():
        cats += [c for c in table if c not in cats]
    out = []
    for cat in cats:
        entry: dict[str, Any] = {"category": cat, "baseline": 1.0}
        for kind in kinds:
            per_host = {}
            for host, table in tables.items():
                best = [r for r in best_of_kind({cat: table.get(cat, {})}, platforms[host], kind) if r.values]
                if best:
                    per_host[host] = max(best[0].values.values())
            entry[kind] = {"min": min(per_host.values()), "max": max(per_host.values()),
                           "hosts": per_host} if per_host else None
        out.append(entry)
    return out


@dataclass
class StackRow:
    platform: str
    outer: str
    inner: str
    """The same runtime measured directly on the host: the inner layer's own cost."""
    benchmark: str
    metric: str
    outer_relative: float
    inner_relative: float
    predicted: float
    measured: float
    measured_ci95: list[float] | None
    error: float
    """predicted / measured - 1: positive when the stack does worse than its layers predict."""

    def public(self) -> dict[str, Any]:
        return asdict(self)


def inner_counterpart(stacked: PlatformInfo, platforms: Sequence[PlatformInfo]) -> PlatformInfo | None:
    """The unstacked platform of the same type, preferring identical options."""
    candidates = [p for p in platforms if p.type == stacked.type and not p.inside and p.name != stacked.name]
    if not candidates:
        return None
    ignore = {"name", "inside", "outer", "type", "kind", "label"}

    def differences(p: PlatformInfo) -> int:
        keys = (set(p.config) | set(stacked.config)) - ignore
        return sum(p.config.get(k) != stacked.config.get(k) for k in keys)
    return min(candidates, key=differences)


def stack_predictions(rows: Sequence[Row], platforms: Sequence[PlatformInfo]) -> list[StackRow]:
    """Fig. 4: is a container in a VM as fast as VM and container overheads multiplied?"""
    by = {(r.benchmark, r.metric, r.platform): r for r in rows if r.relative is not None}
    names = {p.name for p in platforms}
    out = []
    for p in platforms:
        if not p.inside or p.inside not in names:
            continue
        inner = inner_counterpart(p, platforms)
        if inner is None:
            continue
        for (bench, metric, name), row in by.items():
            if name != p.name:
                continue
            o, i = by.get((bench, metric, p.inside)), by.get((bench, metric, inner.name))
            if o is None or i is None or not row.relative:
                continue
            predicted = o.relative * i.relative  # type: ignore[operator]
            out.append(StackRow(p.name, p.inside, inner.name, bench, metric, o.relative,  # type: ignore[arg-type]
                                i.relative, predicted, row.relative,  # type: ignore[arg-type]
                                row.relative_ci95, predicted / row.relative - 1))
    return sorted(out, key=lambda s: (s.platform, s.benchmark, s.metric))


def hosts_matrix(per_host: Mapping[str, Sequence[Row]]) -> list[dict[str, Any]]:
    """One line per (benchmark, metric, platform), hosts as columns: the merged comparison."""
    lines: dict[tuple[str, str, str], dict[str, Any]] = {}
    for host, rows in per_host.items():
        for r in rows:
            if r.category == "lifecycle":
                continue
            line = lines.setdefault((r.benchmark, r.metric, r.platform), {
                "benchmark": r.benchmark, "metric": r.metric, "platform": r.platform, "unit": r.unit,
                "higher_is_better": r.higher_is_better, "category": r.category, "hosts": {}})
            line["hosts"][host] = {"relative": r.relative, "relative_ci95": r.relative_ci95, "mean": r.mean,
                                   "n": r.n, "failed": r.failed, "verdict": r.verdict,
                                   "verdict_reason": r.verdict_reason}
    for line in lines.values():
        rel = [h["relative"] for h in line["hosts"].values() if h["relative"] is not None]
        line["min"], line["max"] = (min(rel), max(rel)) if rel else (None, None)
    return [lines[k] for k in sorted(lines)]


def table_json(table: Mapping[str, Mapping[str, CategoryCell]]) -> dict[str, Any]:
    return {cat: {p: asdict(c) for p, c in cells.items()} for cat, cells in table.items()}

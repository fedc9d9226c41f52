"""What the quick scale changes from the paper scale, read from the two preset files of a part.

Quick keeps each figure's shape at the smallest settings that still measure: every value it
changes is a difference from the paper too, listed here from the files themselves (never
written by hand, so it cannot go stale).
"""
from __future__ import annotations

from functools import cache
from typing import Any

from ..config import SHIPPED, load_campaign
from ..registry import BENCHMARKS
from .model import Part, Study

SIZES = ("memory", "swap", "disk", "host_memory", "payload")


NOT_SET = "not set"
"""A setting a preset leaves out (or sets to None): the benchmark's, platform's or tool's own default."""


def short(v: Any, key: str = "") -> str:
    """A preset's or the paper's value in the study text: `512M`, `1/2/4`, `yes`, `not set`."""
    if v is None:
        return NOT_SET
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, tuple)):
        return "/".join(short(x, key) for x in v) if len(v) <= 6 else f"{len(v)} values"
    if key.split(".")[-1] in SIZES and isinstance(v, int) and v >= 1 << 20 and not v % (1 << 20):
        return f"{v >> 30}G" if not v % (1 << 30) else f"{v >> 20}M"
    return str(v)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return sorted(map(str, a)) == sorted(map(str, b))
    return bool(a == b)


def _benchmark_values(campaign: Any) -> dict[str, dict[str, list[Any]]]:
    out: dict[str, dict[str, list[Any]]] = {}
    for e in campaign.benchmarks:
        cls = BENCHMARKS.get(e.name)
        params = cls.Params(**e.params).model_dump()
        params["instances"] = e.instances or 1
        for k, v in params.items():
            vals = out.setdefault(e.name, {}).setdefault(k, [])
            if v not in vals:
                vals.append(v)
    return out


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): data}


@cache
def quick_changes(study_id: str, part_name: str) -> tuple[str, ...]:
    """Each setting the part's quick presets change from its paper presets, as 'what: quick (paper)'."""
    from .registry import study

    part = study(study_id).part(part_name)
    return tuple(_changes(study(study_id), part))


def _changes(s: Study, part: Part) -> list[str]:
    out: list[str] = []
    for q_stem, p_stem in zip(part.campaign_stems(s.id, "quick"), part.campaign_stems(s.id, "paper")):
        q, p = load_campaign(SHIPPED / f"{q_stem}.yaml"), load_campaign(SHIPPED / f"{p_stem}.yaml")
        for field in ("repetitions", "warmups", "profile"):
            if getattr(q, field) != getattr(p, field):
                out.append(f"{field} {getattr(q, field)} (paper scale {getattr(p, field)})")
        if q.adaptive != p.adaptive and q.adaptive is not None:
            a = q.adaptive
            aimed = " and the cells of undecided paper values" if a.aim == "study" else ""
            out.append(f"extra rounds for undecided cells{aimed} up to {a.max_repetitions} and {a.max_minutes:g} min")
        for qp, pp in zip(q.platforms, p.platforms):
            qo, po = qp.options, pp.options
            for k in sorted(set(qo) | set(po)):
                if not _same(qo.get(k), po.get(k)):
                    out.append(f"{qp.name} {k} {short(qo.get(k), k)} (paper scale {short(po.get(k), k)})")
        qb, pb = _benchmark_values(q), _benchmark_values(p)
        for name in qb:
            for k, vals in qb[name].items():
                paper = pb.get(name, {}).get(k)
                if paper is not None and not _same(vals, paper):
                    out.append(f"{name} {k} {short(vals, k)} (paper scale {short(paper, k)})")
        qs, ps = _flat(q.settings), _flat(p.settings)
        for k in sorted(set(qs) | set(ps)):
            if not _same(qs.get(k), ps.get(k)):
                out.append(f"{q.experiment} {k} {short(qs.get(k), k)} (paper scale {short(ps.get(k), k)})")
    return list(dict.fromkeys(out))


@cache
def presets(study_id: str, part_name: str, scale: str = "paper") -> tuple[Any, ...]:
    """The part's shipped campaigns at a scale, validated (cached: the report asks per value)."""
    from .registry import study

    part = study(study_id).part(part_name)
    return tuple(load_campaign(SHIPPED / f"{stem}.yaml") for stem in part.campaign_stems(study_id, scale))

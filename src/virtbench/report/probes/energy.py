"""The energy probe's report part: energy with the same statistics and verdicts as performance.

Energy values are turned into ordinary samples in memory (J per execution, W, J per unit of
work) and summarized by the same `summarize` as performance, so the energy table's ratios,
CIs and verdicts mean exactly what the performance table's do. Every result row of
`report --json` gets an `energy` field: that benchmark's energy on that platform, or nulls
with the reason.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ...analysis.summary import Row, SampleView, summarize
from ...store.models import Sample
from ..sections import ReportSection, SectionTable
from ..sections import cell as sec_cell
from . import ProbePart, ProbeRecords

ENERGY_WORDS = {"slower": "worse: more energy", "faster": "better: less energy"}
"""The performance verdicts read as energy in the table (JSON keeps the verdict itself)."""


def part(rec: ProbeRecords) -> ProbePart:
    """The energy table relative to the baseline, or why nothing was measured."""
    run = rec.run
    baseline = run.baseline
    platforms = [p.name for p in run.platforms]
    samples = _samples_by_execution(rec)
    views: list[SampleView] = []
    sources: dict[tuple[str, str], set[str]] = defaultdict(set)
    reasons: list[str] = []
    quality: dict[str, Any] = {"wraps_corrected": 0, "gaps": 0, "read_errors": 0, "failed": 0, "domains": set(),
                               "intervals": set()}
    idle_how = ""
    for ex, att in rec.items:
        data = att.json()
        if att.status != "ok":
            (reasons if att.status == "unavailable" else quality.setdefault("errors", [])).append(att.error)
            quality["failed"] += att.status == "failed"
            continue
        q = data.get("quality", {})
        quality["wraps_corrected"] += q.get("wraps_corrected", 0)
        quality["gaps"] += len(q.get("gaps", []))
        quality["read_errors"] += q.get("read_errors", 0)
        quality["domains"].update(q.get("domains_summed", []))
        quality["intervals"].add(q.get("interval"))
        idle_how = data.get("idle_how", idle_how)
        sources[(ex.benchmark, ex.platform)].add(data["source"])
        base = (ex.benchmark, ex.platform, ex.round, ex.warmup)
        views.append(_view(base, "energy_J", data["joules"], "J"))
        views.append(_view(base, "power_W", data["watts_mean"], "W"))
        if "joules_above_idle" in data:
            views.append(_view(base, "energy_above_idle_J", data["joules_above_idle"], "J"))
        for s in samples.get(ex.id, []):  # energy per unit of work: mean watts / throughput
            if s.instance == 0 and s.higher_is_better and s.unit.endswith("/s") and s.value > 0:
                views.append(_view(base, f"J_per_{s.metric}", data["watts_mean"] / s.value,
                                   f"J/{s.unit.removesuffix('/s') or 'op'}"))
    rows = summarize(views, {}, platforms, baseline, alpha=rec.alpha, min_effect=rec.min_effect) if views else []
    reason = "; ".join(sorted(set(reasons))) if not views else ""
    out = ProbePart(data={
        "rows": [_row_json(r) for r in rows],
        "reason": reason or None,
        "quality": {**quality, "domains": sorted(quality["domains"]),
                    "intervals": sorted(i for i in quality["intervals"] if i is not None)},
        "idle": idle_how or "not subtracted (set idle: true to measure idle power before the run)",
    }, row_fields={"energy": _by_row(rows, sources, reason)})
    if views:
        out.tables.append(SectionTable(
            f"energy relative to {baseline} (relative = {baseline} / platform: below 1 uses more energy; "
            "95% CI; same tests and verdicts as performance)",
            ["benchmark", "metric [unit]", "platform", "n", "mean", "relative [95% CI]", "verdict"],
            [[r.benchmark, f"{r.metric} [{r.unit}]", r.platform, r.n, r.mean,
              f"{sec_cell(r.relative)} {_ci(r.relative_ci95)}", ENERGY_WORDS.get(r.verdict or "", r.verdict or "")]
             for r in rows]))
        out.notes.append("energy per unit of work (J_per_<metric>) = the execution's mean watts / its throughput; "
                             f"idle: {out.data['idle']}; sources: "
                             + ", ".join(sorted({s for v in sources.values() for s in v})))
    else:
        out.notes.append(f"energy: no measurement: {reason or 'no execution had energy data'}")
    return out


def _samples_by_execution(rec: ProbeRecords) -> dict[int, list[Sample]]:
    out: dict[int, list[Sample]] = defaultdict(list)
    for s in rec.store.samples(rec.run.id, include_warmup=True):
        out[s.execution_id].append(s)
    return out


def _view(base: tuple[str, str, int, bool], metric: str, value: float, unit: str) -> SampleView:
    bench, platform, rnd, warmup = base
    return SampleView(bench, metric, platform, float(value), unit, False, "energy", rnd, warmup)


def _row_json(r: Row) -> dict[str, Any]:
    return {k: getattr(r, k) for k in ("benchmark", "metric", "unit", "platform", "n", "mean", "ci95", "relative",
                                       "relative_ci95", "p_value", "verdict")}


def _by_row(rows: list[Row], sources: dict[tuple[str, str], set[str]], reason: str) -> dict[str, Any]:
    """(benchmark|platform) -> the `energy` field of every result row of that pair."""
    out: dict[str, Any] = {}
    joules = {(r.benchmark, r.platform): r for r in rows if r.metric == "energy_J"}
    watts = {(r.benchmark, r.platform): r for r in rows if r.metric == "power_W"}
    for key, r in joules.items():
        out["|".join(key)] = {"source": ",".join(sorted(sources.get(key, ()))), "joules_mean": r.mean,
                              "watts_mean": watts[key].mean if key in watts else None, "joules_ci95": r.ci95}
    out["*"] = {"source": None, "joules_mean": None, "watts_mean": None, "joules_ci95": None,
                "reason": reason or "no energy data for this benchmark and platform (failed or not measured)"}
    return out


def energy_rows(secs: Sequence[ReportSection]) -> list[Row]:
    """The energy table's rows (energy_J, power_W, ...) back as Rows, from a report's `probes`
    section: what a comparison with published watts reads (studies/compare.py)."""
    out = []
    for s in secs:
        if s.key != "probes" or not isinstance(s.data, dict):
            continue
        for d in (s.data.get("energy") or {}).get("rows", []):
            out.append(Row(d["benchmark"], d["metric"], d["unit"], False, "energy", d["platform"], d["n"], 0,
                           mean=d["mean"], ci95=d["ci95"], relative=d["relative"], relative_ci95=d["relative_ci95"],
                           p_value=d["p_value"], verdict=d["verdict"]))
    return out


def _ci(ci: list[float] | None) -> str:
    return f"[{ci[0]:.3g}, {ci[1]:.3g}]" if ci else ""

"""Report parts of the probes: energy (with the same statistics and verdicts as
performance), perf counters, and host pressure (a plot and noisy-neighbour warnings).

Probe data lives in the attachments of each execution (kind `probe:<name>`). Energy
values are turned into ordinary samples in memory (J per execution, W, J per unit of work)
and summarized by the same `summarize` as performance, so the energy table's ratios, CIs
and verdicts mean exactly what the performance table's do.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ...analysis import stats
from ...analysis.summary import Row, SampleView, summarize
from ...store.db import Store
from ...store.models import Run
from ..figures import FigureSpec, Series, slug
from ..sections import ReportSection, SectionTable
from ..sections import cell as sec_cell

STALL_WARN = 10.0
"""% of an execution's time with some task stalled on CPU (host PSI) above which the host
was busy with something else: a noisy-neighbour warning."""


ENERGY_WORDS = {"slower": "worse: more energy", "faster": "better: less energy"}
"""The performance verdicts read as energy in the table (JSON keeps the verdict itself)."""


def probe_names(run: Run) -> list[str]:
    return [p if isinstance(p, str) else p.get("name", "") for p in (run.campaign or {}).get("probes") or []]


def build(store: Store, run: Run, benchmark_rows: Sequence[Row] = (), *, alpha: float = stats.ALPHA,
          min_effect: float = stats.MIN_EFFECT) -> ReportSection | None:
    """The `probes` section of a run that had probes; None otherwise."""
    names = probe_names(run)
    if not names:
        return None
    execs = {e.id: e for e in store.executions(run.id)}
    by_probe: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
    for att in store.attachments(run.id, kind="probe:"):
        ex = execs.get(att.execution_id)
        if ex is not None:
            by_probe[att.kind.removeprefix("probe:")].append((ex, att))
    section = ReportSection(key="probes", title="Probes", data={})
    baseline = run.baseline
    platforms = [p.name for p in run.platforms]
    samples = _samples_by_execution(store, run.id)
    if "energy" in names:
        _energy(section, by_probe["energy"], samples, platforms, baseline, run, alpha, min_effect)
    if "perf" in names:
        _perf(section, by_probe["perf"])
    if "pressure" in names:
        _pressure(section, by_probe["pressure"])
    return section


def _samples_by_execution(store: Store, run_id: str) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = defaultdict(list)
    for s in store.samples(run_id, include_warmup=True):
        out[s.execution_id].append(s)
    return out


# -- energy --------------------------------------------------------------------------
def _energy(section: ReportSection, items: list[tuple[Any, Any]], samples: dict[int, list[Any]],
            platforms: list[str], baseline: str, run: Run, alpha: float, min_effect: float) -> None:
    views: list[SampleView] = []
    sources: dict[tuple[str, str], set[str]] = defaultdict(set)
    reasons: list[str] = []
    quality: dict[str, Any] = {"wraps_corrected": 0, "gaps": 0, "read_errors": 0, "failed": 0, "domains": set(),
                               "intervals": set()}
    idle_how = ""
    for ex, att in items:
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
    rows = summarize(views, {}, platforms, baseline, alpha=alpha, min_effect=min_effect) if views else []
    reason = "; ".join(sorted(set(reasons))) if not views else ""
    section.data["energy"] = {
        "rows": [_row_json(r) for r in rows],
        "reason": reason or None,
        "quality": {**quality, "domains": sorted(quality["domains"]),
                    "intervals": sorted(i for i in quality["intervals"] if i is not None)},
        "idle": idle_how or "not subtracted (set idle: true to measure idle power before the run)",
    }
    section.row_fields["energy"] = _by_row(rows, sources, reason)
    if views:
        section.tables.append(SectionTable(
            f"energy relative to {baseline} (relative = {baseline} / platform: below 1 uses more energy; "
            "95% CI; same tests and verdicts as performance)",
            ["benchmark", "metric [unit]", "platform", "n", "mean", "relative [95% CI]", "verdict"],
            [[r.benchmark, f"{r.metric} [{r.unit}]", r.platform, r.n, r.mean,
              f"{sec_cell(r.relative)} {_ci(r.relative_ci95)}", ENERGY_WORDS.get(r.verdict or "", r.verdict or "")]
             for r in rows]))
        section.notes.append("energy per unit of work (J_per_<metric>) = the execution's mean watts / its throughput; "
                             f"idle: {section.data['energy']['idle']}; sources: "
                             + ", ".join(sorted({s for v in sources.values() for s in v})))
    else:
        section.notes.append(f"energy: no measurement: {reason or 'no execution had energy data'}")


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


# -- perf ----------------------------------------------------------------------------
def _perf(section: ReportSection, items: list[tuple[Any, Any]]) -> None:
    per: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    unsupported: dict[str, str] = {}
    failed, hardware_reason = [], ""
    for ex, att in items:
        if ex.warmup:
            continue
        if att.status != "ok":
            failed.append(att.error)
            continue
        data = att.json()
        hardware_reason = data.get("hardware_reason", hardware_reason)
        for event, v in data["events"].items():
            if v["value"] is None:
                unsupported[event] = v["reason"]
            else:
                per[(ex.benchmark, ex.platform)][event].append(float(v["value"]))
        per[(ex.benchmark, ex.platform)]["interrupts"].append(float(data["interrupts_total"]))
        per[(ex.benchmark, ex.platform)]["softirqs"].append(float(data["softirqs_total"]))
    events = sorted({e for d in per.values() for e in d})
    rows = [[b, p, *[(sum(d[e]) / len(d[e])) if d.get(e) else None for e in events]] for (b, p), d in sorted(per.items())]
    section.data["perf"] = {"events": events, "mean_per_execution": [dict(zip(["benchmark", "platform", *events], r))
                                                                     for r in rows],
                            "unavailable": unsupported, "hardware_reason": hardware_reason or None,
                            "failed": failed}
    if rows:
        section.tables.append(SectionTable("perf counters, mean per execution (system-wide unless scope: instance)",
                                           ["benchmark", "platform", *events], rows))
    if unsupported:
        section.notes.append("perf: unavailable here: " + ", ".join(f"{e} ({r})" for e, r in sorted(unsupported.items()))
                             + (f"; {hardware_reason}" if hardware_reason else ""))
    if failed:
        section.notes.append(f"perf: {len(failed)} executions without counters: {failed[0]}")


# -- pressure ------------------------------------------------------------------------
def _pressure(section: ReportSection, items: list[tuple[Any, Any]]) -> None:
    table, warnings = [], []
    series: dict[str, list[Series]] = defaultdict(list)
    for ex, att in items:
        if att.status != "ok":
            warnings.append(f"{ex.benchmark} on {ex.platform}, round {ex.round}: no pressure data: {att.error}")
            continue
        data = att.json()
        s = data.get("summary", {})
        cpu, psi = s.get("host_cpu", {}), s.get("psi_cpu", {})
        mem = s.get("mem_available", {})
        table.append([ex.benchmark, ex.platform, ex.round if not ex.warmup else "warm-up", s.get("readings"),
                      cpu.get("mean"), psi.get("mean"), psi.get("max"), s.get("psi_memory", {}).get("max"),
                      s.get("psi_io", {}).get("max"), mem.get("min"), s.get("inst_cpu", {}).get("mean"),
                      s.get("inst_memory", {}).get("max")])
        if not ex.warmup and (psi.get("mean") or 0) > STALL_WARN:
            warnings.append(f"{ex.benchmark} on {ex.platform}, round {ex.round}: tasks waited for a CPU "
                            f"{psi['mean']:.0f}% of the time")
        if not ex.warmup:
            cols = data["columns"]
            rows = data["rows"]
            t, c, p = cols.index("t"), cols.index("host_cpu"), cols.index("psi_cpu")
            name = f"{ex.platform} r{ex.round}"
            series[ex.benchmark].append(Series(f"{name} CPU busy %", [r[t] for r in rows],
                                               [None if r[c] is None else 100 * r[c] for r in rows]))
            series[ex.benchmark].append(Series(f"{name} CPU stall % (PSI)", [r[t] for r in rows],
                                               [r[p] for r in rows], style="dashed"))
    section.data["pressure"] = {"executions": [dict(zip(_PRESSURE_COLS, r)) for r in table], "warnings": warnings}
    if table:
        section.tables.append(SectionTable(
            "host pressure, measured rounds (CPU busy and stall: % of time; memory in MiB)",
            ["benchmark", "platform", "CPU busy", "CPU stall", "io stall max", "MemAvail min", "inst. cores",
             "inst. MiB max"], _pressure_summary(table)))
    for bench, ss in series.items():
        section.figures.append(FigureSpec(
            id=slug("pressure", bench), kind="trend", title=f"Host CPU and CPU stall during {bench}",
            xlabel="seconds since the execution started", ylabel="% of the host's CPU time", series=ss[:12],
            group="probes", note="PSI some: share of time at least one task waited for a CPU"))
    busy = [w for w in warnings if "waited for a CPU" in w]
    measured = sum(1 for ex, _ in items if not ex.warmup)
    if busy:
        section.notes.append(f"pressure: in {len(busy)} of {measured} measured executions tasks waited for a CPU over "
                             f"{STALL_WARN:.0f}% of the time (host PSI): the host was busy with other work (noisy "
                             f"neighbours), so those results may be slower; e.g. {busy[0]}")
    section.notes += [w for w in warnings if w not in busy][:10]


def _pressure_summary(table: list[list[Any]]) -> list[list[Any]]:
    """Per benchmark and platform over the measured rounds: mean CPU busy and stall, worst
    io stall, least MemAvailable, the instance's mean cores and largest memory."""
    groups: dict[tuple[str, str], list[list[Any]]] = defaultdict(list)
    for r in table:
        if r[2] != "warm-up":
            groups[(r[0], r[1])].append(r)

    def col(rows: list[list[Any]], i: int) -> list[float]:
        return [r[i] for r in rows if r[i] is not None]

    def mean(v: list[float]) -> float | None:
        return sum(v) / len(v) if v else None

    out = []
    for (bench, platform), rows in groups.items():
        busy, mem, inst_mem = mean(col(rows, 4)), col(rows, 9), col(rows, 11)
        stall = mean(col(rows, 5))
        out.append([bench, platform, None if busy is None else round(100 * busy, 1),
                    None if stall is None else round(stall, 1), max(col(rows, 8), default=None),
                    round(min(mem) / 2**20) if mem else None, mean(col(rows, 10)),
                    round(max(inst_mem) / 2**20, 1) if inst_mem else None])
    return sorted(out, key=lambda r: (r[0], r[1]))


_PRESSURE_COLS = ("benchmark", "platform", "round", "readings", "host CPU busy (mean, 0..1)", "CPU stall % (mean)",
                  "CPU stall % (max)", "memory stall % (max)", "io stall % (max)", "MemAvailable min [B]",
                  "instance CPU (mean, cores)", "instance memory max [B]")


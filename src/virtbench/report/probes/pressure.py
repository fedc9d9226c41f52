"""The pressure probe's report part: the host's CPU, memory and io pressure per execution,
a plot of CPU busy and stall over each execution, and noisy-neighbour warnings."""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..figures import FigureSpec, Series, slug
from ..sections import SectionTable
from . import ProbePart, ProbeRecords

STALL_WARN = 10.0
"""% of an execution's time with some task stalled on CPU (host PSI) above which the host
was busy with something else: a noisy-neighbour warning."""


def part(rec: ProbeRecords) -> ProbePart:
    """Per execution its pressure summary; per benchmark a plot of the measured rounds."""
    items = rec.items
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
    limits = [{"benchmark": ex.benchmark, "platform": ex.platform, "round": ex.round, **att.json()["cpu_limit"]}
              for ex, att in items if att.status == "ok" and not ex.warmup and att.json().get("cpu_limit")]
    out = ProbePart(data={"executions": [dict(zip(_PRESSURE_COLS, r)) for r in table], "warnings": warnings,
                          "cpu_limits": limits})
    out.notes += quota_notes(limits)
    if table:
        out.tables.append(SectionTable(
            "host pressure, measured rounds (CPU busy and stall: % of time; memory in MiB)",
            ["benchmark", "platform", "CPU busy", "CPU stall", "io stall max", "MemAvail min", "inst. cores",
             "inst. MiB max"], _pressure_summary(table)))
    for bench, ss in series.items():
        out.figures.append(FigureSpec(
            id=slug("pressure", bench), kind="trend", title=f"Host CPU and CPU stall during {bench}",
            xlabel="seconds since the execution started", ylabel="% of the host's CPU time", series=ss[:12],
            group="probes", note="PSI some: share of time at least one task waited for a CPU"))
    busy = [w for w in warnings if "waited for a CPU" in w]
    measured = sum(1 for ex, _ in items if not ex.warmup)
    if busy:
        out.notes.append(f"pressure: in {len(busy)} of {measured} measured executions tasks waited for a CPU over "
                             f"{STALL_WARN:.0f}% of the time (host PSI): the host was busy with other work (noisy "
                             f"neighbours), so those results may be slower; e.g. {busy[0]}")
    out.notes += [w for w in warnings if w not in busy][:10]
    return out


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


HELD = 1.05
"""The most CPU-seconds per second per quota CPU a held quota may show (as the self-test's cpu-quota)."""


def quota_notes(limits: list[dict[str, Any]]) -> list[str]:
    """Per platform with a CPU quota: the most CPU time per second its cgroup counted in an
    execution and the throttled periods: whether the quota held and acted during this run."""
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for lim in limits:
        if lim.get("quota_cpus") and lim.get("cpu_per_s") is not None:
            by[lim["platform"]].append(lim)
    out = []
    for platform, rows in sorted(by.items()):
        quota = rows[0]["quota_cpus"]
        most = max(r["cpu_per_s"] for r in rows)
        throttled = sum(r.get("throttled_periods") or 0 for r in rows)
        periods = sum(r.get("periods") or 0 for r in rows)
        held = "held" if most <= HELD * quota + 1e-9 else "DID NOT HOLD"
        out.append(f"pressure: {platform}'s CPU quota of {quota:g} {held} during the run: at most {most:.2f} "
                   f"CPU-seconds per second in an execution (its cgroup's counters), throttled in {throttled} of "
                   f"{periods} periods")
    return out

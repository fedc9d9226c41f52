"""The report part of the `density` experiment kind: the density table and the studies' figure.

Read from the stored run: each platform's summary execution (`density-stop`: maximum count,
stop reason and its evidence, memory per instance, confinement) and the executions
`density[count=N]` with their samples (per instance, mean per instance, aggregate). The
JSON section `density` is a list with one entry per platform; the figures are per-instance
and aggregate throughput against the count, one series per platform (as studies 000/002).
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from typing import Any

from ....report.figures import FigureSpec, Series, slug
from ....report.model import Section, Table
from ....store.db import Store
from ....store.models import Run

STOP_KEY = "density-stop"
_COUNT = re.compile(r"^density\[count=(\d+)\]$")
_BOOKKEEPING = ("memory_per_instance", "mem_available_drop_per_instance", "parent_memory_peak")
"""Samples of a count that are density's own (category `memory`, as a memory benchmark's
metrics are too: mbw's vanished from the table and the figure when the category decided),
besides the `sync` category."""

REASONS = {
    "start_failure": "an instance did not start",
    "oom": "OOM kill (kernel counters)",
    "workload_failure": "the workload failed",
    "cpu_starvation": "CPU starvation (workloads got no CPU in their window)",
    "throughput_collapse": "throughput collapsed",
    "kernel_limit": "a kernel limit",
    "disk_full": "the host's disk is full",
    "guard": "the host guard tripped",
    "max_reached": "the count limit (max) was reached",
    "counts_done": "every listed count ran",
    "interrupted": "interrupted",
}


def _mib(v: float | None) -> str:
    return "-" if v is None else f"{v / 2**20:.1f} MiB"


def density_data(store: Store, run: Run) -> list[dict[str, Any]]:
    """One entry per platform (per host and platform in a run across hosts: each host its own
    search): maximum, stop reason and evidence, memory, per-count points."""
    executions = store.executions(run.id)
    summaries = {(e.host, e.platform): json.loads(e.stdout) for e in executions
                 if e.benchmark == STOP_KEY and e.stdout}
    if not summaries:
        return []
    by_exec = defaultdict(list)
    for s in store.samples(run.id, per_instance=True):
        by_exec[s.execution_id].append(s)
    points: dict[tuple[str | None, str], dict[int, dict[str, Any]]] = defaultdict(dict)
    for e in executions:
        m = _COUNT.match(e.benchmark)
        if not m:
            continue
        count = int(m.group(1))
        samples = by_exec.get(e.id, [])
        work = [s for s in samples if s.category not in ("sync", "cost") and s.metric not in _BOOKKEEPING]
        per = sorted((s.instance, s.value) for s in work if s.instance > 0 and not s.metric.endswith("_total"))
        mean = next((s.value for s in work if s.instance == 0 and not s.metric.endswith("_total")), None)
        total = next((s.value for s in work if s.metric.endswith("_total")), None)
        unit = next((s.unit for s in work), "")
        spread = next((s.value for s in samples if s.metric == "start_spread" and s.category == "sync"), None)
        overlap = next((s.value for s in samples if s.metric == "overlap" and s.category == "sync"), None)
        memory = next((s.value for s in samples if s.metric == "memory_per_instance"), None)
        drop = next((s.value for s in samples if s.metric == "mem_available_drop_per_instance"), None)
        peak = next((s.value for s in samples if s.metric == "parent_memory_peak"), None)
        starved = next((int(s.value) for s in samples if s.metric == "starved_instances"), 0)
        healthy = e.status == "ok" and not e.error
        point = points[e.host, e.platform].get(count)
        if point is not None and point["ok"] and not healthy:
            continue  # a count measured twice (bisection): keep the healthy one
        points[e.host, e.platform][count] = {
            "count": count, "ok": healthy, "probe": e.round, "per_instance_mean": mean, "aggregate": total,
            "unit": unit, "per_instance": [v for _, v in per], "memory_per_instance_bytes": memory,
            "mem_available_drop_per_instance_bytes": drop, "error": e.error or None,
            "start_spread_s": spread, "overlap": overlap, "parent_memory_peak_bytes": peak, "starved": starved,
            "duration_s": round(e.duration_s, 2),
            "cost": {s.metric: s.value for s in samples if s.category == "cost" and s.instance == 0}}
    out = []
    for (host, name), summary in summaries.items():
        pts = [points[host, name][c] for c in sorted(points[host, name])]
        good = {p["count"]: p for p in pts if p["ok"]}
        top = good.get(summary["max_count"])
        out.append({
            "platform": name, "host": host, "label": summary.get("label", name), "type": summary.get("type"),
            "image": summary.get("image", {}), "max_count": summary["max_count"],
            "stop_reason": summary["stop_reason"], "stop_detail": summary.get("stop_detail", ""),
            "stop_count": summary.get("stop_count"), "stop_evidence": summary.get("stop_evidence", {}),
            "memory_per_instance_bytes": summary.get("memory_per_instance_bytes"),
            "mem_available_drop_per_instance_bytes": summary.get("mem_available_drop_per_instance_bytes"),
            "throughput_at_1": good[1]["per_instance_mean"] if 1 in good else None,
            "throughput_at_max": top["per_instance_mean"] if top else None,
            "unit": next((p["unit"] for p in pts if p["unit"]), ""),
            "confined": summary.get("confined", False), "host_memory": summary.get("host_memory"),
            "mem_total": summary.get("mem_total"), "guard_thresholds": summary.get("guard_thresholds"),
            "duration_s": summary.get("duration_s"), "probes": summary.get("probes", []), "points": pts,
            "min_overlap": summary.get("min_overlap"), "scaling": summary.get("scaling"),
            "pod": summary.get("pod", False), "start_batches": summary.get("start_batches", []),
            "confined_memory_per_instance_bytes": confined_cost(top),
        })
    return out


def confined_cost(point: dict[str, Any] | None) -> float | None:
    """What one instance cost the confined host at the maximum: the parent's memory peak during
    that count's workload over the count. The instances' own cgroups count far less (an idle
    LXC container: 0.2 MiB, while a 1 GiB parent filled at 2.3 MiB per container), and it is the
    parent's usage that the guard and the OOM killer judge, so this is what explains the maximum."""
    if not point or not point.get("count") or point.get("parent_memory_peak_bytes") is None:
        return None
    return point["parent_memory_peak_bytes"] / point["count"]


def figures(entries: list[dict[str, Any]]) -> list[FigureSpec]:
    """The studies' figure: per-instance and aggregate throughput against the count."""
    if not entries:
        return []
    unit = next((e["unit"] for e in entries if e["unit"]), "")
    out = []
    for what, field, label in (("per-instance", "per_instance_mean", "per instance"),
                               ("aggregate", "aggregate", "all instances together")):
        series = []
        for e in entries:
            pts = [p for p in e["points"] if p["ok"] and p[field] is not None]
            if pts:
                series.append(Series(_named(e), [p["count"] for p in pts], [p[field] for p in pts]))
        if series:
            out.append(FigureSpec(slug("density", what), "count", f"density: throughput {label} against the count",
                                  "instances running at once", f"throughput {label} [{unit}] (higher is better)",
                                  series, group="density", note="healthy counts only; one execution per count"))
    return out


def _named(entry: dict[str, Any]) -> str:
    """A platform as the tables and figures name it: with its host in a run across hosts."""
    return entry["platform"] + (f" on {entry['host']}" if entry.get("host") else "")


def table(entries: list[dict[str, Any]]) -> Table:
    rows = []
    for e in entries:
        one, top = e["throughput_at_1"], e["throughput_at_max"]
        rows.append([_named(e), e["image"].get("release", "-") if e["image"] else "-", e["max_count"],
                     REASONS.get(e["stop_reason"], e["stop_reason"]) + (f" at {e['stop_count']}" if e["stop_count"]
                                                                         else ""),
                     _mib(e["memory_per_instance_bytes"]), _mib(e["mem_available_drop_per_instance_bytes"]),
                     "-" if one is None else f"{one:.4g}", "-" if top is None else f"{top:.4g}"])
    unit = next((e["unit"] for e in entries if e["unit"]), "")
    return Table("Density: maximum count per platform",
                 ["platform", "image", "max", "stop reason", "cgroup mem/inst", "MemAvail drop/inst",
                  f"at 1 [{unit}]", f"at max [{unit}]"], rows)


def _num(v: float | None, fmt: str = ".4g") -> str:
    return "-" if v is None else format(v, fmt)


def points_table(entries: list[dict[str, Any]]) -> Table:
    rows = [[_named(e), p["count"], _health(p),
             _num(p["per_instance_mean"]), _num(p["aggregate"]), _mib(p["memory_per_instance_bytes"]),
             _mib(p.get("parent_memory_peak_bytes")), _num(p.get("start_spread_s"), ".3g"),
             _num(p.get("overlap"), ".2f") + (" !" if _unsynchronized(e, p) else "")]
            for e in entries for p in e["points"]]
    return Table("Density: every measured count", ["platform", "count", "health", "per instance", "aggregate",
                                                   "cgroup mem/inst", "parent peak", "start spread s", "overlap"],
                 rows)


def _health(point: dict[str, Any]) -> str:
    """ok, ok with the few instances left out of the window by chance (starved_share), or the stop."""
    if not point["ok"]:
        return (point["error"] or "failed").partition(":")[0]
    return f"ok, {point['starved']} starved" if point.get("starved") else "ok"


def _unsynchronized(entry: dict[str, Any], point: dict[str, Any]) -> bool:
    """A count whose instances did not run together long enough (its aggregate is not concurrent)."""
    return point.get("overlap") is not None and point["overlap"] < (entry.get("min_overlap") or 0.5)


def notes(entries: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in entries:
        if e["confined"]:
            out.append(f"{e['platform']}: cgroup-confined host: all instances under one parent cgroup of "
                       f"{_mib(e['host_memory'])} (memory and memory+swap), on a host of {_mib(e['mem_total'])}.")
            if (cost := e.get("confined_memory_per_instance_bytes")) is not None:
                out.append(f"{e['platform']}: why the maximum is {e['max_count']}: at that count the confined host "
                           f"held {_mib(cost * e['max_count'])} at its peak during the workload, "
                           f"{_mib(cost)} per instance (each instance's own cgroup: "
                           f"{_mib(e['memory_per_instance_bytes'])} at idle; the rest is what the parent is charged "
                           f"beyond that, the workload's own memory included).")
        evidence = e["stop_evidence"]
        brief = {k: v for k, v in evidence.items() if k in ("oom_kills", "oom_counters", "limit", "reading",
                                                            "error", "failures", "total", "kernel_log")}
        out.append(f"{e['platform']}: stopped by {REASONS.get(e['stop_reason'], e['stop_reason'])}: "
                   f"{e['stop_detail']}" + (f"; evidence: {json.dumps(brief, default=str)[:600]}" if brief else ""))
    out.append("Health of a count: every instance started, every workload succeeded, no new OOM kill in any "
               "instance's or the parent's memory cgroup, aggregate throughput not below the collapse threshold, "
               "no more than starved_share (1 %, rounded down) of the instances without CPU in their window or "
               "far below the median (\"ok, N starved\" counts those few), "
               "host guard (MemAvailable, PSI memory) not tripped. Until-failure searches keep their fleet: it "
               "grows to the next count (instances started in parallel batches) and shrinks by its newest "
               "instances below a failed count; the maximum is then confirmed by a fresh fleet grown from empty "
               "(it must run, and 1 % above it must fail).")
    for e in entries:
        for c in (e.get("stop_evidence") or {}).get("confirmation", []):
            if c.get("within"):
                out.append(f"{_named(e)}: maximum {c.get('count')} confirmed within 1 % by a fresh fleet: "
                           f"{c.get('count')} failed, the same fleet ran {c.get('good')} and that is the maximum "
                           f"({c.get('seconds')} s)")
                continue
            verdict = ("confirmed" if c.get("agrees") else f"not confirmed ({c.get('why')})")
            out.append(f"{_named(e)}: maximum {c.get('count')} {verdict} by a fresh fleet: {c.get('count')} "
                       f"{'ran' if c.get('healthy') else 'failed'}" + (
                           f", {c.get('above')} {'failed' if c.get('above_failed') else 'ran'}"
                           if c.get("healthy") else "") + f" ({c.get('seconds')} s)")
        if e.get("duration_s") is not None:
            batches = e.get("start_batches") or []
            widest = max((b.get("size", 1) for b in batches), default=1)
            out.append(f"{_named(e)}: search took {e['duration_s'] / 60:.1f} min, {len(e.get('probes') or [])} counts "
                       f"measured, up to {widest} instances started at once")
    for e in entries:
        bad = [p["count"] for p in e["points"] if _unsynchronized(e, p)]
        if bad:
            out.append(f"{e['platform']}: warning: at counts {', '.join(map(str, bad))} the instances did not run "
                       f"together for {e.get('min_overlap') or 0.5:g} of the window (overlap marked !): their "
                       "aggregate is not a concurrent measurement.")
    if entries:
        out.append("Synchronised start: every instance sleeps until one start time inside the instance, then runs "
                   "the workload; start spread = last start minus first, overlap = share of the window "
                   "[first start, last end] during which all instances ran.")
        out.append("Memory per instance: mean cgroup usage of the instances at idle (before the workload); "
                   "MemAvailable drop: the host's MemAvailable before the first instance minus at that count, "
                   "divided by the count (other work on the host disturbs it).")
    return out


def build(store: Store, run: Run) -> Section | None:
    entries = density_data(store, run)
    if not entries:
        return None
    return Section(key="density", title="Density until failure", data=entries,
                   tables=[table(entries), points_table(entries)], figures=figures(entries), notes=notes(entries))

"""The `sizing` section of a density run's report: what one instance costs, and how many fit.

From each platform's ramp (model.py): memory per instance inside the confining cgroup (slope
and fixed part, with intervals), the host-side processes' memory outside the instances'
cgroups (PSS per instance), idle CPU per instance, start time per instance as the fleet grew;
then the advice: how many instances of this workload a confined host and a real host of a
given size hold above the guard's floor, with the model's assumptions in words, and for pods
the RuntimeClass `overhead.podFixed` that covers what was measured. Registered as a report
part (asked for every run; None unless the run is a density run with such data).
"""
from __future__ import annotations

from typing import Any

from ....report.figures import FigureSpec, Series
from ....report.model import Section, Table
from ....store.db import Store
from ....store.models import Run
from .. import model as M
from . import _named, density_data

HOST_SIZES = (1, 2, 4, 8, 16, 32, 64)
"""Real hosts (GiB) the advice is given for."""
ASSUMPTIONS = (
    "Sizing model: each cost is fitted against the count by least squares over the healthy counts of fleets "
    "grown from empty (95 % t intervals); memory inside the confining cgroup is its usage minus reclaimable page "
    "cache at idle.",
    "A search stopped by memory at N0 on a confined host of L0 calibrates the cost of one instance at the limit: "
    "c = (L0 - floor - fixed) / (N0 + 1/2), which adds what the workload needs to the idle slope; a host of L "
    "then holds (L - floor(L) - fixed) / c - 1/2 (the bracket N0..N0+1 gives the range).",
    "Assumed: the same workload, image and runtime; the per-instance cost does not change with the host's size; "
    "memory, not CPU, a kernel limit or the disk, is what runs out (a search stopped by another limit gives "
    "memory's ceiling only, and says which limit stopped it).",
    "A real host keeps the guard's floor (max(256 MiB, 10 % of its memory)) and also holds the host-side processes "
    "(shims, monitors, conmon, daemons) that a confined run leaves outside its parent; not counted: what the "
    "host's own system uses (subtract it from the host's memory).",
    "Columns: in cgroup = memory held inside the confining cgroup at idle; in workload = the parent's peak while "
    "the workload ran; host side = PSS of the platform's processes outside the instances' cgroups; idle mCPU = "
    "CPU of the instances at idle (thousandths of a CPU); start s = seconds per instance started, at the first "
    "and the last count. CPU is not modelled: a bigger host's instances share its CPUs too.",
)


def _mib(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v / M.MIB:.{digits}f} MiB"


def _slope(f: M.Fit | None, scale: float = M.MIB, digits: int = 2) -> str:
    """The per-instance part with its 95 % interval, in the column's unit."""
    if f is None:
        return "-"
    text = f"{f.slope / scale:.{digits}f}"
    return text + (f" [{f.slope_ci[0] / scale:.{digits}f}, {f.slope_ci[1] / scale:.{digits}f}]" if f.slope_ci else "")


def _fixed(f: M.Fit | None) -> str:
    return "-" if f is None else f"{f.intercept / M.MIB:.1f}"


def _calibration_overlap(entry: dict[str, Any], min_overlap: float) -> dict[str, Any] | None:
    """How the workloads ran at the count the model is calibrated on, when not together: then
    the CPUs, not only memory, set how much of the workload's memory was held at once."""
    point = next((p for p in entry.get("points", []) if p.get("ok") and p.get("count") == entry.get("max_count")), None)
    if point is None or point.get("overlap") is None or point["overlap"] >= min_overlap:
        return None
    return {"count": point["count"], "overlap": point["overlap"], "start_spread_s": point.get("start_spread_s")}


def platform_sizing(entry: dict[str, Any], guard: dict[str, Any]) -> dict[str, Any]:
    """The sizing data of one platform's search (the JSON entry)."""
    fits = M.costs(entry)
    inside = fits["memory_inside"]
    cal = M.calibrate(entry, inside, guard)
    limit = float(entry.get("host_memory") or 0)
    out: dict[str, Any] = {"platform": entry["platform"], "host": entry.get("host"), "stopped_by": M.stopped_by(entry),
                           "stop_reason": entry.get("stop_reason"), "max_count": entry.get("max_count"),
                           "points": len(M.model_points(entry.get("points", []))),
                           "costs": {k: f.public() if f else None for k, f in fits.items()}, "predictions": []}
    outside = fits["host_side_outside_parent"] or fits["host_side_pss"]
    host_side = outside.slope if outside is not None else 0.0
    if cal is not None:
        out["calibration"] = {"per_instance_bytes": cal.per_instance, "range_bytes": list(cal.range),
                              "fixed_bytes": cal.fixed, "measured_on_bytes": cal.measured_on,
                              "measured_max": cal.measured_max,
                              "not_together": _calibration_overlap(entry, float(entry.get("min_overlap") or 0.5))}
        for factor in (0.5, 1, 2, 4):
            size = limit * factor
            p = M.predict_confined(cal, size, guard)
            out["predictions"].append({"where": "confined host", "memory_bytes": size, "count": p["count"],
                                       "range": p["range"], "measured": entry["max_count"] if factor == 1 else None})
        per = cal.per_instance + host_side
        fixed = cal.fixed
    else:
        per_fit = fits["memory_peak"] if entry.get("confined") else inside
        per = (per_fit.slope if per_fit else 0.0) + host_side
        fixed = per_fit.intercept if per_fit else 0.0
        out["memory_ceiling_only"] = True
    if per > 0:
        for gib in HOST_SIZES:
            n = M.predict_host(per, max(0.0, fixed), gib * M.GIB, guard)
            out["predictions"].append({"where": "host", "memory_bytes": gib * M.GIB, "count": n})
        out["per_instance_bytes"] = per
    if entry.get("pod"):
        out["pod_overhead"] = M.pod_overhead(fits)
    return out


def _advice(e: dict[str, Any]) -> str:
    hosts = [p for p in e["predictions"] if p["where"] == "host"]
    if not hosts:
        return ""
    eight = next((p for p in hosts if p["memory_bytes"] == 8 * M.GIB), hosts[-1])
    bound = "" if e["stopped_by"] == "memory" else f" (memory's ceiling: this search was stopped by {e['stopped_by']})"
    return (f"{e['platform']}: on a host with {eight['memory_bytes'] / M.GIB:g} GiB, keeping the guard's floor, "
            f"about {eight['count']} instances of this workload fit{bound}, at {_mib(e.get('per_instance_bytes'))} "
            "per instance inside and outside its cgroup.")


def build(store: Store, run: Run) -> Section | None:
    if (run.campaign or {}).get("experiment") != "density":
        return None
    entries = [e for e in density_data(store, run) if e.get("max_count")]
    guard = ((run.campaign or {}).get("density") or {}).get("guard") or {}
    data = [platform_sizing(e, guard) for e in entries]
    data = [d for d in data if any(d["costs"].values())]
    if not data:
        return None
    by = {(d["host"], d["platform"]): d for d in data}
    cost_rows = []
    for e in entries:
        d = by.get((e.get("host"), e["platform"]))
        if d is None:
            continue
        c = M.costs(e)
        start = c["start_s_per_instance"]
        cost_rows.append([_named(e), d["stopped_by"], _slope(c["memory_inside"]), _fixed(c["memory_inside"]),
                          _slope(c["memory_peak"]), _slope(c["host_side_outside_parent"] or c["host_side_pss"]),
                          _slope(c["idle_cpu"], 1e-3, 1),
                          "-" if start is None else f"{start.at(start.x_range[0]):.2f}-{start.at(start.x_range[1]):.2f}",
                          d["points"]])
    pred_rows = [[d["platform"], p["where"], f"{p['memory_bytes'] / M.GIB:g} GiB", p["count"],
                  "-" if not p.get("range") else f"{p['range'][0]}-{p['range'][1]}",
                  "-" if p.get("measured") is None else p["measured"]]
                 for d in data for p in d["predictions"]]
    tables = [Table("What one instance costs: per instance [95 % interval], fixed part, fitted over the counts",
                    ["platform", "stopped by", "in cgroup MiB", "fixed MiB", "in workload MiB", "host side MiB",
                     "idle mCPU", "start s", "counts"], cost_rows, key_columns=1),
              Table("How many instances fit above the guard's floor",
                    ["platform", "host", "memory", "instances", "range", "measured"], pred_rows, key_columns=1)]
    pods = [[d["platform"], d["pod_overhead"]["memory"], d["pod_overhead"]["cpu"]]
            for d in data if d.get("pod_overhead")]
    if pods:
        tables.append(Table("RuntimeClass overhead.podFixed that covers what was measured",
                            ["platform", "memory", "cpu"], pods))
    notes = [a for d in data if (a := _advice(d))] + list(ASSUMPTIONS)
    for d in data:
        apart = (d.get("calibration") or {}).get("not_together")
        if apart:
            notes.append(f"{d['platform']}: at {apart['count']}, the count the model is calibrated on, the "
                         f"workloads did not run together (all running for {apart['overlap']:g} of the window, "
                         f"start spread {apart['start_spread_s']:.1f} s): the CPUs, not only memory, set how much of "
                         "the workload's memory was held at once, and a bigger confined host with the same CPUs "
                         "runs even fewer at once, so its counts above are lower bounds.")
        if d.get("memory_ceiling_only"):
            notes.append(f"{d['platform']}: stopped by {d['stopped_by']} ({d['stop_reason']}), not memory: "
                         "the counts above are memory's ceiling, the real limit is the one that stopped it.")
    return Section(key="sizing", title="Sizing advice", data=data, tables=tables, notes=notes,
                   figures=figures(entries, data))


def figures(entries: list[dict[str, Any]], data: list[dict[str, Any]]) -> list[FigureSpec]:
    """Memory inside the confining cgroup at idle against the count (points) with its fitted
    line (dashed), per platform."""
    series = []
    for e in entries:
        d = next((x for x in data if (x["host"], x["platform"]) == (e.get("host"), e["platform"])), None)
        fit = (d or {}).get("costs", {}).get("memory_inside")
        pts = M.model_points(e.get("points", []))
        key = "parent_held_idle" if e.get("confined") else None
        xs = [p["count"] for p in pts]
        ys = [((p.get("cost") or {}).get(key) if key else
               (p.get("memory_per_instance_bytes") or 0) * p["count"]) for p in pts]
        if not xs or fit is None:
            continue
        series.append(Series(_named(e), xs, [None if y is None else y / M.MIB for y in ys], style="points"))
        lo, hi = fit["x_range"]
        series.append(Series(f"{_named(e)} (fit)", [lo, hi],
                             [(fit["intercept"] + fit["slope"] * x) / M.MIB for x in (lo, hi)], style="dashed"))
    if not series:
        return []
    return [FigureSpec("sizing-memory", "count", "sizing: memory the instances hold at idle against the count",
                       "instances running", "memory held in the cgroup [MiB] (lower is better)", series,
                       group="sizing", note="points: healthy counts of fleets grown from empty; dashed: the fit")]

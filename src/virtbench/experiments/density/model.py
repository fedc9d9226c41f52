"""What one instance costs, fitted from a density ramp, and how many fit on another host.

Each healthy count measured by a fleet grown from empty (no shrink since: its readings are
not disturbed by what removed instances left) gives idle readings (costs.py). Against the
count, least squares gives each cost's per-instance part (slope) and fixed part (intercept),
with 95 % Student t intervals:
- memory inside the confining cgroup: the parent's usage minus its reclaimable page cache at
  idle (what the guard and a real host must keep), else (unconfined) the instances' own
  cgroups summed;
- the parent's peak during the workload;
- the host-side processes' PSS (shims, monitors, conmon, daemons) outside the instances'
  cgroups, all of it and the part outside the confining parent;
- idle CPU of the instances and of the host-side processes (CPU-seconds per second);
- the start time per instance as the fleet grows.

Sizing (`predict`): a confined host of L bytes keeps its floor F(L) (the guard's
`confined_min_available`: 10 % of L unless the campaign set it). Where the search was stopped
by memory at N0 on L0, the effective cost of one instance at the limit is
c = (L0 - F(L0) - fixed) / (N0 + 1/2) (the idle slope plus what the workload adds: the model is
calibrated on the measured failure, the bracket N0..N0+1 giving its interval), and
N(L) = (L - F(L) - fixed) / c - 1/2. Assumptions: the per-instance cost does not depend on the
host's size (no page sharing that grows with the count beyond what the fit saw), the same
workload, image and runtime, and memory the limit (not CPU, a kernel limit, or the disk).
A real host of M bytes keeps max(256 MiB, 10 % of M) available and holds the host-side
processes outside the parent too: N = (M - floor(M) - S - fixed) / (c + host side), S being
what the system itself uses. For pods, the RuntimeClass `overhead.podFixed` that covers one
instance's measured idle cost inside its cgroup and outside it, at the upper end of its interval.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ...analysis.stats import t_quantile

MIB = 1 << 20
GIB = 1 << 30
MEMORY_STOPS = ("oom", "guard")
"""Stop reasons that say memory was the limit (every guard threshold is a memory one)."""


@dataclass(frozen=True)
class Fit:
    """y = intercept + slope x by least squares, with 95 % t intervals (None below 3 points)."""

    slope: float
    intercept: float
    n: int
    slope_ci: tuple[float, float] | None = None
    intercept_ci: tuple[float, float] | None = None
    r2: float | None = None
    x_range: tuple[float, float] = (0.0, 0.0)

    def at(self, x: float) -> float:
        return self.intercept + self.slope * x

    def public(self) -> dict[str, Any]:
        return asdict(self)


def fit(xs: Sequence[float], ys: Sequence[float]) -> Fit | None:
    """Least squares of ys on xs; None with fewer than 2 distinct x."""
    pts = [(float(x), float(y)) for x, y in zip(xs, ys) if x is not None and y is not None]
    n = len(pts)
    if n < 2 or len({x for x, _ in pts}) < 2:
        return None
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    sxy = sum((x - mx) * (y - my) for x, y in pts)
    slope = sxy / sxx
    intercept = my - slope * mx
    resid = [y - (intercept + slope * x) for x, y in pts]
    sst = sum((y - my) ** 2 for _, y in pts)
    r2 = 1 - sum(r * r for r in resid) / sst if sst > 0 else 1.0
    slope_ci = intercept_ci = None
    if n >= 3:
        s2 = sum(r * r for r in resid) / (n - 2)
        q = t_quantile(0.975, n - 2)
        se_b = math.sqrt(s2 / sxx)
        se_a = math.sqrt(s2 * (1 / n + mx * mx / sxx))
        slope_ci = (slope - q * se_b, slope + q * se_b)
        intercept_ci = (intercept - q * se_a, intercept + q * se_a)
    xr = (min(x for x, _ in pts), max(x for x, _ in pts))
    return Fit(slope, intercept, n, slope_ci, intercept_ci, r2, xr)


def _fit_of(points: Sequence[dict[str, Any]], y: Any) -> Fit | None:
    xs, ys = [], []
    for p in points:
        v = y(p)
        if v is not None:
            xs.append(p["count"])
            ys.append(v)
    return fit(xs, ys)


def model_points(points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The healthy counts of fleets grown from empty (cost readings present and undisturbed)."""
    return [p for p in points if p.get("ok") and (p.get("cost") or {}).get("fleet_grown") == 1.0]


def costs(entry: dict[str, Any]) -> dict[str, Fit | None]:
    """Each cost of one platform's search against the count (see the module docstring)."""
    pts = model_points(entry.get("points", []))

    def cost(key: str) -> Any:
        return lambda p: (p.get("cost") or {}).get(key)

    inside = _fit_of(pts, cost("parent_held_idle")) if entry.get("confined") else None
    if inside is None:  # unconfined: the instances' own cgroups, summed
        inside = _fit_of(pts, lambda p: None if p.get("memory_per_instance_bytes") is None
                         else p["memory_per_instance_bytes"] * p["count"])
    return {"memory_inside": inside,
            "memory_peak": _fit_of(pts, lambda p: p.get("parent_memory_peak_bytes")),
            "host_side_pss": _fit_of(pts, cost("host_side_pss")),
            "host_side_outside_parent": _fit_of(pts, cost("host_side_pss_outside_parent")),
            "idle_cpu": _fit_of(pts, cost("idle_cpu")),
            "host_side_idle_cpu": _fit_of(pts, cost("host_side_idle_cpu")),
            "start_s_per_instance": _fit_of(pts, cost("start_s_per_instance"))}


def stopped_by(entry: dict[str, Any]) -> str:
    """Which limit ended the search: memory, cpu, a kernel limit, the disk, or none."""
    reason = entry.get("stop_reason")
    if reason in MEMORY_STOPS:
        return "memory"
    if reason == "start_failure":
        limit = str((entry.get("stop_evidence") or {}).get("limit") or "")
        return "memory" if limit.startswith("memory") else "start"
    return {"cpu_starvation": "cpu", "throughput_collapse": "cpu", "kernel_limit": "kernel_limit",
            "disk_full": "disk", "workload_failure": "workload"}.get(str(reason), "none")


def confined_floor(limit: float, guard: dict[str, Any]) -> float:
    """The guard's floor of a confined host of `limit` bytes: as the campaign set it, else 10 %."""
    set_to = guard.get("confined_min_available")
    return float(set_to) if set_to is not None else limit / 10


def host_floor(memory: float, guard: dict[str, Any]) -> float:
    set_to = guard.get("min_available")
    return float(set_to) if set_to is not None else max(128 * MIB, max(256 * MIB, memory / 10))


@dataclass(frozen=True)
class Calibration:
    """The effective cost of one instance at the limit, from the measured failure."""

    per_instance: float
    range: tuple[float, float]
    fixed: float
    measured_on: float
    measured_max: int


def calibrate(entry: dict[str, Any], inside: Fit | None, guard: dict[str, Any]) -> Calibration | None:
    """c = (L0 - F(L0) - fixed) / (N0 + 1/2), N0..N0+1 as its range; None unless a confined
    search stopped by memory at a count above 0."""
    limit, n0 = entry.get("host_memory"), int(entry.get("max_count") or 0)
    if not entry.get("confined") or not limit or n0 < 1 or stopped_by(entry) != "memory":
        return None
    fixed = inside.intercept if inside is not None else 0.0
    room = limit - confined_floor(limit, guard) - fixed
    if room <= 0:
        return None
    return Calibration(room / (n0 + 0.5), (room / (n0 + 1), room / n0), fixed, float(limit), n0)


def predict_confined(cal: Calibration, limit: float, guard: dict[str, Any]) -> dict[str, Any]:
    """How many instances a confined host of `limit` bytes holds, by the calibrated model."""
    room = limit - confined_floor(limit, guard) - cal.fixed

    def n(c: float) -> int:
        return max(0, math.floor(room / c - 0.5)) if c > 0 else 0
    return {"host_memory": limit, "count": n(cal.per_instance), "range": [n(cal.range[1]), n(cal.range[0])]}


def predict_host(per_instance: float, fixed: float, memory: float, guard: dict[str, Any],
                 system: float = 0.0) -> int:
    """Instances a real host of `memory` bytes holds above its guard floor (system: what the
    host's own system uses besides)."""
    room = memory - host_floor(memory, guard) - system - fixed
    return max(0, math.floor(room / per_instance)) if per_instance > 0 else 0


def pod_overhead(fits: dict[str, Fit | None]) -> dict[str, str] | None:
    """RuntimeClass `overhead.podFixed` covering one instance's idle cost inside its cgroup and
    outside it (host side), each at the upper end of its 95 % interval; None without a fit."""
    inside = fits.get("memory_inside")
    if inside is None:
        return None
    outside = fits.get("host_side_outside_parent") or fits.get("host_side_pss")

    def upper(f: Fit | None) -> float:
        if f is None:
            return 0.0
        return max(f.slope, f.slope_ci[1] if f.slope_ci else f.slope)
    memory = upper(inside) + upper(outside)
    cpu = upper(fits.get("idle_cpu")) + upper(fits.get("host_side_idle_cpu"))
    return {"memory": f"{max(1, math.ceil(memory / MIB))}Mi", "cpu": f"{max(1, math.ceil(cpu * 1000))}m"}

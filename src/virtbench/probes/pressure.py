"""pressure: host and per-instance CPU, memory and I/O pressure as a time series (10 Hz).

Each reading: host CPU utilisation since the previous reading (/proc/stat), MemAvailable,
and the share of the interval in which tasks stalled on cpu, memory and io (PSI `some`,
from the delta of the cumulative `total` counters, exact where the avg10 figures are
smoothed over 10 s); for the instance (when its platform gives a host pid): cgroup memory
and its CPU use in cores; over the whole execution, the instance's CPU quota with the CPU time
and the CFS throttling its cgroup counted (whether a `cpus` limit held and acted, read from the
kernel). Reports use it for drift and noisy-neighbour warnings, and the
density experiment's host guard reads the same `PressureReader`.
"""
from __future__ import annotations

import os
from typing import Any

from pydantic import Field

from ..platforms import cpustat
from .base import Availability, ProbeData, ProbeOptions, SamplingProbe, Target
from .hostpressure import PSI_RESOURCES, CpuTimes, PressureReader

COLUMNS = ("t", "host_cpu", "mem_available", "psi_cpu", "psi_memory", "psi_io", "inst_cpu", "inst_memory")
"""t [s since start]; host_cpu [0..1 of all CPUs]; mem_available [bytes]; psi_* [% of the
interval with some task stalled]; inst_cpu [cores]; inst_memory [bytes] (None when unknown)."""


class PressureOptions(ProbeOptions):
    interval: float = Field(0.1, ge=0.02, le=60, description="seconds between readings (0.1 = 10 Hz)")


class Pressure(SamplingProbe):
    name = "pressure"
    description = "host and instance CPU, memory and I/O pressure (PSI, MemAvailable, cgroup usage) over time"
    stores = "a time series per execution: " + ", ".join(COLUMNS)
    Options = PressureOptions

    def __init__(self, options: PressureOptions | None = None, reader: PressureReader | None = None) -> None:
        super().__init__(options)
        self.interval = self.options.interval  # type: ignore[attr-defined]
        self.reader = reader or PressureReader()

    @classmethod
    def available(cls) -> Availability:
        r = PressureReader()
        if r.cpu_times() is None:
            return Availability(False, "no /proc/stat")
        if not r.psi_available():
            return Availability(True, "works without PSI (kernel without CONFIG_PSI or booted psi=0): "
                         "CPU and memory only", "boot with psi=1 for stall times")
        return Availability(True, "PSI, /proc/stat and cgroup usage readable")

    def begin(self, target: Target) -> None:
        self.rows: list[list[Any]] = []
        self.ncpu = os.cpu_count() or 1
        self.files = self.reader.usage_files(target.pids[0]) if target.pids else None
        self.cpu_cgroup = cpustat.cgroup_of(target.pids[0]) if target.pids else None
        self.cpu_before = cpustat.read(self.cpu_cgroup) if self.cpu_cgroup else None
        self.prev = self._raw()
        self.began = self.prev[0]

    def _raw(self) -> tuple[float, CpuTimes | None, dict[str, int], int | None, int | None]:
        psi = {r: p.some_total_us for r in PSI_RESOURCES if (p := self.reader.psi(r)) is not None}
        mem, inst_cpu = self.files.read() if self.files else (None, None)
        return self.now(), self.reader.cpu_times(), psi, inst_cpu, mem

    def sample(self) -> None:
        t, cpu, psi, inst_cpu, mem = raw = self._raw()
        t0, cpu0, psi0, inst_cpu0, _ = self.prev
        self.prev = raw
        dt = t - t0
        if dt <= 0:
            return
        stall = {r: round(min(100.0, (psi[r] - psi0[r]) / (dt * 1e4)), 3) if r in psi and r in psi0 else None
                 for r in PSI_RESOURCES}
        self.rows.append([
            round(t, 4),
            _round(cpu.utilisation_since(cpu0)) if cpu and cpu0 else None,  # None: no clock tick passed
            self.reader.mem_available(),
            stall["cpu"], stall["memory"], stall["io"],
            round((inst_cpu - inst_cpu0) / (dt * 1e9), 4) if inst_cpu is not None and inst_cpu0 is not None else None,
            mem,
        ])

    def finish(self) -> ProbeData:
        self.sample()  # the last partial interval
        data = {"columns": list(COLUMNS), "rows": self.rows, "interval": self.interval, "cpus": self.ncpu,
                "instance": ("cgroup of pid " + str(self.target.pids[0])) if self.target.pids else
                "not available for this platform (no host pid of the instance)",
                "summary": summarize(self.rows), "errors": self.errors}
        if self.cpu_cgroup and self.cpu_before is not None:
            data["cpu_limit"] = cpu_limit(self.cpu_cgroup, self.cpu_before, self.now() - self.began)
        if not self.rows:
            return ProbeData.failed("no reading taken" + (f": {self.errors[0]}" if self.errors else ""), **data)
        return ProbeData("ok", data)


def cpu_limit(cgroup: str, before: cpustat.CpuReading, seconds: float) -> dict[str, Any]:
    """The instance's CPU quota and what its cgroup counted over the execution: CPU-seconds per
    second, CFS periods and how many were throttled (whether a `cpus` limit held, and acted)."""
    d = cpustat.read(cgroup).since(before)
    per_s = cpustat.rate(d, seconds, cpustat.period_s(cgroup))
    return {"cgroup": cgroup, "quota_cpus": cpustat.quota(cgroup), "seconds": round(seconds, 3),
            "cpu_per_s": None if per_s is None else round(per_s, 4), **d.as_dict()}


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 4)


def summarize(rows: list[list[Any]]) -> dict[str, Any]:
    """Mean and max of each column, and the worst stall: what a report warns about."""
    out: dict[str, Any] = {"readings": len(rows)}
    for i, col in enumerate(COLUMNS[1:], 1):
        values = [r[i] for r in rows if r[i] is not None]
        if values:
            out[col] = {"mean": sum(values) / len(values), "max": max(values), "min": min(values)}
    return out

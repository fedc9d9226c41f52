"""CPU time and CFS throttling of a cgroup, as the kernel counts them.

What proves a CPU limit held is the cgroup's own accounting, not a benchmark's throughput
(on a VM whose second vCPU adds little, a quota of one CPU barely changes throughput although
it holds): cgroup v1 `cpuacct.usage` (ns) and `cpu.stat` (`nr_periods`, `nr_throttled`,
`throttled_time` ns), cgroup v2 `cpu.stat` (`usage_usec`, `nr_periods`, `nr_throttled`,
`throttled_usec`). Paths are relative to the hierarchy's root, as /proc/PID/cgroup gives them.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import cgroups


@dataclass(frozen=True)
class CpuReading:
    """One reading of a cgroup's CPU counters (None: the counter is not there)."""

    usage_ns: int | None
    periods: int | None = None
    throttled_periods: int | None = None
    throttled_ns: int | None = None

    def since(self, before: CpuReading) -> CpuReading:
        """The counters' growth from `before` to this reading."""
        def d(a: int | None, b: int | None) -> int | None:
            return None if a is None or b is None else a - b
        return CpuReading(d(self.usage_ns, before.usage_ns), d(self.periods, before.periods),
                          d(self.throttled_periods, before.throttled_periods), d(self.throttled_ns, before.throttled_ns))

    def as_dict(self) -> dict[str, int | None]:
        return {"usage_ns": self.usage_ns, "periods": self.periods, "throttled_periods": self.throttled_periods,
                "throttled_ns": self.throttled_ns}


def _dir(controller: str, relative: str) -> Path:
    rel = relative.strip("/")
    return cgroups.root() / rel if cgroups.is_v2() else cgroups.root() / controller / rel


def _stat(path: Path) -> dict[str, int]:
    try:
        text = path.read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            out[key] = int(value)
    return out


def read(relative: str) -> CpuReading:
    """The CPU time a cgroup (and everything below it) used, and its throttling."""
    if cgroups.is_v2():
        st = _stat(_dir("", relative) / "cpu.stat")
        used, throttled = st.get("usage_usec"), st.get("throttled_usec")
        return CpuReading(None if used is None else used * 1000, st.get("nr_periods"), st.get("nr_throttled"),
                          None if throttled is None else throttled * 1000)
    usage: int | None
    try:
        usage = int(((_dir("cpuacct", relative)) / "cpuacct.usage").read_text().strip())
    except (OSError, ValueError):
        usage = None
    st = _stat(_dir("cpu", relative) / "cpu.stat")
    return CpuReading(usage, st.get("nr_periods"), st.get("nr_throttled"), st.get("throttled_time"))


def _bandwidth(relative: str) -> tuple[int | None, int] | None:
    """(quota µs or None for unlimited, period µs) of a cgroup; None when not readable."""
    try:
        if cgroups.is_v2():
            q, p = (_dir("", relative) / "cpu.max").read_text().split()[:2]
            return (None if q == "max" else int(q)), int(p)
        qi = int((_dir("cpu", relative) / "cpu.cfs_quota_us").read_text())
        pi = int((_dir("cpu", relative) / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return (None if qi < 0 else qi), pi


def quota(relative: str) -> float | None:
    """The cgroup's CFS quota in CPUs (None: unlimited or not readable)."""
    bw = _bandwidth(relative)
    return None if bw is None or bw[0] is None else bw[0] / bw[1]


def period_s(relative: str) -> float | None:
    """The cgroup's CFS period in seconds (the window its quota is enforced over)."""
    bw = _bandwidth(relative)
    return None if bw is None else bw[1] / 1e6


def rate(d: CpuReading, seconds: float, period: float | None) -> float | None:
    """CPU-seconds per second of a cgroup over a load: with a quota, over the CFS periods in
    which it had runnable tasks (those its quota is enforced in: exactly the quota's measure,
    not diluted by the idle time around the load), else over `seconds`."""
    if d.usage_ns is None:
        return None
    if d.periods and period:
        return d.usage_ns / 1e9 / (d.periods * period)
    return d.usage_ns / 1e9 / seconds if seconds > 0 else None


def cgroup_of(pid: int) -> str | None:
    """The CPU cgroup (relative path) of a process: v2 the unified one, v1 the cpuacct one."""
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return None
    v2 = cgroups.is_v2()
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        if (v2 and controllers == "") or (not v2 and "cpuacct" in controllers.split(",")):
            return path
    return None


def process_cpu_ns(pid: int) -> int | None:
    """CPU time (user + system) a process has used so far, from /proc/PID/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK")

"""Host memory pressure, read from /proc: MemAvailable and PSI memory.

MemAvailable is the kernel's own estimate of what can be allocated without swapping; PSI
(`/proc/pressure/memory`, Linux >= 4.20 with psi enabled) says how much of the time tasks
stalled on memory. Together they tell a guard that the host is about to suffer before the
OOM killer or a hang does. Kept small and dependency-free so any part (density's host guard,
probes) can read it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

MEMINFO = Path("/proc/meminfo")
PSI_MEMORY = Path("/proc/pressure/memory")


@dataclass(frozen=True)
class Pressure:
    """One reading; PSI fields are None where the kernel has no PSI."""

    time: float
    mem_total: int
    mem_available: int
    psi_some_avg10: float | None = None
    psi_full_avg10: float | None = None
    psi_some_total_us: int | None = None

    def as_dict(self) -> dict[str, float | int | None]:
        return {"t": round(self.time, 3), "mem_available": self.mem_available,
                "psi_some_avg10": self.psi_some_avg10, "psi_full_avg10": self.psi_full_avg10}


def meminfo(path: Path = MEMINFO) -> dict[str, int]:
    """/proc/meminfo in bytes."""
    out = {}
    for line in path.read_text().splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            out[key] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return out


def parse_psi(text: str) -> dict[str, dict[str, float]]:
    """'some avg10=0.00 avg60=0.00 avg300=0.00 total=0' lines -> {'some': {'avg10': 0.0, ...}}."""
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        kind, *fields = line.split()
        out[kind] = {k: float(v) for k, v in (f.split("=", 1) for f in fields)}
    return out


def psi_available(path: Path = PSI_MEMORY) -> bool:
    try:
        path.read_text()
        return True
    except OSError:  # absent, or psi=0 on the kernel command line (EOPNOTSUPP)
        return False


def read(meminfo_path: Path = MEMINFO, psi_path: Path = PSI_MEMORY) -> Pressure:
    mem = meminfo(meminfo_path)
    some = full = None
    total = None
    try:
        psi = parse_psi(psi_path.read_text())
        some, full = psi["some"]["avg10"], psi.get("full", {}).get("avg10")
        total = int(psi["some"]["total"])
    except (OSError, KeyError, ValueError):
        pass
    return Pressure(time=time.time(), mem_total=mem["MemTotal"], mem_available=mem["MemAvailable"],
                    psi_some_avg10=some, psi_full_avg10=full, psi_some_total_us=total)

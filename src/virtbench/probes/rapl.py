"""Intel/AMD RAPL energy counters through /sys/class/powercap.

Zones: `intel-rapl:N` is a package (or `psys`, the whole platform on recent laptops and
desktops); `intel-rapl:N:M` are its sub-zones (core, uncore, dram). core and uncore are
inside their package, and psys contains the packages, so the total is the packages plus
any dram zones (dram is outside the package domain); psys is kept as its own figure and
never added. Counters wrap at `max_energy_range_uj`: a reading below the previous one is a
wrap, corrected by adding the range and counted in the quality record. `energy_uj` is
readable by root only since Linux 5.10 (CVE-2020-8694, the PLATYPUS power side channel).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

POWERCAP = "sys/class/powercap"


@dataclass(frozen=True)
class Zone:
    path: Path
    name: str
    """package-0, core, uncore, dram, psys."""
    id: str
    """intel-rapl:0:1"""
    max_range_uj: int

    @property
    def nested(self) -> bool:
        return self.id.count(":") >= 2

    @property
    def summed(self) -> bool:
        """Counted in the total: top-level packages and dram (never psys, core or uncore)."""
        return (not self.nested and self.name.startswith("package")) or self.name.startswith("dram")


class RaplError(Exception):
    """RAPL cannot be read here; the message says why (and the probe stores it)."""


def zones(root: Path | str = "/") -> list[Zone]:
    base = Path(root) / POWERCAP
    if not base.is_dir():
        raise RaplError("no /sys/class/powercap: no RAPL driver (not an Intel/AMD CPU with RAPL, "
                        "intel_rapl not loaded, or a VM that does not pass RAPL through)")
    out = []
    for d in sorted(base.iterdir()):
        if not (d / "energy_uj").exists() or not d.name.startswith(("intel-rapl", "amd-rapl")):
            continue
        try:
            name = (d / "name").read_text().strip()
            max_range = int((d / "max_energy_range_uj").read_text())
        except (OSError, ValueError) as exc:
            raise RaplError(f"cannot read RAPL zone {d.name}: {exc}") from None
        out.append(Zone(d, name, d.name, max_range))
    if not out:
        raise RaplError("/sys/class/powercap has no RAPL zone (intel-rapl:*)")
    return out


def read(zone_list: list[Zone]) -> dict[str, int]:
    """One reading of every zone's counter (µJ)."""
    out = {}
    for z in zone_list:
        try:
            out[z.id] = int((z.path / "energy_uj").read_text())
        except PermissionError:
            raise RaplError("RAPL energy_uj is readable by root only (since Linux 5.10, CVE-2020-8694)") from None
        except (OSError, ValueError) as exc:
            raise RaplError(f"cannot read {z.path / 'energy_uj'}: {exc}") from None
    return out


def delta_uj(before: int, after: int, max_range_uj: int) -> tuple[int, bool]:
    """Energy between two readings of one counter, and whether it wrapped in between.

    Correct as long as the counter wraps at most once between the readings, which is why
    the probe keeps reading during the execution (a package at 200 W wraps a 262 J range
    every ~20 min; a 2^32 µJ counter every ~20 s at 200 W)."""
    if after >= before:
        return after - before, False
    return after + max_range_uj - before, True

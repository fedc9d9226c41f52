"""The host guard of a density experiment: the host must never go down.

Before each additional instance and every `interval` seconds while the workload runs, the
guard reads MemAvailable and PSI memory (`probes.hostpressure`). When MemAvailable falls below
`min_available` or the share of time tasks stalled on memory (PSI avg10) exceeds
`max_psi_some` / `max_psi_full`, it trips: density stops adding instances, stops the
workload (the instances are killed) and cleans up, and the trip with its readings is the
stop reason. Defaults are safe on a 2 GB board and a 24 GB server alike:

- min_available: max(256 MiB, 10 % of MemTotal), and never below 128 MiB;
- max_psi_some: 40 (% of the last 10 s some task waited for memory);
- max_psi_full: 10 (% of the last 10 s all non-idle tasks waited: the host is thrashing).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from ..platforms.base import Size
from ..probes.hostpressure import PressureReader

MIB = 1 << 20


@dataclass(frozen=True)
class Pressure:
    """One reading of the host; PSI fields are None where the kernel has no PSI."""

    time: float
    mem_total: int
    mem_available: int
    psi_some_avg10: float | None = None
    psi_full_avg10: float | None = None

    def as_dict(self) -> dict[str, float | int | None]:
        return {"t": round(self.time, 3), "mem_available": self.mem_available,
                "psi_some_avg10": self.psi_some_avg10, "psi_full_avg10": self.psi_full_avg10}


def read_host(reader: PressureReader | None = None) -> Pressure:
    """MemTotal, MemAvailable and PSI memory, through the probes' pressure reader."""
    reader = reader or PressureReader()
    mem = reader.memory()
    psi = reader.psi("memory")
    return Pressure(time=time.time(), mem_total=mem["MemTotal"], mem_available=mem["MemAvailable"],
                    psi_some_avg10=psi.some_avg10 if psi else None, psi_full_avg10=psi.full_avg10 if psi else None)


class GuardSettings(BaseModel):
    """The `guard:` key of a density section (every field optional)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = Field(True, description="watch the host; off only with a count limit and host_memory")
    min_available: Size | None = Field(
        None, description="trip when MemAvailable falls below this (default max(256M, 10% of MemTotal))")
    max_psi_some: float = Field(40.0, ge=0, le=100, description="trip when PSI memory some avg10 exceeds this %")
    max_psi_full: float = Field(10.0, ge=0, le=100, description="trip when PSI memory full avg10 exceeds this %")
    interval: float = Field(0.5, gt=0.05, le=10, description="seconds between readings while the workload runs")


@dataclass
class Trip:
    """Why the guard tripped, with the reading that crossed the threshold."""

    reason: str
    reading: dict
    threshold: dict


@dataclass
class Guard:
    settings: GuardSettings
    read: Callable[[], Pressure] = read_host
    series: list[dict] = field(default_factory=list)
    trip: Trip | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def min_available(self, mem_total: int) -> int:
        if self.settings.min_available is not None:
            return self.settings.min_available
        return max(128 * MIB, max(256 * MIB, mem_total // 10))

    def thresholds(self, mem_total: int) -> dict:
        return {"min_available": self.min_available(mem_total), "max_psi_some": self.settings.max_psi_some,
                "max_psi_full": self.settings.max_psi_full}

    def check(self, when: str) -> Trip | None:
        """One reading; records and returns a Trip when a threshold is crossed."""
        if not self.settings.enabled:
            return None
        r = self.read()
        reading = {**r.as_dict(), "when": when}
        self.series.append(reading)
        limits = self.thresholds(r.mem_total)
        why = None
        if r.mem_available < limits["min_available"]:
            why = (f"MemAvailable {r.mem_available / MIB:.0f} MiB below {limits['min_available'] / MIB:.0f} MiB "
                   f"({when})")
        elif r.psi_full_avg10 is not None and r.psi_full_avg10 > self.settings.max_psi_full:
            why = f"PSI memory full avg10 {r.psi_full_avg10:.1f}% above {self.settings.max_psi_full:g}% ({when})"
        elif r.psi_some_avg10 is not None and r.psi_some_avg10 > self.settings.max_psi_some:
            why = f"PSI memory some avg10 {r.psi_some_avg10:.1f}% above {self.settings.max_psi_some:g}% ({when})"
        if why is None:
            return None
        self.trip = Trip(why, reading, limits)  # the latest: a later probe must not see an old trip
        return self.trip

    def wait_calm(self, seconds: float = 120.0, sleep: float = 2.0) -> bool:
        """Before a fresh probe: wait until no threshold is crossed (PSI averages decay over
        tens of seconds after a trip), at most `seconds`; False if the host stays pressed."""
        deadline = time.monotonic() + seconds
        while self.check("settling before a probe") is not None:
            if time.monotonic() > deadline:
                return False
            time.sleep(sleep)
        return True

    def watch(self, on_trip: Callable[[Trip], None], when: str) -> None:
        """Read every `interval` in a thread until `stop_watching`; call on_trip once."""
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(self.settings.interval):
                trip = self.check(when)
                if trip is not None:
                    on_trip(trip)
                    return

        self._thread = threading.Thread(target=loop, name="density-guard", daemon=True)
        self._thread.start()

    def stop_watching(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

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

With `host_memory:` the instances live in a confining parent cgroup: a *confined host* of that
size. The guard then watches two hosts.

The confined host is judged by the same rules as a real host of its size, because a real
1 GiB board in the state the parent reaches (memory full, reclaim stalling everything, no OOM
kill) is exactly what the guard exists to catch before it falls over (a run of 480 LXC
instances in 1 GiB sat at the limit for minutes, starving every workload, without an OOM):

- its available memory: the limit minus what reclaim cannot give back (usage minus the page
  cache on the file LRU lists, memory.stat), against `confined_min_available` (default 10 % of
  the limit: the real host's 256 MiB minimum is for its own system, which lives outside);
- its stalls, while it is at (or within the last `RECENT` seconds was at) `NEAR_LIMIT` of its
  limit: cgroup v2 its own `memory.pressure`; cgroup v1 has no per-cgroup PSI, so the host's
  PSI is attributed to it then (on a shared host another workload's stall in that moment would
  be blamed on it: the safe side). Against `max_psi_some` / `max_psi_full`. An instance
  thrashing inside its own limit while the parent is far from its limit is not the confined
  host thrashing: not judged as such.

`confined: false` judges the real host only: the confined host then runs into its limit and
the kernel's OOM killer (or thrashing: a starvation or collapse stop) ends the search.

The real host's stalls the instances cause must not trip it, yet host-wide PSI counts
them too. So the guard judges PSI of the host *outside* the parent: on cgroup v2 the
host's avg10 minus the parent's own `memory.pressure`; on cgroup v1 (no per-cgroup PSI) a
host-wide stall is put down to the parent when the parent is near its limit (usage at least
`NEAR_LIMIT` of it) or a memory limit in its subtree (its own, or an instance's own limit) was
hit within the last `RECENT` seconds (PSI avg10 decays over about that long), while the
host's MemAvailable is still at least twice the floor; otherwise, with that much MemAvailable,
only PSI `full` is judged (`some` cannot be attributed on v1: refaults of pages a reclaim of
the parent evicted count as stalls too; `full` means nothing on the host progressed). The
MemAvailable floor itself is judged as before: the host stays protected.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ...platforms.base import Size
from ...probes.hostpressure import PressureReader

MIB = 1 << 20
NEAR_LIMIT = 0.9
"""A confined parent using this share of its limit is pressed by its own limit (cgroup v1)."""
RECENT = 30.0
"""Seconds after the parent last hit its limit during which a host-wide stall is its doing (v1)."""


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


@dataclass(frozen=True)
class ParentPressure:
    """The confining parent's memory: usage and limit, and its own PSI where the kernel has it (v2)."""

    usage: int | None
    limit: int
    psi_some_avg10: float | None = None
    psi_full_avg10: float | None = None
    reclaimable: int | None = None
    """Page cache on the subtree's file LRU lists (memory.stat): what reclaim can give back."""
    failcnt: int | None = None
    """How often a memory limit was hit in the parent's subtree: its own or an instance's
    (v1 memory.failcnt summed, v2 memory.events `max`): either stalls the experiment's tasks."""
    hits: Callable[[], int | None] | None = field(default=None, compare=False, repr=False)
    """Reads `failcnt` when it is needed (the reading walks every cgroup of the subtree: with
    1024 LXC instances about 3000 directories, far too slow under the thrash the guard must
    stop, so the cheap readings decide first)."""
    peak: int | None = None
    """v1 memory.max_usage_in_bytes: the highest usage since the workload window began (the
    fleet resets it then). This kernel's v1 failcnt stays 0 at the limit; the peak does not."""

    @property
    def near_limit(self) -> bool:
        return self.usage is not None and self.usage >= NEAR_LIMIT * self.limit

    @property
    def peaked(self) -> bool:
        """The peak reached the limit's neighbourhood (usage may have been reclaimed since)."""
        return self.peak is not None and self.peak >= NEAR_LIMIT * self.limit

    @property
    def available(self) -> int | None:
        """The confined host's MemAvailable: its limit minus what reclaim cannot give back."""
        if self.usage is None:
            return None
        return max(0, self.limit - max(0, self.usage - (self.reclaimable or 0)))

    def as_dict(self) -> dict[str, float | int | None]:
        return {"usage": self.usage, "limit": self.limit, "reclaimable": self.reclaimable, "psi_some_avg10": self.psi_some_avg10,
                "psi_full_avg10": self.psi_full_avg10, "failcnt": self.failcnt, "peak": self.peak}


def read_parent(relative: str, limit: int) -> ParentPressure:
    """A confining parent's usage and (cgroup v2) its own memory.pressure."""
    from ...platforms import cgroups
    from ...probes.hostpressure import parse_psi

    psi = None
    if cgroups.is_v2():
        try:
            psi = parse_psi((cgroups.memory_dir(relative) / "memory.pressure").read_text())
        except (OSError, ValueError):
            psi = None
    return ParentPressure(cgroups.memory_usage(relative), limit, psi.some_avg10 if psi else None,
                          psi.full_avg10 if psi else None, cgroups.memory_reclaimable(relative), None,
                          lambda: cgroups.limit_hits(relative),
                          None if psi is not None else cgroups.memory_peak(relative))


class GuardSettings(BaseModel):
    """The `guard:` key of a density section (every field optional)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = Field(True, description="watch the host; off only with a count limit and host_memory")
    min_available: Size | None = Field(
        None, description="trip when MemAvailable falls below this (default max(256M, 10% of MemTotal))")
    max_psi_some: float = Field(40.0, ge=0, le=100, description="trip when PSI memory some avg10 exceeds this %")
    max_psi_full: float = Field(10.0, ge=0, le=100, description="trip when PSI memory full avg10 exceeds this %")
    confined: bool = Field(True, description="with host_memory: judge the confined host as a host of "
                           "that size too (its available memory, its stalls at its limit)")
    confined_min_available: Size | None = Field(
        None, description="with host_memory: trip when the confined host's available memory (limit minus "
        "unreclaimable usage) falls below this (default 10% of host_memory)")
    interval: float = Field(0.5, gt=0.05, le=10, description="seconds between readings while the workload runs")
    calm_wait: float = Field(120.0, ge=0, le=3600, description="seconds a probe waits, before its first instance, "
                             "for a host pressed by what ran before to calm down (PSI's 10 s average decays over "
                             "tens of seconds); still pressed then, the probe stops saying so")


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
    parent: Callable[[], ParentPressure] | None = None
    """The confining parent's reader (host_memory): its own stalls are not the host's."""
    series: list[dict] = field(default_factory=list)
    trip: Trip | None = None
    _near_seen: float = float("-inf")
    """When the guard last saw the parent near its limit (monotonic seconds)."""
    _parent_hits: tuple[int, float] | None = None
    """The parent's last limit-hit count and when it last rose (monotonic seconds)."""
    _window: bool = False
    """A workload window is open (watch): the parent's peak belongs to it."""
    costliest: int = 0
    """The most memory one instance's start took that reclaim cannot give back (bytes)."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def min_available(self, mem_total: int) -> int:
        if self.settings.min_available is not None:
            return self.settings.min_available
        return max(128 * MIB, max(256 * MIB, mem_total // 10))

    def confined_min_available(self, limit: int) -> int:
        if self.settings.confined_min_available is not None:
            return self.settings.confined_min_available
        return limit // 10

    def thresholds(self, mem_total: int, limit: int | None = None) -> dict:
        """The thresholds; with a confining parent's `limit` (and `confined` on) the confined host's too."""
        out: dict[str, Any] = {"min_available": self.min_available(mem_total),
                               "max_psi_some": self.settings.max_psi_some, "max_psi_full": self.settings.max_psi_full}
        if limit is not None and self.settings.confined:
            out["confined_min_available"] = self.confined_min_available(limit)
        return out

    def check(self, when: str) -> Trip | None:
        """One reading; records and returns a Trip when a threshold is crossed."""
        if not self.settings.enabled:
            return None
        r = self.read()
        reading: dict[str, Any] = {**r.as_dict(), "when": when}
        self.series.append(reading)
        p = self.parent() if self.parent is not None else None
        if p is not None:
            reading["parent"] = p.as_dict()
            reading["parent_at_limit_recently"] = self._at_limit(p)
        limits = self.thresholds(r.mem_total, p.limit if p is not None else None)
        why = None
        if r.mem_available < limits["min_available"]:
            why = (f"MemAvailable {r.mem_available / MIB:.0f} MiB below {limits['min_available'] / MIB:.0f} MiB "
                   f"({when})")
        elif p is not None and "confined_min_available" in limits:
            why = self._confined(r, p, limits["confined_min_available"], reading, when)
        if why is None and r.mem_available >= limits["min_available"]:
            some, full = self._outside(r, p, limits["min_available"], reading)
            if full is not None and full > self.settings.max_psi_full:
                why = f"PSI memory full avg10 {full:.1f}% above {self.settings.max_psi_full:g}% ({when})"
            elif some is not None and some > self.settings.max_psi_some:
                why = f"PSI memory some avg10 {some:.1f}% above {self.settings.max_psi_some:g}% ({when})"
        if why is None:
            return None
        self.trip = Trip(why, reading, limits)  # the latest: a later probe must not see an old trip
        return self.trip

    def held(self) -> int:
        """What the instances hold that reclaim cannot give back, as a number whose rise is
        an instance's cost: the confined parent's usage minus its page cache; unconfined, the
        host's MemTotal minus MemAvailable (other work on the host moves it too)."""
        p = self.parent() if self.parent is not None else None
        if p is not None and p.usage is not None:
            return p.usage - (p.reclaimable or 0)
        r = self.read()
        return r.mem_total - r.mem_available

    def note_start(self, held_before: int, instances: int = 1) -> None:
        """After instances started together: what one took (`held` now minus before, shared
        among them), the costliest so far."""
        self.costliest = max(self.costliest, (self.held() - held_before) // max(1, instances))

    def room(self) -> int | None:
        """How many more instances, each costing what the costliest so far took, keep the host
        (and the confined host) above its floor: the most a parallel batch may start. None
        when the guard is off or nothing is known of an instance's cost yet."""
        if not self.settings.enabled or self.costliest <= 0:
            return None
        r = self.read()
        p = self.parent() if self.parent is not None else None
        limits = self.thresholds(r.mem_total, p.limit if p is not None else None)
        rooms = [(r.mem_available - limits["min_available"]) // self.costliest]
        if p is not None and "confined_min_available" in limits and p.available is not None:
            rooms.append((p.available - limits["confined_min_available"]) // self.costliest)
        return max(0, min(rooms))

    def next_fits(self, when: str) -> Trip | None:
        """Would one more instance, costing what the costliest so far took, push the confined
        host (or the host) below its floor? A trip before it starts, instead of an OOM kill of
        an instance already running (a third 256 MiB VM in a 1 GiB host: each took 354 MiB,
        316 MiB were left, and starting it OOM-killed the first) or, unconfined, a host that
        falls over (study 002's boards)."""
        if not self.settings.enabled or self.costliest <= 0:
            return None
        r = self.read()
        p = self.parent() if self.parent is not None else None
        limits = self.thresholds(r.mem_total, p.limit if p is not None else None)
        need = self.costliest
        reading: dict[str, Any] = {**r.as_dict(), "when": when, "next_instance_needs": need}
        why = None
        if r.mem_available - need < limits["min_available"]:
            why = (f"the next instance would not fit: MemAvailable {r.mem_available / MIB:.0f} MiB minus the "
                   f"{need / MIB:.0f} MiB the costliest instance took is below {limits['min_available'] / MIB:.0f} "
                   f"MiB ({when})")
        elif p is not None and "confined_min_available" in limits and p.available is not None:
            reading["parent"] = p.as_dict()
            reading["confined_available"] = p.available
            floor = limits["confined_min_available"]
            if p.available - need < floor:
                why = (f"confined host of {p.limit / MIB:.0f} MiB: the next instance would not fit: "
                       f"{p.available / MIB:.0f} MiB available minus the {need / MIB:.0f} MiB the costliest "
                       f"instance took is below {floor / MIB:.0f} MiB ({when})")
        self.series.append(reading)
        if why is None:
            return None
        self.trip = Trip(why, reading, limits)
        return self.trip

    def _confined(self, r: Pressure, p: ParentPressure, floor: int, reading: dict, when: str) -> str | None:
        """The confined host judged as a host of its size (module docstring); None: healthy."""
        size = f"confined host of {p.limit / MIB:.0f} MiB"
        avail = p.available
        if avail is not None:
            reading["confined_available"] = avail
            if avail < floor:
                return (f"{size}: available memory {avail / MIB:.1f} MiB below {floor / MIB:.1f} MiB (usage "
                        f"{(p.usage or 0) / MIB:.0f} MiB, of which {(p.reclaimable or 0) / MIB:.0f} MiB "
                        f"reclaimable page cache) ({when})")
        if not reading.get("parent_at_limit_recently"):
            return None
        some: float | None
        full: float | None
        if p.psi_some_avg10 is not None:  # v2: its own stalls
            some, full, source = p.psi_some_avg10, p.psi_full_avg10, "its own memory.pressure"
        else:  # v1: no per-cgroup PSI; the host's while the parent is at its limit
            some, full = r.psi_some_avg10, r.psi_full_avg10
            source = "host PSI while the parent is at its limit, cgroup v1"
        at = f"at {(p.usage or 0) / p.limit:.0%} of its limit" + (
            f", peak {p.peak / p.limit:.0%}" if p.peak is not None else "")
        if full is not None and full > self.settings.max_psi_full:
            return (f"{size} thrashing: PSI memory full avg10 {full:.1f}% above {self.settings.max_psi_full:g}% "
                    f"({source}; {at}) ({when})")
        if some is not None and some > self.settings.max_psi_some:
            return (f"{size} thrashing: PSI memory some avg10 {some:.1f}% above {self.settings.max_psi_some:g}% "
                    f"({source}; {at}) ({when})")
        return None

    def _outside(self, r: Pressure, p: ParentPressure | None, floor: int,
                 reading: dict) -> tuple[float | None, float | None]:
        """PSI (some, full) the guard judges: the host's, or with a confining parent the
        host's outside it (see the module's docstring); the reasoning goes into `reading`."""
        some, full = r.psi_some_avg10, r.psi_full_avg10
        pressed = ((full is not None and full > self.settings.max_psi_full)
                   or (some is not None and some > self.settings.max_psi_some))
        if p is None or not pressed:
            return some, full
        if p.failcnt is None and p.hits is not None:  # only now: the slow subtree walk
            p = dataclasses.replace(p, failcnt=p.hits())
            reading["parent"]["failcnt"] = p.failcnt
        reading["parent_hit_recently"] = self._hit_recently(p)
        if p.psi_some_avg10 is not None:  # v2: subtract the parent's own stalls
            some = max(0.0, (some or 0.0) - p.psi_some_avg10)
            full = None if full is None else max(0.0, full - (p.psi_full_avg10 or 0.0))
            reading["psi_outside_parent"] = {"some_avg10": some, "full_avg10": full}
            return some, full
        if r.mem_available < 2 * floor:
            return some, full
        if reading["parent_hit_recently"]:
            reading["psi_attributed"] = (f"confined parent at {(p.usage or 0) / p.limit:.0%} of its limit, memory "
                                         f"limits in it hit {p.failcnt} times, host MemAvailable "
                                         f"{r.mem_available / MIB:.0f} MiB: the stall is the confined instances'")
            return None, None
        # v1 cannot tell whose stall 'some' is (refaults of pages a reclaim of the parent evicted
        # count too); with ample MemAvailable only 'full' (nothing on the host progressed) is harm
        reading["psi_attributed"] = (f"PSI some not judged: cgroup v1 cannot attribute it and host MemAvailable is "
                                     f"{r.mem_available / MIB:.0f} MiB; PSI full judged")
        return None, full

    def _at_limit(self, p: ParentPressure) -> bool:
        """The parent at its limit now (usage, or while a workload runs its peak since the
        window began: it tells the parent reached its limit in this window even when a 0.5 s
        reading missed the moment), or seen there within RECENT seconds: cheap readings only."""
        if p.near_limit or (self._window and p.peaked):
            self._near_seen = time.monotonic()
        return time.monotonic() - self._near_seen <= RECENT

    def _hit_recently(self, p: ParentPressure) -> bool:
        """Near its limit now, or seen near it / its limit-hit counter rose within RECENT
        seconds. The guard's own sightings matter: this kernel's v1 memory.failcnt stayed 0
        while the parent sat at its limit (memory.max_usage_in_bytes equal to the limit)."""
        now = time.monotonic()
        if p.failcnt is not None:
            if self._parent_hits is None or p.failcnt > self._parent_hits[0]:
                # the first reading cannot tell when earlier hits were: not recent (the safe side)
                self._parent_hits = (p.failcnt, now if self._parent_hits is not None else float("-inf"))
        recent_hits = self._parent_hits is not None and now - self._parent_hits[1] <= RECENT
        return self._at_limit(p) or recent_hits

    def wait_calm(self, seconds: float | None = None, sleep: float = 2.0,
                  stop: Callable[[], bool] = lambda: False) -> bool:
        """Before a fresh probe: wait until no threshold is crossed (PSI averages decay over
        tens of seconds after a trip), at most `seconds` (default `calm_wait`); False if the
        host stays pressed. A cancel (`stop`) ends the wait at once, as Ctrl-C does."""
        deadline = time.monotonic() + (self.settings.calm_wait if seconds is None else seconds)
        while self.check("settling before a probe") is not None:
            if stop():
                raise KeyboardInterrupt
            if time.monotonic() > deadline:
                return False
            time.sleep(sleep)
        return True

    def watch(self, on_trip: Callable[[Trip], None], when: str) -> None:
        """Read every `interval` in a thread until `stop_watching`; call on_trip once."""
        self._stop.clear()
        self._window = True

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
        self._window = False
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

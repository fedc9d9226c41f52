"""The probe interface: something that watches the host (and the instance) while one
execution runs, and stores what it saw beside that execution.

A probe is one module behind this interface, registered under the entry-point group
`virtbench.probes` like benchmarks and platforms:

    [project.entry-points."virtbench.probes"]
    myprobe = "mypackage.myprobe:MyProbe"

Life of a probe in a run: `Options` validates its campaign entry; `available()` says whether
it works on this host and why not (`virtbench list probes`); `check()` refuses bad input
before anything starts (exit 2); then around every execution `start(target)`, periodic
`sample()` calls for sampling probes, and `stop()` returning a `ProbeData`. A probe that
fails returns (or raises, and the runner records) a failed `ProbeData`: it never fails the
execution, and the benchmark's own samples are stored exactly as without it.
"""
from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from ..platforms.base import Availability

__all__ = ["Availability", "Probe", "ProbeData", "ProbeOptions", "SamplingProbe", "Target"]


@dataclass(frozen=True)
class Target:
    """What one execution runs in: probes that look at the instance use `pids` (the host
    pids of the instance's main processes, empty where the platform does not expose one)."""

    run_id: str
    platform: str
    platform_type: str
    benchmark: str
    round: int
    instance: str
    pids: tuple[int, ...] = ()


@dataclass
class ProbeData:
    """What a probe stores for one execution (one attachment, JSON), and its own status."""

    status: str  # ok | failed | unavailable
    data: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    @classmethod
    def failed(cls, error: str, **data: Any) -> ProbeData:
        return cls("failed", dict(data), error)


class ProbeOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Probe(ABC):
    name: ClassVar[str]
    description: ClassVar[str] = ""
    stores: ClassVar[str] = ""
    """What the probe stores per execution (shown by `virtbench list probes`)."""
    Options: ClassVar[type[ProbeOptions]] = ProbeOptions

    def __init__(self, options: ProbeOptions | None = None) -> None:
        self.options = options if options is not None else self.Options()

    @property
    def kind(self) -> str:
        """The attachment kind its data is stored under."""
        return f"probe:{self.name}"

    @classmethod
    @abstractmethod
    def available(cls) -> Availability:
        """Whether this probe can measure anything on this host, and why not."""

    def check(self) -> None:  # noqa: B027 - optional hook: most probes have nothing to try
        """Refuse bad options against this host before anything starts (InputError)."""

    def commands(self) -> list[list[str]]:
        """Programs of the campaign's choosing this probe would run (argv lists): a campaign
        file may come from anyone, so these run only where the operator allowed them."""
        return []

    def describe(self) -> dict[str, Any]:
        """Stored with the run: the probe's options and what it found on this host."""
        works = self.available()
        return {"name": self.name, "options": self.options.model_dump(mode="json"),
                "works": works.available, "reason": works.reason}

    @abstractmethod
    def start(self, target: Target) -> None:
        """Begin watching one execution (called right before the benchmark's command)."""

    def sample(self) -> None:  # noqa: B027 - sampling probes override it
        """Take one reading (sampling probes; called from their thread at their interval)."""

    @abstractmethod
    def stop(self) -> ProbeData:
        """Stop watching (right after the command) and return what was seen."""


class SamplingProbe(Probe):
    """A probe that reads something every `interval` seconds in a background thread.

    The thread sleeps on an Event, so stop() ends it at once; each reading is timestamped
    with the monotonic clock, so gaps (a slow read, a busy host) show in the data rather
    than being assumed away."""

    interval: float = 0.1

    def start(self, target: Target) -> None:
        self.target = target
        self.errors: list[str] = []
        self._stop = threading.Event()
        self.t0 = time.monotonic()
        self.begin(target)
        self.t_begin = self.now()
        """The watched window starts when start() returns (after begin's first reading)."""
        self._thread = threading.Thread(target=self._loop, name=f"probe-{self.name}", daemon=True)
        self._thread.start()

    def begin(self, target: Target) -> None:  # noqa: B027 - optional: read a first value
        """Called before the first sample (take the starting reading)."""

    def _loop(self) -> None:
        next_at = time.monotonic() + self.interval  # begin() took the reading at t = 0
        self._stop.wait(self.interval)
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception as exc:  # noqa: BLE001 - a failed reading is data, the thread goes on
                if len(self.errors) < 20:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
            next_at += self.interval
            delay = next_at - time.monotonic()
            if delay < 0:  # fell behind: skip the missed ticks instead of bursting
                next_at = time.monotonic()
                delay = 0
            self._stop.wait(delay)

    def stop(self) -> ProbeData:
        self.t_end = self.now()
        """The watched window ends when stop() is called, before a reading in flight ends."""
        self._stop.set()
        self._thread.join(timeout=max(10.0, 3 * self.interval))
        return self.finish()

    @abstractmethod
    def finish(self) -> ProbeData:
        """Build the stored data from the readings (after the thread ended)."""

    def now(self) -> float:
        """Seconds since start()."""
        return time.monotonic() - self.t0

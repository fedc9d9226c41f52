"""A probe: the wall-clock length of the window it watched."""
from __future__ import annotations

import time
from typing import ClassVar

from virtbench.probes.base import Availability, Probe, ProbeData, Target


class Stopwatch(Probe):
    name: ClassVar[str] = "toy-stopwatch"
    description: ClassVar[str] = "seconds each execution's command ran (a plugin test's probe)"

    @classmethod
    def available(cls) -> Availability:
        return Availability(True, "needs nothing but a clock")

    def start(self, target: Target) -> None:
        self.t0 = time.monotonic()

    def stop(self) -> ProbeData:
        return ProbeData("ok", {"seconds": time.monotonic() - self.t0})

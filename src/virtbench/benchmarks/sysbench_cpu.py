"""sysbench cpu: prime-number trial division, the CPU test of the Docker-on-Pi study (seeds/001).

Integer arithmetic only, tiny working set: it isolates the CPU and the scheduler from
memory and I/O, which is what a "pure compute overhead" number needs.
"""
from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field

from ..errors import ParseError
from .base import Benchmark, Metric, Params, search

_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_TOTAL_TIME = rf"^\s*total time:\s*{_NUM}s\s*$"
_EVENTS = r"^\s*total number of events:\s*([0-9]+)\s*$"
_EPS = rf"^\s*events per second:\s*{_NUM}\s*$"
_LAT_SUM = rf"^\s*sum:\s*{_NUM}\s*$"
_LAT_P95 = rf"^\s*95th percentile:\s*{_NUM}\s*$"


class SysbenchCpuParams(Params):
    max_prime: int = Field(
        20000, ge=3, le=10_000_000, description="upper limit of the primes searched per event"
    )
    threads: int = Field(1, ge=1, le=4096, description="worker threads")
    time: int = Field(10, ge=1, le=3600, description="run time in seconds")


class SysbenchCpu(Benchmark):
    """Events per second and per-event latency of sysbench's prime search."""

    name: ClassVar[str] = "sysbench-cpu"
    tool: ClassVar[str] = "sysbench"
    packages: ClassVar[tuple[str, ...]] = ("sysbench",)
    Params: ClassVar[type[Params]] = SysbenchCpuParams
    description: ClassVar[str] = "sysbench cpu: prime search events/s and latency"
    study: ClassVar[dict[str, Any]] = {"time": 60}
    """The `full` profile: Docker-on-Pi study: sysbench cpu."""

    params: SysbenchCpuParams

    def metrics(self) -> list[Metric]:
        p = self.params
        ctx = f"max prime {p.max_prime}, {p.threads} thread(s)"
        return [
            Metric("events_per_second", "events/s", True, "cpu", f"all threads together, {ctx}"),
            Metric("latency_avg", "ms", False, "cpu", f"mean time per event (sum / events), {ctx}"),
            Metric("latency_p95", "ms", False, "cpu", f"95th percentile time per event, {ctx}"),
        ]

    def command(self, workdir: str) -> list[str]:
        p = self.params
        return [
            "sysbench", "cpu", f"--cpu-max-prime={p.max_prime}", f"--threads={p.threads}",
            f"--time={p.time}", "--events=0", "--percentile=95", "run",
        ]

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        def number(pattern: str) -> float:
            return float(search(pattern, stdout, self.tool, source, re.M).group(1))

        number(_TOTAL_TIME)  # only printed once the run completed
        events = number(_EVENTS)
        if events <= 0:
            raise ParseError(self.tool, f"{_EVENTS!r} with at least one event", source)
        # The printed "avg:" has two decimals (0.54 ms); sum / events keeps the resolution.
        return {
            "events_per_second": number(_EPS),
            "latency_avg": number(_LAT_SUM) / events,
            "latency_p95": number(_LAT_P95),
        }

    def version_command(self) -> list[str]:
        return ["sysbench", "--version"]

    def execution_timeout(self) -> float:
        return 4.0 * self.params.time + 60.0

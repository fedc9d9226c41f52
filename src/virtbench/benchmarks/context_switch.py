"""context-switch: one switch between two processes through a pipe, `perf bench sched pipe`.

Two processes pass a token back and forth through two pipes; each round trip blocks each
process once, so it is two context switches, and the metric is usecs/op / 2. Both processes
are pinned to one CPU (`taskset`, util-linux) so every hand-over is a real switch on that CPU,
not a wake-up of a process idling on the other one (which measures IPI and idle-exit latency
instead, and varies with the host's idle state). The CPU is the first one the instance may
use, read from its own affinity, so a `cpuset` option is respected. `pin: false` measures the
unpinned round trip instead.

The script is a constant (`_SCRIPT`); the loop count arrives as a positional parameter.
"""
from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field

from ..errors import ParseError
from . import perf_bench
from .base import Benchmark, Metric, Params, search

_SCRIPT = r"""loops=$1
if [ "$2" = pin ]; then
  cpus=$(taskset -pc $$) || exit
  cpus=${cpus##*: }
  cpu=${cpus%%[,-]*}
  echo "vb:cpu=$cpu"
  exec taskset -c "$cpu" perf bench sched pipe --loop "$loops"
fi
echo "vb:cpu=any"
exec perf bench sched pipe --loop "$loops"
"""


class ContextSwitchParams(Params):
    loops: int = Field(20_000, ge=100, le=100_000_000,
                       description="round trips (two switches each); native: a few us each, gVisor ptrace: ~200 us")
    pin: bool = Field(True, description="both processes on the instance's first CPU (true context switches)")


class ContextSwitch(Benchmark):
    """Microseconds per context switch through a pipe, lower is better."""

    name: ClassVar[str] = "context-switch"
    tool: ClassVar[str] = "perf"
    packages: ClassVar[tuple[str, ...]] = (perf_bench.PACKAGE, "util-linux")
    Params: ClassVar[type[Params]] = ContextSwitchParams
    description: ClassVar[str] = "perf bench sched pipe (pinned to one CPU): us per context switch"
    study: ClassVar[dict[str, Any]] = {"loops": 1_000_000}
    """The `full` profile: perf's default loop count."""
    script: ClassVar[str] = _SCRIPT

    params: ContextSwitchParams

    def metrics(self) -> list[Metric]:
        where = "both on one CPU" if self.params.pin else "unpinned"
        return [Metric("switch_us", "us", False, "kernel",
                       f"pipe round trip / 2 between two processes, {where}, {self.params.loops} round trips")]

    def command(self, workdir: str) -> list[str]:
        return ["sh", "-c", _SCRIPT, "sh", str(self.params.loops), "pin" if self.params.pin else "any"]

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        cpu = search(r"^vb:cpu=(\S+)$", stdout, self.tool, source, re.M).group(1)
        if self.params.pin and not cpu.isdigit():
            raise ParseError(self.tool, f"vb:cpu=<a CPU number> (got {cpu!r})", source)
        us = perf_bench.usecs_per_op(stdout, r"^# Executed ([0-9]+) pipe operations between two processes$",
                                     self.params.loops, source)
        return {"switch_us": us / 2.0}

    def version_command(self) -> list[str]:
        return perf_bench.version_command()

    def execution_timeout(self) -> float:
        return self.params.loops * 1e-3 + 60.0  # 1 ms per round trip: gVisor ptrace under load

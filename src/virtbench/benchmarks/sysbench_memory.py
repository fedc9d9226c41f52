"""sysbench memory: block reads or writes, an open stand-in for PassMark's memory mark (seeds/002).

Each event reads or writes one block of `block_size` bytes. The working set is that block:
with the default global scope all threads share one buffer of `block_size`, with local
scope each thread has its own. So a 1M block measures the CPU caches, not RAM; to load main
memory the block (times the threads, for local scope) must exceed the last-level cache.

`total_size` 0 makes the run time-bound (`time` seconds), so every platform works for the
same time; sysbench's own default (100G) ends the run at whichever limit comes first.
"""
from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field

from ..errors import ParseError
from .base import Benchmark, Metric, Params, search

_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_SIZE = r"^[1-9][0-9]*[KMGT]?$"
_TOTAL_TIME = rf"^\s*total time:\s*{_NUM}s\s*$"
_OPS = rf"^Total operations: ([0-9]+) \(\s*{_NUM} per second\)\s*$"
_MIB = rf"^{_NUM} MiB transferred \(\s*{_NUM} MiB/sec\)\s*$"
_OPER = r"^\s*operation: (\w+)\s*$"


class SysbenchMemoryParams(Params):
    block_size: str = Field(
        "1M", pattern=_SIZE,
        description="bytes per operation, with K/M/G suffix (binary); also the working set",
    )
    total_size: str = Field(
        "0", pattern=r"^(0|[1-9][0-9]*[KMGT]?)$",
        description="data to transfer before stopping; 0 = no limit, the run lasts `time`",
    )
    oper: Literal["read", "write"] = Field("write", description="memory operation")
    access_mode: Literal["seq", "rnd"] = Field("seq", description="sequential or random blocks")
    scope: Literal["global", "local"] = Field(
        "global", description="one buffer shared by all threads, or one per thread"
    )
    threads: int = Field(1, ge=1, le=4096, description="worker threads")
    time: int = Field(5, ge=1, le=3600, description="run time limit in seconds")


class SysbenchMemory(Benchmark):
    """Memory transfer rate and operation rate of sysbench's memory test."""

    name: ClassVar[str] = "sysbench-memory"
    tool: ClassVar[str] = "sysbench"
    packages: ClassVar[tuple[str, ...]] = ("sysbench",)
    Params: ClassVar[type[Params]] = SysbenchMemoryParams
    description: ClassVar[str] = "sysbench memory: block read/write MiB/s and operations/s"
    study: ClassVar[dict[str, Any]] = {"block_size": "64M", "time": 30}
    """The `full` profile: beyond the caches."""

    params: SysbenchMemoryParams

    def metrics(self) -> list[Metric]:
        p = self.params
        ctx = f"{p.access_mode} {p.oper}, {p.block_size} blocks, {p.scope} scope, {p.threads} thread(s)"
        return [
            Metric("mib_per_second", "MiB/s", True, "memory", f"data transferred, {ctx}"),
            Metric("ops_per_second", "ops/s", True, "memory", f"block operations, {ctx}"),
        ]

    def command(self, workdir: str) -> list[str]:
        p = self.params
        return [
            "sysbench", "memory", f"--memory-block-size={p.block_size}",
            f"--memory-total-size={p.total_size}", f"--memory-oper={p.oper}",
            f"--memory-access-mode={p.access_mode}", f"--memory-scope={p.scope}",
            f"--threads={p.threads}", f"--time={p.time}", "--events=0", "run",
        ]

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        def match(pattern: str) -> re.Match[str]:
            return search(pattern, stdout, self.tool, source, re.M)

        match(_TOTAL_TIME)  # only printed once the run completed
        oper = match(_OPER).group(1)
        if oper != self.params.oper:
            raise ParseError(self.tool, f"operation: {self.params.oper} (got {oper})", source)
        ops, mib = match(_OPS), match(_MIB)
        if int(ops.group(1)) <= 0:
            raise ParseError(self.tool, f"{_OPS!r} with at least one operation", source)
        return {"mib_per_second": float(mib.group(2)), "ops_per_second": float(ops.group(2))}

    def version_command(self) -> list[str]:
        return ["sysbench", "--version"]

    def execution_timeout(self) -> float:
        return 4.0 * self.params.time + 60.0

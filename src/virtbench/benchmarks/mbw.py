"""mbw: memory copy bandwidth, the memory test of the Docker-on-Pi study (seeds/001).

Three copy methods over two arrays of `size_mib` MiB each: MEMCPY (one libc memcpy of the
whole array), DUMB (a `b[i] = a[i]` loop over longs) and MCBLOCK (memcpy in blocks of
`block_size` bytes). mbw prints each run and an AVG line per method; the AVG rate is the total
MiB copied over the summed run times (not the mean of the per-run rates), computed from
microsecond timers, so it is used as is. "Copy" counts the bytes copied once (a copy reads and
writes them, so the memory traffic is twice that).

Quirks: mbw silently ignores an unknown -t value and then runs every test, and a failed
allocation is "Error allocating memory: Cannot allocate memory" on stderr with exit 1. The
arrays must be larger than the last-level cache, or the numbers are cache bandwidth.
"""
from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field, model_validator

from ..errors import ParseError
from .base import Benchmark, Metric, Params, search

_METHODS = {"memcpy": "MEMCPY", "dumb": "DUMB", "mcblock": "MCBLOCK"}
_WHAT = {
    "memcpy": "memcpy() of the whole array",
    "dumb": "b[i] = a[i] loop over 8-byte longs",
    "mcblock": "memcpy() in fixed blocks",
}
_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_BLOCK = r"^Using (\d+) bytes as blocks for memcpy block copy test\.$"
_RUNS = r"^Getting down to business\.\.\. Doing (\d+) runs per test\.$"


def _line(label: str, method: str) -> str:
    return rf"^{label}\tMethod: {method}\tElapsed: {_NUM}\tMiB: {_NUM}\tCopy: {_NUM} MiB/s$"


class MbwParams(Params):
    size_mib: int = Field(
        256, ge=1, le=1_048_576,
        description="MiB per array; two arrays are allocated. Keep it well above the "
        "last-level cache (the Pi 2 of the Docker study had 1 GiB RAM in all)",
    )
    runs: int = Field(10, ge=1, le=10_000, description="runs per method (-n)")
    block_size: int = Field(
        262144, ge=1, le=2**30, description="bytes per memcpy call in the MCBLOCK test (-b)"
    )

    @model_validator(mode="after")
    def _check(self) -> MbwParams:
        if self.block_size > self.size_mib * 2**20:
            raise ValueError("block_size must not exceed the array size")
        return self


class Mbw(Benchmark):
    """Average copy bandwidth of mbw's memcpy, dumb and mcblock tests."""

    name: ClassVar[str] = "mbw"
    tool: ClassVar[str] = "mbw"
    packages: ClassVar[tuple[str, ...]] = ("mbw",)
    Params: ClassVar[type[Params]] = MbwParams
    description: ClassVar[str] = "mbw: memcpy / dumb loop / block memcpy bandwidth"
    study: ClassVar[dict[str, Any]] = {"size_mib": 512}
    """The `full` profile: Docker-on-Pi study: arrays well beyond the caches."""

    params: MbwParams

    def metrics(self) -> list[Metric]:
        p = self.params
        ctx = f"{p.size_mib} MiB arrays, {p.runs} run(s), bytes copied once per second"
        return [
            Metric(name, "MiB/s", True, "memory",
                   f"{_WHAT[name]}{f' of {p.block_size} B' if name == 'mcblock' else ''}, {ctx}")
            for name in _METHODS
        ]

    def command(self, workdir: str) -> list[str]:
        p = self.params
        # no -t: mbw runs all three tests; no -q: the header shows block size and run count
        return ["mbw", "-n", str(p.runs), "-b", str(p.block_size), str(p.size_mib)]

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        p = self.params
        block = int(search(_BLOCK, stdout, self.tool, source, re.M).group(1))
        runs = int(search(_RUNS, stdout, self.tool, source, re.M).group(1))
        if (block, runs) != (p.block_size, p.runs):
            expected = f"block size {p.block_size} and {p.runs} runs (got {block} and {runs})"
            raise ParseError(self.tool, expected, source)
        result: dict[str, float] = {}
        for name, method in _METHODS.items():
            each = _line(r"\d+", method)
            got = len(re.findall(each, stdout, re.M))
            if got != p.runs:
                raise ParseError(self.tool, f"{p.runs} x {each!r} (got {got})", source)
            avg = search(_line("AVG", method), stdout, self.tool, source, re.M)
            if float(avg.group(2)) != p.size_mib:
                expected = f"MiB: {p.size_mib} on the AVG {method} line (got {avg.group(2)})"
                raise ParseError(self.tool, expected, source)
            rate = float(avg.group(3))
            if rate <= 0:
                raise ParseError(self.tool, f"a positive AVG {method} rate", source)
            result[name] = rate
        return result

    def version_command(self) -> list[str]:
        # mbw has no version option
        return ["dpkg-query", "-W", "-f", "${Package} ${Version}\n", "mbw"]

    def execution_timeout(self) -> float:
        p = self.params
        # three methods x runs copies of size_mib at a pessimistic 100 MiB/s, plus allocation
        return 3.0 * p.runs * p.size_mib / 100.0 + 60.0

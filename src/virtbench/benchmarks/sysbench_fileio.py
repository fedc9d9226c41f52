"""sysbench fileio: file I/O in the scratch directory, the disk test of the Docker-on-Pi study (seeds/001).

sysbench creates its test files (`test_file.N`) in the current directory and has no option
for another one, and it needs three calls: prepare, run, cleanup. An argv can do neither, so
the command is `sh -c SCRIPT sh WORKDIR OPTIONS...` with one constant script (`_SCRIPT`): it
changes to "$1" and passes the remaining positional parameters ("$@") unchanged to each
sysbench call. No value is ever pasted into shell text. The prepare output (one line per file)
goes to a log that is shown on stderr only if prepare fails; stdout is the run's report alone.

With `extra_flags` "direct" (the default) the files are opened with O_DIRECT, so the page
cache of the instance (or of the host, for a VM's disk image on a file) does not serve
the reads; without it, a file set smaller than RAM is read from memory. The periodic fsync
(every 100 requests, sysbench's default) is kept.
"""
from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field

from ..errors import ParseError
from .base import Benchmark, Metric, Params, search

_SCRIPT = r"""cd "$1" || exit 1
shift
sysbench fileio "$@" prepare > vb-prepare.log 2>&1 || { rc=$?; cat vb-prepare.log >&2; exit "$rc"; }
sysbench fileio "$@" run
rc=$?
sysbench fileio "$@" cleanup > /dev/null 2>&1
exit "$rc"
"""

TestMode = Literal["seqwr", "seqrewr", "seqrd", "rndrd", "rndwr", "rndrw"]
_DOING = {
    "seqwr": "sequential write (creation)", "seqrewr": "sequential rewrite",
    "seqrd": "sequential read", "rndrd": "random read", "rndwr": "random write",
    "rndrw": "random r/w",
}
_READS = frozenset({"seqrd", "rndrd", "rndrw"})
_WRITES = frozenset({"seqwr", "seqrewr", "rndwr", "rndrw"})

_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_SIZE = r"^[1-9][0-9]*[KMGT]?$"
_TOTAL_TIME = rf"^\s*total time:\s*{_NUM}s\s*$"
_EVENTS = r"^\s*total number of events:\s*([0-9]+)\s*$"
_LAT_SUM = rf"^\s*sum:\s*{_NUM}\s*$"
_LAT_P95 = rf"^\s*95th percentile:\s*{_NUM}\s*$"
_FIELDS = {
    "reads_per_s": rf"^\s*reads/s:\s*{_NUM}\s*$",
    "writes_per_s": rf"^\s*writes/s:\s*{_NUM}\s*$",
    "read_mib_per_s": rf"^\s*read, MiB/s:\s*{_NUM}\s*$",
    "written_mib_per_s": rf"^\s*written, MiB/s:\s*{_NUM}\s*$",
}


class SysbenchFileioParams(Params):
    file_total_size: str = Field(
        "256M", pattern=_SIZE,
        description="size of all test files together (K/M/G/T suffix, binary). Make it larger "
        "than RAM when extra_flags is 'none'; sysbench's documentation suggests 2G and more",
    )
    file_num: int = Field(128, ge=1, le=100_000, description="number of test files")
    test_mode: TestMode = Field("rndrw", description="access pattern (Docker study: random I/O)")
    block_size: str = Field("16K", pattern=_SIZE, description="bytes per request")
    extra_flags: Literal["direct", "sync", "dsync", "none"] = Field(
        "direct", description="open flags for the test files (--file-extra-flags)"
    )
    threads: int = Field(1, ge=1, le=4096, description="worker threads")
    time: int = Field(5, ge=1, le=3600, description="run time in seconds")

    def scratch_bytes(self) -> int:
        return _bytes(self.file_total_size)


class SysbenchFileio(Benchmark):
    """Request rates, throughput and request latency of sysbench's file I/O test."""

    name: ClassVar[str] = "sysbench-fileio"
    tool: ClassVar[str] = "sysbench"
    packages: ClassVar[tuple[str, ...]] = ("sysbench",)
    Params: ClassVar[type[Params]] = SysbenchFileioParams
    description: ClassVar[str] = "sysbench fileio: prepare, run, cleanup in the scratch directory"
    study: ClassVar[dict[str, Any]] = {"file_total_size": "2G", "time": 60}
    """The `full` profile: Docker-on-Pi study: random disk I/O."""
    script: ClassVar[str] = _SCRIPT

    params: SysbenchFileioParams

    def _names(self) -> list[str]:
        mode = self.params.test_mode
        names = ["reads_per_s"] if mode in _READS else []
        names += ["writes_per_s"] if mode in _WRITES else []
        names += ["read_mib_per_s"] if mode in _READS else []
        names += ["written_mib_per_s"] if mode in _WRITES else []
        return names

    def metrics(self) -> list[Metric]:
        p = self.params
        ctx = (f"{_DOING[p.test_mode]}, {p.block_size} requests, {p.file_total_size} in "
               f"{p.file_num} files, flags {p.extra_flags}, {p.threads} thread(s)")
        what = {
            "reads_per_s": ("IOPS", "read requests per second"),
            "writes_per_s": ("IOPS", "write requests per second"),
            "read_mib_per_s": ("MiB/s", "data read"),
            "written_mib_per_s": ("MiB/s", "data written"),
        }
        out = [Metric(n, what[n][0], True, "storage", f"{what[n][1]}, {ctx}") for n in self._names()]
        out += [
            Metric("latency_avg", "ms", False, "storage",
                   f"mean time per event (sum / events; fsync calls are events too), {ctx}"),
            Metric("latency_p95", "ms", False, "storage",
                   f"95th percentile time per event (reads, writes, fsyncs), {ctx}"),
        ]
        return out

    def command(self, workdir: str) -> list[str]:
        p = self.params
        flags = [] if p.extra_flags == "none" else [f"--file-extra-flags={p.extra_flags}"]
        return [
            "sh", "-c", _SCRIPT, "sh", workdir,
            f"--file-total-size={p.file_total_size}", f"--file-num={p.file_num}",
            f"--file-test-mode={p.test_mode}", f"--file-block-size={p.block_size}", *flags,
            f"--threads={p.threads}", f"--time={p.time}", "--events=0", "--percentile=95",
        ]

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        def number(pattern: str) -> float:
            return float(search(pattern, stdout, self.tool, source, re.M).group(1))

        number(_TOTAL_TIME)  # only printed once the run completed
        doing = _DOING[self.params.test_mode].replace("(", r"\(").replace(")", r"\)")
        search(rf"^Doing {doing} test$", stdout, self.tool, source, re.M)
        events = number(_EVENTS)
        if events <= 0:
            raise ParseError(self.tool, f"{_EVENTS!r} with at least one event", source)
        result = {name: number(_FIELDS[name]) for name in self._names()}
        for name in ("reads_per_s", "writes_per_s"):
            if name in result and result[name] <= 0:
                raise ParseError(self.tool, f"{_FIELDS[name]!r} above 0", source)
        # The printed "avg:" has two decimals; sum / events keeps the resolution.
        result["latency_avg"] = number(_LAT_SUM) / events
        result["latency_p95"] = number(_LAT_P95)
        return result

    def version_command(self) -> list[str]:
        return ["sysbench", "--version"]

    def execution_timeout(self) -> float:
        # prepare writes the whole file set (at a pessimistic 20 MB/s), then run and cleanup
        total = _bytes(self.params.file_total_size)
        return 2.0 * self.params.time + total / 20e6 + 120.0


def _bytes(size: str) -> int:
    match = re.fullmatch(r"([0-9]+)([KMGT]?)", size)
    if match is None:
        raise ValueError(f"not a size: {size!r}")
    return int(match.group(1)) * 1024 ** " KMGT".index(match.group(2) or " ")

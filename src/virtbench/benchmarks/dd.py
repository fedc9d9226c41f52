"""dd: sequential direct write then read of one file, the storage test of the KVM study (seeds/002).

The study ran `dd if=/dev/zero of=FILE bs=8M count=256 oflag=direct` and read "an existing
testfile" with `dd if=FILE of=/dev/null ... iflag=direct`, on several storage media. Both must
run in one command, and dd writes its summary to stderr, so the command is `sh -c SCRIPT sh
WORKDIR BS COUNT READ` with one constant script (`_SCRIPT`): the values arrive as positional
parameters and are never pasted into shell text. The script prints a marker before each dd
and merges dd's stderr into stdout, so each summary is attributed to its phase, and stops at
the first failing dd.

`read_file: written` reads back the file just written; `other` (the study's way) reads a file
written before the measured write (unmeasured, marker `vb:prepare`), so the measured write of
as many bytes passes between, and its cached pages are dropped (`iflag=nocache count=0`)
before it is read: a device's or a VM disk's write cache no longer holds what is read.

The rates are computed as bytes / seconds from dd's summary line ("268435456 bytes (268 MB,
256 MiB) copied, 0.170931 s, 1.6 GB/s"): the printed rate has two or three significant
digits and a unit that changes with the magnitude (kB/s, MB/s, GB/s); it only serves as a
cross-check. MB is 10^6 bytes, as in dd. O_DIRECT bypasses the page cache of the instance
(not the device's own cache, nor the host's page cache under a VM disk image opened with
cache=writeback); it needs a file system that supports it and aligned block sizes.
"""
from __future__ import annotations

import re
import shlex
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from ..errors import ParseError
from .base import Benchmark, Metric, Params, search

WRITE = 'dd if=/dev/zero of="$f" bs="$2" count="$3" oflag=direct'
READ = 'dd if="$r" of=/dev/null bs="$2" count="$3" iflag=direct'
"""The two measured dd commands, as the script runs them ($f: the file written, $r: the file read)."""
_SCRIPT = rf"""f=$1/vb.dd
r=$f
if [ "$4" = other ]; then
    r=$1/vb.dd.read
    echo vb:prepare
    dd if=/dev/zero of="$r" bs="$2" count="$3" oflag=direct 2>&1 || exit
fi
echo vb:write
{WRITE} 2>&1 || exit
if [ "$4" = other ]; then
    dd if="$r" of=/dev/null iflag=nocache count=0 2>/dev/null || exit
fi
echo vb:read
{READ} 2>&1 || exit
rm -f "$f" "$r"
echo vb:done
"""

_FLOAT = r"[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?"
_COPIED = (rf"^([0-9]+) bytes? (?:\([^)]*\) )?copied, ({_FLOAT}) s, ({_FLOAT}) "
           r"([kMGTPEZY]?)B/s$")
_RECORDS = r"^([0-9]+)\+([0-9]+) records (in|out)$"
_PREFIX = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Z": 1e21,
           "Y": 1e24}
_SUFFIX = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def _bytes(bs: str) -> int:
    return int(bs.rstrip("KMG")) * _SUFFIX[bs[-1] if bs[-1] in "KMG" else ""]


class DdParams(Params):
    bs: str = Field(
        "8M", pattern=r"^[1-9][0-9]*[KMG]?$",
        description="block size, dd syntax (K/M/G = 2^10/2^20/2^30 bytes); a multiple of "
        "4096 for O_DIRECT. KVM study: 8M",
    )
    count: int = Field(
        32, ge=1, le=1_000_000,
        description="blocks per direction; the file is bs x count. KVM study: 256 (2 GiB)",
    )
    read_file: Literal["written", "other"] = Field(
        "written", description="written: read back the file just written; other: read a file written before "
        "the measured write, its cache dropped (the KVM study read an existing file)")

    def scratch_bytes(self) -> int:
        return _bytes(self.bs) * self.count * (2 if self.read_file == "other" else 1)

    @model_validator(mode="after")
    def _check(self) -> DdParams:
        size = _bytes(self.bs)
        if size % 4096 or size > 2**30:
            raise ValueError(f"bs must be a multiple of 4096 bytes and at most 1G (got {self.bs})")
        return self


class Dd(Benchmark):
    """Sequential O_DIRECT write and read throughput of one file in the scratch directory."""

    name: ClassVar[str] = "dd"
    tool: ClassVar[str] = "dd"
    packages: ClassVar[tuple[str, ...]] = ("coreutils",)  # Essential: in every Debian image
    Params: ClassVar[type[Params]] = DdParams
    description: ClassVar[str] = "dd oflag/iflag=direct: sequential write then read of one file"
    study: ClassVar[dict[str, Any]] = {"count": 256}
    """The `full` profile: KVM study: bs=8M count=256 (2 GiB) with direct I/O."""
    script: ClassVar[str] = _SCRIPT

    params: DdParams

    @property
    def size(self) -> int:
        return _bytes(self.params.bs) * self.params.count

    def metrics(self) -> list[Metric]:
        p = self.params
        ctx = f"bs={p.bs} count={p.count} ({self.size / 2**20:g} MiB), O_DIRECT, MB = 10^6 bytes"
        return [
            Metric("write_MBps", "MB/s", True, "storage", f"write from /dev/zero, {ctx}"),
            Metric("read_MBps", "MB/s", True, "storage", f"read back to /dev/null, {ctx}"),
        ]

    def command(self, workdir: str) -> list[str]:
        return ["sh", "-c", _SCRIPT, "sh", workdir, self.params.bs, str(self.params.count), self.params.read_file]

    def phases(self, workdir: str) -> dict[str, list[str]]:
        """The measured dd commands as argv lists, with the values the script gives them (what a
        paper's printed dd lines are held against)."""
        p = self.params
        files = {"$f": f"{workdir}/vb.dd", "$r": f"{workdir}/vb.dd" + (".read" if p.read_file == "other" else "")}
        values = {**files, "$2": p.bs, "$3": str(p.count)}

        def fill(word: str) -> str:
            for k, v in values.items():
                word = word.replace(k, v)
            return word
        return {"write": [fill(w) for w in shlex.split(WRITE)], "read": [fill(w) for w in shlex.split(READ)]}

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        # Each phase is checked as far as it got, so a failed write reports its own records.
        write = search(r"^vb:write$", stdout, self.tool, source, re.M)
        read = re.search(r"^vb:read$", stdout, re.M)
        write_mbps = self._phase(stdout[write.end(): read.start() if read else None], "write", source)
        read = search(r"^vb:read$", stdout, self.tool, source, re.M)
        done = re.search(r"^vb:done$", stdout, re.M)
        read_mbps = self._phase(stdout[read.end(): done.start() if done else None], "read", source)
        search(r"^vb:done$", stdout, self.tool, source, re.M)
        return {"write_MBps": write_mbps, "read_MBps": read_mbps}

    def _phase(self, text: str, phase: str, source: str) -> float:
        where = f"{source}, {phase}"
        for full, partial, _ in re.findall(_RECORDS, text, re.M):
            if (int(full), int(partial)) != (self.params.count, 0):
                expected = f"'{self.params.count}+0 records' (got {full}+{partial})"
                raise ParseError(self.tool, expected, where)
        if len(re.findall(_RECORDS, text, re.M)) != 2:
            raise ParseError(self.tool, f"2 x {_RECORDS!r}", where)
        copied = search(_COPIED, text, self.tool, where, re.M)
        size, seconds = int(copied.group(1)), float(copied.group(2))
        if size != self.size:
            raise ParseError(self.tool, f"{self.size} bytes copied (got {size})", where)
        if seconds <= 0:
            raise ParseError(self.tool, f"a positive time in {copied.group(0)!r}", where)
        rate = size / seconds / 1e6
        printed = float(copied.group(3)) * _PREFIX[copied.group(4)] / 1e6
        # dd rounds to 2-3 significant digits; anything further off means a misread line
        if abs(printed - rate) > 0.1 * rate:
            expected = f"printed rate near {rate:.4g} MB/s (got {copied.group(0)!r})"
            raise ParseError(self.tool, expected, where)
        return rate

    def version_command(self) -> list[str]:
        return ["dd", "--version"]

    def execution_timeout(self) -> float:
        # both directions (and the file read, where written first) at a pessimistic 10 MB/s
        phases = 3.0 if self.params.read_file == "other" else 2.0
        return phases * self.size / 10e6 + 60.0

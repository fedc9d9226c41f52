"""7-Zip's built-in LZMA benchmark, `7zr b`, the CPU test of the KVM-on-ARM study (seeds/002).

The study ran `7zr b -mmt1` and `-mmt2`. Debian 12 ships 7zr in the package p7zip, which is
built from the same 7-Zip code as the package 7zip (7zz, 26.02 here), so the LZMA benchmark
is identical; 7zr is the smaller binary and keeps the study's command name.

Ratings are in 7-Zip's "MIPS": the benchmark converts its measured speed into the instruction
rate a reference CPU would need for it, so compression and decompression rates become
comparable. The ratings are summed over threads.

`-md<N>` is the largest dictionary (2^N bytes): with N >= 22 the benchmark steps through
22..N, one line per size, and RAM use grows with N and the thread count (-md25 -mmt1 needs
437 MB, more than the study's smallest VMs had: "ERROR: Can't allocate required memory!").

The real p7zip 16.02 (Debian 10's and 11's original package 16.02+dfsg, the study's era) has
the same table, but its `Avr:` line has no Speed column (`Avr:  30  2955  898 | 35  4302  1506`):
the ratings are read as the last number of each half (tests/data/7zip/bullseye-p7zip16.02_*).
"""
from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field

from ..errors import ParseError
from .base import Benchmark, Metric, Params, search

# Speed (KiB/s) is in the Avr line from 7-Zip 17 on; p7zip 16.02 prints only Usage, R/U and Rating.
_AVR = (r"^Avr:\s+(?:\d+\s+)?\d+\s+\d+\s+(?P<compress>\d+)\s+\|"
        r"\s+(?:\d+\s+)?\d+\s+\d+\s+(?P<decompress>\d+)\s*$")
_TOT = r"^Tot:\s+(\d+)\s+(\d+)\s+(\d+)\s*$"
_THREADS = r"# Benchmark threads:\s+(\d+)\s*$"


class SevenZipParams(Params):
    threads: int = Field(1, ge=1, le=1024, description="benchmark threads (-mmt). KVM study: 1 and 2")
    dictionary: int | None = Field(
        22, ge=16, le=30,
        description="largest dictionary as log2 bytes (-md); >= 22 steps through 22..N. "
        "None: 7-Zip's default (22..25, 437 MB RAM at 1 thread), as in the KVM study",
    )
    passes: int | None = Field(
        1, ge=1, le=100,
        description="measuring passes (`7zr b N`); None: 7-Zip's default, as in the KVM study. "
        "One pass with -md22 takes about 8 s, the study's `7zr b -mmt1` about 42 s",
    )


class SevenZip(Benchmark):
    """LZMA compression and decompression ratings of `7zr b`."""

    name: ClassVar[str] = "7zip"
    tool: ClassVar[str] = "7zr"
    packages: ClassVar[tuple[str, ...]] = ("p7zip",)
    Params: ClassVar[type[Params]] = SevenZipParams
    description: ClassVar[str] = "7zr b: LZMA compression/decompression rating (7-Zip MIPS)"
    study: ClassVar[dict[str, Any]] = {"passes": None, "dictionary": None}
    """The `full` profile: KVM study: `7zr b -mmt1` with 7-Zip's own passes and dictionary sweep."""

    params: SevenZipParams

    def metrics(self) -> list[Metric]:
        p = self.params
        size = f"dictionary up to 2^{p.dictionary} B" if p.dictionary else "default dictionaries"
        ctx = f"{p.threads} thread(s), {size}"
        return [
            Metric("compress_rating", "MIPS", True, "cpu", f"LZMA compression rating (Avr), {ctx}"),
            Metric("decompress_rating", "MIPS", True, "cpu", f"LZMA decompression rating (Avr), {ctx}"),
            Metric("total_rating", "MIPS", True, "cpu", f"mean of both ratings (Tot), {ctx}"),
        ]

    def command(self, workdir: str) -> list[str]:
        p = self.params
        argv = ["7zr", "b"]
        if p.passes is not None:
            argv.append(str(p.passes))
        argv.append(f"-mmt{p.threads}")
        if p.dictionary is not None:
            argv.append(f"-md{p.dictionary}")
        return argv

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        threads = int(search(_THREADS, stdout, self.tool, source, re.M).group(1))
        if threads != self.params.threads:
            expected = f"'# Benchmark threads: {self.params.threads}' (got {threads})"
            raise ParseError(self.tool, expected, source)
        # "Avr:" and "Tot:" are printed only after the last pass; an allocation failure or a
        # kill leaves a partial table (and 7-Zip's error, if any, on stderr).
        avr = search(_AVR, stdout, self.tool, source, re.M)
        tot = search(_TOT, stdout, self.tool, source, re.M)
        result = {
            "compress_rating": float(avr.group("compress")),
            "decompress_rating": float(avr.group("decompress")),
            "total_rating": float(tot.group(3)),
        }
        for name, value in result.items():
            if value <= 0:
                raise ParseError(self.tool, f"a positive {name} (got {value:g})", source)
        return result

    def version_command(self) -> list[str]:
        return ["7zr", "--help"]

    def execution_timeout(self) -> float:
        p = self.params
        # about 8-10 s per dictionary size and pass here; 7-Zip scales the work to the CPU speed
        sizes = 4 if p.dictionary is None else max(1, p.dictionary - 21)
        passes = p.passes or 1
        return 120.0 * sizes * passes + 120.0

"""page-fault: faults per second on freshly mapped anonymous memory, `stress-ng --vm` (Debian stress-ng).

The vm stressor maps `size` MiB of anonymous memory, writes it once with 64-bit stores
(`--vm-method write64`) and unmaps it again, round after round (no `--vm-keep`), so every
4 KiB page written is a first touch: one minor fault, with the kernel zeroing the page.
`--vm-madvise nohugepage` keeps transparent huge pages out (one fault per 2 MiB would make
the count meaningless). stress-ng counts one bogo op per MiB written (4096 write64 blocks of
256 bytes), so faults = bogo ops x 256, over the stressor's wall-clock time from the YAML
report (microsecond precision; the text table rounds to 10 ms). The 4 KiB of stores after
each fault are part of the figure (about 0.1 us of the 1 to 2 us a native fault costs).

Under gVisor the figure is first touches per second as the application sees them: the Sentry
populates the host mapping of its memory file in ranges larger than a page, so one trap serves
many pages and the rate can exceed native (seen here: about 2.7 x with the ptrace platform).

stress-ng's own "page faults per second" (stress-ng --fault) comes from getrusage, which
gVisor does not count (it reports 0), and it times file operations too: not used.
"""
from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field

from ..errors import ParseError
from .base import Benchmark, Metric, Params, search

PAGES_PER_BOGO_OP = 256
"""write64: one bogo op per 2^12 blocks of 256 bytes = 1 MiB = 256 pages of 4 KiB."""

_SCRIPT = r"""f=$1/vb.stress-ng.yaml
stress-ng --vm 1 --vm-bytes "$2"M --vm-method write64 --vm-madvise nohugepage --vm-ops "$3" \
  --metrics --temp-path "$1" --yaml "$f" 2>&1 || exit
echo vb:yaml
cat "$f" && rm -f "$f"
"""
_FLOAT = r"[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?"


class PageFaultParams(Params):
    size: int = Field(64, ge=4, le=65536, description="MiB mapped, written once and unmapped per round")
    rounds: int = Field(8, ge=1, le=100_000, description="map-write-unmap rounds")


class PageFault(Benchmark):
    """Minor page faults per second on fresh anonymous memory, higher is better."""

    name: ClassVar[str] = "page-fault"
    tool: ClassVar[str] = "stress-ng"
    packages: ClassVar[tuple[str, ...]] = ("stress-ng",)
    Params: ClassVar[type[Params]] = PageFaultParams
    description: ClassVar[str] = "stress-ng --vm write64, fresh mapping each round: page faults per second"
    study: ClassVar[dict[str, Any]] = {"rounds": 64}
    script: ClassVar[str] = _SCRIPT

    params: PageFaultParams

    @property
    def ops(self) -> int:
        return self.params.size * self.params.rounds

    def metrics(self) -> list[Metric]:
        p = self.params
        return [Metric("faults_per_s", "1/s", True, "kernel",
                       f"first-touch faults of 4 KiB pages (with their writes), {p.rounds} rounds of {p.size} MiB")]

    def command(self, workdir: str) -> list[str]:
        return ["sh", "-c", _SCRIPT, "sh", workdir, str(self.params.size), str(self.ops)]

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        marker = search(r"^vb:yaml$", stdout, self.tool, source, re.M)
        report = stdout[marker.end():]
        search(r"^\s*- stressor: vm$", report, self.tool, source, re.M)
        ops = int(search(r"^\s*bogo-ops: ([0-9]+)$", report, self.tool, source, re.M).group(1))
        if ops != self.ops:
            raise ParseError(self.tool, f"bogo-ops: {self.ops} (got {ops})", source)
        seconds = float(search(rf"^\s*wall-clock-time: ({_FLOAT})$", report, self.tool, source, re.M).group(1))
        if seconds <= 0:
            raise ParseError(self.tool, "a positive wall-clock-time", source)
        if not re.search(r"successful run completed", stdout[:marker.start()]):
            raise ParseError(self.tool, "'successful run completed'", source)
        return {"faults_per_s": ops * PAGES_PER_BOGO_OP / seconds}

    def version_command(self) -> list[str]:
        return ["stress-ng", "--version"]

    def execution_timeout(self) -> float:
        return self.ops * PAGES_PER_BOGO_OP * 200e-6 + 60.0  # 200 us per fault: gVisor ptrace under load

"""fork-exec: processes spawned and reaped per second, timed by hyperfine (Debian hyperfine).

hyperfine starts `/bin/true` without a shell (`-N`) `runs` times after `warmup` untimed
starts and reports each run's wall time from spawn to reap; the rate is runs / sum(times).
Each run is one process creation, one execve of a small dynamically linked program (the
loader maps libc), its exit and the parent's wait: the whole life of a short process, which
is what build systems and shell scripts pay thousands of times. Under gVisor every step is
done by the Sentry; in a VM the page-table work runs under nested paging.

hyperfine writes its JSON to a file (`--export-json`); the constant script prints a marker
and the file after hyperfine's own summary, so both are kept in the raw output.
"""
from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from pydantic import Field

from ..errors import ParseError
from .base import Benchmark, Metric, Params, search

_SCRIPT = r"""f=$1/vb.hyperfine.json
hyperfine -N --style basic --runs "$2" --warmup "$3" --export-json "$f" /bin/true || exit
echo vb:json
cat "$f" && rm -f "$f"
"""


class ForkExecParams(Params):
    runs: int = Field(300, ge=10, le=1_000_000, description="timed process starts")
    warmup: int = Field(20, ge=0, le=10_000, description="untimed starts before (page cache, loader)")


class ForkExec(Benchmark):
    """Processes spawned, run (/bin/true) and reaped per second, higher is better."""

    name: ClassVar[str] = "fork-exec"
    tool: ClassVar[str] = "hyperfine"
    packages: ClassVar[tuple[str, ...]] = ("hyperfine",)
    Params: ClassVar[type[Params]] = ForkExecParams
    description: ClassVar[str] = "hyperfine -N /bin/true: processes spawned and reaped per second"
    study: ClassVar[dict[str, Any]] = {"runs": 3000, "warmup": 100}
    script: ClassVar[str] = _SCRIPT

    params: ForkExecParams

    def metrics(self) -> list[Metric]:
        return [Metric("spawns_per_s", "1/s", True, "kernel",
                       f"fork+exec+exit+wait of /bin/true (no shell), {self.params.runs} runs")]

    def command(self, workdir: str) -> list[str]:
        return ["sh", "-c", _SCRIPT, "sh", workdir, str(self.params.runs), str(self.params.warmup)]

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        marker = search(r"^vb:json$", stdout, self.tool, source, re.M)
        try:
            doc: Any = json.loads(stdout[marker.end():])
            result = doc["results"][0]
            times = [float(t) for t in result["times"]]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ParseError(self.tool, f"results[0].times in the exported JSON ({exc})", source) from None
        if result.get("command") != "/bin/true":
            raise ParseError(self.tool, f"command '/bin/true' (got {result.get('command')!r})", source)
        if len(times) != self.params.runs:
            raise ParseError(self.tool, f"{self.params.runs} timed runs (got {len(times)})", source)
        codes = result.get("exit_codes") or [0]
        if any(c != 0 for c in codes):
            raise ParseError(self.tool, "exit code 0 in every run", source)
        if min(times) <= 0:
            raise ParseError(self.tool, "positive run times", source)
        return {"spawns_per_s": len(times) / sum(times)}

    def version_command(self) -> list[str]:
        return ["hyperfine", "--version"]

    def execution_timeout(self) -> float:
        return (self.params.runs + self.params.warmup) * 0.2 + 60.0  # 200 ms per start: emulated guests

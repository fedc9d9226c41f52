"""`perf bench` (Debian linux-perf): the shared part of the syscall and context-switch benchmarks.

Both print the same summary:

    # Running 'syscall/basic' benchmark:
    # Executed 1000000 getppid() calls
         Total time: 0.518 [sec]

           0.518146 usecs/op
            1929957 ops/sec

`usecs/op` has six decimals (picoseconds), `Total time` only three (truncated: 7.9 ms prints 0.007), so the per-operation time
is read from `usecs/op`; the executed count must be the one asked for, and the total must agree
with count x usecs/op (a misread line or a tool that stopped early fails the sample).
"""
from __future__ import annotations

import re

from ..errors import ParseError
from .base import search

PACKAGE = "linux-perf"
_FLOAT = r"[0-9]+(?:\.[0-9]+)?"


def usecs_per_op(text: str, executed: str, count: int, source: str) -> float:
    """Microseconds per operation from a `perf bench` summary, checked against `count`.

    `executed` is the regular expression of the "# Executed N ..." line with one group for N."""
    done = search(executed, text, "perf", source, re.M)
    if int(done.group(1)) != count:
        raise ParseError("perf", f"{count} operations executed (got {done.group(1)})", source)
    total = float(search(rf"^\s*Total time: ({_FLOAT}) \[sec\]$", text, "perf", source, re.M).group(1))
    per_op = float(search(rf"^\s*({_FLOAT}) usecs/op$", text, "perf", source, re.M).group(1))
    if per_op <= 0:
        raise ParseError("perf", "a positive usecs/op", source)
    # Total time is cut (not rounded) to whole ms: allow that plus 1 % of the total.
    if abs(per_op * count / 1e6 - total) > 0.0011 + 0.01 * total:
        raise ParseError("perf", f"Total time near {per_op * count / 1e6:.3f} s = {count} x {per_op} us "
                         f"(got {total})", source)
    return per_op


def version_command() -> list[str]:
    return ["perf", "--version"]

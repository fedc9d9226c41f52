"""A workload that makes the memory cgroup it runs in thrash, for the host guard's tests.

`python thrash.py FILE ANON_MIB [SECONDS]` holds ANON_MIB of anonymous memory (every page
written: with no swap, reclaim cannot take it back) and then reads random pages of FILE, one
at a time, until SECONDS have passed (default: until killed). When the cgroup's limit minus
ANON_MIB leaves page cache for a little less than FILE, most pages are read again and again
while resident (the kernel counts them as the working set) and evicted soon after: every
miss is a refault of a working-set page, reclaim at the limit makes room for it, and the
kernel counts both as memory stalls (PSI memory). The cgroup sits at its limit, nothing is
OOM-killed (page cache can always be reclaimed): the state the density guard calls a
thrashing confined host, in which a real board of that size makes no progress.

Measured in a 64 MiB v1 cgroup with 40 MiB held (about 20 MiB left to page cache), share of
6 s stalled (PSI memory some; full within a point of it), at load 0.6-1.1: a 22 MiB file
65 %, 24 MiB 51 %, 28 MiB 40 %, 32 MiB 29 %, 48 MiB 11 %; reading a 48 MiB file
sequentially instead only 8 % (pages read once are never the working set, so their refaults
do not count: only reclaim does). Two reading threads stalled no more than one. Other work
on the CPUs dilutes the share (PSI is a share of all non-idle time, and a task that waits
for a CPU is not stalled on memory): at load 2.3 the 22 MiB file gave some 30 %, full 18 %.

A plain script (argv only, nothing but the standard library) so the test can start it inside
the cgroup from its first page through `python -m virtbench.platforms.cgroups exec`.
"""
from __future__ import annotations

import mmap
import os
import random
import sys
import time

PAGE = mmap.PAGESIZE


def hold(mib: int) -> mmap.mmap:
    """ANON_MIB of anonymous memory, each page written so it is really charged."""
    m = mmap.mmap(-1, mib << 20)
    for off in range(0, len(m), PAGE):
        m[off] = 0x5A
    return m


def read_random(path: str, seconds: float | None) -> int:
    """Read random pages of `path` until `seconds` have passed; how many pages were read."""
    deadline = None if seconds is None else time.monotonic() + seconds
    rnd = random.Random(1)
    reads = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        pages = os.fstat(fd).st_size // PAGE
        while deadline is None or time.monotonic() < deadline:
            for _ in range(1024):
                os.pread(fd, PAGE, rnd.randrange(pages) * PAGE)
            reads += 1024
    finally:
        os.close(fd)
    return reads


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: thrash.py FILE ANON_MIB [SECONDS]", file=sys.stderr)
        return 2
    anon = hold(int(argv[1]))
    reads = read_random(argv[0], float(argv[2]) if len(argv) == 3 else None)
    anon.close()
    print(f"{reads} pages read")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

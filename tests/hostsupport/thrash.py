"""A workload that makes the memory cgroup it runs in thrash, for the host guard's tests.

`python thrash.py FILE ANON_MIB [SECONDS]` holds ANON_MIB of anonymous memory (every page
written: with no swap, reclaim cannot take it back) and then reads FILE from start to end
over and over until SECONDS have passed (default: until killed). When the cgroup's limit
minus ANON_MIB is smaller than FILE, each pass must evict the pages the previous pass read
and read them back from the disk: the reader spends its time in reclaim and in refaults,
which the kernel counts as memory stalls (PSI memory), while the cgroup sits at its limit
and nothing is OOM-killed (page cache can always be reclaimed). That is the state the guard
calls a thrashing confined host: a real board of that size in it makes no progress.

A plain script (argv only, nothing but the standard library) so the test can start it inside
the cgroup from its first page through `python -m virtbench.platforms.cgroups exec`.
"""
from __future__ import annotations

import mmap
import os
import sys
import time

PAGE = mmap.PAGESIZE
CHUNK = 1 << 20


def hold(mib: int) -> mmap.mmap:
    """ANON_MIB of anonymous memory, each page written so it is really charged."""
    m = mmap.mmap(-1, mib << 20)
    for off in range(0, len(m), PAGE):
        m[off] = 0x5A
    return m


def read_forever(path: str, seconds: float | None) -> int:
    """Read `path` whole again and again; the number of passes."""
    deadline = None if seconds is None else time.monotonic() + seconds
    passes = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while deadline is None or time.monotonic() < deadline:
            os.lseek(fd, 0, os.SEEK_SET)
            while os.read(fd, CHUNK):
                pass
            passes += 1
    finally:
        os.close(fd)
    return passes


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: thrash.py FILE ANON_MIB [SECONDS]", file=sys.stderr)
        return 2
    anon = hold(int(argv[1]))
    passes = read_forever(argv[0], float(argv[2]) if len(argv) == 3 else None)
    anon.close()
    print(f"{passes} passes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""The lxc platform's `disk:` option: the container's root filesystem as an ext4 image of that size."""
from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from .. import proc


def tree_bytes(root: Path) -> int:
    """Apparent size of a directory tree (what mkfs -d copies), hard links once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            try:
                st = os.lstat(os.path.join(dirpath, f))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def disk_image(path: Path, root: Path, size: int) -> Path:
    """A sparse ext4 file of `size` bytes holding a copy of the root `root` (mkfs.ext4 -d): the
    container's whole root filesystem, so writes beyond `size` fail with ENOSPC inside it,
    never filling the host's filesystem. LXC's loop backend mounts it in the container."""
    with open(path, "wb") as f:
        f.truncate(size)
    proc.run(["mkfs.ext4", "-q", "-F", "-L", "vbroot", "-d", str(root), str(path)], timeout=600)
    return path


ATTACH_LOCK = Path("/run/virtbench-lxc-loop.lock")
"""Host-wide as the loop devices are: runs with different runtime directories (parallel test
workers, a web worker beside the CLI) must not share a device either."""


@contextlib.contextmanager
def attach_lock() -> Iterator[None]:
    """One loop-backed container starting at a time on this host. LXC's loop backend asks for the
    first free /dev/loopN, then binds its file to it: two starting at once can be given the same
    one, and one fails to mount its rootfs (seen: one of two parallel starts in most tries)."""
    with open(ATTACH_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield

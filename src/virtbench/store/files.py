"""The SQLite store's files: created readable by their owner only, and the one-line answer
when they cannot be (a path below a regular file, a full disk).

Results hold campaigns and host facts; others on the host have no business reading them.
"""
from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

from ..errors import InputError, StoreError
from ..filemodes import PRIVATE_DIR, PRIVATE_FILE, make_private_dirs, owner_only

SQLITE_FILES = ("", "-wal", "-shm", "-journal", ".migrate-lock")
"""A SQLite store's files: the database, its WAL, shared memory, rollback journal, migration lock."""

DISK_FULL_FIX = "free space there, or point --db / VIRTBENCH_DB at a larger filesystem"

LOW_SPACE = 1 << 20
"""Below this many free bytes an SQLite I/O error on opening is a full disk."""


def free_bytes(directory: Path) -> int | None:
    try:
        return shutil.disk_usage(directory).free
    except OSError:
        return None


def size_text(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


SQLITE_HEADER = b"SQLite format 3\x00"


def not_a_database(path: Path) -> str | None:
    """Why an existing path cannot be an SQLite database (None: it is one, an empty file SQLite
    makes one of, or nothing yet), read before SQLite opens it: /dev/null took 10 s to be
    called 'locked', /proc/self/environ 'disk full', a text file a traceback."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    if stat.S_ISDIR(st.st_mode):
        return "it is a directory"
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file (a device, pipe or socket)"
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    if head and head != SQLITE_HEADER:
        return "it is not an SQLite database (its first bytes are something else)"
    if not head and st.st_size == 0 and path.resolve().parts[1:2] in (("proc",), ("sys",)):
        return "it is a kernel file (/proc, /sys), not a database"
    return None


def create_private(path: Path, shown: str, *, tighten: bool) -> None:
    """The SQLite file and the directories leading to it, readable by this user only: missing
    directories made 0700, a new database file 0600 (SQLite gives its WAL and shared-memory
    files the database's mode). tighten: also the existing files of virtbench's own default
    store, made world-readable by older versions. One line, exit 2, when it cannot be."""
    fix = "give --db (or VIRTBENCH_DB) a path in a directory you can write, e.g. sqlite:///results.db"
    blocker = next((p for p in reversed(path.parents) if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise InputError(f"cannot create the results database {path}: {blocker} is a file, not a directory", fix)
    if problem := not_a_database(path):
        raise InputError(f"cannot use {path} as the results database: {problem}",
                         "give --db (or VIRTBENCH_DB) a virtbench results database or the path of a new one, "
                         "e.g. sqlite:///results.db")
    try:
        make_private_dirs(path.parent)
        if not path.exists():  # an existing one is only opened (perhaps read-only) by SQLite
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
    except FileExistsError:
        pass  # created meanwhile by another process
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            free = free_bytes(path.parent)
            raise StoreError(f"disk full: cannot create the results database {shown}"
                             + (f" ({size_text(free)} free on its filesystem)" if free is not None else ""),
                             DISK_FULL_FIX) from None
        raise InputError(f"cannot create the results database {path}: {exc.strerror}", fix) from None
    if tighten:
        for suffix in SQLITE_FILES:
            owner_only(Path(f"{path}{suffix}"), PRIVATE_FILE)
        owner_only(path.parent, PRIVATE_DIR)

"""Who may read what virtbench keeps: its owner only.

The results store holds campaigns and host facts; the image cache and the instance
directories hold guest root filesystems whose setuid-root binaries any local user could
run if they could reach them. So every directory virtbench creates for them is 0700 and
every store file 0600, and directories of virtbench's own that an older version created
world-readable are closed at start (only those this user owns: a directory the
administrator shared on purpose elsewhere is not touched).
"""
from __future__ import annotations

import os
from pathlib import Path

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def make_private_dirs(path: Path) -> None:
    """mkdir -p where every directory created is 0700 (Path.mkdir(parents=True) gives the
    parents the umask's mode, 0755 under the usual one)."""
    missing = []
    for p in (path, *path.parents):
        if p.exists():
            break
        missing.append(p)
    for p in reversed(missing):
        try:
            p.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:  # made meanwhile by another process
            pass


def owner_only(path: Path, mode: int) -> None:
    """chmod path to mode when this user owns it and its group or others have any access."""
    try:
        st = path.stat()
        if st.st_uid == os.geteuid() and st.st_mode & 0o077:
            path.chmod(mode)
    except OSError:
        pass


def private_dirs(*paths: Path, create: bool = True) -> None:
    """Each directory created 0700 if missing (create), else closed to others if this user
    owns it. A directory this user may not create is left to whoever uses it to report."""
    for path in paths:
        if create:
            try:
                make_private_dirs(path)
            except OSError:
                continue
        owner_only(path, PRIVATE_DIR)

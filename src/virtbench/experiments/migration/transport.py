"""How an instance's storage reaches the destination: the seam between "another directory or
filesystem on this host" (LocalTransport) and "another host" (over SSH, when several hosts
exist). The offline migration only calls this interface, so a remote destination is a new
Transport, not a new migration.

Every copy the migration makes at a destination is recorded under the state directory before
it is written (`Leftovers`), so the experiment, a failure and `virtbench cleanup` after a crash
all remove it.
"""
from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ... import proc
from ...platforms import mounts
from ...platforms.base import Paths
from . import storage


class Transport(Protocol):
    """Moves directory trees to one destination root."""

    root: Path

    def describe(self) -> str: ...

    def free_bytes(self) -> int: ...

    def facts(self, measure: bool = True) -> storage.StorageFacts: ...

    def copy(self, src: Path, dest: Path) -> int:
        """Copy the tree src to dest (under root), durable on return; returns bytes moved."""

    def remove(self, dest: Path) -> None: ...


class LocalTransport:
    """A destination directory on this host, typically on another filesystem or disk.

    `cp -a` keeps owners, modes, xattrs and overlayfs whiteouts (character devices) as they
    are, and `sync -f` makes the copy durable before the clock stops: the time is the
    storage's, not the page cache's."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def describe(self) -> str:
        return f"directory {self.root} on this host"

    def free_bytes(self) -> int:
        return storage.free_bytes(self.root)

    def facts(self, measure: bool = True) -> storage.StorageFacts:
        return storage.measure(self.root) if measure else storage.facts(self.root)

    def copy(self, src: Path, dest: Path) -> int:
        moved = storage.tree_bytes(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        proc.run(["cp", "-a", "--sparse=auto", "--no-target-directory", str(src), str(dest)], timeout=3600)
        proc.run(["sync", "-f", str(dest)], timeout=600)
        return moved

    def remove(self, dest: Path) -> None:
        mounts.safe_rmtree(dest)


class Leftovers:
    """The destination copies of one run, written down before they exist (crash-safe)."""

    def __init__(self, paths: Paths, run_id: str) -> None:
        self.file = paths.state / "migration" / f"{run_id}.json"
        self._lock = threading.Lock()  # instances move in parallel threads

    def _read(self) -> list[str]:
        try:
            return list(json.loads(self.file.read_text()))
        except (OSError, ValueError):
            return []

    def add(self, path: Path) -> None:
        with self._lock:
            entries = self._read()
            if str(path) not in entries:
                self.file.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.file.with_suffix(".tmp")
                tmp.write_text(json.dumps([*entries, str(path)]))
                tmp.replace(self.file)

    def remove_all(self) -> list[str]:
        """Delete every recorded copy (never through a mount point), then the record."""
        removed = []
        for entry in self._read():
            p = Path(entry)
            if p.exists() or p.is_symlink():
                mounts.safe_rmtree(p)
                removed.append(f"migration copy {p}")
        self.file.unlink(missing_ok=True)
        return removed


def cleanup_records(d: Path, run_id: str | None, remove: Callable[[str], list[str]]) -> list[str]:
    """Run `remove(run_id)` for each run's record file (RUN.json) in d, or only run_id's; then d
    itself if it is empty. What each removed, in words."""
    if not d.is_dir():
        return []
    removed: list[str] = []
    for f in sorted(d.glob("*.json")):
        if run_id is None or f.stem == run_id:
            removed += remove(f.stem)
    try:
        os.rmdir(d)
    except OSError:
        pass
    return removed


def cleanup(paths: Paths, run_id: str | None = None) -> list[str]:
    """Remove the destination copies of one run (or of every run) left by a failure or crash."""
    return cleanup_records(paths.state / "migration", run_id, lambda rid: Leftovers(paths, rid).remove_all())

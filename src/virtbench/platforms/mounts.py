"""Mounts and instance directories shared by the chroot/OCI/LXC/QEMU platforms.

These platforms run the image's own files, so a wrong unmount order or an rm that follows a
still-mounted bind into the image would destroy the image (or the host's /sys). Everything
that deletes therefore first unmounts in reverse mount order, re-reads /proc/self/mountinfo
to prove nothing is left, and only then removes.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import proc
from ..errors import InputError, VirtbenchError
from .naming import INSTANCE_PREFIX

META = "virtbench.json"
"""Per-instance file naming platform and run, so cleanup finds exactly its own leftovers."""


# -- /proc/self/mountinfo -----------------------------------------------------------------
@dataclass(frozen=True)
class MountEntry:
    mount_id: int
    parent_id: int
    root: str
    mount_point: str
    options: str
    fstype: str
    source: str


def unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as \\ooo octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[MountEntry]:
    """Entries in the kernel's order (parents before children, older before newer)."""
    entries = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split(" ")
        sep = fields.index("-", 6)
        entries.append(MountEntry(
            mount_id=int(fields[0]), parent_id=int(fields[1]), root=unescape(fields[3]),
            mount_point=unescape(fields[4]), options=fields[5],
            fstype=fields[sep + 1], source=unescape(fields[sep + 2])))
    return entries


def read_mountinfo() -> list[MountEntry]:
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        return parse_mountinfo(f.read())


def mounts_under(directory: Path | str, entries: list[MountEntry] | None = None) -> list[MountEntry]:
    """Mounts at or below directory, in mount order."""
    base = os.path.realpath(directory).rstrip("/") or "/"
    prefix = base if base == "/" else base + "/"
    entries = read_mountinfo() if entries is None else entries
    return [e for e in entries if e.mount_point == base or e.mount_point.startswith(prefix)]


# -- mounting -------------------------------------------------------------------------------
def _mount(*args: str | Path) -> None:
    proc.run(["mount", *map(str, args)], timeout=60)


def bind(src: Path | str, dst: Path | str, *, recursive: bool = False, readonly: bool = False) -> None:
    """Bind mount; read-only takes a second, per-mount remount (the source stays writable)."""
    _mount("--rbind" if recursive else "--bind", src, dst)
    if readonly:
        _mount("-o", "remount,bind,ro", dst)


def make_private(target: Path | str, *, recursive: bool = False) -> None:
    """Stop mount events propagating between this mount and its source's peers."""
    _mount("--make-rprivate" if recursive else "--make-private", target)


def make_rslave(target: Path | str) -> None:
    """Host mount changes still appear inside, but unmounting inside never reaches the host.

    Without this, unmounting an rbind of /sys on a systemd host (shared propagation)
    unmounts the host's own /sys/fs/cgroup."""
    _mount("--make-rslave", target)


def mount_fs(fstype: str, target: Path | str, options: str | None = None) -> None:
    _mount("-t", fstype, *(["-o", options] if options else []), fstype, target)


def check_overlay_path(p: Path) -> None:
    if any(c in str(p) for c in ",:\\"):
        raise InputError(f"path {p} contains ',', ':' or '\\' which overlayfs options cannot hold",
                         "use a state directory and image cache without those characters")


def mount_overlay(lower: Path, instance_dir: Path, upper: Path | None = None) -> Path:
    """The image as a copy-on-write root: writes land in instance_dir/upper (or `upper`, with
    its work dir beside it: a migrated layer), never in lower."""
    upper = upper or instance_dir / "upper"
    work, merged = upper.parent / (upper.name + ".work"), instance_dir / "rootfs"
    if upper == instance_dir / "upper":
        work = instance_dir / "work"
    for p in (lower, upper, work, merged):
        check_overlay_path(p)
    for d in (upper, work, merged):
        d.mkdir(parents=True, exist_ok=True)
    _mount("-t", "overlay", "overlay", "-o",
           f"lowerdir={lower},upperdir={upper},workdir={work}", merged)
    make_private(merged)
    return merged


def unmount_all(directory: Path | str, *, passes: int = 5) -> list[str]:
    """Unmount everything at or under directory, newest first; lazily if a mount is busy."""
    done: list[str] = []
    found = mounts_under(directory)
    ids = {e.mount_id for e in found}
    for top in reversed([e for e in found if e.parent_id not in ids]):
        # Private first: if a crash came between rbind and make-rslave, a shared copy of /sys
        # would pass our unmounts on to the host. Then one `umount -R` per tree.
        proc.run(["mount", "--make-rprivate", top.mount_point], timeout=60, check=False)
        if proc.run(["umount", "-R", top.mount_point], timeout=60, check=False).ok:
            done += [e.mount_point for e in found if e.mount_point == top.mount_point
                     or e.mount_point.startswith(top.mount_point.rstrip("/") + "/")]
    for _ in range(passes):
        found = mounts_under(directory)
        if not found:
            return done
        for entry in reversed(found):
            r = proc.run(["umount", entry.mount_point], timeout=60, check=False)
            if not r.ok and "not mounted" not in r.stderr:
                proc.run(["umount", "-l", entry.mount_point], timeout=60, check=False)
            done.append(entry.mount_point)
    left = mounts_under(directory)
    if left:
        raise VirtbenchError(f"could not unmount {', '.join(e.mount_point for e in left)}",
                             "stop the processes using them (fuser -m), then run virtbench cleanup")
    return done


def safe_rmtree(directory: Path) -> None:
    """Delete a directory only if nothing is mounted in it (rm would follow into the image)."""
    if not directory.exists() and not directory.is_symlink():
        return
    left = mounts_under(directory)
    if left:
        raise VirtbenchError(f"refusing to delete {directory}: {left[0].mount_point} is still mounted",
                             "run virtbench cleanup")
    shutil.rmtree(directory)


# -- instance directories -------------------------------------------------------------------
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


def instance_name(name: str) -> str:
    """The runtime-visible name: prefixed so cleanup recognises it, and a safe alphabet because
    it becomes paths, cgroup dirs and runtime ids."""
    if not NAME_RE.fullmatch(name):
        raise InputError(f"invalid instance name {name!r}", "use letters, digits, '-', '_' or '.'")
    return name if name.startswith(INSTANCE_PREFIX) else INSTANCE_PREFIX + name


def teardown_dir(directory: Path) -> list[str]:
    """Unmount everything in an instance dir, then delete it; returns what was unmounted."""
    unmounted = unmount_all(directory)
    safe_rmtree(directory)
    return unmounted


def write_meta(directory: Path, data: dict[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / (META + ".tmp")
    try:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(directory / META)
    except BaseException:  # a full disk: no half-written file left for cleanup to stumble on
        tmp.unlink(missing_ok=True)
        raise


def read_meta(directory: Path) -> dict[str, Any] | None:
    try:
        return json.loads((directory / META).read_text())
    except (OSError, ValueError):
        return None


def leftovers(parent: Path, platform: str, run_id: str | None) -> list[tuple[Path, dict[str, Any]]]:
    """Instance dirs under parent that this platform made (of one run, or all)."""
    found: list[tuple[Path, dict[str, Any]]] = []
    if not parent.is_dir():
        return found
    for d in sorted(parent.iterdir()):
        meta = read_meta(d) if d.is_dir() and not d.is_symlink() else None
        if meta and meta.get("platform") == platform and run_id in (None, meta.get("run_id")):
            found.append((d, meta))
    return found


# -- probing without an image -------------------------------------------------------------
def skeleton_rootfs(directory: Path) -> list[str]:
    """A tiny root filesystem for probes: empty dirs plus the host's program dirs to bind.

    Probes must not depend on a built image, yet must really start something; binding the
    host's /usr (and /bin, /lib... where they are not merged-usr symlinks) gives `true`."""
    directory.mkdir(parents=True, exist_ok=True)
    binds = []
    for d in ("proc", "sys", "dev", "tmp", "etc", "usr"):
        (directory / d).mkdir(exist_ok=True)
    binds.append("/usr")
    for d in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / d
        if host.is_symlink():
            target = directory / d
            if not target.is_symlink():
                target.symlink_to(os.readlink(host))
        elif host.is_dir():
            (directory / d).mkdir(exist_ok=True)
            binds.append(str(host))
    return binds

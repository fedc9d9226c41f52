"""The lxc platform's `proxmox: true`: containers as Proxmox VE makes them by default (study 000).

Proxmox VE (pve-container) creates containers unprivileged (ids 0-65535 of the container mapped
to 100000-165535 of the host), with LXC's lxcfs hooks (the container's /proc/meminfo, cpuinfo,
uptime and stat show its limits: lxcfs must run on the host, which needs FUSE), and turns
`cores: N` into a set of N CPUs (pvestatd rebalances which ones; no CPU quota unless `cpulimit`),
`memory`/`swap` into the memory and memory+swap limits, as the plain platform does.

Here: `cpus: N` becomes a cpuset of N CPUs (a stable pick per container, spread over the host's
CPUs) instead of a CFS quota; the image's root filesystem is used through a copy whose file
owners are shifted by 100000 (made once per image and kept beside the containers), so the
mapped root owns it; the writable layer is given to the mapped root too. A host without FUSE,
without a running lxcfs or without user namespaces is refused in one line before anything starts.
"""
from __future__ import annotations

import os
import shutil
import zlib
from pathlib import Path

from .. import proc
from ..errors import InputError

ID_BASE = 100000
ID_COUNT = 65536
LXCFS = Path("/var/lib/lxcfs")
"""Where lxcfs mounts its files; LXC's lxcfs hook (/usr/share/lxcfs/lxc.mount.hook) reads them there."""


def check_host(name: str, lxcfs_dir: Path = LXCFS, fuse: Path = Path("/dev/fuse"),
               userns: Path = Path("/proc/self/uid_map"), subuid: Path = Path("/etc/subuid"),
               subgid: Path = Path("/etc/subgid")) -> None:
    """Refuse in one line what a host lacks for Proxmox's defaults."""
    fix = "install lxcfs and start it (`systemctl start lxcfs`, or `lxcfs /var/lib/lxcfs`), or drop proxmox:"
    if not fuse.exists():
        raise InputError(f"{name}: proxmox: no {fuse} (FUSE), which lxcfs needs", "load the fuse module, or drop proxmox:")
    if not userns.exists():
        raise InputError(f"{name}: proxmox: this kernel has no user namespaces (unprivileged containers)",
                         "use a kernel with CONFIG_USER_NS, or drop proxmox:")
    if not (lxcfs_dir / "proc" / "meminfo").exists():
        raise InputError(f"{name}: proxmox: lxcfs is not running (nothing mounted at {lxcfs_dir})", fix)
    if shutil.which("newuidmap"):  # LXC maps ids with it when installed, and it reads root's ranges
        for f in (subuid, subgid):
            if not delegated(f):
                raise InputError(f"{name}: proxmox: {f} gives root no ids {ID_BASE}-{ID_BASE + ID_COUNT - 1} "
                                 "(LXC maps through newuidmap here)",
                                 f"add the line root:{ID_BASE}:{ID_COUNT} to /etc/subuid and /etc/subgid, as Proxmox "
                                 "VE has them, or drop proxmox:")


def delegated(path: Path, user: str = "root") -> bool:
    """Whether a subordinate id file gives `user` the whole range the containers are mapped to."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        who, _, rest = line.strip().partition(":")
        start, _, count = rest.partition(":")
        if who in (user, "0") and start.isdigit() and count.isdigit() and \
                int(start) <= ID_BASE and int(start) + int(count) >= ID_BASE + ID_COUNT:
            return True
    return False


def idmap_lines() -> list[str]:
    return [f"lxc.idmap = u 0 {ID_BASE} {ID_COUNT}", f"lxc.idmap = g 0 {ID_BASE} {ID_COUNT}"]


def cpuset_for(name: str, cores: float, cpus: int | None = None) -> str:
    """N whole CPUs for a container, as Proxmox's `cores: N` gives it: a stable pick per name,
    spread over the host's CPUs (pvestatd balances them; here the name's hash picks the first)."""
    total = cpus or os.cpu_count() or 1
    n = max(1, min(total, round(cores)))
    first = zlib.crc32(name.encode()) % total
    return ",".join(str((first + i) % total) for i in range(n)) if n < total else f"0-{total - 1}"


def shifted_rootfs(source: Path, cache: Path) -> Path:
    """A copy of an image's root filesystem owned by the container's mapped ids (+ID_BASE), made once
    per image (cache/<image dir name>) and reused; made in a temporary directory, renamed when whole."""
    target = cache / f"{source.parent.name}-{ID_BASE}" / "rootfs"
    if (target.parent / "complete").exists():
        return target
    tmp = cache / f".{source.parent.name}-{ID_BASE}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    proc.run(["cp", "-a", "--reflink=auto", f"{source}/.", str(tmp / "rootfs")], timeout=1800)
    def shift(entry: str) -> None:
        st = os.lstat(entry)
        os.lchown(entry, st.st_uid + ID_BASE, st.st_gid + ID_BASE)

    shift(str(tmp / "rootfs"))
    for dirpath, dirs, files in os.walk(tmp / "rootfs"):
        for x in dirs + files:
            shift(os.path.join(dirpath, x))
    (tmp / "complete").write_text("")
    shutil.rmtree(target.parent, ignore_errors=True)
    tmp.rename(target.parent)
    return target


def give_to_root(path: Path) -> None:
    """The container's writable layer owned by its mapped root."""
    os.chown(path, ID_BASE, ID_BASE)


def traversable(path: Path) -> None:
    """Let the container's mapped root reach path: search (o+x, no listing) added to each of its
    directories that lacks it. virtbench's state directory is 0700 (the results database is
    private), and an unprivileged container's root, host uid ID_BASE, could not reach its own
    rootfs under it (lxc-start: "Could not access ... Please grant it x access")."""
    for p in (path, *path.parents):
        st = p.stat()
        if not st.st_mode & 0o001 and st.st_uid == os.geteuid():
            p.chmod(st.st_mode & 0o7777 | 0o001)

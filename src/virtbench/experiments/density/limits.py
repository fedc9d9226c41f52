"""What stops density besides memory: the kernel's limits (bridge ports, pids, inotify
instances) predicted before the next instances start, a runtime's error text classified by
the limit it points at, and a full disk told apart from inotify's ENOSPC."""
from __future__ import annotations

import os
import re
from pathlib import Path

BRIDGE_PORT_LIMIT = 1023
"""A Linux bridge holds at most BR_MAX_PORTS = 1024 ports (port 0 is reserved)."""

_LIMIT_PATTERNS = (
    (r"exchange full|EXFULL", "bridge ports: a Linux bridge holds at most 1023 ports"),
    (r"too many open files|inotify|EMFILE", "inotify instances or open files (fs.inotify.max_user_instances, "
                                            "ulimit -n)"),
    (r"resource temporarily unavailable|EAGAIN|fork.*failed|pids\.max", "pids (kernel.pid_max, threads-max or a "
                                                                        "pids cgroup)"),
    (r"cannot allocate memory|ENOMEM|out of memory", "memory (the runtime could not allocate)"),
    (r"no space left on device|ENOSPC", "disk space or inotify watches (ENOSPC)"),
)


def classify_failure(text: str) -> str | None:
    """Name the limit a runtime's error text points at (None: not a known limit)."""
    for pattern, name in _LIMIT_PATTERNS:
        if re.search(pattern, text, re.IGNORECASE):
            return name
    return None


def _sysctl(name: str) -> int | None:
    try:
        return int(Path("/proc/sys", *name.split(".")).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def inotify_instances(uid: int = 0) -> int:
    """inotify instances held by processes of `uid` (what fs.inotify.max_user_instances caps)."""
    count = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify":
                    count += 1
        except OSError:
            continue
    return count


def kernel_usage(network: str) -> dict[str, tuple[int, int, str]]:
    """Use and maximum of the kernel limits that stop density early: {name: (used, max, what)}."""
    out: dict[str, tuple[int, int, str]] = {}
    if network == "bridge":
        for bridge in ("vbbr0", "docker0"):
            brif = Path(f"/sys/class/net/{bridge}/brif")
            if brif.is_dir():
                out[f"bridge ports ({bridge})"] = (len(os.listdir(brif)), BRIDGE_PORT_LIMIT, "BR_MAX_PORTS")
    tasks = int(Path("/proc/loadavg").read_text().split()[3].split("/")[1])
    caps = [(c, n) for n in ("kernel.pid_max", "kernel.threads-max") if (c := _sysctl(n))]
    if caps:
        cap, name = min(caps)
        out["pids"] = (tasks, cap, name)
    if (icap := _sysctl("fs.inotify.max_user_instances")) is not None:
        out["inotify instances"] = (inotify_instances(), icap, "fs.inotify.max_user_instances")
    return out


def next_instance_blocked(before: dict[str, tuple[int, int, str]] | None,
                          now: dict[str, tuple[int, int, str]], took_instances: int = 1) -> dict | None:
    """A kernel limit the next instance would cross: what one instance of the last
    `took_instances` took (at least 1) added to what is used now exceeds the maximum. None when clear."""
    for room in kernel_room(before, now, took_instances).values():
        if room["room"] < 1:
            return {k: v for k, v in room.items() if k != "room"}
    return None


def kernel_room(before: dict[str, tuple[int, int, str]] | None, now: dict[str, tuple[int, int, str]],
                took_instances: int = 1) -> dict[str, dict]:
    """Per kernel limit: how many more instances fit (`room`), each costing what one of the last
    `took_instances` started took (at least 1 unit), with the readings behind it."""
    out = {}
    for name, (used, cap, what) in now.items():
        took = used - before[name][0] if before and name in before else 0
        cost = max(1, -(-took // max(1, took_instances)))
        out[name] = {"limit": name, "setting": what, "used": used, "max": cap, "last_instance_took": cost,
                     "room": max(0, (cap - used) // cost)}
    return out


DISK_FULL_FREE = 64 << 20
"""ENOSPC with less than this free on the state directory's filesystem is a full disk (not
inotify watches, whose exhaustion also says ENOSPC)."""


def disk_full(text: str, where: Path) -> dict | None:
    """The evidence that an error is the host's disk being full: ENOSPC in the error and
    little left on the filesystem of `where` (the state directory: instances' layers, the
    store) or of a path the error names. None otherwise."""
    if not re.search(r"no space left on device|ENOSPC|errno 28|disk is full", text, re.IGNORECASE):
        return None
    for candidate in [where, *(Path(p) for p in re.findall(r"(/[\w.+@-]+(?:/[\w.+@-]+)*)", text))]:
        while not candidate.exists() and candidate != candidate.parent:
            candidate = candidate.parent
        try:
            st = os.statvfs(candidate)
        except OSError:
            continue
        free, size = st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
        if free <= max(DISK_FULL_FREE, size // 100):
            return {"path": str(candidate), "free_bytes": free, "size_bytes": size,
                    "free_inodes": st.f_favail, "error": text[-1500:]}
    return None

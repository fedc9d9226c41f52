"""cgroups: the host's hierarchy mode, CPU limits checked up front, leftover cgroups removed."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import InputError
from .mounts import MountEntry, read_mountinfo

CGROUP_ROOT = Path("/sys/fs/cgroup")


def parse_cpulist(text: str) -> set[int]:
    """'0-2,5' -> {0, 1, 2, 5} (the kernel's cpulist format, also used by cpuset options)."""
    cpus: set[int] = set()
    for part in filter(None, text.strip().split(",")):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def check_limits(options: Any, platform: str) -> None:
    """Limits this host cannot honour fail the campaign up front, not at the first create."""
    try:
        online = parse_cpulist(Path("/sys/devices/system/cpu/online").read_text())
    except OSError:
        online = set(os.sched_getaffinity(0))
    if options.cpus is not None and options.cpus > len(online):
        raise InputError(f"{platform}: cpus={options.cpus:g} but this host has {len(online)} CPUs",
                         f"use cpus <= {len(online)}")
    missing = parse_cpulist(options.cpuset or "") - online
    if missing:
        raise InputError(f"{platform}: cpuset {options.cpuset} names CPUs this host does not have "
                         f"({', '.join(map(str, sorted(missing)))})",
                         f"online CPUs: {min(online)}-{max(online)}")


def cgroup_mode(entries: list[MountEntry] | None = None) -> str:
    """'v2' (unified), 'hybrid' (v1 controllers plus a cgroup2 mount) or 'v1'."""
    entries = read_mountinfo() if entries is None else entries
    types = {e.mount_point: e.fstype for e in entries if e.mount_point.startswith(str(CGROUP_ROOT))}
    if types.get(str(CGROUP_ROOT)) == "cgroup2":
        return "v2"
    return "hybrid" if "cgroup2" in types.values() else "v1"


def remove_cgroups(relative: str) -> list[str]:
    """rmdir a leftover cgroup in every hierarchy; the kernel refuses while tasks remain."""
    removed = []
    for d in [CGROUP_ROOT / relative, *CGROUP_ROOT.glob(f"*/{relative}")]:
        if d.is_dir():
            try:
                d.rmdir()
                removed.append(f"cgroup {d}")
            except OSError:
                pass
    return removed

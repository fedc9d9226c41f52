"""Where a pod's cgroups are on its node, found by the pod's UID (what the kubelet names them by).

The kubelet puts a pod in `kubepods[/burstable|/besteffort]/pod<UID>` under its cgroup root
(cgroupfs driver), or `kubepods[-QOS]-pod<UID with _>.slice` (systemd driver), and each
container in a child named by its container ID (`<ID>` or `cri-containerd-<ID>.scope`). Only
readable on the node itself (where the platform runs with `hosts:` naming the node, or a node
sharing this host's cgroup tree): elsewhere nothing is found, and OOM kills are read from the
pod's status alone.
"""
from __future__ import annotations

import os
from collections import deque
from pathlib import Path

from .. import cgroups

MAX_DEPTH = 7


def hierarchy(controller: str) -> Path:
    """The directory of a controller's hierarchy (v2: the unified root)."""
    if cgroups.is_v2():
        return cgroups.root()
    for name in (controller, f"{controller},cpuacct", f"cpu,{controller}", f"cpuacct,{controller}"):
        d = cgroups.root() / name
        if d.is_dir():
            return d
    return cgroups.root() / controller


def pod_dir_names(uid: str) -> set[str]:
    flat = uid.replace("-", "_")
    return {f"pod{uid}", *(f"kubepods{q}-pod{flat}.slice" for q in ("", "-burstable", "-besteffort"))}


def find_pod(uid: str, root: Path) -> Path | None:
    """The pod's directory under `root` (breadth first, a few levels deep), or None."""
    wanted = pod_dir_names(uid)
    todo: deque[tuple[Path, int]] = deque([(root, 0)])
    while todo:
        here, depth = todo.popleft()
        try:
            entries = list(os.scandir(here))
        except OSError:
            continue
        for e in entries:
            if not e.is_dir(follow_symlinks=False):
                continue
            if e.name in wanted:
                return Path(e.path)
            if depth < MAX_DEPTH:
                todo.append((Path(e.path), depth + 1))
    return None


def container_dir(pod: Path, container_id: str | None) -> Path:
    """The container's own directory in the pod's (the pod's itself when it has none: gVisor)."""
    if container_id:
        cid = container_id.split("://", 1)[-1]
        for name in (cid, f"cri-containerd-{cid}.scope", f"docker-{cid}.scope", f"crio-{cid}.scope"):
            if (pod / name).is_dir():
                return pod / name
    return pod


def relative(path: Path, controller: str = "memory") -> str:
    """A cgroup directory as the path relative to its hierarchy's root (what cgroups.py takes)."""
    return "/" + str(path.relative_to(hierarchy(controller)))


def memory_cgroup(uid: str, container_id: str | None) -> str | None:
    """The container's memory cgroup (relative): the victim's own cgroup counts a v1 OOM kill."""
    pod = find_pod(uid, hierarchy("memory"))
    return relative(container_dir(pod, container_id)) if pod is not None else None


def cpu_usage_ns(uid: str) -> int | None:
    """The pod's CPU time so far (ns): v1 cpuacct.usage, v2 cpu.stat usage_usec."""
    pod = find_pod(uid, hierarchy("cpuacct"))
    if pod is None:
        return None
    try:
        if cgroups.is_v2():
            stat = dict(line.split(" ", 1) for line in (pod / "cpu.stat").read_text().splitlines() if " " in line)
            return int(stat["usage_usec"]) * 1000
        return int((pod / "cpuacct.usage").read_text())
    except (OSError, KeyError, ValueError):
        return None

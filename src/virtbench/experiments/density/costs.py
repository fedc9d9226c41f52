"""What the instances of a density count cost at idle, read from the kernel before the workload.

Per measured count (fleet idle, after `settle`):
- the confining parent's memory: usage, and usage minus its reclaimable page cache ("held":
  what the guard and a real host of that size must keep);
- the memory of the host-side processes that serve the instances from outside their own
  cgroups (the platform's `host_processes`: shims, LXC's monitors, conmon): their PSS
  (proportional set size: shared pages split among their users), all of it and the part
  outside the confining parent (which the parent's usage does not hold). Outside the parent
  only processes started since the search began count: on a shared host other work's
  monitors and shims are not this fleet's, and a daemon serving everyone (dockerd,
  containerd) is not counted (its growth per instance shows in the host's MemAvailable drop);
- CPU time over the settle window: of the instances (the parent's cpuacct, else each
  instance's cgroup) and of those host-side processes.
The density model (model.py) regresses each against the count: per instance and fixed part.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ...platforms import cgroups, cpustat


@dataclass
class HostSide:
    """The platform's host-side processes outside the instances' cgroups."""

    processes: int = 0
    pss: int = 0
    pss_outside_parent: int = 0
    cpu_ns: int = 0
    names: dict[str, int] = field(default_factory=dict)
    """How many processes of each name were found (evidence: what was counted)."""


@dataclass
class IdleReading:
    time: float
    count: int
    parent_usage: int | None
    parent_held: int | None
    instances_cpu_ns: int | None
    host_side: HostSide


def _pss(pid: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _names(pid: str) -> set[str]:
    """The process's command name, and where that is `exe` (a runtime that re-executed itself
    as /proc/self/exe: runsc's gofer and sandbox) the base name of its argv[0]. Other processes'
    command lines are not read: reading one waits for its memory map, slow on a pressed host."""
    out = set()
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        out.add(comm)
        if comm == "exe":
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0].decode(errors="replace")
            if argv0:
                out.add(os.path.basename(argv0.split()[0]))
    except (OSError, IndexError):
        pass
    return out


def _started(pid: str) -> float | None:
    """When a process started (seconds since the epoch), from /proc/PID/stat and the boot time."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(int(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines()
                    if ln.startswith("btime "))
    except (OSError, IndexError, ValueError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def host_side(names: tuple[str, ...], instance_cgroups: list[str], parent: str | None,
              since: float | None = None) -> HostSide:
    """The host-side processes named `names` (command name, or argv[0]'s base name; a name of
    15 characters also matches longer ones, as the kernel cuts command names there) that are
    not in an instance's own memory cgroup: in the confining parent (LXC's monitors), or,
    outside it, started since `since` (the search's start: the shims and monitors of this
    fleet, not those of other work on the host, nor a daemon serving everyone)."""
    out = HostSide()
    if not names:
        return out
    inside = tuple(c.rstrip("/") + "/" for c in instance_cgroups if c)
    top = parent.strip("/") if parent else None
    for pid in filter(str.isdigit, os.listdir("/proc")):
        found = _names(pid)
        name = next((n for n in names for f in found if f == n or (len(f) == 15 and n.startswith(f))), None)
        if name is None:
            continue
        cg = cgroups.memory_cgroup_of(int(pid))
        if cg is None or (cg.rstrip("/") + "/").startswith(inside):
            continue
        in_parent = top is not None and (cg.strip("/") + "/").startswith(top + "/")
        if not in_parent and since is not None and (_started(pid) or 0) < since:
            continue
        pss = _pss(pid)
        if pss is None:
            continue
        out.processes += 1
        out.pss += pss
        if not in_parent:
            out.pss_outside_parent += pss
        out.cpu_ns += cpustat.process_cpu_ns(int(pid)) or 0
        out.names[name] = out.names.get(name, 0) + 1
    return out


def instances_cpu_ns(instance_cgroups: list[str], parent: str | None) -> int | None:
    """CPU time of the instances so far: the confining parent's (it holds them all), else the
    sum over each instance's own cgroup (the same relative path in the CPU hierarchy)."""
    if parent:
        return cpustat.read(parent).usage_ns
    readings = [cpustat.read(c).usage_ns for c in instance_cgroups if c]
    known = [r for r in readings if r is not None]
    return sum(known) if known else None


def read_idle(count: int, instance_cgroups: list[str], parent: str | None,
              names: tuple[str, ...], since: float | None = None) -> IdleReading:
    usage = cgroups.memory_usage(parent) if parent else None
    held = None
    if usage is not None:
        held = usage - (cgroups.memory_reclaimable(parent or "") or 0)
    return IdleReading(time.monotonic(), count, usage, held, instances_cpu_ns(instance_cgroups, parent),
                       host_side(names, instance_cgroups, parent, since))


def idle_samples(before: IdleReading, after: IdleReading) -> list[dict]:
    """The cost readings of one count as samples (instance 0, category `cost`): memory at the
    end of the settle window, CPU as CPU-seconds per second over it."""
    base = {"instance": 0, "category": "cost", "higher_is_better": False}
    out = []
    if after.parent_usage is not None:
        out.append({"metric": "parent_usage_idle", "value": float(after.parent_usage), "unit": "B", **base})
    if after.parent_held is not None:
        out.append({"metric": "parent_held_idle", "value": float(after.parent_held), "unit": "B", **base})
    hs = after.host_side
    if hs.processes:
        out += [{"metric": "host_side_pss", "value": float(hs.pss), "unit": "B", **base},
                {"metric": "host_side_pss_outside_parent", "value": float(hs.pss_outside_parent), "unit": "B",
                 **base}]
    window = after.time - before.time
    if window > 0.2:
        if after.instances_cpu_ns is not None and before.instances_cpu_ns is not None:
            out.append({"metric": "idle_cpu", "value": max(0.0, (after.instances_cpu_ns - before.instances_cpu_ns)
                                                           / 1e9 / window), "unit": "CPU", **base})
        if hs.processes:
            out.append({"metric": "host_side_idle_cpu", "value": max(0.0, (hs.cpu_ns - before.host_side.cpu_ns)
                                                                     / 1e9 / window), "unit": "CPU", **base})
    return out

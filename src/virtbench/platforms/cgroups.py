"""cgroups: the host's hierarchy mode, CPU limits checked up front, leftover cgroups removed;
memory cgroups read and written directly: OOM evidence, usage, and a confining parent.

Runtimes' own OOM flags are unreliable (Docker's `OOMKilled` misses kills of a non-init
process), so OOM kills are read from the kernel's counters: cgroup v2 `memory.events`
(`oom_kill`), cgroup v1 `memory.failcnt`, `memory.memsw.failcnt` and `memory.oom_control`
(`oom_kill`, kernels >= 4.13). A confining parent (`Confinement`) puts every instance of an
experiment under one memory limit, so a density run can fill "a 1 GiB host" on a bigger
machine without touching the host's own memory.

`python -m virtbench.platforms.cgroups exec --cgroup REL -- ARGV` starts ARGV inside the
cgroup REL (every hierarchy): how a process-launched runtime (QEMU) is confined from its
first page on, where moving it afterwards would leave its boot memory charged elsewhere.
"""
from __future__ import annotations

import functools
import os
import re
import signal
import sys
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError, VirtbenchError
from . import units
from .mounts import MountEntry, read_mountinfo

CGROUP_ROOT = Path("/sys/fs/cgroup")


def parse_cpulist(text: str) -> set[int]:
    """'0-2,5' -> {0, 1, 2, 5} (the kernel's cpulist format, also used by cpuset options)."""
    cpus: set[int] = set()
    for part in filter(None, text.strip().split(",")):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def online_cpus() -> set[int]:
    """This host's online CPUs (the numbers a cpuset may name)."""
    try:
        return parse_cpulist(Path("/sys/devices/system/cpu/online").read_text())
    except OSError:
        return set(os.sched_getaffinity(0))


def check_limits(options: Any, platform: str) -> None:
    """Limits this host cannot honour fail the campaign up front, not at the first create."""
    online = online_cpus()
    if options.cpus is not None and options.cpus > len(online):
        raise InputError(f"{platform}: cpus={options.cpus:g} but this host has {len(online)} CPUs",
                         f"use cpus <= {len(online)}")
    missing = parse_cpulist(options.cpuset or "") - online
    if missing:
        raise InputError(f"{platform}: cpuset {options.cpuset} names CPUs this host does not have "
                         f"({', '.join(map(str, sorted(missing)))})",
                         f"online CPUs: {min(online)}-{max(online)}")


def cgroup_mode(entries: list[MountEntry] | None = None) -> str:
    """'v2' (unified), 'hybrid' (v1 controllers plus a cgroup2 mount) or 'v1'. Without entries:
    this host's, read once per process (_host_mode)."""
    if entries is None:
        return _host_mode()
    types = {e.mount_point: e.fstype for e in entries if e.mount_point.startswith(str(CGROUP_ROOT))}
    if types.get(str(CGROUP_ROOT)) == "cgroup2":
        return "v2"
    return "hybrid" if "cgroup2" in types.values() else "v1"


@functools.cache
def _host_mode() -> str:
    """The host's mode, read from /proc/self/mountinfo once: a density fleet's bind mounts make
    that file hundreds of lines long, and reading it for every instance's counters took 93 % of
    a 1 GiB runc search's CPU (800 instances). Nothing in virtbench mounts or converts the
    host's cgroups, so the mode cannot change during a run."""
    return cgroup_mode(read_mountinfo())


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


# -- memory: OOM evidence, usage, a confining parent ---------------------------------------
V1_CONTROLLERS = ("memory", "pids", "cpu", "cpuacct", "cpuset", "blkio", "devices", "freezer")
"""v1 hierarchies a confining parent is made in (a runtime that places its container under
the parent by path, like LXC's lxc.cgroup.dir or Docker's --cgroup-parent, needs it in all)."""


def root() -> Path:
    return CGROUP_ROOT


def is_v2() -> bool:
    return cgroup_mode() == "v2"


def memory_dir(relative: str) -> Path:
    """The memory cgroup directory of a path relative to the hierarchy's root."""
    rel = relative.strip("/")
    return root() / rel if is_v2() else root() / "memory" / rel


def memory_cgroup_of(pid: int) -> str | None:
    """The memory cgroup (relative path) a process is in, from /proc/PID/cgroup."""
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        if (is_v2() and controllers == "") or "memory" in controllers.split(","):
            return path
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _int(path: Path) -> int | None:
    text = _read(path)
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def oom_counters(relative: str) -> dict[str, int]:
    """The kernel's OOM evidence of a memory cgroup; {} when the cgroup is gone.

    v2: memory.events (`oom`, `oom_kill`, `max`); v1: `failcnt` (hits of the memory limit),
    `memsw_failcnt` (of memory+swap), and memory.oom_control's `oom_kill` / `under_oom`."""
    d = memory_dir(relative)
    out: dict[str, int] = {}
    if is_v2():
        text = _read(d / "memory.events") or ""
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key in ("oom", "oom_kill", "max", "oom_group_kill"):
                out[key] = int(value)
        return out
    for key, name in (("failcnt", "memory.failcnt"), ("memsw_failcnt", "memory.memsw.failcnt")):
        if (count := _int(d / name)) is not None:
            out[key] = count
    for line in (_read(d / "memory.oom_control") or "").splitlines():
        key, _, value = line.partition(" ")
        if key in ("oom_kill", "under_oom"):
            out[key] = int(value)
    return out


def oom_kills(counters: dict[str, int]) -> int:
    return counters.get("oom_kill", 0)


def limit_hits(relative: str) -> int | None:
    """How often a memory limit was hit anywhere in a subtree: the cgroup's own and every
    descendant's (an instance at its own limit stalls inside the subtree too). v2 memory.events
    `max` is hierarchical already; v1 sums `memory.failcnt` over the subtree. None: gone."""
    d = memory_dir(relative)
    if is_v2():
        return oom_counters(relative).get("max")
    if not d.is_dir():
        return None
    return sum(_int(f) or 0 for f in d.rglob("memory.failcnt"))


def subtree_oom_kills(relative: str) -> int | None:
    """OOM kills anywhere in a subtree. A kill the *parent's* limit caused is counted in the
    victim's own cgroup (v1 memory.oom_control `oom_kill` is not hierarchical; the parent's
    stays 0), so the parent's evidence is the sum over its descendants. v2 memory.events is
    hierarchical already. None: the cgroup is gone."""
    d = memory_dir(relative)
    if is_v2():
        return oom_counters(relative).get("oom_kill")
    if not d.is_dir():
        return None
    total = 0
    for f in d.rglob("memory.oom_control"):
        for line in (_read(f) or "").splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                total += int(value)
    return total


def reset_peak(relative: str) -> None:
    """Start a new peak-usage window (v1 memory.max_usage_in_bytes takes 0; v2 memory.peak
    counts since the cgroup was made, so nothing is reset there)."""
    if not is_v2():
        try:
            (memory_dir(relative) / "memory.max_usage_in_bytes").write_text("0")
        except OSError:
            pass


def memory_peak(relative: str) -> int | None:
    """The highest usage since `reset_peak` (v1) or since creation (v2 memory.peak)."""
    return _int(memory_dir(relative) / ("memory.peak" if is_v2() else "memory.max_usage_in_bytes"))


def memory_limit(relative: str) -> int | None:
    d = memory_dir(relative)
    text = (_read(d / ("memory.max" if is_v2() else "memory.limit_in_bytes")) or "").strip()
    return int(text) if text.isdigit() else None


def memory_evidence(relative: str) -> dict[str, int | None]:
    """A cgroup's memory at a glance: usage, peak, limit and how often the limit was hit
    (whether memory was the limit at a count, or far from it)."""
    return {"usage": memory_usage(relative), "peak": memory_peak(relative), "limit": memory_limit(relative),
            "limit_hits": limit_hits(relative), "oom_kills": subtree_oom_kills(relative)}


MEMORY_FILES = {True: ("memory.events", "memory.pressure", "memory.peak", "memory.current", "memory.max"),
                False: ("memory.failcnt", "memory.max_usage_in_bytes", "memory.usage_in_bytes",
                        "memory.limit_in_bytes", "memory.oom_control")}
"""The memory cgroup's own files a stop's evidence quotes, by hierarchy (v2: True)."""


def memory_files(relative: str) -> dict[str, Any]:
    """A memory cgroup's counters under their file names, as the kernel wrote them (key/value
    files as mappings, PSI as {some: {avg10...}, full: {...}}): evidence a reader can check
    against the kernel's documentation without knowing virtbench. Missing files are left out."""
    d = memory_dir(relative)
    out: dict[str, Any] = {}
    for name in MEMORY_FILES[is_v2()]:
        text = _read(d / name)
        if text is None:
            continue
        lines = [line.split() for line in text.strip().splitlines() if line.strip()]
        if name.endswith(".pressure"):
            out[name] = {f[0]: {k: float(v) for k, v in (x.split("=", 1) for x in f[1:])} for f in lines}
        elif len(lines) == 1 and len(lines[0]) == 1:
            out[name] = int(lines[0][0]) if lines[0][0].isdigit() else lines[0][0]
        else:
            out[name] = {f[0]: int(f[1]) for f in lines if len(f) == 2 and f[1].isdigit()}
    return out


_OOM_KILL_LINE = re.compile(r"oom-kill:.*?oom_memcg=(\S*?),task_memcg=(\S*?),")


def log_oom_kills(lines: list[str], relative: str) -> list[str]:
    """Kernel log OOM-kill lines whose memcg (the one whose limit was hit, or the victim's) is
    `relative` or below it: the evidence that survives a victim's cgroup removed with its
    container. Other OOMs on a shared host (another cgroup) are not counted."""
    top = "/" + relative.strip("/")
    out = []
    for line in lines:
        m = _OOM_KILL_LINE.search(line)
        if m and any(g == top or g.startswith(top + "/") for g in m.groups()):
            out.append(line)
    return out


def memory_reclaimable(relative: str) -> int | None:
    """Bytes of the subtree's page cache on the file LRU lists (inactive + active file), which
    reclaim can give back: v1 memory.stat `total_inactive_file` + `total_active_file`
    (hierarchical), v2 `inactive_file` + `active_file`. Shared memory (tmpfs) sits on the anon
    lists and is not counted. None: the cgroup is gone."""
    text = _read(memory_dir(relative) / "memory.stat")
    if text is None:
        return None
    keys = ("inactive_file", "active_file") if is_v2() else ("total_inactive_file", "total_active_file")
    stat = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
    try:
        return sum(int(stat[k]) for k in keys)
    except (KeyError, ValueError):
        return None


def memory_usage(relative: str) -> int | None:
    """Bytes charged to the cgroup now (v2 memory.current, v1 memory.usage_in_bytes)."""
    d = memory_dir(relative)
    return _int(d / ("memory.current" if is_v2() else "memory.usage_in_bytes"))


def swap_accounting() -> bool:
    """Whether a memory+swap limit can be set (v1 needs swapaccount: memory.memsw.*)."""
    if is_v2():
        return (root() / "memory.swap.max").exists() or any(root().glob("*/memory.swap.max"))
    return (root() / "memory" / "memory.memsw.limit_in_bytes").exists()


BOARD_RESERVED = 0.15
"""The share of a board's nominal RAM its kernel may not see: firmware, GPU and kernel reserve it
(an "8 GB" Raspberry Pi 5 reports about 7.8 GiB MemTotal, a 1 GB Pi 2 about 0.9 GiB)."""


def whole_board(memory: int, total: int) -> bool:
    """A host_memory of this host's own nominal size (8G on an "8 GB" board, whose MemTotal is less):
    the whole host, as the paper's board was, not a confinement beyond what it has."""
    return total <= memory and memory * (1 - BOARD_RESERVED) <= total


@dataclass
class Confinement:
    """A parent cgroup holding every instance of an experiment under one memory limit.

    memory+swap is limited to the same size (no swap escape); the host's MemTotal bounds it
    (a larger 'host' would not be a smaller host). Created in every v1 hierarchy so runtimes
    that place containers by path find the parent everywhere."""

    relative: str
    memory: int

    def check(self) -> None:
        total = host_memory_total()
        if self.memory >= total:
            raise InputError(f"host_memory {self.memory >> 20} MiB is not smaller than this host's "
                             f"memory ({total >> 20} MiB)", "give a host_memory below the host's MemTotal")

    def dirs(self) -> list[Path]:
        rel = self.relative.strip("/")
        if is_v2():
            return [root() / rel]
        return [root() / c / rel for c in V1_CONTROLLERS if (root() / c).is_dir()]

    def create(self) -> None:
        self.check()
        if units.unit_of(self.relative):  # systemd's tree: a transient slice, never a write behind its back
            units.create(self.relative, {"MemoryMax": str(self.memory), "MemorySwapMax": "0"})
            return
        if is_v2():
            parts = Path(self.relative.strip("/")).parts
            here = root()
            for part in parts:
                try:
                    (here / "cgroup.subtree_control").write_text("+memory +pids +cpu")
                except OSError:
                    pass
                here = here / part
                here.mkdir(exist_ok=True)
            (here / "memory.max").write_text(str(self.memory))
            if (here / "memory.swap.max").exists():
                (here / "memory.swap.max").write_text("0")
            return
        for d in self.dirs():
            d.mkdir(parents=True, exist_ok=True)
            if d.parts[len(root().parts)] == "cpuset":
                _init_cpuset(d)
        mem = memory_dir(self.relative)
        if _int(mem / "memory.use_hierarchy") == 0:  # children must count against the parent
            (mem / "memory.use_hierarchy").write_text("1")
        (mem / "memory.limit_in_bytes").write_text(str(self.memory))
        if (mem / "memory.memsw.limit_in_bytes").exists():
            (mem / "memory.memsw.limit_in_bytes").write_text(str(self.memory))

    def usage(self) -> int | None:
        return memory_usage(self.relative)

    def oom(self) -> dict[str, int]:
        return oom_counters(self.relative)

    def remove(self, timeout: float = 10.0) -> list[str]:
        """Remove the parent and every cgroup below it (deepest first); waits for dying tasks."""
        return remove_tree(self.relative, timeout)


def kill_tasks(relative: str, spare: Collection[int] = ()) -> int:
    """SIGKILL every process in a memory cgroup and below it but those in `spare`; how many
    were signalled. The density guard's brake: stopping 1024 thrashing containers one by one
    took minutes while the host stalled, a kill of their processes frees their memory at once.
    Never the hierarchy's root."""
    if not relative.strip("/"):
        raise ValueError("refusing to kill every process of the root cgroup")
    n = 0
    for pid in set(tasks(relative)) - set(spare):
        try:
            os.kill(pid, signal.SIGKILL)
            n += 1
        except ProcessLookupError:
            pass
    return n


def tasks(relative: str) -> list[int]:
    """The processes of a memory cgroup and of every cgroup below it ([] when it is gone)."""
    d = memory_dir(relative)
    return [int(pid) for procs in ([d / "cgroup.procs", *d.glob("*/**/cgroup.procs")] if d.is_dir() else [])
            for pid in (_read(procs) or "").split() if pid.isdigit()]


def reclaim(relative: str) -> None:
    """Between density probes (no task left in it): give back what removed instances left
    charged (page cache and, on v1, the kernel memory of their offline cgroups), so each probe
    starts on an empty confined host instead of a parent that fills up probe after probe."""
    d = memory_dir(relative)
    target = d / ("memory.reclaim" if is_v2() else "memory.force_empty")
    try:
        target.write_text(str(1 << 40) if is_v2() else "0")
    except OSError:
        pass


def _init_cpuset(d: Path) -> None:
    """A new v1 cpuset cgroup starts empty (no task may join): copy the parent's CPUs and nodes."""
    for f in (d / "cpuset.cpus", d / "cpuset.mems"):
        if f.exists() and not f.read_text().strip():
            f.write_text(((d.parent / f.name).read_text().strip()) or "0")


def remove_tree(relative: str, timeout: float = 10.0) -> list[str]:
    """rmdir a cgroup subtree in every hierarchy, children first; the kernel refuses while
    tasks remain, so retry until `timeout` (a killed container's tasks take a moment)."""
    rel = relative.strip("/")
    removed: list[str] = units.remove(rel)  # a slice: systemd removes its cgroups
    tops = [root() / rel] if is_v2() else [root() / c / rel for c in os.listdir(root())
                                           if (root() / c / rel).is_dir()]
    deadline = time.monotonic() + timeout
    for top in tops:
        if not top.is_dir():
            continue
        while True:
            left = []
            for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [top]:
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    left.append(d)
            if not left:
                removed.append(f"cgroup {top}")
                break
            if time.monotonic() > deadline:
                raise VirtbenchError(f"cgroup {left[0]} still has tasks after {timeout:g} s",
                                     "stop the processes in it (cat cgroup.procs), then virtbench cleanup")
            time.sleep(0.1)
    return removed


def leftover_parents(prefix: str) -> list[str]:
    """Relative paths of the parents (slices.parent_path) whose name starts with `prefix`: top-level
    cgroups, and slices in virtbench.slice (for cleanup)."""
    base = root() if is_v2() else root() / "memory"
    if not base.is_dir():
        return []
    found = [p.name for p in base.iterdir() if p.is_dir() and p.name.startswith(prefix)]
    in_slice = base / units.SLICE
    unit = units.slice_unit(prefix)
    if in_slice.is_dir():
        found += [f"{units.SLICE}/{p.name}" for p in in_slice.iterdir()
                  if p.is_dir() and p.name.startswith(unit.removesuffix(".slice"))]
    return sorted(found)


def host_memory_total() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise VirtbenchError("no MemTotal in /proc/meminfo")


def enter(relative: str, pid: int | None = None) -> None:
    """Move a process (default: this one) into `relative` in every hierarchy that has it."""
    pid = os.getpid() if pid is None else pid
    rel = relative.strip("/")
    dirs = [root() / rel] if is_v2() else [root() / c / rel for c in V1_CONTROLLERS if (root() / c).is_dir()]
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
        if not is_v2() and d.parts[len(root().parts)] == "cpuset":  # a new level has no CPUs, and the kernel
            for level in [*reversed(d.parents)][len(root().parts) + 1:] + [d]:  # refuses its child any: top down
                _init_cpuset(level)
        (d / "cgroup.procs").write_text(str(pid))


def main(argv: list[str] | None = None) -> int:
    """exec --cgroup REL -- ARGV: join the cgroup, then become ARGV (keeps the pid)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 4 or args[0] != "exec" or args[1] != "--cgroup" or "--" not in args:
        print("usage: python -m virtbench.platforms.cgroups exec --cgroup REL -- ARGV...", file=sys.stderr)
        return 2
    rel, command = args[2], args[args.index("--") + 1:]
    enter(rel)
    os.execvp(command[0], command)
    return 127  # pragma: no cover - execvp does not return


if __name__ == "__main__":
    raise SystemExit(main())

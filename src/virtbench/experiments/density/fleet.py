"""The instances of one density probe: started one by one, kept running, measured together.

A `Fleet` grows by one instance at a time (the guard and the kernel limits are checked
before each), runs the workload in all of them from one start time shared inside the
instances (sync.py: per-instance and aggregate throughput are real concurrent
measurements, and the overlap says how far), and reads the evidence of what
went wrong from the kernel itself: OOM counters of every instance's memory cgroup and of
the confining parent (an instance's own cgroup may vanish with it), the kernel log, the
runtime's error text. `close()` stops and removes every instance, whatever happened.
"""
from __future__ import annotations

import dataclasses
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ... import proc
from ...benchmarks.base import Benchmark
from ...images.image import Image
from ...platforms import cgroups, kernellog, naming
from ...platforms.base import Instance, Platform
from . import sync as density_sync
from .guard import Guard, Trip, read_host

SCRATCH = "/var/tmp/virtbench"
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
                          now: dict[str, tuple[int, int, str]]) -> dict | None:
    """A kernel limit the next instance would cross: what the last instance took (at least 1)
    added to what is used now exceeds the maximum. None when clear."""
    for name, (used, cap, what) in now.items():
        cost = max(1, used - before[name][0]) if before and name in before else 1
        if used + cost > cap:
            return {"limit": name, "setting": what, "used": used, "max": cap, "last_instance_took": cost}
    return None


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


class StartFailure(Exception):
    """An additional instance did not start: the runtime's own error text."""


@dataclass
class Member:
    instance: Instance
    cgroup: str | None
    """Memory cgroup (relative path) of the instance's main process, read once it started."""


@dataclass
class Outcome:
    """One synchronised workload execution at a count."""

    count: int
    results: list[tuple[Member, proc.Result]]
    started_at: float
    duration_s: float
    oom_before: dict[str, dict[str, int]]
    oom_after: dict[str, dict[str, int]]
    kernel_log: list[str]
    trip: Trip | None
    memory_usage: list[int | None]
    mem_available_before: int
    sync: density_sync.Overlap | None = None
    """Start spread and overlap of the instances' workloads (None: not measured)."""
    parent_memory: dict | None = None
    """The confining parent's usage, peak during the window, limit and limit hits (None: unconfined)."""
    log_kills: list[str] = field(default_factory=list)
    """Kernel log OOM-kill lines of this fleet's cgroups during the window (a victim's cgroup
    may be gone with its container, so its counter cannot be read any more)."""

    def oom_kills(self) -> dict[str, int]:
        """New OOM kills per cgroup during the window (instances and the confining parent,
        whose count sums its subtree), and the kernel log's lines when no counter moved."""
        kills = {k: cgroups.oom_kills(self.oom_after.get(k, {})) - cgroups.oom_kills(v)
                 for k, v in self.oom_before.items()
                 if cgroups.oom_kills(self.oom_after.get(k, {})) > cgroups.oom_kills(v)}
        if not kills and self.log_kills:
            kills["kernel log"] = len(self.log_kills)
        return kills


@dataclass
class Fleet:
    platform: Platform
    image: Image
    run_id: str
    prefix: str
    guard: Guard
    parent: str | None = None
    members: list[Member] = field(default_factory=list)
    created: list[Instance] = field(default_factory=list)
    creating: str | None = None
    """The name being created: a signal during create leaves an instance `created` misses."""

    def name(self, n: int) -> str:
        """The n-th instance's name (naming keeps it valid and unique, however long the prefix)."""
        return naming.fit(self.prefix, f"-{n}")

    def add(self) -> Member:
        """Create and start one more instance; StartFailure carries the runtime's text."""
        name = self.name(len(self.members) + 1)
        self.creating = name
        try:
            inst = self.platform.create(self.image, name, self.run_id)
        except Exception as exc:  # noqa: BLE001 - the text is the evidence
            raise StartFailure(f"create {name}: {exc}") from exc
        self.created.append(inst)
        self.creating = None
        try:
            self.platform.start(inst)
        except Exception as exc:  # noqa: BLE001
            raise StartFailure(f"start {name}: {exc}") from exc
        member = Member(inst, self.platform.memory_cgroup(inst))
        self.members.append(member)
        return member

    def cgroups(self) -> list[str]:
        return [m.cgroup for m in self.members if m.cgroup] + ([self.parent] if self.parent else [])

    def oom_counters(self) -> dict[str, dict[str, int]]:
        """Each instance's counters, and the parent's with `oom_kill` summed over its subtree
        (a kill its limit caused is counted in the victim's cgroup on v1)."""
        out = {cg: cgroups.oom_counters(cg) for cg in self.cgroups()}
        if self.parent and (kills := cgroups.subtree_oom_kills(self.parent)) is not None:
            out[self.parent]["oom_kill"] = kills
        return out

    def memory_usage(self) -> list[int | None]:
        return [cgroups.memory_usage(m.cgroup) if m.cgroup else None for m in self.members]

    def run_workload(self, bench: Benchmark, workdir_key: str, min_overlap: float = 0.5) -> Outcome:
        """Every instance starts the workload at one shared start time, inside the instance
        (sync.py); the guard watches throughout and, on a trip, the instances are
        killed at once (which ends every workload). When the instances did not run together
        because some arrived after the start time, the count is run once more with a longer
        lead; what was measured is kept with the outcome either way."""
        count = len(self.members)
        workdir = f"{SCRATCH}/{workdir_key}"
        usage = self.memory_usage()
        mem_before = read_host().mem_available
        oom_before = self.oom_counters()
        if self.parent:
            cgroups.reset_peak(self.parent)
        mark = kernellog.mark()
        argv = bench.command(workdir)
        tripped: list[Trip] = []
        t0 = time.time()
        self.guard.watch(tripped.append, f"workload at {count}")
        try:
            clocks, failed, launch_s = self._rehearse(workdir)
            lead = max(1.0, 1.5 * launch_s + 0.5)
            for attempt in (1, 2):
                results, sync = self._launch(argv, clocks, failed, lead, bench.execution_timeout(), tripped)
                sync.attempts = attempt
                if tripped or sync.ok(min_overlap) or not sync.late or attempt == 2:
                    break
                lead = 2 * lead + (sync.spread_s or 0.0)
        finally:
            self.guard.stop_watching()
        if sync.reported and not sync.ok(min_overlap):  # none reported: the count failed, and says why
            sync.warnings.append(
                f"the {count} instances did not run together: {sync.reported} reported, start spread "
                f"{sync.spread_s} s, all running for {sync.overlap} of the window (wanted >= {min_overlap:g}), "
                f"{sync.late} arrived after the start time; the aggregate is not a concurrent measurement")
        log = kernellog.oom_lines_since(mark)
        return Outcome(count=count, results=results, started_at=t0, duration_s=time.time() - t0,
                       oom_before=oom_before, oom_after=self.oom_counters(),
                       kernel_log=log, trip=tripped[0] if tripped else None,
                       memory_usage=usage, mem_available_before=mem_before, sync=sync,
                       parent_memory=cgroups.memory_evidence(self.parent) if self.parent else None,
                       log_kills=self.log_kills(log))

    def log_kills(self, lines: list[str]) -> list[str]:
        """The kernel log's OOM kills in this fleet's cgroups (the parent's subtree, else each
        instance's own)."""
        scopes = [self.parent] if self.parent else [m.cgroup for m in self.members if m.cgroup]
        return [ln for ln in lines if any(cgroups.log_oom_kills([ln], s) for s in scopes)]

    def _parallel(self, job, items: list, tripped: list[Trip]) -> list[proc.Result]:
        """job(item) for every item at once; a guard trip kills the instances (ending them)."""
        with ThreadPoolExecutor(max_workers=max(1, len(items))) as pool:
            futures = [pool.submit(job, x) for x in items]
            try:
                while True:
                    _, pending = wait(futures, timeout=0.2)
                    if not pending:
                        break
                    if tripped:
                        self.kill()
                        wait(futures)
                        break
            except BaseException:  # a signal: end the workloads now instead of waiting them out
                with signals_held():
                    self.kill()
                raise
            out = []
            for f in futures:
                try:
                    out.append(f.result())
                except Exception as exc:  # noqa: BLE001 - a timeout or a dead instance: a failed run
                    out.append(proc.Result([], 1, "", f"{type(exc).__name__}: {exc}", 0.0))
            return out

    def _rehearse(self, workdir: str) -> tuple[list[density_sync.Clock | None], dict[int, proc.Result], float]:
        """Launch a trivial command in every instance at once (it makes the work directory and
        reads the instance's clock): how long a launch of all takes, and each one's clock."""
        shared = self.platform.kind != "vm"

        def one(m: Member) -> tuple[proc.Result, int, int]:
            a = time.time_ns()
            r = self.platform.host.run(self.platform.exec_argv(m.instance, density_sync.rehearsal(workdir)),
                                       timeout=120, check=False)
            return r, a, time.time_ns()

        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=max(1, len(self.members))) as pool:
            rows = list(pool.map(one, self.members))
        launch_s = time.monotonic() - started
        clocks: list[density_sync.Clock | None] = []
        failed: dict[int, proc.Result] = {}
        for i, (r, a, b) in enumerate(rows):
            try:
                if r.returncode != 0:
                    raise ValueError(f"exit {r.returncode}")
                clocks.append(density_sync.read_clock(r.stdout, a, b, shared_kernel=shared))
            except ValueError as exc:
                clocks.append(None)
                failed[i] = proc.Result(r.argv, r.returncode or 1, r.stdout,
                                        f"could not prepare the workload (work directory, clock): {exc}\n{r.stderr}",
                                        r.seconds)
        return clocks, failed, launch_s

    def _launch(self, argv: list[str], clocks: list[density_sync.Clock | None], failed: dict[int, proc.Result],
                lead: float, timeout: float, tripped: list[Trip]) -> tuple[list[tuple[Member, proc.Result]],
                                                                      density_sync.Overlap]:
        deadline = time.time_ns() + int(lead * 1e9)

        def one(i: int) -> proc.Result:
            clock = clocks[i]
            if clock is None:
                return failed[i]
            wrapped = density_sync.wrap(argv, deadline + clock.offset_ns)
            return self.platform.host.run(self.platform.exec_argv(self.members[i].instance, wrapped),
                                          timeout=timeout + lead + 2.0 * len(self.members), check=False)

        raw = self._parallel(one, list(range(len(self.members))), tripped)
        markers = [density_sync.parse_marker(r.stderr) if clocks[i] else None for i, r in enumerate(raw)]
        sync = density_sync.overlap(markers, [c.offset_ns if c else 0 for c in clocks], lead)
        results = [(m, dataclasses.replace(r, argv=argv, stderr=density_sync.strip_marker(r.stderr)))
                   for m, r in zip(self.members, raw)]
        return results, sync

    def kill(self) -> None:
        """End every instance now (a guard trip, a signal). Under a confining parent the
        processes of each instance's own cgroup are SIGKILLed first, all at once: one by one,
        the stops of 1024 thrashing LXC containers took minutes while the host stalled. Only
        cgroups strictly below the parent: never the parent itself (LXC's monitors live
        there) nor a cgroup outside it."""
        if self.parent:
            top = self.parent.strip("/") + "/"
            for m in self.members:
                if m.cgroup and m.cgroup.strip("/").startswith(top):
                    cgroups.kill_tasks(m.cgroup)
        for inst in self.created:
            try:
                self.platform.stop(inst)
            except Exception:  # noqa: BLE001 - close() removes what is left
                pass

    def close(self) -> list[str]:
        """Stop and remove every instance created (newest first); errors are collected. A
        second signal must not cut this short (SIGTERM and SIGINT wait until it is done), and
        whatever a step could not remove, or a create cut short by a signal left, is removed
        through the platform's own cleanup of this run."""
        errors = []
        with signals_held():
            for inst in reversed(self.created):
                for step in (self.platform.stop, self.platform.remove):
                    try:
                        step(inst)
                    except Exception as exc:  # noqa: BLE001 - try every instance, then report
                        errors.append(f"{inst.name}: {step.__name__}: {exc}")
            if errors or self.creating is not None:
                try:
                    type(self.platform).cleanup(self.platform.paths, self.run_id)
                    errors = [f"{e} (removed by the platform's cleanup afterwards)" for e in errors]
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"cleanup of run {self.run_id}: {exc}")
            self.creating = None
            self.created.clear()
            self.members.clear()
        return errors


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGTERM and SIGINT wait (pending) until the block ends: removing instances must finish.
    Outside the main thread signals are not ours to mask: nothing changes there."""
    held = {signal.SIGTERM, signal.SIGINT}
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)

"""The instances of one density search: started in parallel batches, kept running, measured together.

A `Fleet` lives for a whole search: it grows to the next count (`add_many`: a batch of
instances created and started at once, the guard and the kernel limits checked before each
batch by the ramp), shrinks back by stopping its newest instances (`shrink`), and runs the
workload in all of them from one start time shared inside the instances (sync.py:
per-instance and aggregate throughput are real concurrent measurements, and the overlap says
how far). It reads the evidence of what went wrong from the kernel itself: OOM counters of
every instance's memory cgroup and of the confining parent (an instance's own cgroup may
vanish with it), the kernel log, the runtime's error text. A guard trip during the workload
kills the workload's processes only (what was not in the instances' cgroups at idle), so the
instances survive for the next count; where that finds nothing to kill (a VM's workload runs
in its guest) every instance is killed as before. `close()` stops and removes every
instance, whatever happened.
"""
from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from ... import proc
from ...benchmarks.base import Benchmark
from ...errors import CommandError
from ...executor import HostExecutor
from ...images.image import Image
from ...platforms import cgroups, kernellog, naming
from ...platforms.base import Instance, Platform
from . import resident
from . import sync as density_sync
from .guard import Guard, Trip, read_host
from .threads import all_at_once, signals_held

SCRATCH = "/var/tmp/virtbench"
REMOVERS = 8
"""Instances stopped and removed at once when a fleet shrinks or closes."""


class StartFailure(Exception):
    """An additional instance did not start: the runtime's own error text."""


REHEARSAL_TIMEOUT = 120.0
"""Seconds one rehearsal exec may take; a docker exec into a fleet at its memory limit hung
past it (2026-11-30, 557 instances) and the timeout ended the whole run instead of the count."""


@dataclass
class Member:
    instance: Instance
    cgroup: str | None
    """Memory cgroup (relative path) of the instance's main process, read once it started."""
    start_s: float = 0.0
    """Seconds its batch took to create and start (each instance of a batch: the batch's time)."""
    batch: int = 1
    """How many instances started together with it."""
    clock: density_sync.Clock | None = None
    """Its clock, read when its resident runner was started."""
    runner: resident.Runner | None = None
    """Its resident runner (resident.py); None: not started yet, or launched by exec."""
    no_runner: str | None = None
    """Why it has no runner (the instance could not make its FIFOs): its launches exec."""


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
    creating: set[str] = field(default_factory=set)
    """Names being created: a signal during create leaves an instance `created` misses."""
    serial: int = 0
    """Instances named so far: a name is never used twice, also after the fleet shrank."""
    killed: bool = False
    """Every instance was killed (a brake that found no workload of its own to kill): none is usable."""
    idle: dict[str, set[int]] = field(default_factory=dict)
    """The processes of each instance's cgroup before the workload: what the brake spares."""
    one_clock: bool = False
    """A rehearsal read every instance's clock as the host's realtime clock (one kernel)."""
    launch_per_instance_s: float | None = None
    """The last launch into all instances (to the last arrival) per instance: the next lead."""
    runner_dir: str = f"{SCRATCH}/.runner"

    @property
    def resident(self) -> bool:
        """Whether this fleet's instances get resident runners: containers of this host's kernel,
        reached through /proc (not a sandbox's or VM's own kernel, a pod, a remote or stacked host)."""
        return (isinstance(self.platform.host, HostExecutor)
                and self.platform.kind == "container" and not self.platform.pod)

    def name(self, n: int) -> str:
        """The n-th instance's name (naming keeps it valid and unique, however long the prefix)."""
        return naming.fit(self.prefix, f"-{n}")

    def add(self) -> Member:
        """Create and start one more instance; StartFailure carries the runtime's text."""
        started, errors = self.add_many(1)
        if errors:
            raise StartFailure(errors[0])
        return started[0]

    def add_many(self, k: int) -> tuple[list[Member], list[str]]:
        """Create and start `k` instances at once (threads; each platform's create and start are
        independent per instance). Returns those that started, in name order, and the runtime's
        error text of each that did not (a failed one is removed again)."""
        names = []
        for _ in range(k):
            self.serial += 1
            names.append(self.name(self.serial))
        t0 = time.monotonic()

        def one(name: str) -> Member | str:
            self.creating.add(name)
            try:
                inst = self.platform.create(self.image, name, self.run_id)
            except Exception as exc:  # noqa: BLE001 - the text is the evidence
                self.creating.discard(name)
                return f"create {name}: {exc}"
            self.created.append(inst)
            self.creating.discard(name)
            try:
                self.platform.start(inst)
            except Exception as exc:  # noqa: BLE001
                self._remove([inst])
                return f"start {name}: {exc}"
            return Member(inst, self.platform.memory_cgroup(inst))

        if k == 1:
            results = [one(names[0])]
        else:
            results = all_at_once(one, names)
        seconds = time.monotonic() - t0
        started = [dataclasses.replace(r, start_s=seconds, batch=k) for r in results if isinstance(r, Member)]
        self.members.extend(started)
        return started, [r for r in results if isinstance(r, str)]

    def shrink(self, count: int, brake: bool = False) -> list[str]:
        """Stop and remove the newest instances until `count` are left (errors collected).
        brake: their processes are SIGKILLed first, all at once (a host that is pressed now)."""
        gone = self.members[count:]
        if not gone:
            return []
        if brake:
            self._kill_members(gone)
        del self.members[count:]
        return self._remove([m.instance for m in gone])

    def drop_dead(self) -> list[str]:
        """After a failed count: remove the instances that no longer answer (an OOM kill of an
        instance's init, a killed fleet); returns their names. The others are kept."""
        if self.killed:
            dead = list(self.members)
            self.killed = False
        else:
            probe = ["true"]

            def answers(m: Member) -> bool:
                """Its cgroup still has processes (a file read), else (no cgroup known) an exec answers."""
                if m.cgroup:
                    return bool(cgroups.tasks(m.cgroup))
                r = self.platform.host.run(self.platform.exec_argv(m.instance, probe), timeout=60, check=False)
                return r.returncode == 0

            with ThreadPoolExecutor(max_workers=max(1, min(32, len(self.members)))) as pool:
                alive = list(pool.map(answers, self.members))
            dead = [m for m, ok in zip(self.members, alive) if not ok]
        if dead:
            self.members = [m for m in self.members if m not in dead]
            self._remove([m.instance for m in dead])
        return [m.instance.name for m in dead]

    def _remove(self, instances: list[Instance]) -> list[str]:
        """Stop and remove these instances, newest first (REMOVERS at once when there are more:
        stopping 500 LXC containers one after another took minutes); errors collected, every
        step tried."""
        def one(inst: Instance) -> list[str]:
            errors = []
            for step in (self.platform.stop, self.platform.remove):
                try:
                    step(inst)
                except Exception as exc:  # noqa: BLE001 - try every instance, then report
                    errors.append(f"{inst.name}: {step.__name__}: {exc}")
            return errors

        newest_first = list(reversed(instances))
        with signals_held():
            if len(newest_first) <= REMOVERS:
                found = [one(inst) for inst in newest_first]
            else:
                with ThreadPoolExecutor(max_workers=REMOVERS) as pool:
                    found = list(pool.map(one, newest_first))
            for inst in newest_first:
                if inst in self.created:
                    self.created.remove(inst)
        return [e for errors in found for e in errors]

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
        (sync.py); the guard watches throughout and, on a trip, the workloads are killed at
        once (`brake`). When the instances did not run together
        because some arrived after the start time, the count is run once more with a longer
        lead; what was measured is kept with the outcome either way."""
        count = len(self.members)
        workdir = f"{SCRATCH}/{workdir_key}"
        oom_before = self.oom_counters()
        if self.parent:
            cgroups.reset_peak(self.parent)
        mark = kernellog.mark()
        argv = bench.command(workdir)
        tripped: list[Trip] = []
        t0 = time.time()
        self.guard.watch(tripped.append, f"workload at {count}")
        try:
            clocks, failed, launch_s = self._prepare(workdir)
            self.note_idle()  # after the preparation: a runner it started is the instance's, not the workload's
            usage = self.memory_usage()
            mem_before = read_host().mem_available
            lead = max(1.0, 1.5 * launch_s + 0.5)
            for attempt in (1, 2):
                results, sync = self._launch(argv, workdir, clocks, failed, lead, bench.execution_timeout(), tripped)
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
                        self.brake()
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

    def _prepare(self, workdir: str) -> tuple[list[density_sync.Clock | None], dict[int, proc.Result], float]:
        """Each instance's clock and how long launching into all will take. A rehearsal (a launch
        of its own: 557 docker execs took 40 s of each 90 s count) is needed once per fleet whose
        instances read the host's clock; later counts go by the last launch, per instance (one
        slower than that makes instances late: the count runs again with a longer lead)."""
        n = len(self.members)
        if self.resident:
            return self._start_runners()
        if self.one_clock and self.launch_per_instance_s is not None:
            return [density_sync.Clock("realtime", 0)] * n, {}, self.launch_per_instance_s * n
        clocks, failed, launch_s = self._rehearse(workdir)
        kinds = {c.kind for c in clocks if c is not None}
        self.one_clock = self.platform.kind != "vm" and kinds == {"realtime"}
        self.launch_per_instance_s = launch_s / max(1, n)
        return clocks, failed, launch_s

    def _rehearse(self, workdir: str) -> tuple[list[density_sync.Clock | None], dict[int, proc.Result], float]:
        """Launch a trivial command in every instance at once (it makes the work directory and
        reads the instance's clock): how long a launch of all takes, and each one's clock."""
        shared = self.platform.kind != "vm"

        def one(m: Member) -> tuple[proc.Result, int, int]:
            a = time.time_ns()
            argv = self.platform.exec_argv(m.instance, density_sync.rehearsal(workdir))
            try:
                r = self.platform.host.run(argv, timeout=REHEARSAL_TIMEOUT, check=False)
            except CommandError as exc:  # timed out: that instance's workload fails, the count with it
                r = proc.Result(argv, 1, exc.stdout or "", f"{exc.message}\n{exc.stderr or ''}",
                                (time.time_ns() - a) / 1e9)
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

    def _start_runners(self) -> tuple[list[density_sync.Clock | None], dict[int, proc.Result], float]:
        """Start a resident runner in each instance that has none (one exec each, once in its
        life: this is its rehearsal, reading its clock); the launch estimate comes from the
        runners' last launch (their first: the starts' own time)."""
        n = len(self.members)
        pending = [m for m in self.members if m.no_runner is None and (m.runner is None or not m.runner.alive())]
        failed: dict[int, proc.Result] = {}

        def one(m: Member) -> proc.Result | None:
            directory = f"{self.runner_dir}/{m.instance.name}"
            got = resident.start(self.platform.host, self.platform.exec_argv(m.instance, resident.start_argv(directory)),
                                 m.cgroup, REHEARSAL_TIMEOUT)
            m.runner, m.no_runner = got.runner, got.no_runner
            m.clock = got.clock or m.clock
            return got.failure

        started = time.monotonic()
        if pending:
            with ThreadPoolExecutor(max_workers=max(1, len(pending))) as pool:
                results = dict(zip((id(m) for m in pending), pool.map(one, pending)))
            for i, m in enumerate(self.members):
                if (r := results.get(id(m))) is not None:
                    failed[i] = r
        start_s = time.monotonic() - started
        if self.launch_per_instance_s is None:
            self.launch_per_instance_s = start_s / max(1, len(pending))
        return [m.clock for m in self.members], failed, self.launch_per_instance_s * n

    def _launch(self, argv: list[str], workdir: str, clocks: list[density_sync.Clock | None],
                failed: dict[int, proc.Result], lead: float, timeout: float,
                tripped: list[Trip]) -> tuple[list[tuple[Member, proc.Result]], density_sync.Overlap]:
        launched = time.time_ns()
        deadline = launched + int(lead * 1e9)
        gone: list[str] = []

        def one(i: int) -> proc.Result:
            clock, member = clocks[i], self.members[i]
            if clock is None or i in failed:
                return failed[i]
            limit = density_sync.exec_timeout(timeout, lead)
            if member.runner is not None:
                try:
                    return member.runner.run([str(deadline + clock.offset_ns), workdir, *argv], limit)
                except resident.Gone as exc:  # launched by exec this time; the next count starts a new runner
                    member.runner.kill()
                    member.runner = None
                    gone.append(f"{member.instance.name}: {exc}")
            wrapped = density_sync.wrap(argv, deadline + clock.offset_ns, workdir)
            return self.platform.host.run(self.platform.exec_argv(member.instance, wrapped),
                                          timeout=limit, check=False)

        raw = self._parallel(one, list(range(len(self.members))), tripped)
        markers = [density_sync.parse_marker(r.stderr) if clocks[i] else None for i, r in enumerate(raw)]
        sync = density_sync.overlap(markers, [c.offset_ns if c else 0 for c in clocks], lead)
        if gone:
            sync.warnings.append(f"{len(gone)} resident runner(s) did not take the job and were launched by exec "
                                 f"(a new runner at the next count): {'; '.join(gone[:3])}")
        arrivals = [m.arrived - c.offset_ns for m, c in zip(markers, clocks) if m is not None and c is not None]
        if arrivals:
            self.launch_per_instance_s = max(0.0, (max(arrivals) - launched) / 1e9) / len(self.members)
        results = [(m, dataclasses.replace(r, argv=argv, stderr=density_sync.strip_marker(r.stderr)))
                   for m, r in zip(self.members, raw)]
        return results, sync

    def kill(self) -> None:
        """End every instance now (a signal, or a brake that found no workload to kill). Under a
        confining parent the processes of each instance's own cgroup are SIGKILLed first, all at
        once: one by one, the stops of 1024 thrashing LXC containers took minutes while the host
        stalled. Only cgroups strictly below the parent: never the parent itself (LXC's monitors
        live there) nor a cgroup outside it."""
        self._kill_members(self.members)
        self.killed = True
        for inst in self.created:
            try:
                self.platform.stop(inst)
            except Exception:  # noqa: BLE001 - close() removes what is left
                pass

    def _kill_members(self, members: list[Member]) -> None:
        if self.parent:
            top = self.parent.strip("/") + "/"
            for m in members:
                if m.cgroup and m.cgroup.strip("/").startswith(top):
                    cgroups.kill_tasks(m.cgroup)

    def note_idle(self) -> None:
        """Before the workload: the processes each instance runs at idle (the brake spares them)."""
        self.idle = {m.cgroup: set(cgroups.tasks(m.cgroup)) for m in self.members if m.cgroup}

    def kill_workloads(self) -> int:
        """The guard's brake during the workload: SIGKILL, at once, every process of an
        instance's cgroup that was not there at idle (the workload and what it started); the
        instances themselves keep running. How many were signalled."""
        return sum(cgroups.kill_tasks(cg, spare=before) for cg, before in self.idle.items())

    def brake(self) -> None:
        """A guard trip during the workload: end the workload. A container's workload runs as
        host processes in its cgroup (none found: it has ended); a VM's runs in its guest and a
        sandbox's inside its own kernel, out of reach: there every instance is killed."""
        if self.kill_workloads() == 0 and self.platform.kind in ("vm", "sandbox"):
            self.kill()

    def close(self) -> list[str]:
        """Stop and remove every instance created (newest first); errors are collected. A
        second signal must not cut this short (SIGTERM and SIGINT wait until it is done), and
        whatever a step could not remove, or a create cut short by a signal left, is removed
        through the platform's own cleanup of this run."""
        with signals_held():
            errors = self._remove(list(self.created))
            if errors or self.creating:
                try:
                    type(self.platform).cleanup(self.platform.paths, self.run_id)
                    errors = [f"{e} (removed by the platform's cleanup afterwards)" for e in errors]
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"cleanup of run {self.run_id}: {exc}")
            self.creating.clear()
            self.created.clear()
            self.members.clear()
        return errors

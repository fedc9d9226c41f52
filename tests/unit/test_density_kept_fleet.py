"""The density search with a kept fleet, on a platform that only counts: the fleet grows to the
next count in parallel batches and shrinks by its newest instances, no name is used twice,
the maximum is confirmed from an empty fleet, and far fewer instances are started than with
a fresh fleet per probe. The workload is replaced by a capacity (a count above it fails)."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from virtbench import proc
from virtbench.experiments.density import growth
from virtbench.experiments.density import ramp as ramp_module
from virtbench.experiments.density.growth import Batch
from virtbench.experiments.density.guard import Guard, GuardSettings, Pressure
from virtbench.experiments.density.kind import Until
from virtbench.experiments.density.ramp import Ramp, Stop
from virtbench.platforms.base import Instance, Paths

GIB = 1 << 30


class Counting:
    """A platform whose instances are names: create/start/stop/remove recorded, starts take
    `start_s` (so parallel starts are faster), `fail_at` names an instance number whose start fails."""

    type = name = "counting"
    kind = "container"
    host_processes: tuple[str, ...] = ()
    pod = False

    def __init__(self, tmp: Path, start_s: float = 0.002, fail_start: set[int] | None = None,
                 ports: int | None = None) -> None:
        self.paths = Paths(state=tmp)
        self.options = SimpleNamespace(network="none")
        self.start_s, self.fail_start, self.ports = start_s, fail_start or set(), ports
        self.names: list[str] = []
        self.live: set[str] = set()
        self.starts = 0
        self.concurrent = self.most_concurrent = 0
        self.lock = threading.Lock()
        self.host = SimpleNamespace(run=lambda argv, timeout=None, check=False: proc.Result(
            argv, 0 if argv[-1] in self.live else 1, "", "", 0.0))

    def create(self, image, name, run_id):
        with self.lock:
            assert name not in self.names, f"{name} used twice"
            self.names.append(name)
        return Instance(name, "counting", run_id)

    def start(self, inst):
        with self.lock:
            self.concurrent += 1
            self.most_concurrent = max(self.most_concurrent, self.concurrent)
        time.sleep(self.start_s)
        with self.lock:
            self.concurrent -= 1
            if int(inst.name.rsplit("-", 1)[1]) in self.fail_start:
                raise RuntimeError("start failed: a transient error")
            if self.ports is not None and len(self.live) >= self.ports:
                raise RuntimeError("RTNETLINK answers: Exchange full")
            self.live.add(inst.name)
            self.starts += 1

    def exec_argv(self, inst, argv):
        return [*argv, inst.name]

    def memory_cgroup(self, inst):
        return None

    def stop(self, inst):
        self.live.discard(inst.name)

    def remove(self, inst):
        self.live.discard(inst.name)

    def discard(self, inst):
        self.remove(inst)
        return []

    @classmethod
    def cleanup(cls, paths, run_id=None):
        return []


def _search(tmp_path: Path, monkeypatch, capacity, *, counts=None, parallel="auto", **kw):
    """A search where count N fails when capacity(N, ramp) says so; returns (result, platform, ramp)."""
    monkeypatch.setattr(growth, "kernel_usage", lambda network: {})
    monkeypatch.setattr(growth.kernellog, "mark", lambda: 0)
    monkeypatch.setattr(growth.kernellog, "oom_lines_since", lambda mark: [])
    plat = Counting(tmp_path, **{k: v for k, v in kw.items() if k in ("start_s", "fail_start", "ports")})
    logs: list[str] = []
    ctx = SimpleNamespace(run_id="r1", log=logs.append, step=lambda m: None, stop_requested=lambda: False)
    calm = Pressure(time=0.0, mem_total=24 * GIB, mem_available=20 * GIB, psi_some_avg10=0.0, psi_full_avg10=0.0)
    guard = Guard(GuardSettings(calm_wait=0), read=lambda: calm)
    section = SimpleNamespace(parallel=parallel, settle=0, min_overlap=0.5)
    r = Ramp(ctx=ctx, platform=plat, image=None, section=section, guard=guard, parent=None, bench=None)
    seen: list[tuple[int, int, bool]] = []

    def run(fleet, count, batches):
        assert len(fleet.members) == count and {m.instance.name for m in fleet.members} <= plat.live
        seen.append((count, r.probe_no, r.grown))
        return None if count <= capacity(count, r) else Stop("oom", f"OOM at {count}", count)

    r._run = run
    result = r.search(counts or Until(until="failure", max=1024).ramp(), bisect=True,
                      **{k: v for k, v in kw.items() if k in ("precision", "confirm")})
    return result, plat, r, seen


def test_the_kept_fleet_finds_the_exact_maximum_with_few_starts(tmp_path, monkeypatch):
    result, plat, r, seen = _search(tmp_path, monkeypatch, lambda n, r: 700)
    assert result.max_count == 700 and result.stop.count == 701
    check = result.stop.evidence["confirmation"][0]
    assert check["agrees"] and check["healthy"] and check["above"] == 707 and check["above_failed"]
    assert [(c, p) for c, p, _ in seen[-2:]] == [(700, 2), (707, 2)]  # a second fleet, grown from empty
    assert plat.live == set()                                         # nothing left running
    assert len(set(plat.names)) == len(plat.names)                    # no name twice
    # ramp 1..1024 (1024 starts), the bisection grows by 256+64+16+8+4+2, the confirmation 707:
    # a fresh fleet per probe would start about 7000
    assert plat.starts <= 1024 + 350 + 707, plat.starts
    assert plat.most_concurrent > 1 and max(b["size"] for b in r.grower.batches) > 1
    shrunk = [c for c, p, grown in seen if not grown]
    assert shrunk and all(p == 1 for c, p, g in seen if not g)        # only the kept fleet shrank


def test_a_fresh_fleet_that_disagrees_moves_the_maximum(tmp_path, monkeypatch):
    """A kept fleet that shrank fails above 690 (memory its removed instances left charged);
    a fleet grown from empty holds 700. The confirmation finds 697 running from empty, the
    search goes on, and the maximum ends within 1 % of the fresh fleets' 700."""
    result, plat, _, seen = _search(tmp_path, monkeypatch, lambda n, r: 700 if r.grown else 690)
    checks = result.stop.evidence["confirmation"]
    assert not checks[0]["agrees"] and "ran correctly from an empty fleet" in checks[0]["why"]
    assert abs(result.max_count - 700) <= 7 and plat.live == set()
    # from the count the fresh fleet ran it steps up by 1 %, doubling, not to the schedule's 1024
    # (docker 2026-11-30: 1024 containers started after a fresh fleet ran 564)
    after = [c for c, p, _ in seen if p >= 2]
    assert after[:3] == [690, 697, 704] and max(after) < 750, after


def test_a_fresh_fleet_within_1_percent_below_is_the_answer_without_a_third_fleet(tmp_path, monkeypatch):
    """docker at 1 GiB, 2026-11-30: the kept fleet ran 557, a fleet from empty failed 557 and a
    third fleet 556 (the answer 555, 15.6 min: two fleets of 550 to grow). A fresh fleet whose
    own maximum is within 1 % below is the confirmation: found by that fleet, with no third."""
    result, plat, r, seen = _search(tmp_path, monkeypatch, lambda n, r: 700 if r.probe_no == 1 else 696)
    checks = result.stop.evidence["confirmation"]
    assert len(checks) == 1 and checks[0]["agrees"] and checks[0]["within"], checks
    assert result.max_count == 696 and result.stop.count == 697 and plat.live == set()
    assert max(p for _, p, _ in seen) == 2  # the kept fleet and one fleet from empty
    assert [c for c, p, _ in seen if p == 2][:2] == [700, 693]
    # more than 1 % below: not the answer; the search goes on from what the fresh fleet found
    result, _, _, _ = _search(tmp_path, monkeypatch, lambda n, r: 700 if r.probe_no == 1 else 680)
    checks = result.stop.evidence["confirmation"]
    assert not checks[0]["agrees"] and abs(result.max_count - 680) <= 7


def test_steps_above_a_count_double_up_to_the_schedule():
    assert ramp_module.steps_above(564, [1024, 1500]) == [570, 582, 606, 654, 750, 942, 1024, 1500]
    assert ramp_module.steps_above(10, [11, 12]) == [11, 12] and ramp_module.steps_above(10, []) == []


def test_parallel_1_starts_one_by_one_and_a_failed_batch_start_is_retried_alone(tmp_path, monkeypatch):
    result, plat, r, _ = _search(tmp_path, monkeypatch, lambda n, r: 100, counts=[1, 2, 4, 8], parallel=1)
    assert plat.most_concurrent == 1 and result.max_count == 8 and result.stop.reason == "max_reached"
    result, plat, r, _ = _search(tmp_path / "b", monkeypatch, lambda n, r: 100, counts=[1, 16, 64], parallel=4,
                                 start_s=0.02, fail_start={40}, confirm=False)
    # the start of the 40th name failed once, in a batch: started alone again, the search goes on
    assert result.stop.reason == "max_reached" and result.max_count == 64 and plat.live == set()
    assert any(b["started"] < b["size"] for b in r.grower.batches)  # the batch with the failed start
    result, plat, r, _ = _search(tmp_path / "c", monkeypatch, lambda n, r: 100, counts=[1, 16, 64], parallel=4,
                                 start_s=0.02, ports=39, confirm=False)
    # a real limit: the 40th instance fails in its batch and alone: a kernel limit at 40
    assert result.stop.reason == "kernel_limit" and "bridge ports" in result.stop.detail, result.stop
    assert result.stop.count == 40 and result.max_count == 39 and plat.live == set()


def test_the_batch_size_follows_the_starts_throughput():
    b = Batch(cap=16)
    b.done(1, 1.0)
    assert b.size == 2
    b.done(2, 1.0)      # twice as fast: double again
    assert b.size == 4
    b.done(4, 4.0)      # slower than 2 at once: halve
    assert b.size == 2
    b.failed()
    assert b.take(10) == 1


@pytest.mark.parametrize("room, expected", [(None, 16), (3, 3), (0, 1)])
def test_the_guard_s_room_caps_a_batch(room, expected, tmp_path, monkeypatch):
    """Never more instances at once than the guard's floor leaves room for (the costliest so far each)."""
    monkeypatch.setattr(growth, "kernel_usage", lambda network: {})
    plat = Counting(tmp_path, start_s=0)
    ctx = SimpleNamespace(run_id="r", log=lambda m: None, step=lambda m: None, stop_requested=lambda: False)
    guard = SimpleNamespace(check=lambda when: None, next_fits=lambda when: None, room=lambda: room,
                            held=lambda: 0, note_start=lambda held, n=1: None)
    g = growth.Grower(ctx, plat, guard, None, Batch(cap=16, size=16))
    fleet = ramp_module.Fleet(plat, None, "r", "p", guard)
    assert g.grow(fleet, 20, "fleet 1") is None
    assert g.batches[0]["size"] == expected
    fleet.close()


def test_a_growth_stopped_below_the_count_measures_the_fleet_it_has_first(tmp_path, monkeypatch):
    """1024 cannot grow beyond 700 (the 701st does not start): the 700 running are measured
    next, not half-way down to 512."""
    result, plat, r, seen = _search(tmp_path, monkeypatch, lambda n, r: 10_000, ports=700, confirm=False)
    assert result.max_count == 700 and result.stop.count == 701 and result.stop.reason == "kernel_limit"
    assert [c for c, _, _ in seen][-1] == 700 and 512 in [c for c, _, _ in seen]
    assert len(seen) == 11  # 1..512 (10 counts), 1024 never reached (growth stopped at 700), then 700: done


def test_a_signal_during_a_parallel_batch_leaves_nothing_running(tmp_path):
    """SIGINT while four instances start at once: the starts under way finish first (their
    instances are known to the fleet), so close() removes every one and no thread outlives it."""
    import signal

    class SignalledAtFirstStart(Counting):
        """The signal comes from the batch's last start to begin (a timer thread could fire after
        the batch on a loaded host): every start is under way when it arrives."""

        begun = 0

        def start(self, inst):
            with self.lock:
                SignalledAtFirstStart.begun += 1
                send = SignalledAtFirstStart.begun == 4
            if send:  # to the main thread, pending before this start goes on (a thread sending
                # it came after the batch had ended in the fresh CI run's unit lane, at load 10)
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            super().start(inst)

    plat = SignalledAtFirstStart(tmp_path, start_s=0.3)
    fleet = ramp_module.Fleet(plat, None, "r", "p", None)
    # Python's own SIGINT handler, unblocked, whatever an earlier test in this worker left (the
    # fresh CI run of land3's unit lane, load 13, got no KeyboardInterrupt; 12 runs alone did)
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    raised = False
    try:
        fleet.add_many(4)
    except KeyboardInterrupt:
        raised = True
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGINT, handler)
    assert raised, f"no KeyboardInterrupt (SIGINT's handler before the test: {handler!r}, blocked: {signal.SIGINT in mask})"
    assert len(plat.live) == 4 and len(fleet.created) == 4 and fleet.members == []
    assert fleet.close() == [] and plat.live == set()
    assert not [t for t in threading.enumerate() if t.name.startswith(("ThreadPoolExecutor", "density-start-"))]


def test_a_rehearsal_exec_that_times_out_fails_its_instance_not_the_run():
    """2026-11-30, docker at 1 GiB: one `docker exec` of the rehearsal into a fleet of 557 at its
    memory limit hung past 120 s; the timeout's CommandError ended the whole run (exit 1, 35
    minutes of search lost). It is that instance's failure now, so the count fails and says why."""
    from virtbench.errors import CommandError
    from virtbench.experiments.density.fleet import Member
    from virtbench.platforms.base import Instance
    from virtbench.proc import Result

    def run(argv, timeout=None, check=True):
        if argv[0] == "vb-1":
            raise CommandError(argv, None, "", "", timed_out=True, timeout=timeout)
        return Result(argv, 0, "realtime 1796021000000000000\n", "", 0.01)

    plat = SimpleNamespace(kind="container", exec_argv=lambda inst, argv: [inst.name, *argv],
                           host=SimpleNamespace(run=run))
    fleet = ramp_module.Fleet(plat, None, "r", "p", None)
    fleet.members = [Member(Instance(f"vb-{i}", "docker", "r", {}), None) for i in range(3)]
    clocks, failed, launch_s = fleet._rehearse("/scratch/w")
    assert clocks[0] is not None and clocks[2] is not None and clocks[1] is None
    assert list(failed) == [1] and "timed out after 120 s" in failed[1].stderr and launch_s >= 0


def test_a_fleet_on_one_kernel_rehearses_once_then_times_its_launches_itself(tmp_path):
    """A rehearsal is a launch into every instance of its own (557 docker execs: 40 s of each
    90 s count, 2026-11-30). Where it read the host's realtime clock in every instance, later
    counts skip it: zero offsets, the lead from the last launch's arrivals, and the wrapper
    makes the work directory itself. A VM fleet rehearses every count (its clocks drift)."""
    from virtbench.experiments.density.fleet import Member
    from virtbench.experiments.density.sync import Clock

    execs: list[list[str]] = []
    timeouts: list[float] = []

    def run(argv, timeout=None, check=True):
        execs.append(argv)
        timeouts.append(timeout)
        return proc.run(argv[1:], timeout=timeout, check=False)   # the "instance" is this host

    def fleet_of(kind: str, n: int):
        plat = SimpleNamespace(kind=kind, exec_argv=lambda inst, argv: [inst.name, *argv],
                               host=SimpleNamespace(run=run))
        fleet = ramp_module.Fleet(plat, None, "r", "p", None)
        fleet.members = [Member(Instance(f"vb-{i}", "docker", "r", {}), None) for i in range(n)]
        return fleet

    fleet = fleet_of("container", 3)
    clocks, failed, first = fleet._prepare(str(tmp_path / "w1"))
    assert len(execs) == 3 and failed == {} and clocks == [Clock("realtime", 0)] * 3
    assert fleet.one_clock and fleet.launch_per_instance_s == pytest.approx(first / 3)
    results, sync = fleet._launch(["true"], str(tmp_path / "w1"), clocks, failed, 1.0, 30.0, [])
    assert sync.reported == 3 and all(r.returncode == 0 for _, r in results)
    fleet.members.append(Member(Instance("vb-3", "docker", "r", {}), None))
    execs.clear()
    clocks, failed, estimate = fleet._prepare(str(tmp_path / "w2"))
    assert execs == [] and clocks == [Clock("realtime", 0)] * 4
    assert estimate == pytest.approx(4 * fleet.launch_per_instance_s)
    assert not (tmp_path / "w2").exists()
    results, sync = fleet._launch(["sh", "-c", 'test -d "$0"', str(tmp_path / "w2")], str(tmp_path / "w2"),
                                  clocks, failed, 1.0, 30.0, [])
    assert [r.returncode for _, r in results] == [0] * 4 and sync.reported == 4 and sync.late == 0
    # an exec's bound is its launch and workload, not 2 s per instance (2048 s at 1024: a hung
    # `docker exec` held a signal's cleanup for six minutes)
    assert timeouts[-4:] == [30.0 + 2 * 1.0 + 60.0] * 4

    vm = fleet_of("vm", 2)
    for _ in range(2):
        execs.clear()
        vm._prepare(str(tmp_path / "w3"))
        assert len(execs) == 2 and not vm.one_clock


def test_a_fresh_fleet_takes_over_the_last_fleet_s_launch_time(tmp_path, monkeypatch):
    """The confirmation's fresh fleet is the same platform's instances on the same kernel: its
    first count needs no rehearsal (115 s of docker's first fresh count at 558, 2026-11-30)."""
    _, _, r, _ = _search(tmp_path, monkeypatch, lambda n, r: 3, counts=[1, 2, 4])
    fleet = r._fleet()
    fleet.one_clock, fleet.launch_per_instance_s = True, 0.05
    r.close_fleet()
    fresh = r._fleet()
    assert fresh is not fleet and (fresh.one_clock, fresh.launch_per_instance_s) == (True, 0.05)
    r.close_fleet()


def test_the_report_says_a_confirmation_within_1_percent_as_such():
    from virtbench.experiments.density.report import notes

    entry = {"platform": "docker", "label": "docker", "stop_reason": "guard", "stop_detail": "at 556",
             "stop_evidence": {"confirmation": [{"count": 557, "agrees": True, "within": True, "healthy": False,
                                                 "good": 555, "seconds": 240.0}]},
             "points": [], "max_count": 555, "confined": None}
    lines = [ln for ln in notes([entry]) if "fresh fleet:" in ln]
    assert lines == ["docker: maximum 557 confirmed within 1 % by a fresh fleet: 557 failed, the same fleet ran 555 "
                     "and that is the maximum (240.0 s)"], lines


def test_every_count_s_workload_starts_on_a_reclaimed_confined_host(tmp_path, monkeypatch):
    """Kept fleet or grown from empty, each count's workload starts after the confined host's
    reclaimable memory was given back (after the idle readings, before the workload, when the
    fleet grew), so the guard sees the same state whatever the fleet's history; the amount is logged."""
    calls: list[str] = []
    usage = iter([900 << 20, 880 << 20])
    monkeypatch.setattr(ramp_module.cgroups, "reclaim", lambda rel: calls.append(f"reclaim {rel}"))
    monkeypatch.setattr(ramp_module.cgroups, "memory_usage", lambda rel: next(usage))
    monkeypatch.setattr(ramp_module.costs, "read_idle", lambda *a, **k: calls.append("idle"))
    monkeypatch.setattr(ramp_module.costs, "idle_samples", lambda before, after: [])
    logs: list[str] = []
    ctx = SimpleNamespace(run_id="r", log=logs.append, step=lambda m: None, stop_requested=lambda: False)
    guard = Guard(GuardSettings(calm_wait=0))
    section = SimpleNamespace(parallel="auto", settle=0, min_overlap=0.5)
    r = Ramp(ctx=ctx, platform=Counting(tmp_path), image=None, section=section, guard=guard,
             parent="virtbench/density-r", bench=None)
    fleet = SimpleNamespace(members=[], run_workload=lambda bench, key, overlap: calls.append("workload")
                            or SimpleNamespace(sync=None))
    r.judge = SimpleNamespace(judge=lambda outcome, available, extra: None)
    assert r._run(fleet, 7, [{"started": 7, "seconds": 1.0, "size": 7}]) is None
    assert calls == ["idle", "idle", "reclaim virtbench/density-r", "workload"]
    assert any("count 7: reclaimed 20.0 MiB" in line for line in logs), logs
    calls.clear()  # reached by shrinking: _pressed_with reclaimed after the failed count
    assert r._run(fleet, 6, []) is None and calls == ["idle", "idle", "workload"]

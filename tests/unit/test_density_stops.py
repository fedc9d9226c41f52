"""Density stop reasons told apart: CPU starvation (a starved openssl child's `-nan`) from a
broken workload, an OOM caused by the confining parent's limit (counted in the victim's cgroup
on v1, or only in the kernel log), a full disk, and a bisection that must not blame the host's
leftovers of a failed probe on a count that ran correctly before."""
from __future__ import annotations

import errno
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from virtbench import proc
from virtbench.errors import disk_full as disk_full_error
from virtbench.experiments.density import limits as density_limits
from virtbench.experiments.density.fleet import Fleet, Member, Outcome
from virtbench.experiments.density.growth import new_kills
from virtbench.experiments.density.kind import DensitySection, Until
from virtbench.experiments.density.limits import disk_full
from virtbench.experiments.density.ramp import Ramp, Stop
from virtbench.platforms import cgroups, kernellog
from virtbench.platforms.base import Instance, Paths

DATA = Path(__file__).parent.parent / "data"
WORKLOAD = {"name": "openssl", "algorithm": "des-ede3", "bytes": 64, "multi": 2, "seconds": 5}
PARENT = "virtbench-density-55b64279-20261125-024707-b530"
OOM_LINE = ("[21355.321224] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=lxc.payload.vb-20261125-"
            f"024707-b530-lxc-p3-1,mems_allowed=0,oom_memcg=/{PARENT},task_memcg=/{PARENT}/lxc.payload.vb-20261125-"
            "024707-b530-lxc-p3-9,task=openssl,pid=24164,uid=0")
"""A real kernel log line (this machine, kernel 6.18, cgroup v1): the parent's limit killed an
openssl in instance 9; the parent's own memory.oom_control `oom_kill` stayed 0."""
OTHER_OOM = ("[21864.786120] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=vb-x-limited-r0,"
             "mems_allowed=0,oom_memcg=/vbst-62cbb5/vb-x-limited-r0,task_memcg=/vbst-62cbb5/vb-x-limited-r0,"
             "task=sysbench,pid=31560,uid=0")


def _read(name: str) -> str:
    return (DATA / "openssl" / name).read_text()


GOOD = (_read("des-ede3_multi2.txt"), _read("des-ede3_multi2.stderr.txt"))
STARVED = (_read("des-ede3_multi2_starved_nan.txt"), _read("des-ede3_multi2_starved_nan.stderr.txt"))
SINGLE = (_read("des-ede3_single.txt"), _read("des-ede3_single.stderr.txt"))
STARVED_ZERO = (_read("des-ede3_single_starved_zero.txt"), _read("des-ede3_single_starved_zero.stderr.txt"))
STARVED_INF = (_read("des-ede3_single_starved_inf.txt"), _read("des-ede3_single_starved_inf.stderr.txt"))
BROKEN = (_read("fail_des-cbc_nolegacy_single.txt"), _read("fail_des-cbc_nolegacy_single.stderr.txt"))


def _prober(tmp_path: Path, points: dict | None = None, workload: dict | None = None,
            **settings: float) -> tuple[Ramp, list[dict]]:
    section = DensitySection(workload=workload or WORKLOAD, counts=[1, 2], **settings)
    stored: list[dict] = []
    ctx = SimpleNamespace(sink=SimpleNamespace(record=lambda **kw: stored.append(kw)), run_id="r", log=lambda m: None,
                          stop_requested=lambda: False)
    platform = SimpleNamespace(name="lxc", paths=Paths(state=tmp_path), kind="container")
    ramp = Ramp(ctx=ctx, platform=platform, image=None, section=section, guard=None, parent=PARENT,
                    bench=section.benchmark())
    for count, per in (points or {}).items():
        ramp.points[count] = {"per_instance": per, "memory_per_instance": 1e6, "available_drop_per_instance": 0}
        ramp.best_total[count] = sum(per)
    return ramp, stored


def _outcome(outputs: list[tuple[str, str]], *, log_kills: list[str] | None = None,
             returncode: int = 0) -> Outcome:
    results = [(Member(Instance(f"i{i}", "lxc", "r"), None), proc.Result(["openssl"], returncode, out, err, 5.0))
               for i, (out, err) in enumerate(outputs, 1)]
    return Outcome(count=len(outputs), results=results, started_at=0.0, duration_s=5.0, oom_before={},
                   oom_after={}, kernel_log=log_kills or [], trip=None, memory_usage=[1 << 20] * len(outputs),
                   mem_available_before=1 << 34, parent_memory={"usage": 200 << 20, "peak": 260 << 20,
                                                                "limit": 1 << 30, "limit_hits": 0, "oom_kills": 0},
                   log_kills=log_kills or [])


def test_a_starved_child_s_nan_at_a_high_count_is_cpu_starvation(tmp_path: Path):
    """Session 4's LXC run stopped at 120 on 'workload failure': 3 of 120 openssl children never
    got the CPU and printed -nan. That is CPU starvation, with the curve and the output."""
    ramp, stored = _prober(tmp_path, {1: [1.4e7], 64: [2.2e5] * 64})
    stop = ramp._judge(_outcome([GOOD] * 117 + [STARVED] * 3), 1 << 34)
    assert stop is not None and stop.reason == "cpu_starvation", stop
    assert "3 of 120" in stop.detail and "240 workload processes" in stop.detail
    assert "memory was not the limit (the confining parent peaked at 260 MiB of 1024 MiB)" in stop.detail
    ev = stop.evidence
    assert any("-nan" in line for line in ev["starved_output"])
    assert ev["curve"][1] == 1.4e7 and ev["curve"][64] == pytest.approx(2.2e5) and 120 in ev["curve"]
    assert ev["parent_memory"]["limit"] == 1 << 30 and ev["cpus"] == os.cpu_count()
    assert stored[-1]["error"].startswith("cpu_starvation: ")
    assert len([s for s in stored[-1]["samples"] if s["metric"] == "throughput" and s["instance"] > 0]) == 117


def test_starvation_with_the_parent_at_its_limit_says_memory_stalled_too(tmp_path: Path):
    """Session 5 at 480 instances: 27 starved children and the 1 GiB parent's peak at its limit
    (no OOM kill): the detail must not claim memory was not the limit."""
    ramp, _ = _prober(tmp_path, {1: [1.4e7]})
    outcome = _outcome([GOOD] * 3 + [STARVED])
    outcome.parent_memory = {**outcome.parent_memory, "peak": 1 << 30}
    stop = ramp._judge(outcome, 1 << 34)
    assert stop.reason == "cpu_starvation" and "not the limit" not in stop.detail
    assert "at its memory limit too (peak 1024 MiB of 1024 MiB)" in stop.detail


def test_a_single_process_that_counted_nothing_in_its_window_is_cpu_starvation(tmp_path: Path):
    """Session 21's runc search at 1 GiB: at 408 instances of `openssl speed -seconds 2` (no
    -multi) one counted 0 operations in its 2.14 s (`+R:0:...`, rate 0.00) and the count was
    judged a workload failure, although it is what the -nan of a -multi child is: no CPU."""
    ramp, stored = _prober(tmp_path, {1: [1.4e7], 256: [2.2e5] * 256},
                           workload={**WORKLOAD, "multi": 1, "seconds": 2})
    stop = ramp._judge(_outcome([SINGLE] * 5 + [STARVED_ZERO]), 1 << 34)
    assert stop is not None and stop.reason == "cpu_starvation", stop
    assert "1 of 6" in stop.detail


def test_a_single_process_whose_window_read_zero_seconds_is_cpu_starvation(tmp_path: Path):
    """2026-11-30, docker at 543 instances from an empty fleet: seven counted 0 operations and
    one counted 889 in a window read as 0.000000 s (rate `inf`); the count was judged a workload
    failure, where the kept fleet's same count had been CPU starvation."""
    ramp, _ = _prober(tmp_path, {1: [1.4e7], 256: [2.2e5] * 256}, workload={**WORKLOAD, "multi": 1, "seconds": 2})
    stop = ramp._judge(_outcome([SINGLE] * 5 + [STARVED_ZERO, STARVED_INF]), 1 << 34)
    assert stop is not None and stop.reason == "cpu_starvation", stop
    assert "2 of 7" in stop.detail
    assert any(line.startswith("+R:0:DES-EDE3-CBC:2.14") for line in stop.evidence["starved_output"])


RUNC_2S = {**WORKLOAD, "multi": 1, "seconds": 2}


@pytest.mark.parametrize(("starved", "share", "healthy"), [(4, 0.01, True), (5, 0.01, True), (6, 0.01, False),
                                                           (1, 0.0, False)])
def test_a_few_starved_instances_of_a_large_fleet_are_chance_not_a_stop(tmp_path: Path, starved: int, share: float,
                                                                        healthy: bool):
    """Session 21's runc search at 1 GiB stopped on CPU at 408, 512, 564 and 568 (1-4 instances with no
    CPU in their 2 s window), yet ran 640 correctly later: single starved instances are the
    scheduler's chance far beyond one process per CPU. Up to starved_share of the count (1 % of
    568 is 5) are counted and shown; more stop the count as before, and 0 keeps the old rule."""
    ramp, stored = _prober(tmp_path, {1: [1.4e7], 256: [2.2e5] * 256}, workload=RUNC_2S, starved_share=share)
    stop = ramp._judge(_outcome([SINGLE] * (568 - starved) + [STARVED_ZERO] * starved), 1 << 34)
    if healthy:
        assert stop is None and 568 in ramp.points
        counted = [x for x in stored[-1]["samples"] if x["metric"] == "starved_instances"]
        assert [x["value"] for x in counted] == [starved]
        assert stored[-1]["status"] == "ok" and not stored[-1]["error"]
    else:
        assert stop is not None and stop.reason == "cpu_starvation" and f"{starved} of 568" in stop.detail
        assert 568 not in ramp.points


@pytest.mark.parametrize(("low", "healthy"), [(2, True), (3, False)])
def test_instances_far_below_the_median_stop_a_count_only_beyond_the_share(tmp_path: Path, low: int, healthy: bool):
    """The other CPU stop (an instance below 0.1 x the median: 7482 against 1.011e+05 at 448 in the
    same search) follows the same share: 2 of 200 are chance, 3 are a collapse."""
    ramp, _ = _prober(tmp_path, {1: [1.4e7], 128: [2.2e5] * 128}, workload=RUNC_2S)
    weak = (SINGLE[0].replace(SINGLE[0].strip().rsplit(":", 1)[-1], "1000.00"), SINGLE[1])
    stop = ramp._judge(_outcome([SINGLE] * (200 - low) + [weak] * low), 1 << 34)
    if healthy:
        assert stop is None
    else:
        assert stop is not None and stop.reason == "throughput_collapse" and f"{low} of 200" in stop.detail


def test_a_failed_cipher_with_a_zero_rate_is_not_starvation(tmp_path: Path):
    """The other way to print a rate of 0: -multi children that could not init their cipher
    (exit 0, `+F:...:0.00`). They counted nothing because they never started: no `+R` line."""
    ramp, _ = _prober(tmp_path, {1: [1.4e7]})
    broken = (_read("fail_des-cbc_nolegacy_multi2.txt"), _read("fail_des-cbc_nolegacy_multi2.stderr.txt"))
    assert ramp._judge(_outcome([GOOD] * 3 + [broken]), 1 << 34).reason == "workload_failure"


def test_nan_without_a_healthy_lower_count_is_a_broken_workload(tmp_path: Path):
    ramp, _ = _prober(tmp_path)
    assert ramp._judge(_outcome([STARVED]), 1 << 34).reason == "workload_failure"


def test_a_tool_error_at_a_high_count_stays_a_workload_failure(tmp_path: Path):
    ramp, _ = _prober(tmp_path, {1: [1.4e7]})
    stop = ramp._judge(_outcome([GOOD] * 3 + [BROKEN], returncode=0), 1 << 34)
    assert stop.reason == "workload_failure"


def test_a_parent_oom_seen_only_in_the_kernel_log_is_an_oom(tmp_path: Path):
    """The victim's cgroup can be gone with its container: the kernel log still names the
    parent (oom_memcg) and the victim (task_memcg)."""
    ramp, _ = _prober(tmp_path, {1: [1.4e7]})
    stop = ramp._judge(_outcome([GOOD, STARVED], log_kills=[OOM_LINE]), 1 << 34)
    assert stop.reason == "oom" and stop.evidence["oom_kills"] == {"kernel log": 1}
    assert stop.evidence["kernel_log"] == [OOM_LINE] and stop.evidence["parent_memory"]["limit"] == 1 << 30


def test_kernel_log_oom_lines_are_attributed_to_the_parent_only():
    assert cgroups.log_oom_kills([OOM_LINE, OTHER_OOM, "[1.0] Killed process 3 (x)"], PARENT) == [OOM_LINE]
    assert cgroups.log_oom_kills([OOM_LINE], PARENT + "0") == []  # a sibling with a longer name
    fleet = Fleet(platform=None, image=None, run_id="r", prefix="p", guard=None, parent=PARENT)
    assert fleet.log_kills([OTHER_OOM, OOM_LINE]) == [OOM_LINE]


def test_v1_parent_oom_kills_are_summed_over_its_subtree(tmp_path: Path, monkeypatch):
    """On v1 the parent's memory.oom_control says oom_kill 0 when its limit killed a task in
    an instance: the kill is counted in the victim's cgroup."""
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(cgroups, "cgroup_mode", lambda entries=None: "hybrid")
    parent = tmp_path / "memory" / "p"
    for d, kills in ((parent, 0), (parent / "a", 2), (parent / "a" / "init.scope", 1), (parent / "b", 0)):
        d.mkdir(parents=True, exist_ok=True)
        (d / "memory.oom_control").write_text(f"oom_kill_disable 0\nunder_oom 0\noom_kill {kills}\n")
    (parent / "memory.max_usage_in_bytes").write_text("272629760\n")
    (parent / "memory.limit_in_bytes").write_text(str(1 << 30))
    assert cgroups.subtree_oom_kills("p") == 3 and cgroups.subtree_oom_kills("gone") is None
    assert cgroups.memory_peak("p") == 260 << 20
    cgroups.reset_peak("p")
    assert (parent / "memory.max_usage_in_bytes").read_text() == "0"
    assert cgroups.memory_evidence("p")["limit"] == 1 << 30
    fleet = Fleet(platform=None, image=None, run_id="r", prefix="p", guard=None, parent="p")
    assert fleet.oom_counters()["p"]["oom_kill"] == 3


# -- bisection after a failure: the host's leftovers are not the count's -----------------------
def _search_prober(fail: dict[int, list[int | None]], waits: list[str],
                   limit: int = 12) -> tuple[Ramp, list[int]]:
    """measure(n) fails at the instance `fail[n].pop(0)` (None: healthy), else every count from
    `limit` on fails; await_recovery is recorded instead of waiting."""
    calls: list[int] = []
    ramp = Ramp(ctx=SimpleNamespace(log=lambda m: None), platform=SimpleNamespace(name="lxc"), image=None,
                section=None, guard=None, parent=None, bench=None)

    def measure(c, probes):
        calls.append(c)
        probes.append({"count": c})
        at = fail[c].pop(0) if fail.get(c) else (c if c >= limit else None)
        return None if at is None else Stop("start_failure", f"instance {at} did not start", at)

    ramp.measure = measure
    ramp.await_recovery = lambda: waits.append("wait") or {"waited_s": 0.0, "recovered": True}
    return ramp, calls


def test_a_failure_below_the_known_good_count_waits_and_probes_again():
    """After 16 failed, the probe of 12 fails at instance 3 (memory of the failed probe not yet
    back): the maximum must not drop to 2; wait, probe 12 again afresh, go on bisecting."""
    waits: list[str] = []
    ramp, calls = _search_prober({12: [3, None]}, waits, limit=13)
    result = ramp.search([1, 2, 4, 8, 16], bisect=True, confirm=False)
    assert calls == [1, 2, 4, 8, 16, 12, 12, 14, 13]
    assert waits == ["wait"] and result.max_count == 12 and result.stop.count == 13


def test_a_host_that_never_recovers_stops_the_bisection_without_lowering_the_maximum():
    waits: list[str] = []
    ramp, calls = _search_prober({12: [3, 3, 3, 3]}, waits)
    result = ramp.search([1, 2, 4, 8, 16], bisect=True)
    assert result.max_count == 8 and len(waits) == 2 and calls[5:] == [12, 12, 12]  # and no confirmation
    assert "did not recover" in result.stop.evidence["bisection_stopped"] and result.stop.count == 16


def test_a_start_failure_between_good_and_mid_narrows_to_that_instance():
    ramp, calls = _search_prober({24: [20]}, [], limit=30)
    result = ramp.search([1, 2, 4, 8, 16, 32], bisect=True, confirm=False)
    assert calls[6] == 24 and calls[7] == 18  # failing is 20 now, not 24
    assert result.max_count == 19


def test_precision_ends_the_bisection_that_close():
    ramp, calls = _search_prober({}, [], limit=700)
    result = ramp.search(Until(until="failure", max=1024).ramp(), bisect=True, precision=8, confirm=False)
    assert result.max_count >= 692 and result.stop.count - result.max_count <= 8
    assert len(calls) == 11 + 6  # 1..1024, then 512..1024 narrowed to 8 in six steps


def _aimed_prober(monkeypatch, limit_count: int, per_mib: float = 1.63) -> tuple[Ramp, list[int]]:
    """A confined host of 1 GiB with a 10 % floor whose peak grows 1.63 MiB per instance
    (session 21's runc fleet) and fails above `limit_count`; measure records each healthy
    count's peak as the judge does."""
    mib = 1 << 20
    monkeypatch.setattr(cgroups, "memory_limit", lambda rel: 1 << 30)
    guard = SimpleNamespace(confined_min_available=lambda limit: limit // 10)
    ramp = Ramp(ctx=SimpleNamespace(log=lambda m: None), platform=SimpleNamespace(name="runc"), image=None,
                section=None, guard=guard, parent="p", bench=None, probe_no=1)
    calls: list[int] = []

    def measure(c, probes):
        calls.append(c)
        probes.append({"count": c})
        if c > limit_count:
            return Stop("guard", "available memory below the floor", c)
        ramp.points[c] = {"peak": int(2 * mib + per_mib * mib * c)}
        return None

    ramp.measure = measure
    return ramp, calls


@pytest.mark.parametrize("limit_count", [562, 540, 600, 700])
def test_the_ramp_aims_below_the_predicted_maximum_instead_of_doubling_past_it(monkeypatch, limit_count: int):
    """The peaks of 16..512 predict (1024 - 102.4 - 2) / 1.63 = 564: the ramp measures 558, then
    steps up by 12, 24, ... and never measures 1024, whose overshoot squeezed the kept fleet in
    session 21; the bisection ends at the limit wherever it lies around the prediction."""
    ramp, calls = _aimed_prober(monkeypatch, limit_count)
    assert ramp.predicted_max() is None  # nothing measured yet
    result = ramp.search(Until(until="failure", max=1500).ramp(), bisect=True, confirm=False)
    assert result.max_count == limit_count and result.stop.count == limit_count + 1
    assert calls[:11] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 558] and 1024 not in calls
    # doubling to 1024 and bisecting back measures 20 counts at 562; a prediction 25 % low costs 2 more
    assert len(calls) <= {562: 16, 540: 17, 600: 20, 700: 22}[limit_count], calls


def test_a_ramp_already_past_the_prediction_steps_on_instead_of_doubling(monkeypatch):
    """Measured (lxc, 1 GiB, 2026-11-30): 16..256 predicted 510, so the ramp measured 500 and
    then 512, both healthy (the peak per instance falls as the workloads run less together); the
    next scheduled count, 1024, was then measured at once: its overshoot squeezed the kept fleet,
    which ran 576 and 584 where fresh fleets failed both, and the search took two confirmations
    and a third fleet to come back to 518. Past the prediction the ramp steps on from 512."""
    ramp, calls = _aimed_prober(monkeypatch, 518, per_mib=1.8)
    result = ramp.search(Until(until="failure", max=1500).ramp(), bisect=True, confirm=False)
    assert result.max_count == 518 and 1024 not in calls, calls
    assert calls[9:12] == [504, 512, 524], calls
    assert len(calls) <= 16, calls


def test_no_aim_without_a_confining_parent_or_after_the_first_fleet(monkeypatch):
    ramp, _ = _aimed_prober(monkeypatch, 562)
    for c in (16, 32, 64):
        ramp.points[c] = {"peak": int((2 + 1.63 * c) * (1 << 20))}
    assert ramp.predicted_max() == 564
    ramp.probe_no = 2
    assert ramp.predicted_max() is None
    ramp.probe_no, ramp.parent = 1, None
    assert ramp.predicted_max() is None


# -- a full disk ---------------------------------------------------------------------------------
def test_enospc_on_a_full_filesystem_is_a_full_disk(tmp_path: Path, monkeypatch):
    text = f"create vb-1: [Errno 28] No space left on device: '{tmp_path}/lxc/vb-1/config'"
    assert disk_full(text, tmp_path) is None  # plenty free here: ENOSPC of inotify watches, say
    full = os.statvfs_result((4096, 4096, 1000, 0, 0, 100, 0, 0, 0, 255))
    monkeypatch.setattr(density_limits.os, "statvfs", lambda p: full)
    ev = disk_full(text, tmp_path)
    assert ev["free_bytes"] == 0 and ev["size_bytes"] == 4096 * 1000 and "Errno 28" in ev["error"]
    assert disk_full("exit 1: permission denied", tmp_path) is None


def test_a_full_disk_in_the_cli_is_one_line():
    try:
        try:
            open("/nonexistent-dir/x", "w")
        except OSError:
            raise OSError(errno.ENOSPC, "No space left on device", "/var/lib/x/store.db") from None
    except OSError as exc:
        err = disk_full_error(RuntimeError("wrapped")) or disk_full_error(exc)
    assert err is not None and err.message == "disk full writing /var/lib/x/store.db: no space left on device"
    assert "VIRTBENCH_STATE_DIR" in err.fix
    sqlite = Exception("(sqlite3.OperationalError) database or disk is full")
    assert "results store" in disk_full_error(sqlite).message
    assert disk_full_error(ValueError("x")) is None


def test_a_start_whose_oom_only_the_kernel_log_shows_is_an_oom(monkeypatch):
    """A start the parent's OOM killed: LXC removes the failed instance's cgroup with its
    counter, so the kernel log's line naming the parent is the evidence."""
    monkeypatch.setattr(kernellog, "oom_lines_since", lambda mark: [OTHER_OOM, OOM_LINE])
    fleet = Fleet(platform=None, image=None, run_id="r", prefix="p", guard=None, parent=PARENT)
    monkeypatch.setattr(fleet, "oom_counters", lambda: {PARENT: {"oom_kill": 0}})
    kills, log = new_kills(fleet, {PARENT: {"oom_kill": 0}}, 0)
    assert kills == {"kernel log": 1} and log == [OOM_LINE]
    monkeypatch.setattr(kernellog, "oom_lines_since", lambda mark: [OTHER_OOM])
    assert new_kills(fleet, {PARENT: {"oom_kill": 0}}, 0)[0] == {}


# -- a signal mid-create -------------------------------------------------------------------------
class _Platform:
    """Records what the fleet asks; create is cut short by a signal once `cut` instances exist."""

    cleaned: list[str] = []

    def __init__(self, cut: int) -> None:
        self.cut, self.made, self.removed, self.paths = cut, [], [], Paths(state=Path("/nonexistent"))

    def create(self, image, name, run_id):
        if len(self.made) == self.cut:
            raise KeyboardInterrupt("signal 15")  # the container dir exists, create never returned
        self.made.append(name)
        return Instance(name, "fake", run_id)

    def start(self, inst):
        pass

    def memory_cgroup(self, inst):
        return None

    def stop(self, inst):
        pass

    def remove(self, inst):
        self.removed.append(inst.name)

    @classmethod
    def cleanup(cls, paths, run_id=None):
        cls.cleaned.append(run_id)
        return []


def test_a_signal_during_create_is_cleaned_up_through_the_platform():
    """Session 4 left containers when SIGTERM came mid-probe: an instance whose create was cut
    short is not in `created`; close() must remove it through the platform's cleanup of the run."""
    plat = _Platform(cut=2)
    _Platform.cleaned = []
    fleet = Fleet(platform=plat, image=None, run_id="r1", prefix="p", guard=None)
    fleet.add()
    fleet.add()
    with pytest.raises(KeyboardInterrupt):
        fleet.add()
    assert fleet.creating == {"p-3"}
    assert fleet.close() == [] and plat.removed == ["p-2", "p-1"] and _Platform.cleaned == ["r1"]
    assert fleet.creating == set() and fleet.created == []
    plat2 = _Platform(cut=5)
    fleet2 = Fleet(platform=plat2, image=None, run_id="r2", prefix="q", guard=None)
    fleet2.add()
    fleet2.close()
    assert _Platform.cleaned == ["r1"]  # a normal close needs no sweep


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/sys/fs/cgroup/memory").is_dir(),
                    reason="needs root and a cgroup v1 memory hierarchy")
def test_the_brake_kills_each_instance_s_processes_at_once_and_nothing_else():
    """A trip or a signal: the processes of every instance's own cgroup below the parent are
    SIGKILLed at once (one lxc-stop after another took minutes for 1024 thrashing containers);
    the parent's own processes (LXC's monitors) and anything outside are left to the stops."""
    import subprocess
    import uuid

    parent = f"vb-test-brake-{uuid.uuid4().hex[:6]}"
    root = Path("/sys/fs/cgroup/memory") / parent
    procs = []
    try:
        for d in ("inst1", "inst2/sub"):
            (root / d).mkdir(parents=True)
        for d in ("inst1", "inst2/sub", ""):
            p = subprocess.Popen(["sleep", "300"])
            (root / d / "cgroup.procs").write_text(str(p.pid))
            procs.append(p)
        stopped = []
        plat = SimpleNamespace(stop=lambda inst: stopped.append(inst))
        fleet = Fleet(plat, None, "r", "p", None, parent,
                      members=[Member("i1", f"{parent}/inst1"), Member("i2", f"{parent}/inst2"),
                               Member("outside", "/")], created=["i1", "i2"])
        fleet.kill()
        assert [p.wait(timeout=10) for p in procs[:2]] == [-9, -9]
        assert procs[2].poll() is None                       # the parent's own process lives
        assert stopped == ["i1", "i2"]                       # then the ordinary stops
        with pytest.raises(ValueError):
            cgroups.kill_tasks("/")
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for d in ("inst2/sub", "inst2", "inst1", ""):
            try:
                (root / d).rmdir()
            except OSError:
                pass


def test_a_memory_benchmark_s_throughput_is_shown_beside_density_s_own_memory_samples():
    """mbw's metrics have the category `memory`, as density's bookkeeping (memory per instance,
    the parent's peak) does: the table and figure of a 1 GiB mbw campaign showed no throughput."""
    import json as _json

    from virtbench.experiments.density.report import STOP_KEY, density_data

    def smp(eid, metric, inst, value, cat):
        return SimpleNamespace(execution_id=eid, metric=metric, instance=inst, value=value, category=cat, unit="MiB/s")

    execs = [SimpleNamespace(id=1, host="", platform="lxc", benchmark="density[count=2]", round=1, status="ok", error="",
                             duration_s=12.0),
             SimpleNamespace(id=2, host="", platform="lxc", benchmark=STOP_KEY, round=1, status="ok", error="",
                             stdout=_json.dumps({"platform": "lxc", "max_count": 2, "stop_reason": "guard"}))]
    samples = [smp(1, "memcpy", 1, 14931.6, "memory"), smp(1, "memcpy", 2, 14670.7, "memory"),
               smp(1, "memcpy", 0, 14801.2, "memory"), smp(1, "memcpy_total", 0, 29602.3, "memory"),
               smp(1, "memory_per_instance", 0, 352256.0, "memory"), smp(1, "parent_memory_peak", 0, 37e6, "memory"),
               smp(1, "start_spread", 0, 0.002, "sync"), smp(1, "overlap", 0, 0.87, "sync")]
    store = SimpleNamespace(executions=lambda run_id: execs, samples=lambda run_id, per_instance=True: samples)
    entry = density_data(store, SimpleNamespace(id="r"))[0]
    point = entry["points"][0]
    assert point["per_instance_mean"] == 14801.2 and point["aggregate"] == 29602.3, point
    assert point["memory_per_instance_bytes"] == 352256.0


def test_a_parents_v2_counters_are_quoted_under_their_file_names(tmp_path: Path, monkeypatch):
    """A guard stop's evidence on cgroup v2: memory.events, memory.pressure and memory.peak as the
    kernel wrote them. memory.events, .peak, .current and .max are the values read on the systemd +
    cgroup v2 reference guest (kernel 6.1) at a guard stop; memory.pressure is in the kernel's
    format with non-zero averages (the guest's read all zeros), so the floats are parsed."""
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(cgroups, "cgroup_mode", lambda entries=None: "v2")
    parent = tmp_path / "virtbench.slice" / "p.slice"
    parent.mkdir(parents=True)
    (parent / "memory.events").write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
    (parent / "memory.pressure").write_text("some avg10=1.25 avg60=0.30 avg300=0.06 total=412\n"
                                            "full avg10=0.50 avg60=0.10 avg300=0.02 total=201\n")
    (parent / "memory.peak").write_text("136470528\n")
    (parent / "memory.current").write_text("139264\n")
    (parent / "memory.max").write_text("536870912\n")
    counters = cgroups.memory_files("virtbench.slice/p.slice")
    assert counters == {"memory.events": {"low": 0, "high": 0, "max": 0, "oom": 0, "oom_kill": 0, "oom_group_kill": 0},
                        "memory.pressure": {"some": {"avg10": 1.25, "avg60": 0.30, "avg300": 0.06, "total": 412.0},
                                            "full": {"avg10": 0.50, "avg60": 0.10, "avg300": 0.02, "total": 201.0}},
                        "memory.peak": 136470528, "memory.current": 139264, "memory.max": 536870912}
    (parent / "memory.max").write_text("max\n")
    assert cgroups.memory_files("virtbench.slice/p.slice")["memory.max"] == "max"
    assert cgroups.memory_files("virtbench.slice/gone") == {}


def test_a_host_pressed_before_the_first_instance_is_waited_for_then_named(tmp_path: Path, monkeypatch):
    """CI of 58a49fa: a density run that began right after a test thrashing memory stopped at
    'PSI memory full avg10 10.6% above 10% (before instance 1)' and reported a maximum of 0 for
    every platform. A probe waits for the host to be calm before its first instance; a host
    still pressed after the wait stops the probe saying it was so before anything started."""
    from virtbench.experiments.density import guard as density_guard
    from virtbench.experiments.density.guard import Guard, GuardSettings, Pressure

    def pressed(full: float) -> Pressure:
        return Pressure(time=0.0, mem_total=24 << 30, mem_available=23 << 30, psi_some_avg10=full,
                        psi_full_avg10=full)

    clock = [0.0]
    monkeypatch.setattr(density_guard.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(density_guard.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    readings = iter([pressed(10.6), pressed(10.3), pressed(0.5)])
    ramp, _ = _prober(tmp_path)
    ramp.guard = Guard(GuardSettings(), read=lambda: next(readings))
    assert ramp._pressed_before() is None and clock[0] == 4.0  # 10.6, 10.3, then calm: waited for

    ramp.guard = Guard(GuardSettings(), read=lambda: pressed(10.6))
    stop = ramp._pressed_before()
    assert clock[0] >= 4.0 + 120  # the whole wait (calm_wait's default)
    assert stop is not None and stop.reason == "guard" and stop.count == 1
    assert stop.detail.startswith("the host was under memory pressure before instance 1 started and stayed so "
                                  "for 120 s")
    assert "PSI memory full avg10 10.6% above 10%" in stop.detail
    assert stop.evidence["reading"]["psi_full_avg10"] == 10.6

    # a cancel (`virtbench cancel`, the web app) during the wait ends it at its next reading
    ramp.ctx.stop_requested = lambda: clock[0] >= 130.0
    with pytest.raises(KeyboardInterrupt):
        ramp._pressed_before()
    assert clock[0] == 130.0

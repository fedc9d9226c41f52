"""Density: campaign section and bad input, guard thresholds, kernel-limit prediction, failure
classification, readers of /proc and cgroup files, and the LXC system-container config."""
from __future__ import annotations

from pathlib import Path

import pytest

from virtbench.config import parse_campaign
from virtbench.errors import InputError
from virtbench.experiments.density.guard import Guard, GuardSettings, ParentPressure, Pressure, read_host
from virtbench.experiments.density.kind import DensitySection, Until
from virtbench.experiments.density.limits import classify_failure, next_instance_blocked
from virtbench.platforms import cgroups
from virtbench.platforms.lxc import LXCOptions, build_lxc_config, lxc_cgroup_lines
from virtbench.probes.hostpressure import PressureReader

MIB = 1 << 20
WORKLOAD = {"name": "openssl", "algorithm": "des-ede3", "bytes": 64, "multi": 2, "seconds": 2}


def campaign(**density) -> dict:
    return {"name": "d", "experiment": "density",
            "platforms": [{"name": "native", "type": "native"}, {"name": "lxc", "type": "lxc", "memory": "64M"}],
            "density": {"workload": WORKLOAD, "counts": [1, 2], **density}}


def test_campaign_parses_with_the_section_and_round_trips():
    c = parse_campaign(campaign(counts={"until": "failure", "max": 50}, host_memory="1G"))
    assert isinstance(c.section, DensitySection)
    assert c.section.host_memory == 1 << 30
    again = parse_campaign(c.model_dump(mode="json"))
    assert again.section == c.section


@pytest.mark.parametrize("density, expected", [
    ({"counts": {"until": "failure"}, "guard": {"enabled": False}, "host_memory": "1G"}, "no limit"),
    ({"guard": {"enabled": False}}, "host_memory"),
    ({"counts": [2, 1]}, "increasing"),
    ({"counts": [0, 1]}, "increasing"),
    ({"workload": {"name": "iperf3"}}, "client-server"),
    ({"workload": {"name": "nope"}}, "unknown benchmark"),
    ({"workload": {"name": "openssl", "bytes": 7}}, "multiple"),
    ({"host_memory": "lots"}, "not a size"),
    ({"colapse": 0.3}, "unknown key"),
])
def test_bad_density_input_is_one_line(density, expected):
    with pytest.raises(InputError) as err:
        parse_campaign(campaign(**density), "c.yaml")
    assert expected in err.value.message and "\n" not in err.value.message


@pytest.mark.parametrize("image, expected", [
    ({"release": "buster2"}, "unknown release"),
    ({"rootfs": "/nonexistent.tar.zst"}, "is not a file"),
    ({"release": "bullseye", "rootfs": "/x"}, "exactly one"),
])
def test_bad_platform_image_is_one_line(image, expected):
    c = campaign()
    c["platforms"][1]["image"] = image
    with pytest.raises(InputError) as err:
        parse_campaign(c, "c.yaml")
    assert expected in err.value.message


def test_disk_on_a_backend_that_cannot_enforce_it():
    c = campaign()
    c["platforms"][1] = {"name": "d", "type": "docker", "disk": "2G"}
    with pytest.raises(InputError, match="docker cannot enforce a root filesystem size"):
        parse_campaign(c, "c.yaml")


def test_platform_image_is_kept_in_the_stored_form():
    c = campaign()
    c["platforms"][1]["image"] = {"release": "bullseye"}
    parsed = parse_campaign(c)
    assert parsed.platform("lxc").image == {"release": "bullseye"}
    assert parse_campaign(parsed.model_dump(mode="json")).platform("lxc").image == {"release": "bullseye"}


def test_ramp_doubles_or_steps_up_to_max():
    assert Until(until="failure", max=20).ramp() == [1, 2, 4, 8, 16, 20]
    assert Until(until="failure", max=16).ramp() == [1, 2, 4, 8, 16]
    assert Until(until="failure", max=10, step=4).ramp() == [1, 5, 9, 10]


def reading(avail_mib: int, some: float | None = 0.0, full: float | None = 0.0) -> Pressure:
    return Pressure(time=0.0, mem_total=8192 * MIB, mem_available=avail_mib * MIB,
                             psi_some_avg10=some, psi_full_avg10=full)


@pytest.mark.parametrize("r, trips", [
    (reading(4000), None),
    (reading(700), "MemAvailable"),          # default: 10 % of 8 GiB = 819 MiB
    (reading(4000, some=55.0), "some"),
    (reading(4000, full=12.0), "full"),
    (reading(4000, some=None, full=None), None),  # no PSI on this kernel: MemAvailable alone
])
def test_guard_thresholds(r, trips):
    guard = Guard(GuardSettings(), read=lambda: r)
    trip = guard.check("test")
    assert (trip is None) if trips is None else (trips in trip.reason)
    assert guard.series and guard.series[-1]["when"] == "test"


def test_guard_default_floor_on_a_small_host():
    assert Guard(GuardSettings()).min_available(2048 * MIB) == 256 * MIB
    assert Guard(GuardSettings(min_available="1G")).min_available(2048 * MIB) == 1 << 30


def test_guard_reports_the_latest_trip_and_waits_for_calm():
    readings = iter([reading(4000, full=12.0), reading(4000, full=11.0), reading(4000), reading(4000)])
    guard = Guard(GuardSettings(), read=lambda: next(readings))
    assert "12.0" in guard.check("a").reason
    assert guard.wait_calm(seconds=5, sleep=0.01)  # 11.0 (still pressed), then calm
    assert "11.0" in guard.trip.reason


def test_disabled_guard_never_trips():
    assert Guard(GuardSettings(enabled=False), read=lambda: reading(1)).check("x") is None


def test_kernel_limit_predicted_from_what_the_last_instance_took():
    before = {"inotify instances": (100, 128, "fs.inotify.max_user_instances")}
    assert next_instance_blocked(before, {"inotify instances": (112, 128, "x")}) is None
    blocked = next_instance_blocked(before, {"inotify instances": (118, 128, "x")})
    assert blocked and blocked["last_instance_took"] == 18 and blocked["limit"] == "inotify instances"
    assert next_instance_blocked(None, {"pids": (128, 128, "kernel.pid_max")})["limit"] == "pids"


@pytest.mark.parametrize("text, name", [
    ("RTNETLINK answers: Exchange full", "bridge ports"),
    ("Failed to allocate directory watch: Too many open files", "inotify"),
    ("fork: Resource temporarily unavailable", "pids"),
    ("QEMU: cannot set up guest memory 'pc.ram': Cannot allocate memory", "memory"),
    ("lxc-start: something else", None),
])
def test_start_failures_are_classified(text, name):
    got = classify_failure(text)
    assert (got is None) if name is None else name in got


def test_guard_reads_meminfo_and_psi(tmp_path: Path):
    (tmp_path / "proc/pressure").mkdir(parents=True)
    (tmp_path / "proc/meminfo").write_text("MemTotal:       24684084 kB\nMemFree: 1 kB\nMemAvailable:   23572172 kB\n")
    (tmp_path / "proc/pressure/memory").write_text("some avg10=1.50 avg60=0.20 avg300=0.00 total=12345\n"
                                                   "full avg10=0.25 avg60=0.00 avg300=0.00 total=678\n")
    r = read_host(PressureReader(tmp_path))
    assert r.mem_total == 24684084 * 1024 and r.mem_available == 23572172 * 1024
    assert (r.psi_some_avg10, r.psi_full_avg10) == (1.5, 0.25)
    (tmp_path / "proc/pressure/memory").unlink()
    assert read_host(PressureReader(tmp_path)).psi_some_avg10 is None


def test_oom_counters_v1_and_v2(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(cgroups, "cgroup_mode", lambda entries=None: "hybrid")
    d = tmp_path / "memory" / "p" / "c"
    d.mkdir(parents=True)
    (d / "memory.failcnt").write_text("17\n")
    (d / "memory.memsw.failcnt").write_text("3\n")
    (d / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    (d / "memory.usage_in_bytes").write_text("1048576\n")
    assert cgroups.oom_counters("/p/c") == {"failcnt": 17, "memsw_failcnt": 3, "under_oom": 0, "oom_kill": 2}
    assert cgroups.memory_usage("p/c") == 1 << 20
    assert cgroups.oom_counters("/gone") == {}
    (tmp_path / "memory" / "p" / "memory.failcnt").write_text("0\n")  # the parent never hit its own limit...
    assert cgroups.limit_hits("p") == 17  # ...but an instance below it hit its own: a stall inside the parent
    assert cgroups.limit_hits("gone") is None
    monkeypatch.setattr(cgroups, "cgroup_mode", lambda entries=None: "v2")
    v2 = tmp_path / "q"
    v2.mkdir()
    (v2 / "memory.events").write_text("low 0\nhigh 0\nmax 40\noom 2\noom_kill 1\noom_group_kill 0\n")
    assert cgroups.oom_kills(cgroups.oom_counters("q")) == 1
    assert cgroups.limit_hits("q") == 40  # v2 memory.events is hierarchical


def test_memory_cgroup_of_a_process(tmp_path: Path):
    own = cgroups.memory_cgroup_of(__import__("os").getpid())
    assert own is not None and own.startswith("/")


def test_confinement_larger_than_the_host_is_refused():
    with pytest.raises(InputError, match="not smaller than this host"):
        cgroups.Confinement("x", 1 << 50).check()


def test_a_board_size_host_memory_on_a_board_of_that_size_is_the_whole_host(monkeypatch):
    """Study 000's paper preset says host_memory: 8G, its board's nominal RAM; an "8 GB" Pi 5 reports
    about 7.8 GiB. Before: refused ("not smaller than this host's memory") on the paper's own board."""
    from virtbench.experiments.density.kind import Density
    from virtbench.platforms.base import Paths

    monkeypatch.setattr(cgroups, "host_memory_total", lambda: 7_900 << 20)
    board = Density(parse_campaign(campaign(counts={"until": "failure", "max": 50}, host_memory="8G")), Paths())
    assert board.confining() is None and board.provenance()["density"]["whole_board"] is True
    smaller = Density(parse_campaign(campaign(counts={"until": "failure", "max": 50}, host_memory="4G")), Paths())
    assert smaller.confining() == 4 << 30 and smaller.provenance()["density"]["whole_board"] is False
    assert not cgroups.whole_board(16 << 30, 7_900 << 20)  # a 16G preset is not this board: still refused
    with pytest.raises(InputError, match="not smaller than this host"):
        cgroups.Confinement("x", 16 << 30).check()


def test_lxc_swap_disk_init_and_parent_in_the_config():
    o = LXCOptions(memory="64M", swap=0, init="systemd", disk="1G")
    assert "lxc.cgroup.memory.memsw.limit_in_bytes = 67108864" in lxc_cgroup_lines(o, "hybrid")
    assert "lxc.cgroup2.memory.swap.max = 0" in lxc_cgroup_lines(o, "v2")
    conf = build_lxc_config(name="vb-x", run_id="r", rootfs="loop:/d/rootdev", options=o, cgroup_mode="hybrid",
                            apparmor=False, init="/lib/systemd/systemd", cgroup_parent="virtbench-density-r")
    assert "lxc.rootfs.path = loop:/d/rootdev" in conf
    assert "lxc.init.cmd = /lib/systemd/systemd" in conf
    assert "lxc.cgroup.dir.container = virtbench-density-r/lxc.payload.vb-x" in conf
    with pytest.raises(ValueError, match="swap needs memory"):
        LXCOptions(swap="64M")
    with pytest.raises(ValueError, match="disk below"):
        LXCOptions(disk="10M")


def test_confining_parents_belong_to_one_state_directory():
    """cleanup of one state directory (a test session, another installation) must never
    remove the confining parent of a run measuring under another."""
    from pathlib import Path

    from virtbench.experiments.density.kind import parent_prefix
    from virtbench.platforms.base import Paths

    a, b = parent_prefix(Paths(state=Path("/var/lib/virtbench"))), parent_prefix(Paths(state=Path("/tmp/other")))
    assert a != b and not a.startswith(b) and not b.startswith(a)
    assert a == parent_prefix(Paths(state=Path("/var/lib/virtbench")))
    assert a.startswith("virtbench-density-") and a.endswith("-")


# -- the guard with a confining parent (host_memory) ----------------------------------------------
def parent(usage_mib: int, *, failcnt: int | None = 0, some: float | None = None,
           full: float | None = None) -> ParentPressure:
    return ParentPressure(usage=usage_mib * MIB, limit=1024 * MIB, psi_some_avg10=some, psi_full_avg10=full,
                          failcnt=failcnt)


@pytest.mark.parametrize("host, par, trips", [
    # v1 (no per-cgroup PSI): the parent at its limit explains a host-wide stall; the host is fine
    (reading(4000, full=30.0, some=80.0), parent(1000), None),
    # ...but not when the host's own MemAvailable is low (then it trips on that)
    (reading(700, full=30.0), parent(1000), "MemAvailable"),
    # ...nor with the parent far from its limit: 'full' (nothing progressed) is judged, 'some' is not
    (reading(4000, full=30.0), parent(100), "full"),
    (reading(4000, some=80.0, full=2.0), parent(100), None),
    (reading(1500, some=80.0, full=2.0), parent(100), "some"),     # MemAvailable below twice the floor
    # v2: the parent's own memory.pressure is subtracted from the host's
    (reading(4000, full=30.0, some=50.0), parent(1000, full=28.0, some=45.0), None),
    (reading(4000, full=30.0), parent(1000, full=5.0, some=5.0), "full"),
])
def test_confined_guard_judges_the_host_outside_the_parent(host, par, trips):
    """The real host's view (`confined: false`: the confined host's own judgement is off)."""
    guard = Guard(GuardSettings(confined=False), read=lambda: host, parent=lambda: par)
    trip = guard.check("workload")
    assert (trip is None) if trips is None else (trips in trip.reason), trip
    assert guard.series[-1]["parent"]["usage"] == par.usage
    unconfined = Guard(GuardSettings(), read=lambda: host).check("workload")
    assert unconfined is not None or host.psi_full_avg10 is None  # the old guard tripped on every one of these


def test_confined_guard_v1_remembers_a_recent_limit_hit():
    """PSI avg10 lingers after the parent was reclaimed or OOM-killed: a limit hit within the last
    RECENT seconds still explains it; the first reading's old hits do not (safe side)."""
    pars = iter([parent(100, failcnt=5), parent(100, failcnt=9), parent(100, failcnt=9)])
    guard = Guard(GuardSettings(confined=False), read=lambda: reading(4000, full=30.0), parent=lambda: next(pars))
    assert guard.check("first") is not None            # hits of unknown age: trip
    assert guard.check("after a hit") is None          # the counter rose just now
    assert guard.check("still recent") is None
    guard._parent_hits = (9, guard._parent_hits[1] - 31)
    guard.parent = lambda: parent(100, failcnt=9)
    assert guard.check("long after") is not None


def test_confined_guard_v1_remembers_seeing_the_parent_at_its_limit():
    """This kernel's v1 failcnt stays 0 at the limit: the parent seen at its limit a moment ago
    (its page cache reclaimed since) still explains a stall for RECENT seconds."""
    pars = iter([parent(1020, failcnt=0), parent(600, failcnt=0), parent(600, failcnt=0)])
    guard = Guard(GuardSettings(confined=False), read=lambda: reading(4000, full=30.0), parent=lambda: next(pars))
    assert guard.check("at the limit") is None
    assert guard.check("reclaimed a moment later") is None
    guard._near_seen -= 31
    assert guard.check("long after") is not None


def test_a_density_run_has_no_main_table_rows():
    """The density section is the result: its per-count executions are not rows against a baseline."""
    from types import SimpleNamespace

    from virtbench.report.sections import in_main_table

    assert not in_main_table(SimpleNamespace(campaign={"experiment": "density"}))
    assert in_main_table(SimpleNamespace(campaign={"name": "x"}))                # benchmarks
    assert in_main_table(SimpleNamespace(campaign={"experiment": "not-installed-here"}))


@pytest.mark.parametrize("kind", ["benchmarks", "migration"])
def test_a_platform_image_outside_density_is_refused(kind):
    """Only density gives each platform its own image; elsewhere it was silently ignored."""
    c = {"name": "b", "platforms": [{"name": "native", "type": "native"},
                                    {"name": "lxc", "type": "lxc", "image": {"release": "bullseye"}}],
         "benchmarks": ["openssl"]}
    if kind != "benchmarks":
        c = {"name": "m", "experiment": kind, "platforms": c["platforms"][1:], "migration": {"counts": [1], "mode": "lifecycle"}}
    with pytest.raises(InputError) as err:
        parse_campaign(c, "c.yaml")
    assert err.value.exit_code == 2 and "\n" not in err.value.message
    assert "platforms[" in err.value.message and "image" in err.value.message and "density" in err.value.fix


# -- resume: an unfinished platform's search goes on where it stopped ------------------------------
def _stored(count: int, rnd: int, ok: bool, total: float | None = None, eid: int = 0):
    from types import SimpleNamespace

    e = SimpleNamespace(id=eid or count * 10 + rnd, platform="lxc", benchmark=f"density[count={count}]",
                        round=rnd, status="ok" if ok else "failed",
                        error="" if ok else f"oom: OOM kill during the workload at {count} instances")
    samples = [] if total is None else [
        SimpleNamespace(execution_id=e.id, instance=0, metric="throughput_total", value=total),
        SimpleNamespace(execution_id=e.id, instance=0, metric="memory_per_instance", value=5e6),
        SimpleNamespace(execution_id=e.id, instance=1, metric="throughput", value=total / count)]
    return e, samples


def _prober(calls: list[int], fail_from: int):
    """A search whose counts fail from `fail_from` on (measure recorded, no instance started)."""
    from types import SimpleNamespace

    from virtbench.experiments.density.ramp import Ramp, Stop

    ramp = Ramp(ctx=SimpleNamespace(log=lambda m: None), platform=SimpleNamespace(name="lxc"), image=None,
                section=None, guard=None, parent=None, bench=None)

    def measure(count, probes):
        calls.append(count)
        probes.append({"count": count})
        return Stop("oom", "x", count) if count >= fail_from else None

    ramp.measure = measure
    return ramp


def test_a_resumed_ramp_goes_on_after_the_last_good_count():
    from virtbench.experiments.density.resume import resumed

    stored = [_stored(1, 1, True, 10.0), _stored(2, 1, True, 19.0), _stored(4, 1, True, 30.0)]
    state = resumed([e for e, _ in stored], [s for _, ss in stored for s in ss], "lxc", "throughput")
    assert (state.probe_no, state.good, state.failing, state.stop) == (1, 4, None, None)
    assert state.totals == {1: 10.0, 2: 19.0, 4: 30.0} and state.points[4]["memory_per_instance"] == 5e6
    calls: list[int] = []
    ramp = _prober(calls, fail_from=11)
    result = ramp.search([1, 2, 4, 8, 16, 32], bisect=True, resume=state)
    assert calls[:2] == [8, 16]                   # not 1, 2, 4 again
    assert calls[2:5] == [12, 10, 11]             # then the bisection between 8 and 16
    assert calls[5:] == [10, 11]                  # and the confirmation from an empty fleet
    assert result.max_count == 10 and result.stop.count == 11
    assert result.stop.evidence["confirmation"][0]["agrees"]
    assert ramp.best_total[4] == 30.0 and ramp.probe_no == 1  # the next fleet is round 2: rounds never reused


def test_a_resumed_bisection_goes_on_between_good_and_failing():
    from virtbench.experiments.density.resume import resumed

    stored = [_stored(8, 1, True, 50.0), _stored(16, 1, False), _stored(12, 2, True, 55.0)]
    state = resumed([e for e, _ in stored], [s for _, ss in stored for s in ss], "lxc", "throughput")
    assert (state.probe_no, state.good, state.failing) == (2, 12, 16) and state.stop.reason == "oom"
    calls: list[int] = []
    result = _prober(calls, fail_from=15).search([1, 2, 4, 8, 16, 32], bisect=True, resume=state, confirm=False)
    assert calls == [14, 15] and result.max_count == 14 and result.stop.count == 15
    done = resumed([e for e, _ in stored[:1]] + [_stored(9, 3, False)[0]], [], "lxc", "throughput")
    calls.clear()
    assert _prober(calls, 9).search([1, 2, 4, 8, 16], bisect=True, resume=done,
                                    confirm=False).max_count == 8 and calls == []


def test_confined_guard_v1_reads_the_parent_s_peak_during_the_workload():
    """Session 5's LXC run (512 instances, 1G): the parent's memory.max_usage_in_bytes reached
    1024 MiB while usage read 50-80 % at each 0.5 s reading and failcnt stayed 0, so the guard
    tripped on host PSI full 19.5 %. The peak of the workload window attributes the stall."""
    at_peak = ParentPressure(usage=600 * MIB, limit=1024 * MIB, failcnt=0, peak=1024 * MIB)
    guard = Guard(GuardSettings(confined=False), read=lambda: reading(4000, full=19.5), parent=lambda: at_peak)
    assert guard.check("before instance 512") is not None  # between windows the peak is old: not used
    guard._window = True  # what watch() sets while the workload runs
    assert guard.check("workload at 512") is None
    assert guard.series[-1]["parent"]["peak"] == 1024 * MIB and "psi_attributed" in guard.series[-1]
    # judged as the 1 GiB host it stands for, the same readings are that host thrashing
    confined = Guard(GuardSettings(), read=lambda: reading(4000, full=19.5), parent=lambda: at_peak)
    confined._window = True
    trip = confined.check("workload at 512")
    assert trip is not None and "confined host of 1024 MiB thrashing" in trip.reason and "19.5%" in trip.reason


# -- the confined host judged as a host of its size --------------------------------------------------
def cparent(usage_mib: int, cache_mib: int = 0, *, some: float | None = None, full: float | None = None,
            failcnt: int = 0, peak_mib: int | None = None) -> ParentPressure:
    return ParentPressure(usage=usage_mib * MIB, limit=1024 * MIB, psi_some_avg10=some, psi_full_avg10=full,
                          reclaimable=cache_mib * MIB, failcnt=failcnt,
                          peak=None if peak_mib is None else peak_mib * MIB)


@pytest.mark.parametrize("host, par, trips", [
    # recorded: session 5's 480 LXC instances in 1 GiB (v1), parent at its limit, host PSI full
    # 19.5 %, 21 GB available on the host, no OOM kill: the 1 GiB host is thrashing
    (reading(21000, some=61.0, full=19.5), cparent(1010, 300), "thrashing: PSI memory full avg10 19.5%"),
    (reading(21000, some=61.0, full=2.0), cparent(1010, 300), "thrashing: PSI memory some avg10 61.0%"),
    # at its limit but calm: page cache fills a host's memory, reclaim gives it back
    (reading(21000, some=1.0, full=0.0), cparent(1020, 700), None),
    # full of what reclaim cannot give back (anon, no swap; kernel memory): its floor, 10 % = 102 MiB
    (reading(21000, some=1.0, full=0.0), cparent(1000, 20), "available memory 44.0 MiB below 102.4 MiB"),
    (reading(21000, some=1.0, full=0.0), cparent(900, 10), None),        # 134 MiB available
    # far from its limit: a host-wide stall is not the confined host's (v1: another engineer's,
    # or one instance thrashing inside its own 64M limit, failcnt rising)
    (reading(21000, some=61.0, full=2.0), cparent(300, 50, failcnt=7), None),
    # v2: its own memory.pressure, while at its limit
    (reading(21000, some=61.0, full=19.5), cparent(1010, 300, some=50.0, full=12.0), "full avg10 12.0%"),
    (reading(21000, some=6.0, full=1.5), cparent(1010, 300, some=5.0, full=1.0), None),
])
def test_the_confined_host_is_guarded_like_a_host_of_its_size(host, par, trips):
    guard = Guard(GuardSettings(), read=lambda: host, parent=lambda: par)
    trip = guard.check("workload at 480")
    assert (trip is None) if trips is None else (trip is not None and trips in trip.reason), trip
    if trip is not None:
        assert trip.reason.startswith("confined host of 1024 MiB")
        assert trip.threshold["confined_min_available"] == 1024 * MIB // 10
        assert trip.reading["parent"]["reclaimable"] == par.reclaimable    # the evidence
    off = Guard(GuardSettings(confined=False), read=lambda: host, parent=lambda: par).check("x")
    assert off is None or not off.reason.startswith("confined")


def test_the_confined_floor_is_configurable_and_the_real_host_still_comes_first():
    par = cparent(1000, 20)                                       # 44 MiB available
    assert Guard(GuardSettings(confined_min_available="32M"), read=lambda: reading(21000),
                 parent=lambda: par).check("x") is None
    trip = Guard(GuardSettings(), read=lambda: reading(700), parent=lambda: par).check("x")
    assert trip.reason.startswith("MemAvailable 700 MiB")        # the real host's floor first
    assert "confined_min_available" not in Guard(GuardSettings(confined=False)).thresholds(8 << 30, 1 << 30)


def test_the_confined_host_stays_pressed_for_recent_seconds_after_its_limit():
    """v1 PSI avg10 lingers ~10 s after reclaim pulled the parent off its limit: still its stall."""
    pars = iter([cparent(1010, 300), cparent(500, 100), cparent(500, 100)])
    guard = Guard(GuardSettings(), read=lambda: reading(21000, some=5.0, full=15.0), parent=lambda: next(pars))
    assert guard.check("at the limit") is not None
    assert "thrashing" in guard.check("a moment later").reason
    guard._near_seen -= 31
    trip = guard.check("long after")          # not the confined host's; the real host's 'full' still judged
    assert trip is not None and trip.reason.startswith("PSI memory full")


def test_the_next_instance_that_would_not_fit_trips_the_guard_before_it_starts():
    """Recorded: QEMU TCG, 256 MiB VMs in a 1 GiB confined host (this machine, load 9): each VM
    took 354 MiB; with two running, starting the third OOM-killed the first. The guard now
    knows what the costliest instance took and stops before the third."""
    usage = [0]
    par = lambda: cparent(usage[0], 4)  # noqa: E731 - a VM's memory is anon: little page cache
    guard = Guard(GuardSettings(), read=lambda: reading(21000), parent=par)
    assert guard.next_fits("before instance 1") is None         # nothing known yet
    for _ in (1, 2):
        held = guard.held()
        usage[0] += 354
        guard.note_start(held)
        assert guard.costliest == 354 * MIB
    assert guard.check("before instance 3") is None             # 320 MiB available: above the 102 MiB floor
    trip = guard.next_fits("before instance 3")
    assert trip is not None and "the next instance would not fit" in trip.reason
    assert "320 MiB available minus the 354 MiB" in trip.reason and trip.reading["next_instance_needs"] == 354 * MIB
    # LXC-sized instances (0.6 MiB each) fit long before the floor
    small = Guard(GuardSettings(), read=lambda: reading(21000), parent=lambda: cparent(600, 10))
    small.costliest = int(0.6 * MIB)
    assert small.next_fits("before instance 900") is None
    # unconfined: the host's own floor (819 MiB on this 8 GiB reading)
    host = Guard(GuardSettings(), read=lambda: reading(1100))
    host.costliest = 354 * MIB
    assert "MemAvailable 1100 MiB minus the 354 MiB" in host.next_fits("before instance 5").reason


def test_the_guard_walks_the_parent_s_subtree_only_when_the_cheap_readings_do_not_decide(monkeypatch):
    """1024 LXC instances in 1 GiB (this machine): the parent sat at its limit, host PSI full
    93 %, and no trip came for 10 minutes. Each reading summed memory.failcnt over ~3000 cgroup
    directories, CPU-starved among 1024 busy containers. The confined host's judgement needs
    only the parent's usage, peak, memory.stat and the host's PSI; the walk is for attributing
    a stall when the parent is not at its limit."""
    from virtbench.experiments.density import guard as density_guard
    from virtbench.platforms import cgroups as cg

    walks: list[str] = []
    usage = [1024 * MIB]
    monkeypatch.setattr(cg, "is_v2", lambda: False)
    monkeypatch.setattr(cg, "memory_usage", lambda rel: usage[0])
    monkeypatch.setattr(cg, "memory_reclaimable", lambda rel: 8 * MIB)
    monkeypatch.setattr(cg, "memory_peak", lambda rel: usage[0])
    monkeypatch.setattr(cg, "limit_hits", lambda rel: walks.append(rel) or 0)
    guard = Guard(GuardSettings(confined_min_available=0), read=lambda: reading(21000, some=99.9, full=93.7),
                  parent=lambda: density_guard.read_parent("p", 1024 * MIB))
    trip = guard.check("workload at 1024")
    assert trip is not None and "confined host of 1024 MiB thrashing" in trip.reason and walks == []
    guard._near_seen -= 31
    usage[0] = 300 * MIB            # far from its limit: whose stall? now the walk is needed
    guard.check("later")
    assert walks == ["p"] and guard.series[-1]["parent"]["failcnt"] == 0

"""The self-test's judging on known numbers (a check that must fail does fail), its result
shape, its registry and the pieces it added to platforms and the runner."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from virtbench.errors import InputError, UnavailableError
from virtbench.experiments.benchmarks.oomwatch import describe_kills
from virtbench.platforms import throttle
from virtbench.platforms.oci import OCIOptions, oci_resources
from virtbench.selftest import aa, cpu_quota, io_throttle, netem, oom, overhead, suite
from virtbench.selftest.base import CHECKS, Check, CheckResult, Judgement, Skip


@pytest.mark.parametrize("limited, twin, throttled, ratio, expected, passed, why", [
    # a host that scales (2 processes 1.97x one): the quota of 1 CPU halves a 2-thread load
    ([1.00, 1.01], [1.95, 1.97], 38, 0.51, 1 / 1.97, True, ""),
    # the issue's 2-vCPU cloud VM: two openssl processes 1.06x one (1.53 against 1.44 GB/s), docker
    # --cpus 1 read 0.98 of native: the quota held, and the scaling says 0.94 was all it could take
    ([0.99, 1.00], [1.06, 1.07], 4, 0.98, 1 / 1.06, True, ""),
    # gVisor at 2.54x its CPU limit, no throttling: not held
    ([2.54, 2.50], [2.0, 2.0], 0, 1.0, 0.5, False, "did not hold"),
    ([1.00, 1.00], [0.90, 0.95], 0, 1.0, 1.0, False, "not shown"),        # a busy host: the quota never acted
    ([1.00, 1.00], [1.90, 1.95], 0, 0.5, 0.5, False, "never throttled"),
    ([1.00, 1.00], [1.90, 1.95], 20, 0.98, 0.51, False, "did not follow"),  # held, but throughput stayed
    ([], [], 0, None, None, False, "no cgroup"),
])
def test_cpu_quota_judge(limited, twin, throttled, ratio, expected, passed, why):
    j = cpu_quota.judge(1.0, limited, twin, throttled, ratio, expected)
    assert j.passed is passed and why in j.reason, j
    if limited:
        assert "CPU-s/s under cpus: 1" in j.measured and "throttled in" in j.measured


def test_cpu_quota_on_an_emulated_cpu_judges_the_cgroup_not_the_throughput():
    assert cpu_quota.judge(1.0, [1.0], [1.9], 10, 0.9, 0.5, judge_ratio=False).passed
    assert not cpu_quota.judge(1.0, [1.3], [1.9], 10, 0.5, 0.5, judge_ratio=False).passed


def test_the_quota_verdict_is_the_cgroup_s_alone():
    assert cpu_quota.quota_held({"limited_cpu": [1.0], "quota": 1.0, "throttled": 3}) is True
    assert cpu_quota.quota_held({"limited_cpu": [1.2], "quota": 1.0, "throttled": 0}) is False
    assert cpu_quota.quota_held({"limited_cpu": [0.9], "quota": 1.0, "throttled": 0}) is None  # never acted
    assert cpu_quota.quota_held({"limited_cpu": [], "quota": 1.0}) is None


@pytest.mark.parametrize("iops,passed", [(200, True), (190.5, True), (209.9, True), (211, False), (185, False),
                                         (70000, False), (None, False)])
def test_io_throttle_judge(iops, passed):
    assert io_throttle.judge(iops).passed is passed


def test_io_throttle_needs_a_disk_faster_than_the_throttle():
    assert io_throttle.headroom_gap(70000) is None
    assert "150" in io_throttle.headroom_gap(150)
    assert io_throttle.headroom_gap(None) is not None


def test_netem_judge():
    base = [0.052, 0.048, 0.050, 0.061]
    assert netem.judge(base, [1.05, 1.052, 1.049, 1.07]).passed
    assert netem.judge(base, [1.16, 1.17, 1.18, 1.2]).passed is False  # over 0.1 ms too much
    assert netem.judge(base, base).passed is False  # the delay did not show at all
    assert netem.judge([], [1.0]).passed is False


def test_oom_judge():
    assert oom.judge(["out of memory: the kernel's OOM killer killed 1 process (...); exited 137"], 0).passed
    assert oom.judge(["command exited with status 137"], 0).passed is False  # killed, but not called an OOM kill
    assert oom.judge([], 1).passed is False  # the allocation became a result
    assert oom.judge([], 0).passed is False


def test_oom_knows_whether_the_host_swaps(tmp_path):
    (tmp_path / "mi").write_text("MemTotal: 100 kB\nSwapTotal:       0 kB\n")
    assert oom.host_swaps(tmp_path / "mi") is False
    (tmp_path / "mi").write_text("SwapTotal:  1024 kB\n")
    assert oom.host_swaps(tmp_path / "mi") is True


def test_oom_on_a_vm_limits_the_guest_ram_and_allocates_in_blocks_that_pass_its_overcommit_check():
    """A VM's limit is its guest's RAM (128 MiB at least): the 64 MiB campaign was refused, then
    the check was skipped; now the guest gets 256 MiB and four 128 MiB blocks (one 256 MiB block
    would be refused by the guest's overcommit heuristic, a failure without an OOM kill)."""
    from types import SimpleNamespace

    asked: list[dict] = []
    reason = "out of memory: the kernel's OOM killer killed 1 process (the guest kernel's count, /proc/vmstat)"

    def run(campaign: dict) -> SimpleNamespace:
        asked.append(campaign)
        return SimpleNamespace(run_id="r", rows=[], failures=[{"benchmark": "sysbench-memory", "error": reason}])

    ctx = SimpleNamespace(platform="qemu", require_platform=lambda name: None, run=run)
    judgement, details = oom.Oom().measure(ctx)
    assert judgement.passed and details["held"] is True, judgement
    (platform,), (bench,) = asked[0]["platforms"], asked[0]["benchmarks"]
    assert platform == {"name": "limited", "type": "qemu", "memory": "256M"}
    assert (bench["block_size"], bench["threads"], bench["scope"]) == ("128M", 4, "local")
    from virtbench.platforms.qemu.options import QemuOptions

    QemuOptions(memory=platform["memory"])  # the campaign's VM is one the platform takes


def test_a_guest_kernels_oom_kill_fails_the_execution_from_its_own_count():
    """Read before and after the execution through the platform (a VM: its guest's
    /proc/vmstat); the host cgroup is not read for it."""
    from types import SimpleNamespace

    from virtbench.experiments.benchmarks.oomwatch import OomWatch
    from virtbench.platforms.qemu.platform import vmstat_oom_kills

    vmstat = (Path(__file__).parents[1] / "data" / "vmstat" / "guest-bookworm-after-oom.txt").read_text()
    assert vmstat_oom_kills(vmstat) == 1 and vmstat_oom_kills("nr_free_pages 1\n") is None
    counts = iter([0, 1])

    def guest_oom_kills(instance: object) -> int:
        return next(counts)

    def memory_cgroup(instance: object) -> str:
        raise AssertionError("a VM's OOM kills are not the host cgroup's")

    vm = SimpleNamespace(options=SimpleNamespace(memory=256 << 20), guest_oom_kills=guest_oom_kills,
                         memory_cgroup=memory_cgroup)
    watch = OomWatch(vm, None)  # type: ignore[arg-type]
    got = watch.kills()
    assert got is not None and got.startswith(oom.MARK) and "guest RAM 256 MiB" in got and "/proc/vmstat" in got
    quiet = SimpleNamespace(options=SimpleNamespace(memory=256 << 20), guest_oom_kills=lambda i: 2,
                            memory_cgroup=memory_cgroup)
    assert OomWatch(quiet, None).kills() is None  # type: ignore[arg-type]


def test_overhead_judge():
    direct = [1400.0, 1402.0, 1398.0, 1401.0, 1399.0, 1400.0]
    assert overhead.judge([v * 1.003 for v in direct], direct).passed
    far = overhead.judge([v * 1.03 for v in direct], direct)
    assert far.passed is False and "+3.00 %" in far.reason
    assert overhead.judge([1400.0], direct).passed is False


def test_overhead_judges_the_paired_estimate_not_the_ratio_of_medians():
    """The CI run that failed: medians 1.0119 apart, the pairs +0.7 % [-0.3 to +1.7 %]."""
    via = [1615902720.0, 1649247232.0, 1672890368.0, 1676688384.0, 1684146176.0, 1687364608.0,
           1657410560.0, 1602176000.0]
    direct = [1616821248.0, 1632527360.0, 1680272384.0, 1658696704.0, 1685292032.0, 1668510720.0,
              1606219776.0, 1604844544.0]
    assert not overhead.decided(via, direct)  # the check would add pairs
    j = overhead.judge(via, direct)
    assert j.passed, j
    assert "1.007" in j.measured and "medians 1.0119" in j.measured


def test_overhead_fails_when_shown_beyond_the_tolerance_and_passes_a_small_shown_difference():
    direct = [1000.0, 1005.0, 995.0, 1003.0, 997.0, 1000.0]
    slow = overhead.judge([v * f for v, f in zip(direct, [0.975, 0.981, 0.978, 0.983, 0.977, 0.980])], direct)
    assert slow.passed is False and "-2.1" in slow.reason and overhead.decided(
        [v * 0.979 for v in direct], direct)
    # about -0.3 % in every pair: shown (the interval excludes 1) but inside +-1 %, and the equivalence
    # test says so
    small = [v * f for v, f in zip(direct, [0.9968, 0.9972, 0.9965, 0.9970, 0.9969, 0.9971])]
    j = overhead.judge(small, direct)
    assert j.passed and "same" in j.measured and overhead.decided(small, direct)


def test_overhead_undecided_at_the_cap_is_judged_by_its_estimate():
    direct = [1000.0, 1000.0, 1000.0, 1000.0]
    assert overhead.judge([1004.0, 975.0, 1030.0, 1001.0], direct).passed  # +0.2 %, noise +-3 %
    j = overhead.judge([1030.0, 990.0, 1050.0, 1010.0], direct)  # +2 %, noise +-3 %
    assert j.passed is False and not overhead.decided([1030.0, 990.0, 1050.0, 1010.0], direct)


def test_aa_judge():
    assert aa.judge("same", "same within +-2%: +0.3 %").passed
    assert aa.judge("slower", "slower by 3 %").passed is False
    assert aa.judge("faster", "faster by 3 %").passed is False
    assert aa.judge("inconclusive", "noise +-4 %").passed is False


def test_aa_judge_after_a_first_difference_measured_again():
    """One false difference is the rule's designed 5 %: the repetition decides."""
    j = aa.judge("same", "same within +-2%: +0.1 %", ("slower", "slower by 2.4 %"))
    assert j.passed and "first comparison came out slower" in j.measured
    j = aa.judge("slower", "slower by 2.2 %", ("slower", "slower by 2.4 %"))
    assert j.passed is False and "twice in a row" in j.reason
    assert aa.judge("inconclusive", "noise +-4 %", ("faster", "faster by 3 %")).passed is False


class _Fixed(Check):
    name = "fixed"
    title = "test"

    def __init__(self, outcome):
        self.outcome = outcome

    def expected(self) -> str:
        return "42"

    def measure(self, ctx):
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome, {"n": 1}


def test_a_check_result_for_pass_skip_and_error():
    ok = _Fixed(Judgement(True, "42")).run(None)
    assert (ok.passed, ok.skipped, ok.measured) == (True, False, "42")
    skipped = _Fixed(Skip("no netem here", "modprobe sch_netem")).run(None)
    assert skipped.skipped and skipped.passed is None and "fix: modprobe sch_netem" in skipped.reason
    broken = _Fixed(RuntimeError("runc exploded")).run(None)
    assert broken.passed is False and not broken.skipped and "runc exploded" in broken.reason
    assert set(ok.public()) >= {"name", "expected", "measured", "passed", "skipped", "reason"}


def test_outcome_passes_only_when_every_check_that_ran_passed():
    passed = CheckResult("a", "e", "m", True, False, "")
    skipped = CheckResult("b", "e", "-", None, True, "no netem")
    failed = CheckResult("c", "e", "m", False, False, "off")
    assert suite.SuiteResult([passed, skipped], [0, 0, 0], [0, 0, 0], 1.0).passed
    out = suite.SuiteResult([passed, skipped, failed], [0, 0, 0], [0, 0, 0], 1.0)
    assert out.passed is False and out.public()["passed"] is False
    assert [c["name"] for c in out.public()["checks"]] == ["a", "b", "c"]


def test_every_check_is_registered_in_the_issue_order():
    assert suite.names()[:6] == list(suite.ORDER)
    assert all(issubclass(cls, Check) and cls.name == name for name, cls in CHECKS.items())
    assert suite.select(["oom", "aa"]) == ["oom", "aa"]
    with pytest.raises(InputError, match="unknown selftest check 'oomm'.*did you mean 'oom'"):
        suite.select(["oomm"])


def test_oom_reason():
    assert describe_kills(0, "virtbench/x", 64 << 20) is None
    text = describe_kills(1, "virtbench/x", 64 << 20)
    assert text.startswith(oom.MARK) and "limit 64 MiB" in text and "virtbench/x" in text


def test_oci_throttle_and_swap():
    opts = OCIOptions(memory="64M", swap=0, device_read_iops=200)
    res = oci_resources(opts, (254, 0))
    assert res["blockIO"] == {"throttleReadIOPSDevice": [{"major": 254, "minor": 0, "rate": 200}]}
    assert res["memory"] == {"limit": 64 << 20, "swap": 64 << 20}
    with pytest.raises(ValueError, match="swap needs memory"):
        OCIOptions(swap=0)


def test_whole_disk_maps_a_partition_to_its_disk(tmp_path):
    dev = os.stat(tmp_path).st_dev
    disk = tmp_path / "devices" / "vda"
    (disk / "vda1").mkdir(parents=True)
    (disk / "vda1" / "partition").write_text("1\n")
    (disk / "dev").write_text("254:0\n")
    block = tmp_path / "block"
    block.mkdir()
    (block / f"{os.major(dev)}:{os.minor(dev)}").symlink_to(disk / "vda1")
    assert throttle.whole_disk(tmp_path / "not" / "yet", block) == (254, 0)
    (block / f"{os.major(dev)}:{os.minor(dev)}").unlink()
    with pytest.raises(UnavailableError, match="no I/O throttle"):
        throttle.whole_disk(tmp_path, block)


def test_whole_disk_of_this_hosts_root():
    major, minor = throttle.whole_disk(Path("/"))
    assert Path(f"/sys/dev/block/{major}:{minor}").exists() or major == 0


def test_cpu_quota_judged_again_from_its_recorded_readings():
    """A real cpu-quota check's readings (runc on this machine, cgroup v1) judged again: the
    judgement is a pure function of what the cgroup counted and the scaling beside it."""
    import json

    rec = json.loads((Path(__file__).parent.parent / "data" / "selftest" / "cpu_quota_runc.json").read_text())["check"]
    d = rec["details"]
    limited = [t["cpu_per_s"] for t in d["turns"]["limited"]]
    assert all(t["throttled_periods"] > 0 and t["periods"] >= 19 for t in d["turns"]["limited"])
    assert all(t["periods"] is None or t["periods"] == 0 for t in d["turns"]["twin"])  # no quota, no periods
    j = cpu_quota.judge(d["quota"], limited, d["twin_cpu"], d["throttled"], d["ratio"], d["expected_ratio"])
    assert j.passed and j.measured == rec["measured"]
    assert cpu_quota.quota_held(d) is True
    # the same cgroup readings on a host whose second CPU adds little (the issue's 1.06x): a held
    # quota leaves 0.94 expected, so this host's 0.54 would be a quota costing more than its share
    poor = cpu_quota.judge(d["quota"], limited, d["twin_cpu"], d["throttled"], d["ratio"], 1 / 1.06)
    assert not poor.passed and "did not follow" in poor.reason

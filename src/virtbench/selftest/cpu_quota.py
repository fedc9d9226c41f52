"""A CPU quota must hold, read from the cgroup's own CPU time, not from a benchmark's throughput.

Two instances of the platform (`selftest --platform P`, runc by default), identical but for
`cpus: 1` (half a CPU on a one-CPU host), run a CPU-bound 2-thread load (openssl speed
-multi 2) in turns (unlimited, limited, limited, unlimited). Around each turn the instance's
cgroup is read: CPU time (cgroup v1 cpuacct.usage, v2 cpu.stat usage_usec) and CFS
bandwidth periods and throttling (nr_periods, nr_throttled). The quota holds when the limited
instance got at most 1.05 x its quota in CPU-seconds per second over the periods it ran in
(the quota's own window; the unlimited twin over the load's seconds), and was throttled
wherever the unlimited twin took more than that.

Throughput is read too, but judged against what the host's measured parallel scaling
predicts (hostinfo.expected_ratio: min(1, quota / scaling(2)), the scaling measured before
and after the turns): on a VM whose second vCPU adds little (two processes 1.06x one) a
held quota of 1 CPU leaves about 0.94 of the unlimited throughput, on a host that scales 2x
about 0.5. Where the CPU is emulated (QEMU TCG) a CPU-second does no fixed amount of work:
the throughput is shown but not judged, the cgroup's counters are.
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Any, ClassVar

from .. import hostinfo
from ..boards import emulated
from ..config import parse_campaign
from ..experiments.benchmarks import session as sessions
from ..platforms import cpustat, naming
from ..platforms.base import Instance, Platform
from ..runner.execute import new_run_id
from .base import Check, Judgement, Skip
from .context import Context

QUOTA = 1.0
HELD = 1.05
"""The most CPU-seconds per second per quota CPU a held quota may show."""
THREADS = 2
SECONDS = 2
TOLERANCE = 0.1
"""The throughput ratio's allowed distance from the scaling's expectation."""
BENCHMARK: dict[str, Any] = {"name": "openssl", "algorithm": "aes-128-cbc", "bytes": 1024, "multi": THREADS,
                             "seconds": SECONDS}
METRIC = "throughput"


def judge(quota: float, limited_cpu: list[float], twin_cpu: list[float], throttled: int, ratio: float | None,
          expected: float | None, judge_ratio: bool = True) -> Judgement:
    """limited_cpu / twin_cpu: CPU-seconds per second of each turn; throttled: periods the
    limited instance was throttled in; ratio: its throughput against the twin's; expected: the
    ratio the host's scaling predicts."""
    if not limited_cpu or not twin_cpu:
        return Judgement(False, "-", "no cgroup CPU readings")
    worst, twin = max(limited_cpu), min(twin_cpu)
    shown = (f"{worst:.2f} CPU-s/s under cpus: {quota:g} (unlimited {statistics.median(twin_cpu):.2f}), "
             f"throttled in {throttled} periods")
    if ratio is not None:
        shown += f"; throughput {ratio:.3f} of unlimited" + (
            f", expected {expected:.3f} from the host's scaling" if expected is not None else "")
    if worst > HELD * quota + 1e-9:
        return Judgement(False, shown, f"the quota did not hold: {worst:.2f} CPU-seconds per second, more than "
                                       f"{HELD:g} x {quota:g}")
    if twin <= HELD * quota:
        return Judgement(False, shown, f"not shown: the unlimited load took only {twin:.2f} CPU-seconds per second "
                                       "(a busy host, or too few CPUs), so the quota never had to act")
    if throttled <= 0:
        return Judgement(False, shown, "the cgroup never throttled although the load wanted more than the quota: "
                                       "its CPU time stayed low for another reason")
    if judge_ratio and ratio is not None and expected is not None and abs(ratio - expected) > TOLERANCE + 1e-9:
        return Judgement(False, shown, f"the quota held, but throughput did not follow it: {ratio:.3f} against "
                                       f"{expected:.3f} +- {TOLERANCE:g} expected from the host's scaling")
    return Judgement(True, shown)


def quota_held(details: dict[str, Any]) -> bool | None:
    """The enforcement verdict alone (for platforms/enforcement): None when not shown."""
    cpu = details.get("limited_cpu") or []
    if not cpu:
        return None
    if max(cpu) > HELD * details["quota"]:
        return False
    return True if details.get("throttled", 0) > 0 else None


class CpuQuota(Check):
    name: ClassVar[str] = "cpu-quota"
    title: ClassVar[str] = ("a CPU-bound 2-thread load under `cpus: 1` gets at most 1.05 CPU-seconds per second "
                            "(the cgroup's counters), throttled")
    limit: ClassVar[str | None] = "cpu"

    def expected(self) -> str:
        return (f"<= {HELD:g} CPU-s/s per quota CPU and throttled ({self.on}, cpus: {QUOTA:g}, openssl -multi "
                f"{THREADS}); throughput min(1, cpus / scaling({THREADS})) +- {TOLERANCE:g} of unlimited")

    def measure(self, ctx: Context) -> tuple[Judgement, dict[str, Any]]:
        ctx.require_platform(ctx.platform)
        quota = QUOTA if len(os.sched_getaffinity(0)) >= 2 else QUOTA / 2  # one CPU: half of it
        campaign = parse_campaign({"name": "selftest-cpu-quota", "image": {"profile": "quick"}, "baseline": "twin",
                                   "platforms": [{"name": "twin", "type": ctx.platform},
                                                 {"name": "limited", "type": ctx.platform, "cpus": quota}],
                                   "benchmarks": [BENCHMARK]}, "selftest cpu-quota campaign")
        session = sessions.build_objects(campaign, ctx.paths)
        sessions.prepare(session, log=ctx.log)
        bench = next(iter(session.benchmarks.values()))
        image = session.image
        assert image is not None
        scaling = [hostinfo.parallel_scaling()]
        made: list[tuple[Platform, Instance]] = []
        turns: dict[str, list[dict[str, Any]]] = {"twin": [], "limited": []}
        run_id = new_run_id()
        try:
            for name in ("twin", "limited"):
                plat = session.platforms[name]
                plat.cgroup_parent = ctx.cgroup_parent
                inst = plat.create(image, naming.unit_name(run_id, f"selftest-{name}", 1), run_id)
                made.append((plat, inst))
                plat.start(inst)
            for name in ("twin", "limited", "limited", "twin"):
                plat, inst = made[0] if name == "twin" else made[1]
                turns[name].append(self._turn(plat, inst, bench))
        finally:
            for plat, inst in reversed(made):
                plat.discard(inst)
        scaling.append(hostinfo.parallel_scaling())
        measured = [s for s in scaling if s.get("scaling") is not None]
        mean = ({"processes": measured[0]["processes"],
                 "scaling": statistics.mean(s["scaling"] for s in measured)} if measured else None)
        expected = hostinfo.expected_ratio(quota, THREADS, mean)
        tw = [t["throughput"] for t in turns["twin"] if t["throughput"]]
        lim = [t["throughput"] for t in turns["limited"] if t["throughput"]]
        ratio = statistics.median(lim) / statistics.median(tw) if tw and lim else None
        limited_cpu = [float(t["cpu_per_s"]) for t in turns["limited"] if t["cpu_per_s"] is not None]
        twin_cpu = [float(t["cpu_per_s"]) for t in turns["twin"] if t["cpu_per_s"] is not None]
        throttled = sum(int(t["throttled_periods"] or 0) for t in turns["limited"])
        details: dict[str, Any] = {"platform": ctx.platform, "quota": quota, "turns": turns, "scaling": scaling,
                                   "limited_cpu": limited_cpu, "twin_cpu": twin_cpu, "throttled": throttled,
                                   "ratio": ratio, "expected_ratio": expected}
        judge_ratio = not emulated(hostinfo.virtualization()["vm"])
        j = judge(quota, limited_cpu, twin_cpu, throttled, ratio, expected, judge_ratio)
        details["held"] = quota_held(details)
        return j, details

    @staticmethod
    def _turn(plat: Platform, inst: Instance, bench: Any) -> dict[str, Any]:
        """One run of the load with the instance's cgroup read around it."""
        cgroup = plat.memory_cgroup(inst)
        if cgroup is None:
            raise Skip(f"{plat.type} gives no cgroup of its instances to read their CPU time from")
        before = cpustat.read(cgroup)
        if before.usage_ns is None:
            raise Skip(f"no CPU accounting readable for {plat.type}'s cgroup {cgroup}",
                       "mount the cpuacct controller (cgroup v1) or enable cpu in the cgroup v2 tree")
        t0 = time.monotonic()
        r = plat.exec(inst, bench.command("/tmp"), timeout=bench.execution_timeout(), check=False)
        wall = time.monotonic() - t0
        d = cpustat.read(cgroup).since(before)
        value = None
        if r.returncode == 0:
            value = bench.parse(r.stdout, r.stderr, source=f"{plat.name} openssl")[METRIC]
        return {"cpu_per_s": cpustat.rate(d, SECONDS, cpustat.period_s(cgroup)), "wall_s": round(wall, 3),
                "cgroup": cgroup, **d.as_dict(), "throughput": value, "exit": r.returncode,
                "error": "" if r.returncode == 0 else (r.stderr or r.stdout)[-300:]}

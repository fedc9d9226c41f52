"""One platform's density search: ramp up, bisect to the maximum, confirm it from an empty fleet.

The search keeps one fleet (fleet.Fleet) between the counts it measures: it grows the
running fleet to the next count in parallel batches (growth.py) and, below a failed count,
shrinks it back by stopping the newest instances, instead of starting every count from zero.
`search` ramps through the schedule (doubling, or by `step`) until a count fails, then
bisects between the last good and the failing count until they are `precision` apart (1: the
exact maximum). A kept fleet must not shift the maximum (memory a failed count left charged,
instances that went through a thrash): the found count is confirmed by a fresh fleet grown
from empty to it, and then to 1 % (at least one instance) above it, which must fail; when
the fresh fleet disagrees the search goes on from what it found, at most twice. Each fleet
is a `round` of the stored executions (the first fleet round 1, ...), so a resumed search
goes on with a new round. Every measured count is judged and stored by judge.Judge.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from ...benchmarks.base import Benchmark
from ...images.image import Image
from ...platforms import cgroups
from ...platforms.base import Platform
from ...platforms.naming import INSTANCE_PREFIX
from ..base import ExperimentContext
from . import costs, model
from .fleet import Fleet
from .growth import AUTO_PARALLEL, Batch, Grower
from .guard import Guard, read_host
from .judge import STOP_REASONS, Judge, Stop, guard_evidence
from .resume import Resumed

__all__ = ["STOP_REASONS", "Ramp", "SearchResult", "Stop"]

RECOVERY_RETRIES = 2
"""Probes again after a failure below the known-good count, each after waiting for recovery."""
RECOVERY_TIMEOUT = 180.0
"""Seconds to wait for the host's memory to come back before such a retry."""
CONFIRM_ABOVE = 0.01
"""The confirmation's second count lies this share (at least one instance) above the maximum."""
MAX_CONFIRMATIONS = 2
AIM_MARGIN = 0.01
"""The ramp aims this share below the predicted maximum, and steps up from there by twice it, doubling."""
AIM_FROM = 16
"""Counts from which the confined host's peak is fitted for the prediction (below, fixed costs dominate)."""


@dataclass
class SearchResult:
    max_count: int
    stop: Stop
    probes: list[dict]


def steps_above(good: int, schedule: list[int]) -> list[int]:
    """The counts to measure after a fresh fleet ran above the maximum a kept fleet had found:
    from `good` up in steps of 1 % (at least one instance), doubling, to the schedule's next
    count. Jumping to that count instead (docker, 2026-11-30: from 564 to 1024) overshoots by
    hundreds of instances, and the bisection back down costs a count each halving."""
    if not schedule:
        return []
    step, out = max(1, math.ceil(good * CONFIRM_ABOVE)), []
    count = good + step
    while count < schedule[0]:
        out.append(count)
        step *= 2
        count += step
    return [*out, *schedule]


def fleet_prefix(run_id: str, platform: str, probe_no: int) -> str:
    """The head of one fleet's instance names; Fleet.name adds each instance's number."""
    return f"{INSTANCE_PREFIX}{run_id}-{platform}-p{probe_no}"


@dataclass
class Ramp:
    ctx: ExperimentContext
    platform: Platform
    image: Image
    section: Any
    guard: Guard
    parent: str | None
    bench: Benchmark
    baseline: bool = False
    probe_no: int = 0
    """The current fleet's number (a fleet started from empty is a new one): the stored round."""
    points: dict[int, dict] = field(default_factory=dict)
    """Healthy counts measured: per-instance throughput, memory, MemAvailable drop."""
    best_total: dict[int, float] = field(default_factory=dict)
    fleet: Fleet | None = None
    grown: bool = True
    """The fleet reached its size by growing from empty alone (no shrink, no dead instance
    dropped): its idle readings are what the sizing model is fitted to."""
    failed_last: bool = False
    """The last measured count failed: the next one first drops dead instances and waits for calm."""
    launches: tuple[bool, float | None] = (False, None)
    """The last closed fleet's clock and launch time per instance (fleet.Fleet): a fresh
    fleet's instances are the same, so its first count needs no rehearsal either."""
    step_no: int = 0
    started_at: float | None = None
    """When the search began: host-side processes outside the parent started before are not its fleet's."""
    grew_to: int | None = None
    """The fleet's size when the last growth stopped (a start failed, the guard said the next
    would not fit): one below the failing count, already running, so measured first."""
    available_at_start: int = 0
    _start_state: tuple[int | None, int] | None = None
    """The parent's usage and the host's MemAvailable when the first fleet started: what a
    recovered host returns to."""

    def __post_init__(self) -> None:
        self.judge = Judge(self.ctx, self.platform, self.bench, self.section, self.parent, self.baseline,
                           self.points, self.best_total)
        parallel = getattr(self.section, "parallel", "auto") if self.section is not None else 1
        self.grower = Grower(self.ctx, self.platform, self.guard, self.parent,
                             Batch(cap=AUTO_PARALLEL if parallel == "auto" else int(parallel)))

    @property
    def metric(self):
        """The workload's first (headline) metric: the throughput the density curve shows."""
        return self.bench.metrics()[0]

    def _judge(self, outcome, available_at_start: int, extra: list[dict] | None = None) -> Stop | None:
        return self.judge.judge(outcome, available_at_start, extra)

    def memory_per_instance(self, count: int) -> float | None:
        return self.judge.memory_per_instance(count)

    def available_drop_per_instance(self, count: int) -> float | None:
        return self.judge.available_drop_per_instance(count)

    # -- the search ----------------------------------------------------------------------
    def search(self, counts: list[int], *, bisect: bool, resume: Resumed | None = None,
               precision: int = 1, confirm: bool = True) -> SearchResult:
        """Ramp through `counts`, then (bisect) narrow down between the last good and the first
        failing count until they are `precision` apart, then confirm from an empty fleet. A
        resumed search starts where the stored one stopped: after its highest healthy count, or
        straight into the bisection when a count above it already failed."""
        probes: list[dict] = []
        good, stop = 0, None
        self.started_at = time.time()
        if resume is not None:
            self.probe_no = resume.probe_no
            self.best_total.update(resume.totals)
            self.points.update(resume.points)
            good, stop = resume.good, resume.stop
        checks: list[dict] = []
        above_ran = False
        try:
            while True:
                if stop is None:
                    todo = [c for c in counts if c > good]
                    good, stop = self._ramp_up(steps_above(good, todo) if above_ran else todo, good, probes)
                    if stop is None:
                        reason = "max_reached" if bisect else "counts_done"
                        return SearchResult(good, Stop(reason, f"every count up to {good} ran correctly",
                                                       evidence={"confirmation": checks} if checks else {}), probes)
                if not bisect or stop.reason == "interrupted":
                    break
                good, stop = self._bisect(good, stop, precision, probes)
                if (not confirm or good < 1 or stop.reason == "interrupted" or "bisection_stopped" in stop.evidence
                        or len(checks) >= MAX_CONFIRMATIONS):
                    break
                check = self.confirm(good, stop, probes, cap=counts[-1])
                checks.append({k: v for k, v in check.items() if k != "stop"})
                if check["agrees"]:
                    if check.get("within"):  # the fresh fleet's maximum, 1 % or less below the kept fleet's
                        good, stop = check["good"], check["stop"]
                    break
                good, stop = check["good"], check["stop"]
                above_ran = stop is None
                self.ctx.log(f"{self.platform.name}: the fresh fleet disagreed ({check['why']}); searching on")
        finally:
            self.close_fleet()
        if checks:
            stop = Stop(stop.reason, stop.detail, stop.count, {**stop.evidence, "confirmation": checks})
        return SearchResult(good, stop, probes)

    def _ramp_up(self, todo: list[int], good: int, probes: list[dict]) -> tuple[int, Stop | None]:
        for count in todo:
            good, stop = self._aim_below(count, good, probes)
            if stop is None:
                stop = self.measure(count, probes)
            if stop is not None:
                return good, stop
            good = count
        return good, None

    def _aim_below(self, count: int, good: int, probes: list[dict]) -> tuple[int, Stop | None]:
        """Before a scheduled count beyond the predicted maximum: measure just below the
        prediction, then step up from there (twice the margin, doubling) until a count fails or
        the scheduled one is reached. Doubling past the limit squeezes the kept fleet, and its
        readings then flatter the counts below: session 21's runc fleet ran 640 after 1024 had
        failed, where a fresh fleet failed 640 and the limit was 562. Aiming also spares the
        counts that bisect down from the overshoot."""
        predicted = self.predicted_max()
        if predicted is None or not predicted < count or good + 1 >= count:
            return good, None
        margin = max(1, math.ceil(predicted * AIM_MARGIN))
        # at or past the prediction already (the peak per instance fell as the fleet grew: its
        # workloads ran less together): step on from the last good count, never double past it
        aim, step = (max(good + 1, predicted - margin), 2 * margin) if good < predicted else \
            (good + 2 * margin, 4 * margin)
        if aim >= count:
            return good, None
        self.ctx.log(f"{self.platform.name}: the confined host's peak so far predicts a maximum of {predicted}: "
                     f"measuring {aim} before {count}")
        while aim < count:
            stop = self.measure(aim, probes)
            probes[-1]["aimed_at"] = predicted
            if stop is not None:
                return good, stop
            good, aim, step = aim, aim + step, 2 * step
        return good, None

    def predicted_max(self) -> int | None:
        """The count at which the confined host's peak during the workload reaches its limit
        minus the guard's floor: least squares of the peak against the healthy counts (from
        AIM_FROM) of the first fleet, grown from empty and never shrunk. None unconfined, with
        fewer than three such counts, or after the first fleet (kept and fresh fleets differ)."""
        if not self.parent or self.probe_no != 1 or not self.grown or self.guard is None:
            return None
        pts = [(c, p["peak"]) for c, p in sorted(self.points.items()) if c >= AIM_FROM and p.get("peak")]
        limit = cgroups.memory_limit(self.parent)
        line = model.fit([c for c, _ in pts], [peak for _, peak in pts]) if len(pts) >= 3 else None
        if line is None or line.slope <= 0 or not limit:
            return None
        return int((limit - self.guard.confined_min_available(limit) - line.intercept) / line.slope)

    def _bisect(self, good: int, stop: Stop, precision: int, probes: list[dict]) -> tuple[int, Stop]:
        failing = stop.count if stop.count is not None else good + 1
        retries = 0
        while failing - good > max(1, precision):
            mid = (good + failing) // 2
            if self.grew_to is not None and good < self.grew_to == failing - 1:
                mid = self.grew_to  # growth stopped at the failing count: the fleet below it is there
            s = self.measure(mid, probes)
            if s is None:
                good = max(good, mid)
            elif s.reason != "interrupted" and s.count is not None and s.count <= good:
                # a count that ran correctly before failed now: the previous failure's leftovers
                # (memory not yet given back, dying instances), not this count's. Start afresh
                # once the host has recovered and probe again; never lower the maximum on that evidence.
                retries += 1
                seen = {"count": s.count, "reason": s.reason, "detail": s.detail, "fleet": self.probe_no}
                if retries > RECOVERY_RETRIES:
                    return good, Stop(stop.reason, stop.detail, stop.count, {
                        **stop.evidence, "bisection_stopped": (
                            f"count {s.count} failed (fleet {self.probe_no}, {s.reason}) although {good} ran "
                            f"correctly: the host did not recover after {RECOVERY_RETRIES} waits, so the "
                            f"bisection stopped between {good} and {failing}"), "not_recovered": seen})
                self.close_fleet()
                recovery = self.await_recovery()
                probes[-1]["host_not_recovered"] = {**seen, "recovery": recovery}
                self.ctx.log(f"{self.platform.name}: count {s.count} failed though {good} ran correctly: the host "
                             f"had not recovered; waited {recovery.get('waited_s')} s, probing {mid} again afresh")
            else:
                # the probed count failed; the stop says at which instance (a start may fail below mid)
                failing = s.count if s.count is not None and good < s.count < mid else mid
                stop = s
                if s.reason == "interrupted":
                    break
        return good, stop

    def confirm(self, good: int, stop: Stop, probes: list[dict], cap: int | None = None) -> dict[str, Any]:
        """The found maximum from an empty fleet: `good` must run correctly and 1 % above it
        (at least the failing count, at most `cap`) must fail. Where `good` fails, the same
        fleet tries 1 % below: running there, it bisects to its own maximum, which agrees within
        1 % and is the answer (`within`). Returns the verdict, and on disagreement the bracket
        to search on: (good, stop) where the fresh fleet failed lower, or (the higher count, no
        stop) where it ran more."""
        above = max(stop.count or good + 1, good + max(1, math.ceil(good * CONFIRM_ABOVE)))
        if cap is not None:
            above = max(good + 1, min(above, cap))
        self.close_fleet()
        t0 = time.monotonic()
        out: dict[str, Any] = {"count": good, "above": above, "fleet": self.probe_no + 1}
        s = self.measure(good, probes)
        out["healthy"] = s is None
        if s is not None:
            failing = s.count if s.count is not None and s.count <= good else good
            why = f"{good} failed from an empty fleet ({s.reason}: {s.detail})"
            floor = good - max(1, math.ceil(good * CONFIRM_ABOVE))
            if s.reason != "interrupted" and 0 < floor < failing and self.measure(floor, probes) is None:
                # the empty fleet's own maximum lies within 1 % below: found by this fleet, it is
                # the confirmed answer (a second fresh fleet of hundreds took minutes to tell 1-2)
                found, at = self._bisect(floor, s, 1, probes)
                return out | {"agrees": True, "within": True, "good": found, "stop": at,
                              "seconds": round(time.monotonic() - t0, 1),
                              "why": f"{why}; the same fleet ran {found}, within 1 % of {good}",
                              "above_stop": f"{at.reason} at {at.count}: {at.detail}"}
            lower = max((c for c in self.points if c < failing), default=0)
            return out | {"agrees": False, "good": lower, "stop": s, "seconds": round(time.monotonic() - t0, 1),
                          "why": why}
        s = self.measure(above, probes)
        out |= {"above_failed": s is not None, "seconds": round(time.monotonic() - t0, 1)}
        if s is None:
            return out | {"agrees": False, "good": above, "stop": None,
                          "why": f"{above} ran correctly from an empty fleet, above the maximum {good}"}
        return out | {"agrees": True, "stop": s, "above_stop": f"{s.reason} at {s.count}: {s.detail}"}

    def await_recovery(self, timeout: float = RECOVERY_TIMEOUT, sleep: float = 2.0) -> dict[str, Any]:
        """After a count failed below the known-good one (the fleet removed): wait until the
        memory the failed fleet held has come back (the confining parent's usage near where the
        first fleet started it, the host's MemAvailable within 5 % of where it was) and the guard
        is calm, at most `timeout` seconds. Returns the readings (evidence of the retry)."""
        start = time.monotonic()
        reading: dict[str, Any] = {}
        while True:
            if self.parent:
                cgroups.reclaim(self.parent)
            host = read_host()
            usage = cgroups.memory_usage(self.parent) if self.parent else None
            base_usage, base_avail = self._start_state or (usage, host.mem_available)
            reading = {"parent_usage": usage, "parent_usage_at_start": base_usage,
                       "mem_available": host.mem_available, "mem_available_at_start": base_avail}
            memory_back = ((usage is None or base_usage is None or usage <= base_usage + 32 * 2**20)
                           and host.mem_available >= 0.95 * base_avail)
            calm = self.guard.check("waiting for the host to recover") is None
            if (memory_back and calm) or time.monotonic() - start > timeout:
                reading |= {"recovered": memory_back and calm, "waited_s": round(time.monotonic() - start, 1)}
                return reading
            time.sleep(sleep)

    # -- the fleet -------------------------------------------------------------------------
    def _fleet(self) -> Fleet:
        if self.fleet is None:
            self.probe_no += 1
            prefix = fleet_prefix(self.ctx.run_id, self.platform.name, self.probe_no)
            self.fleet = Fleet(self.platform, self.image, self.ctx.run_id, prefix, self.guard, self.parent)
            self.fleet.one_clock, self.fleet.launch_per_instance_s = self.launches
            self.grown = True
            self.grower.forget_usage()
        return self.fleet

    def close_fleet(self) -> None:
        """Stop and remove the fleet (a fresh one starts from empty)."""
        if self.fleet is None:
            return
        fleet, self.fleet = self.fleet, None
        self.launches = (fleet.one_clock, fleet.launch_per_instance_s)  # a fresh fleet's are the same
        errors = fleet.close()
        self.failed_last = False
        if errors:
            self.ctx.log(f"{self.platform.name}: cleanup errors: {'; '.join(errors)}")

    def measure(self, count: int, probes: list[dict]) -> Stop | None:
        """Bring the fleet to `count` (shrink or grow), let it settle, read its idle cost, run
        the workload and judge it; the Stop when the count failed."""
        fleet = self._fleet()
        self.step_no += 1
        self.judge.probe_no = self.probe_no
        record: dict[str, Any] = {"step": self.step_no, "fleet": self.probe_no, "count": count,
                                  "had": len(fleet.members), "started": time.time()}
        probes.append(record)
        stop: Stop | None = None
        errors: list[str] = []
        batches: list[dict] = []
        try:
            if len(fleet.members) > count:
                errors += fleet.shrink(count, brake=self.failed_last)
                self.grown = False
                self.grower.forget_usage()
            if self.failed_last and fleet.members and (dead := fleet.drop_dead()):
                record["dead_removed"] = len(dead)
                self.grown = False
            if not fleet.members:
                if self.parent and self.probe_no > 1:
                    cgroups.reclaim(self.parent)
                stop = self._pressed_before()
                self.available_at_start = read_host().mem_available
                if self._start_state is None:
                    self._start_state = (cgroups.memory_usage(self.parent) if self.parent else None,
                                         self.available_at_start)
            elif self.failed_last:
                stop = self._pressed_with(len(fleet.members))
            self.grew_to = None
            if stop is None:
                first = len(self.grower.batches)
                stop = self.grower.grow(fleet, count, f"fleet {self.probe_no}")
                batches = self.grower.batches[first:]
                if stop is not None and stop.count == len(fleet.members) + 1:
                    self.grew_to = len(fleet.members)
            if stop is None:
                stop = self._run(fleet, count, batches)
        except KeyboardInterrupt:
            stop = Stop("interrupted", "interrupted by user or signal", None)
            raise
        finally:
            self.failed_last = stop is not None
            record |= {"fleet_after": len(fleet.members), "ok": stop is None, "stop": stop.reason if stop else None,
                       "batches": [b["size"] for b in batches], "seconds": round(time.time() - record["started"], 1),
                       "cleanup_errors": errors}
            self.ctx.log(f"{self.platform.name}: fleet {self.probe_no}, count {count} (from {record['had']}): "
                         + ("ok" if stop is None else f"{stop.reason} at {stop.count}: {stop.detail}"))
            if errors:
                self.ctx.log(f"{self.platform.name}: cleanup errors: {'; '.join(errors)}")
        return stop

    def _run(self, fleet: Fleet, count: int, batches: list[dict]) -> Stop | None:
        cgs = [m.cgroup for m in fleet.members if m.cgroup]
        names = self.platform.host_processes
        before = costs.read_idle(count, cgs, self.parent, names, self.started_at)
        if self.section.settle:
            time.sleep(self.section.settle)
        after = costs.read_idle(count, cgs, self.parent, names, self.started_at)
        extra = costs.idle_samples(before, after)
        base = {"instance": 0, "category": "cost", "higher_is_better": False}
        extra.append({"metric": "fleet_grown", "value": 1.0 if self.grown else 0.0, "unit": "bool", **base})
        started = sum(b["started"] for b in batches)
        if started:
            extra += [{"metric": "start_s_per_instance", "value": sum(b["seconds"] for b in batches) / started,
                       "unit": "s", **base},
                      {"metric": "start_parallel", "value": float(max(b["size"] for b in batches)), "unit": "count",
                       **base}]
        if self.parent and batches:  # after a shrink, _pressed_with has reclaimed
            self._reclaim_before(count)
        self.ctx.step(f"{self.platform.name}: fleet {self.probe_no}, {count} instances running the workload")
        outcome = fleet.run_workload(self.bench, f"density-{self.probe_no}-{self.step_no}-{count}",
                                     self.section.min_overlap)
        for warning in outcome.sync.warnings if outcome.sync else []:
            self.ctx.log(f"{self.platform.name}: warning at {count}: {warning}")
        return self.judge.judge(outcome, self.available_at_start, extra)

    def _reclaim_before(self, count: int) -> None:
        """Every count's workload starts on a confined host with its reclaimable memory given
        back, whatever the fleet's history. The guard counts kernel memory as used (v1's
        memory.stat does not say which slab is reclaimable), and a kept fleet reclaimed after
        a failed count had 6-20 MiB more available than a fleet grown from empty to the same
        count (runc, docker at 1 GiB, 2026-11-30), so fresh fleets failed the kept fleet's
        maximum. No swap on the confined host: only page cache and slab go. After a growth only:
        a count reached by shrinking was reclaimed by _pressed_with (and v1's force_empty takes
        10-18 s with 550 docker containers, 2-3 s when there is nothing to give back)."""
        assert self.parent is not None
        before, t0 = cgroups.memory_usage(self.parent), time.monotonic()
        cgroups.reclaim(self.parent)
        after = cgroups.memory_usage(self.parent)
        if before is not None and after is not None:
            self.ctx.log(f"{self.platform.name}: fleet {self.probe_no}, count {count}: reclaimed "
                         f"{(before - after) / 2**20:.1f} MiB of the confined host in "
                         f"{time.monotonic() - t0:.2f} s before the workload")

    def _pressed_before(self) -> Stop | None:
        """Before a fleet's first instance, wait for a calm host: what ran before (a failed
        count, another platform, other work) can keep PSI's 10 s average high, and a trip then
        is not this platform's."""
        if self.guard.wait_calm(stop=self.ctx.stop_requested) or (trip := self.guard.trip) is None:
            return None
        return Stop("guard", f"the host was under memory pressure before instance 1 started and stayed so for "
                    f"{self.guard.settings.calm_wait:g} s, not from this platform's instances: {trip.reason}", 1,
                    guard_evidence(trip, self.parent))

    def _pressed_with(self, count: int) -> Stop | None:
        """After a failed count, with the kept fleet down to `count` idle instances: wait for the
        host to calm down (PSI decays over tens of seconds); still pressed, the idle fleet of
        this size is what presses it."""
        if self.parent:
            cgroups.reclaim(self.parent)
        if self.guard.wait_calm(stop=self.ctx.stop_requested) or (trip := self.guard.trip) is None:
            return None
        return Stop("guard", f"with {count} instances idle after a failed count the host stayed under memory "
                    f"pressure for {self.guard.settings.calm_wait:g} s: {trip.reason}", count,
                    guard_evidence(trip, self.parent))

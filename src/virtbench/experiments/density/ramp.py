"""Probing counts for one platform: ramp, judge each count, bisect to the exact maximum.

A probe starts fresh instances one at a time up to each count of its schedule and measures
there (see fleet.Fleet); the first unhealthy count ends the probe with a `Stop`
carrying the evidence. `search` runs the ramp, then (until: failure) bisects between the
last good and the first failing count with a fresh probe per step. Every measured count is
stored as an execution `density[count=N]` with per-instance samples (instance 1..N), the
mean per instance (instance 0), `throughput_total`, and the memory each instance cost.
"""
from __future__ import annotations

import json
import os
import re
import statistics
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ...benchmarks.base import Benchmark
from ...errors import VirtbenchError
from ...images.image import Image
from ...platforms import cgroups, kernellog
from ...platforms.base import Platform
from ...platforms.naming import INSTANCE_PREFIX
from ...store.db import now
from ..base import ExperimentContext
from .fleet import Fleet, Outcome, StartFailure, classify_failure, disk_full, kernel_usage, next_instance_blocked
from .guard import NEAR_LIMIT, Guard, Trip, read_host

STOP_REASONS = ("start_failure", "oom", "workload_failure", "cpu_starvation", "throughput_collapse",
                "kernel_limit", "disk_full", "guard", "max_reached", "counts_done", "interrupted")
STARVED_OUTPUT = re.compile(r"(?<![a-z])-?nan(?![a-z])|TimeoutExpired|timed out", re.IGNORECASE)
"""What a workload starved of CPU prints: openssl speed -multi sums its children's counts over
their times, and a child that never got the CPU in its window reports 0/0 (`-nan`); at worst
the tool does not finish before its timeout."""
RECOVERY_RETRIES = 2
"""Probes again after a failure below the known-good count, each after waiting for recovery."""
RECOVERY_TIMEOUT = 180.0
"""Seconds to wait for the host's memory to come back before such a retry."""


@dataclass
class Stop:
    reason: str
    detail: str
    count: int | None = None
    """The count that failed (None: nothing failed, e.g. the list of counts was done)."""
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class Resumed:
    """What an interrupted run had measured of one platform's search (read from the store)."""

    probe_no: int = 0
    good: int = 0
    """The highest healthy count."""
    failing: int | None = None
    """The lowest failing count above `good` (None: none failed yet)."""
    stop: Stop | None = None
    totals: dict[int, float] = field(default_factory=dict)
    points: dict[int, dict] = field(default_factory=dict)


def resumed(executions: list[Any], samples: list[Any], platform: str, metric: str) -> Resumed:
    """The search state of `platform` from its stored `density[count=N]` executions: healthy
    counts (with their aggregate and memory, for the collapse reference and the summary) and
    the lowest failing count above them, with the stored error as its stop."""
    out = Resumed()
    mine = [(int(m.group(1)), e) for e in executions if e.platform == platform
            and (m := re.match(r"^density\[count=(\d+)\]$", e.benchmark))]
    by_exec: dict[int, dict[str, float]] = {}
    per_instance: dict[int, list[float]] = {}
    for smp in samples:
        if smp.instance == 0:
            by_exec.setdefault(smp.execution_id, {})[smp.metric] = smp.value
        elif smp.metric == metric:
            per_instance.setdefault(smp.execution_id, []).append(smp.value)
    for count, e in mine:
        out.probe_no = max(out.probe_no, e.round)
        if e.status == "ok" and not e.error:
            values = by_exec.get(e.id, {})
            out.good = max(out.good, count)
            if f"{metric}_total" in values:
                out.totals[count] = values[f"{metric}_total"]
            out.points[count] = {"per_instance": per_instance.get(e.id, []),
                                 "memory_per_instance": values.get("memory_per_instance"),
                                 "available_drop_per_instance": values.get("mem_available_drop_per_instance")}
    for count, e in sorted(mine, key=lambda ce: ce[0]):
        if count > out.good and not (e.status == "ok" and not e.error):
            reason, _, detail = (e.error or "workload_failure: failed").partition(": ")
            out.failing = count
            out.stop = Stop(reason if reason in STOP_REASONS else "workload_failure", detail or e.error, count,
                            {"resumed": "read back from the stored execution", "error": e.error})
            break
    return out


@dataclass
class SearchResult:
    max_count: int
    stop: Stop
    probes: list[dict]


def _loadavg() -> str:
    """The host's load when a collapse was judged: other work on the host also lowers throughput."""
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def _tail(text: str, n: int = 1500) -> str:
    """The start and the end of a long text: a runtime's first error and its last lines."""
    return text if len(text) <= n else text[:n // 3] + " ... " + text[-(2 * n) // 3:]


def fleet_prefix(run_id: str, platform: str, probe_no: int) -> str:
    """The head of one ramp's instance names; Fleet.name adds each instance's number."""
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
    points: dict[int, dict] = field(default_factory=dict)
    """Healthy counts measured: per-instance throughput, memory, MemAvailable drop."""
    best_total: dict[int, float] = field(default_factory=dict)
    _usage_before_last: dict | None = None
    """Kernel limit use before the last instance started: what one instance costs."""
    _start_state: tuple[int | None, int] | None = None
    """The parent's usage and the host's MemAvailable when the first probe started: what a
    recovered host returns to."""

    @property
    def metric(self):
        """The workload's first (headline) metric: the throughput the density curve shows."""
        return self.bench.metrics()[0]

    # -- the search ----------------------------------------------------------------------
    def search(self, counts: list[int], *, bisect: bool, resume: Resumed | None = None) -> SearchResult:
        """Ramp through `counts`, then (bisect) narrow down between the last good and the first
        failing count. A resumed search starts where the stored one stopped: after its highest
        healthy count, or straight into the bisection when a count above it already failed."""
        probes: list[dict] = []
        good, stop = 0, None
        if resume is not None:
            self.probe_no = resume.probe_no
            self.best_total.update(resume.totals)
            self.points.update(resume.points)
            good, stop = resume.good, resume.stop
        if stop is None:
            todo = [c for c in counts if c > good]
            if todo:
                ok, stop = self.step(todo, probes)
                good = max(good, ok)
        if stop is None:
            reason = "max_reached" if bisect else "counts_done"
            return SearchResult(good, Stop(reason, f"every count up to {good} ran correctly"), probes)
        failing = stop.count if stop.count is not None else good + 1
        retries = 0
        while bisect and failing - good > 1:
            mid = (good + failing) // 2
            ok, s = self.step([mid], probes)
            if s is None:
                good = max(good, ok)
            elif s.reason != "interrupted" and s.count is not None and s.count <= good:
                # a count that ran correctly before failed now: the previous failure's leftovers
                # (memory not yet given back, dying instances), not this count's. Wait for the
                # host to recover and probe again; never lower the maximum on that evidence.
                retries += 1
                seen = {"count": s.count, "reason": s.reason, "detail": s.detail, "probe": self.probe_no}
                if retries > RECOVERY_RETRIES:
                    stop = Stop(stop.reason, stop.detail, stop.count, {
                        **stop.evidence, "bisection_stopped": (
                            f"count {s.count} failed in probe {self.probe_no} ({s.reason}) although {good} ran "
                            f"correctly: the host did not recover after {RECOVERY_RETRIES} waits, so the "
                            f"bisection stopped between {good} and {failing}"), "not_recovered": seen})
                    break
                recovery = self.await_recovery()
                probes[-1]["host_not_recovered"] = {**seen, "recovery": recovery}
                self.ctx.log(f"{self.platform.name}: count {s.count} failed though {good} ran correctly: the host "
                             f"had not recovered; waited {recovery.get('waited_s')} s, probing {mid} again")
            else:
                # the probed count failed; the stop says at which instance (a start may fail below mid)
                failing = s.count if s.count is not None and good < s.count < mid else mid
                stop = s
                if s.reason == "interrupted":
                    break
        return SearchResult(good, stop, probes)

    def await_recovery(self, timeout: float = RECOVERY_TIMEOUT, sleep: float = 2.0) -> dict[str, Any]:
        """After a probe failed below the known-good count: wait until the memory the failed
        probe held has come back (the confining parent's usage near where the first probe
        started it, the host's MemAvailable within 5 % of where it was) and the guard is calm,
        at most `timeout` seconds. Returns the readings (evidence of the retry)."""
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

    def step(self, counts: list[int], probes: list[dict]) -> tuple[int, Stop | None]:
        """Fresh instances up to each count in turn; returns (last good count, stop or None)."""
        self.probe_no += 1
        prefix = fleet_prefix(self.ctx.run_id, self.platform.name, self.probe_no)
        fleet = Fleet(self.platform, self.image, self.ctx.run_id, prefix, self.guard, self.parent)
        self._usage_before_last = None
        record: dict[str, Any] = {"probe": self.probe_no, "counts": counts, "started": time.time()}
        probes.append(record)
        good = 0
        if self.probe_no > 1 and self.parent:
            cgroups.reclaim(self.parent)
        stop = self._pressed_before()
        available_at_start = read_host().mem_available
        if self._start_state is None:
            self._start_state = (cgroups.memory_usage(self.parent) if self.parent else None, available_at_start)
        try:
            for count in counts if stop is None else []:
                stop = self._grow(fleet, count)
                if stop is not None:
                    break
                if self.section.settle:
                    time.sleep(self.section.settle)
                self.ctx.step(f"{self.platform.name}: probe {self.probe_no}, {count} instances running the workload")
                outcome = fleet.run_workload(self.bench, f"density-{self.probe_no}-{count}",
                                             self.section.min_overlap)
                for warning in outcome.sync.warnings if outcome.sync else []:
                    self.ctx.log(f"{self.platform.name}: warning at {count}: {warning}")
                stop = self._judge(outcome, available_at_start)
                if stop is not None:
                    break
                good = count
        except KeyboardInterrupt:
            stop = Stop("interrupted", "interrupted by user or signal", None)
            raise
        finally:
            errors = fleet.close()
            record |= {"good": good, "stop": stop.reason if stop else None,
                       "seconds": round(time.time() - record["started"], 1), "cleanup_errors": errors}
            self.ctx.log(f"{self.platform.name}: probe {self.probe_no} (counts {counts[0]}..{counts[-1]}): "
                         f"last good {good}" + (f"; {stop.reason} at {stop.count}: {stop.detail}" if stop else ""))
            if errors:
                self.ctx.log(f"{self.platform.name}: cleanup errors: {'; '.join(errors)}")
        return good, stop

    def _pressed_before(self) -> Stop | None:
        """Before a probe's first instance, wait for a calm host: what ran before (a probe, another
        platform, other work) can keep PSI's 10 s average high, and a trip then is not this platform's."""
        if self.guard.wait_calm(stop=self.ctx.stop_requested) or (trip := self.guard.trip) is None:
            return None
        return Stop("guard", f"the host was under memory pressure before instance 1 started and stayed so for "
                    f"{self.guard.settings.calm_wait:g} s, not from this platform's instances: {trip.reason}", 1,
                    self._guard_evidence(trip))

    # -- growing -------------------------------------------------------------------------
    def _grow(self, fleet: Fleet, count: int) -> Stop | None:
        while len(fleet.members) < count:
            n = len(fleet.members) + 1
            if self.ctx.stop_requested():
                raise KeyboardInterrupt
            trip = self.guard.check(f"before instance {n}") or self.guard.next_fits(f"before instance {n}")
            if trip is not None:
                return Stop("guard", trip.reason, n, self._guard_evidence(trip))
            usage = kernel_usage(getattr(self.platform.options, "network", "none"))
            limit = next_instance_blocked(self._usage_before_last, usage)
            if limit is not None:
                return Stop("kernel_limit", f"{limit['limit']}: {limit['used']} of {limit['max']} used, instance "
                            f"{n} would need {limit['last_instance_took']} more", n, limit)
            self._usage_before_last = usage
            self.ctx.step(f"{self.platform.name}: probe {self.probe_no}, starting instance {n}")
            before = fleet.oom_counters()
            mark = kernellog.mark()
            held = self.guard.held()
            try:
                fleet.add()
            except StartFailure as exc:
                text = str(exc)
                if (disk := disk_full(text, self.platform.paths.state)) is not None:
                    return Stop("disk_full", f"host disk full: instance {n} could not be created or started, "
                                f"{disk['free_bytes'] >> 20} MiB free on {disk['path']}", n, disk)
                limit_name = classify_failure(text)
                oom, log = self._new_kills(fleet, before, mark)
                if oom:
                    return Stop("oom", f"OOM kill while starting instance {n}", n,
                                {"oom_counters": oom, "start_error": _tail(text), "kernel_log": log[-10:],
                                 "parent_memory": cgroups.memory_evidence(self.parent) if self.parent else None})
                reason = "kernel_limit" if limit_name and not limit_name.startswith("memory") else "start_failure"
                return Stop(reason, f"instance {n} did not start" + (f" ({limit_name})" if limit_name else ""), n,
                            {"error": _tail(text), "limit": limit_name,
                             "parent_memory": cgroups.memory_evidence(self.parent) if self.parent else None})
            kills, log = self._new_kills(fleet, before, mark)
            self.guard.note_start(held)
            if kills:
                return Stop("oom", f"OOM kill when instance {n} started", n,
                            {"oom_counters": kills, "kernel_log": log[-10:],
                             "parent_memory": cgroups.memory_evidence(self.parent) if self.parent else None})
        return None

    def _guard_evidence(self, trip: Trip) -> dict[str, Any]:
        """The reading that tripped, its thresholds, and the confining parent's own counters
        as the kernel keeps them (v2: memory.events, memory.pressure, memory.peak)."""
        evidence: dict[str, Any] = {"reading": trip.reading, "thresholds": trip.threshold}
        if self.parent:
            evidence["parent_counters"] = cgroups.memory_files(self.parent)
        return evidence

    @staticmethod
    def _new_kills(fleet: Fleet, before: dict[str, dict[str, int]], mark: int) -> tuple[dict, list[str]]:
        """OOM kills since `before`/`mark`: the counters that rose, else the kernel log's lines
        naming the fleet's cgroups (a failed start's cgroup is removed with its counter)."""
        log = kernellog.oom_lines_since(mark)
        kills: dict[str, Any] = {cg: c for cg, c in fleet.oom_counters().items()
                                 if c.get("oom_kill", 0) > before.get(cg, {}).get("oom_kill", 0)}
        ours = fleet.log_kills(log)
        if not kills and ours:
            kills["kernel log"] = len(ours)
        return kills, ours or log

    # -- judging a count -----------------------------------------------------------------
    def _judge(self, outcome: Outcome, available_at_start: int) -> Stop | None:
        count = outcome.count
        per_instance: list[float | None] = []
        failures: list[str] = []
        failed_output: list[str] = []
        """Each failed instance's own output with its failure: what tells starvation apart."""
        for i, (member, r) in enumerate(outcome.results, 1):
            if r.returncode != 0:
                failures.append(f"instance {i} ({member.instance.name}) exit {r.returncode}: "
                                f"{_tail(r.stderr.strip() or r.stdout.strip(), 300)}")
                failed_output.append(f"{failures[-1]}\n{r.stdout}\n{r.stderr}")
                per_instance.append(None)
                continue
            try:
                parsed = self.bench.parse(r.stdout, r.stderr, source=f"instance {i}")
                per_instance.append(parsed[self.metric.name])
            except VirtbenchError as exc:
                failures.append(f"instance {i}: {exc}")
                failed_output.append(f"{failures[-1]}\n{r.stdout}\n{r.stderr}")
                per_instance.append(None)
        ok_values = [v for v in per_instance if v is not None]
        kills = outcome.oom_kills()
        usage = [u for u in outcome.memory_usage if u is not None]
        mem_per_instance = sum(usage) / len(usage) if usage else None
        drop = (available_at_start - outcome.mem_available_before) / count
        stop: Stop | None = None
        if outcome.trip is not None:
            stop = Stop("guard", outcome.trip.reason, count, self._guard_evidence(outcome.trip))
        elif kills:
            stop = Stop("oom", f"OOM kill during the workload at {count} instances", count,
                        {"oom_kills": kills, "counters_after": {k: outcome.oom_after.get(k) for k in kills},
                         "kernel_log": (outcome.log_kills or outcome.kernel_log)[-10:],
                         "parent_memory": outcome.parent_memory})
        elif failures and (disk := disk_full("\n".join(failed_output), self.platform.paths.state)) is not None:
            stop = Stop("disk_full", f"host disk full: {len(failures)} of {count} workloads could not write, "
                        f"{disk['free_bytes'] >> 20} MiB free on {disk['path']}", count, disk)
        elif failures and self._starved(outcome, failed_output):
            stop = Stop("cpu_starvation", f"{len(failures)} of {count} workloads got no CPU in their window "
                        f"({count * self._workers()} workload processes on {os.cpu_count()} CPUs): throughput "
                        f"per instance collapsed, no OOM kill" + self._memory_note(outcome), count,
                        self._starvation_evidence(outcome, failures, ok_values))
        elif failures:
            stop = Stop("workload_failure", f"{len(failures)} of {count} workloads failed", count,
                        {"failures": failures[:10], "kernel_log": outcome.kernel_log[-10:],
                         "parent_memory": outcome.parent_memory})
        else:
            total = sum(ok_values)
            lower = [t for c, t in self.best_total.items() if c < count]
            ref = statistics.median(lower) if lower else None
            median = statistics.median(ok_values)
            if ref is not None and total < self.section.collapse * ref:
                stop = Stop("throughput_collapse", f"aggregate {total:.4g} below {self.section.collapse:g} x the "
                            f"median of the lower counts ({ref:.4g})", count,
                            {"total": total, "lower_totals": lower, "loadavg": _loadavg(),
                             "curve": self._curve(count, ok_values), "parent_memory": outcome.parent_memory})
            elif count > 1 and min(ok_values) < self.section.starved * median:
                stop = Stop("throughput_collapse", f"an instance got {min(ok_values):.4g}, below "
                            f"{self.section.starved:g} x the median ({median:.4g})", count,
                            {"per_instance": ok_values, "loadavg": _loadavg(),
                             "curve": self._curve(count, ok_values), "parent_memory": outcome.parent_memory})
            else:
                self.best_total[count] = total
                self.points[count] = {"per_instance": ok_values, "memory_per_instance": mem_per_instance,
                                      "available_drop_per_instance": drop}
        self._store(outcome, per_instance, mem_per_instance, drop, stop)
        return stop

    def _workers(self) -> int:
        return int(getattr(self.bench.params, "multi", None) or 1)

    def _starved(self, outcome: Outcome, failed_output: list[str]) -> bool:
        """Failures that are CPU starvation, not a broken workload: the same workload ran
        correctly at a lower count, and every failed instance printed what a starved tool
        prints (or timed out), with no OOM kill (judged before)."""
        if outcome.count < 2 or not self.points or min(self.points) >= outcome.count:
            return False
        return all(STARVED_OUTPUT.search(f) for f in failed_output)

    def _curve(self, count: int, values: list[float]) -> dict[int, float | None]:
        """Mean throughput per instance against the count: the healthy counts, then this one."""
        curve: dict[int, float | None] = {c: statistics.mean(p["per_instance"]) if p["per_instance"] else None
                                          for c, p in sorted(self.points.items())}
        curve[count] = statistics.mean(values) if values else 0.0
        return curve

    @staticmethod
    def _memory_note(outcome: Outcome) -> str:
        """Whether memory was the limit too: the confining parent's peak against its limit (at
        the limit without a kill, reclaim stalled the instances on top of the CPU contention)."""
        pm = outcome.parent_memory or {}
        if not (pm.get("peak") and pm.get("limit")):
            return ""
        peak, limit = pm["peak"] >> 20, pm["limit"] >> 20
        if pm["peak"] >= NEAR_LIMIT * pm["limit"]:
            return (f"; the confining parent was at its memory limit too (peak {peak} MiB of {limit} MiB): "
                    "memory reclaim stalled the instances as well")
        return f"; memory was not the limit (the confining parent peaked at {peak} MiB of {limit} MiB)"

    def _starvation_evidence(self, outcome: Outcome, failures: list[str], ok_values: list[float]) -> dict:
        starved_lines = [ln.strip() for _, r in outcome.results for ln in (r.stdout + r.stderr).splitlines()
                         if STARVED_OUTPUT.search(ln)]
        return {"curve": self._curve(outcome.count, ok_values), "failed_instances": len(failures),
                "failures": failures[:5], "starved_output": starved_lines[:10],
                "workload_processes": outcome.count * self._workers(), "cpus": os.cpu_count(),
                "loadavg": _loadavg(), "parent_memory": outcome.parent_memory,
                "host_mem_available": outcome.mem_available_before}

    def _store(self, outcome: Outcome, values: list[float | None], mem: float | None, drop: float,
               stop: Stop | None) -> None:
        metric = self.metric
        base = {"unit": metric.unit, "higher_is_better": metric.higher_is_better, "category": metric.category}
        samples: list[dict] = []
        ok = [v for v in values if v is not None]
        if stop is None or stop.reason in ("throughput_collapse", "cpu_starvation"):
            samples += [{"metric": metric.name, "value": float(v), "instance": i, **base}
                        for i, v in enumerate(values, 1) if v is not None]
            samples += [{"metric": metric.name, "value": float(statistics.mean(ok)), "instance": 0, **base},
                        {"metric": f"{metric.name}_total", "value": float(sum(ok)), "instance": 0, **base}]
        mem_base = {"unit": "B", "higher_is_better": False, "category": "memory"}
        if self.baseline:  # the baseline runs unconfined at count 1: throughput only, for the ratio
            mem = None
        if mem is not None:
            samples.append({"metric": "memory_per_instance", "value": float(mem), "instance": 0, **mem_base})
        if not self.baseline:
            samples.append({"metric": "mem_available_drop_per_instance", "value": float(drop), "instance": 0,
                            **mem_base})
        peak = (outcome.parent_memory or {}).get("peak")
        if peak is not None:  # how close the confined host came to its limit at this count
            samples.append({"metric": "parent_memory_peak", "value": float(peak), "instance": 0, **mem_base})
        sync = outcome.sync
        if sync is not None and sync.spread_s is not None and sync.overlap is not None:
            samples += [{"metric": "start_spread", "value": float(sync.spread_s), "instance": 0, "unit": "s",
                         "higher_is_better": False, "category": "sync"},
                        {"metric": "overlap", "value": float(sync.overlap), "instance": 0, "unit": "ratio",
                         "higher_is_better": True, "category": "sync"}]
        stdout = (f"### sync {json.dumps(sync.as_dict())}\n" if sync else "")
        stdout += "".join(f"### instance {i} ({m.instance.name}) exit {r.returncode}\n{r.stdout}\n"
                         for i, (m, r) in enumerate(outcome.results, 1))
        stderr = "".join(f"### instance {i}\n{r.stderr}\n" for i, (m, r) in enumerate(outcome.results, 1) if r.stderr)
        started = datetime.fromtimestamp(outcome.started_at, UTC).replace(tzinfo=None)
        self.ctx.sink.record(
            run_id=self.ctx.run_id, round=self.probe_no, warmup=False, platform=self.platform.name,
            benchmark=f"density[count={outcome.count}]",
            status="ok" if stop is None or stop.reason in ("throughput_collapse", "cpu_starvation") else "failed",
            started_at=started, finished_at=now(), duration_s=outcome.duration_s,
            instance=f"{outcome.count} instances", argv=self.bench.command("/var/tmp/virtbench"),
            stdout=_tail(stdout, 200_000), stderr=_tail(stderr, 50_000),
            error=f"{stop.reason}: {stop.detail}" if stop else "", samples=samples)

    # -- memory ----------------------------------------------------------------------------
    def memory_per_instance(self, count: int) -> float | None:
        point = self.points.get(count) or (self.points[max(self.points)] if self.points else None)
        return point["memory_per_instance"] if point else None

    def available_drop_per_instance(self, count: int) -> float | None:
        point = self.points.get(count) or (self.points[max(self.points)] if self.points else None)
        return point["available_drop_per_instance"] if point else None

"""Judging one measured count of a density search, and storing it.

A count is healthy when every instance ran the workload correctly, no OOM kill appeared in
the kernel's counters, throughput did not collapse and the guard did not trip; otherwise the
`Stop` names the reason with the kernel's evidence. Every measured count is stored as an
execution `density[count=N]` with per-instance samples (instance 1..N), the mean per
instance (instance 0), `throughput_total`, the memory each instance cost, and the idle cost
readings (costs.py, category `cost`) the sizing model is fitted to.
"""
from __future__ import annotations

import json
import math
import os
import re
import statistics
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ...benchmarks.base import Benchmark
from ...errors import VirtbenchError
from ...platforms import cgroups
from ...platforms.base import Platform
from ...store.db import now
from ..base import ExperimentContext
from .fleet import Outcome
from .guard import NEAR_LIMIT, Trip
from .limits import disk_full

STOP_REASONS = ("start_failure", "oom", "workload_failure", "cpu_starvation", "throughput_collapse",
                "kernel_limit", "disk_full", "guard", "max_reached", "counts_done", "interrupted")
STARVED_OUTPUT = re.compile(r"(?<![a-z])-?nan(?![a-z])|^\+R\d*:0:[^:\n]+:|^\+R\d*:\d+:[^:\n]+:0(\.0*)?$"
                            r"|TimeoutExpired|timed out", re.IGNORECASE | re.MULTILINE)
"""What a workload starved of CPU prints: openssl speed counts its operations in its window
(`+R:count:cipher:seconds`), and one that never got the CPU there counts 0: a single process
then reports a rate of 0, and -multi sums its children's counts over their times, so a child
that never ran reports 0/0 (`-nan`); one that ran only around its alarm reads its window as
0 s long (`+R:889:...:0.000000`, rate `inf`); at worst the tool does not finish before its timeout.
A tool that cannot run at all prints no `+R` line (it fails on its cipher first)."""


@dataclass
class Stop:
    reason: str
    detail: str
    count: int | None = None
    """The count that failed (None: nothing failed, e.g. the list of counts was done)."""
    evidence: dict[str, Any] = field(default_factory=dict)



def _loadavg() -> str:
    """The host's load when a collapse was judged: other work on the host also lowers throughput."""
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def _tail(text: str, n: int = 1500) -> str:
    """The start and the end of a long text: a runtime's first error and its last lines."""
    return text if len(text) <= n else text[:n // 3] + " ... " + text[-(2 * n) // 3:]




def guard_evidence(trip: Trip, parent: str | None) -> dict[str, Any]:
    """The reading that tripped, its thresholds, and the confining parent's own counters
    as the kernel keeps them (v2: memory.events, memory.pressure, memory.peak)."""
    evidence: dict[str, Any] = {"reading": trip.reading, "thresholds": trip.threshold}
    if parent:
        evidence["parent_counters"] = cgroups.memory_files(parent)
    return evidence


@dataclass
class Judge:
    """Judges and stores the counts of one platform's search; `points` and `best_total` are
    the healthy counts so far (the collapse reference, the curve, the summary's memory)."""

    ctx: ExperimentContext
    platform: Platform
    bench: Benchmark
    section: Any
    parent: str | None
    baseline: bool = False
    points: dict[int, dict] = field(default_factory=dict)
    best_total: dict[int, float] = field(default_factory=dict)
    probe_no: int = 0
    """The round the next stored count is recorded with (the ramp sets it per measured count)."""

    @property
    def metric(self):
        """The workload's first (headline) metric: the throughput the density curve shows."""
        return self.bench.metrics()[0]

    def _guard_evidence(self, trip: Trip) -> dict[str, Any]:
        return guard_evidence(trip, self.parent)

    def judge(self, outcome: Outcome, available_at_start: int, extra: list[dict] | None = None) -> Stop | None:
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
        starved = bool(failures) and self._starved(outcome, failed_output)
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
        elif starved and not self._few(len(failures), count):
            stop = Stop("cpu_starvation", f"{len(failures)} of {count} workloads got no CPU in their window "
                        f"({count * self._workers()} workload processes on {os.cpu_count()} CPUs): throughput "
                        f"per instance collapsed, no OOM kill" + self._memory_note(outcome), count,
                        self._starvation_evidence(outcome, failures, ok_values))
        elif failures and not starved:
            stop = Stop("workload_failure", f"{len(failures)} of {count} workloads failed", count,
                        {"failures": failures[:10], "kernel_log": outcome.kernel_log[-10:],
                         "parent_memory": outcome.parent_memory})
        else:
            total = sum(ok_values)
            lower = [t for c, t in self.best_total.items() if c < count]
            ref = statistics.median(lower) if lower else None
            median = statistics.median(ok_values)
            low = [v for v in ok_values if v < self.section.starved * median] if count > 1 else []
            if ref is not None and total < self.section.collapse * ref:
                stop = Stop("throughput_collapse", f"aggregate {total:.4g} below {self.section.collapse:g} x the "
                            f"median of the lower counts ({ref:.4g})", count,
                            {"total": total, "lower_totals": lower, "loadavg": _loadavg(),
                             "curve": self._curve(count, ok_values), "parent_memory": outcome.parent_memory})
            elif low and not self._few(len(low) + len(failures), count):
                stop = Stop("throughput_collapse", f"{len(low)} of {count} instances below "
                            f"{self.section.starved:g} x the median ({median:.4g}), the lowest {min(low):.4g}"
                            + (f", and {len(failures)} got no CPU" if failures else ""), count,
                            {"per_instance": ok_values, "loadavg": _loadavg(),
                             "curve": self._curve(count, ok_values), "parent_memory": outcome.parent_memory})
            else:
                self.best_total[count] = total
                self.points[count] = {"per_instance": ok_values, "memory_per_instance": mem_per_instance,
                                      "available_drop_per_instance": drop,
                                      "peak": (outcome.parent_memory or {}).get("peak")}
                if failures or low:  # few enough to be chance: counted and shown, the count is healthy
                    extra = [*(extra or []), {"metric": "starved_instances", "value": float(len(failures) + len(low)),
                                              "unit": "count", "higher_is_better": False, "category": "sync",
                                              "instance": 0}]
                    self.ctx.log(f"{self.platform.name}: at {count}, {len(failures)} instances got no CPU in their "
                                 f"window and {len(low)} less than {self.section.starved:g} x the median: within "
                                 f"starved_share {self.section.starved_share:g}, the count is healthy")
        self._store(outcome, per_instance, mem_per_instance, drop, stop, extra or [])
        return stop

    def _few(self, n: int, count: int) -> bool:
        """Few enough instances left out of the window to be the scheduler's chance (starved_share)."""
        return n <= math.floor(self.section.starved_share * count)

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
               stop: Stop | None, extra: list[dict]) -> None:
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
        if not self.baseline:  # the idle cost of this count (costs.py), for the sizing model
            samples += extra
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

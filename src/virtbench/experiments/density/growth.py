"""Growing a density fleet to the next count: parallel batches, as many as the host takes.

Before each batch the guard (the host's and the confined host's floors, PSI) and the kernel
limits (bridge ports, pids, inotify instances) are read, and the batch is cut to what they
leave room for: the guard's room in instances of the costliest start so far, the kernel
limits' room in instances of what one of the last batch took. The batch size itself follows
the starts' throughput: it doubles while a bigger batch starts instances faster than the half
as big one did, and halves when it starts them slower (a runtime serialising its starts, a host
whose CPUs are saturated); a start failure in a batch of several is retried alone before it
counts. Each batch's time is kept: the start time per instance as the fleet grows.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ...platforms import cgroups, kernellog
from ...platforms.base import Platform
from ..base import ExperimentContext
from .fleet import Fleet
from .guard import Guard
from .judge import Stop, _tail, guard_evidence
from .limits import classify_failure, disk_full, kernel_room, kernel_usage

AUTO_PARALLEL = 16
"""The most instances one batch starts when the campaign leaves `parallel` to the search."""


@dataclass
class Batch:
    """The batch-size controller (see the module docstring)."""

    cap: int = AUTO_PARALLEL
    size: int = 1
    rates: dict[int, float] = field(default_factory=dict)
    """Instances per second last seen at each batch size."""

    def take(self, wanted: int) -> int:
        return max(1, min(self.size, self.cap, wanted))

    def done(self, size: int, seconds: float) -> None:
        rate = size / max(seconds, 1e-3)
        self.rates[size] = rate
        half = self.rates.get(size // 2) if size > 1 else None
        if size == self.size and size * 2 <= self.cap and (half is None or rate > 1.1 * half):
            self.size = size * 2
        elif half is not None and rate < 0.9 * half:
            self.size = max(1, size // 2)

    def failed(self) -> None:
        self.size = 1


def new_kills(fleet: Fleet, before: dict[str, dict[str, int]], mark: int) -> tuple[dict, list[str]]:
    """OOM kills since `before`/`mark`: the counters that rose, else the kernel log's lines
    naming the fleet's cgroups (a failed start's cgroup is removed with its counter)."""
    log = kernellog.oom_lines_since(mark)
    kills: dict[str, Any] = {cg: c for cg, c in fleet.oom_counters().items()
                             if c.get("oom_kill", 0) > before.get(cg, {}).get("oom_kill", 0)}
    ours = fleet.log_kills(log)
    if not kills and ours:
        kills["kernel log"] = len(ours)
    return kills, ours or log


@dataclass
class Grower:
    ctx: ExperimentContext
    platform: Platform
    guard: Guard
    parent: str | None
    batch: Batch = field(default_factory=Batch)
    batches: list[dict[str, Any]] = field(default_factory=list)
    """Every batch started: count reached, size, seconds (the start time as the fleet grows)."""
    _usage_before: dict | None = None
    """Kernel limit use before the last batch started, and how many it started: what one costs."""
    _took: int = 1

    def forget_usage(self) -> None:
        """The fleet shrank or is new: the last batch's kernel-limit cost no longer reads from a difference."""
        self._usage_before = None

    def _parent_memory(self) -> dict | None:
        return cgroups.memory_evidence(self.parent) if self.parent else None

    def grow(self, fleet: Fleet, count: int, label: str) -> Stop | None:
        """Start instances until the fleet has `count`; the first obstacle is the Stop."""
        while len(fleet.members) < count:
            n = len(fleet.members) + 1
            if self.ctx.stop_requested():
                raise KeyboardInterrupt
            trip = self.guard.check(f"before instance {n}") or self.guard.next_fits(f"before instance {n}")
            if trip is not None:
                return Stop("guard", trip.reason, n, guard_evidence(trip, self.parent))
            usage = kernel_usage(getattr(self.platform.options, "network", "none"))
            rooms = kernel_room(self._usage_before, usage, self._took)
            blocked = next((r for r in rooms.values() if r["room"] < 1), None)
            if blocked is not None:
                limit = {k: v for k, v in blocked.items() if k != "room"}
                return Stop("kernel_limit", f"{limit['limit']}: {limit['used']} of {limit['max']} used, instance "
                            f"{n} would need {limit['last_instance_took']} more", n, limit)
            size = self.batch.take(count - len(fleet.members))
            if (room := self.guard.room()) is not None:
                size = min(size, max(1, room))
            size = min([size, *(r["room"] for r in rooms.values())])
            self._usage_before, self._took = usage, size
            last = n + size - 1
            self.ctx.step(f"{self.platform.name}: {label}, starting instance {n}"
                          + (f"-{last} ({size} at once)" if size > 1 else ""))
            before = fleet.oom_counters()
            mark = kernellog.mark()
            held = self.guard.held()
            t0 = time.monotonic()
            started, errors = fleet.add_many(size)
            seconds = time.monotonic() - t0
            if started:
                self.guard.note_start(held, len(started))
                self.batches.append({"count": len(fleet.members), "size": size, "started": len(started),
                                     "seconds": round(seconds, 3)})
            kills, log = new_kills(fleet, before, mark)
            if errors:
                stop = self._start_failed(fleet, errors, kills, log, size)
                if stop is not None:
                    return stop
                continue
            self.batch.done(size, seconds)
            if kills:
                at = len(fleet.members)
                return Stop("oom", f"OOM kill when instance{'s' if size > 1 else ''} {n}"
                            + (f"-{last}" if size > 1 else "") + " started", at,
                            {"oom_counters": kills, "kernel_log": log[-10:], "parent_memory": self._parent_memory()})
        return None

    def _start_failed(self, fleet: Fleet, errors: list[str], kills: dict, log: list[str], size: int) -> Stop | None:
        """A batch with failed starts: an OOM kill, a full disk, a known limit, or (started
        alone, or retried alone) the start failure; a batch of several is retried one by one."""
        text = errors[0]
        n = len(fleet.members) + 1
        if (disk := disk_full(text, self.platform.paths.state)) is not None:
            return Stop("disk_full", f"host disk full: instance {n} could not be created or started, "
                        f"{disk['free_bytes'] >> 20} MiB free on {disk['path']}", n, disk)
        if kills:
            return Stop("oom", f"OOM kill while starting instance {n}", n,
                        {"oom_counters": kills, "start_error": _tail(text), "kernel_log": log[-10:],
                         "parent_memory": self._parent_memory()})
        if size > 1:
            self.ctx.log(f"{self.platform.name}: {len(errors)} of {size} instances started at once failed "
                         f"({_tail(text, 300)}); starting one at a time")
            self.batch.failed()
            return None
        limit_name = classify_failure(text)
        reason = "kernel_limit" if limit_name and not limit_name.startswith("memory") else "start_failure"
        return Stop(reason, f"instance {n} did not start" + (f" ({limit_name})" if limit_name else ""), n,
                    {"error": _tail(text), "limit": limit_name, "parent_memory": self._parent_memory()})

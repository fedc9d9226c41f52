"""OOM kills during one execution: a tool the kernel killed for memory is a failed sample
that says so, never a result.

A tool killed by the OOM killer exits with SIGKILL (or, when a child was killed, may even
exit 0 with partial output). The runner reads the instance's memory cgroup counters
(platforms.cgroups: v2 memory.events `oom_kill`, v1 memory.oom_control `oom_kill`) before
and after each execution: any new kill fails the execution with the count, the cgroup and
the limit, whatever the tool printed. A VM's limit is its RAM: its guest kernel kills, out
of the host cgroup's sight, so the guest's own count (/proc/vmstat oom_kill) is read instead.
"""
from __future__ import annotations

from ...platforms import cgroups
from ...platforms.base import Instance, Platform


class OomWatch:
    """The instance's OOM-kill count at the start of an execution, compared at its end."""

    def __init__(self, platform: Platform, instance: Instance) -> None:
        self.platform, self.instance = platform, instance
        self.limit = getattr(platform.options, "memory", None)
        self.guest_before = self._guest()
        try:
            self.cgroup = None if self.guest_before is not None else platform.memory_cgroup(instance)
        except Exception:  # noqa: BLE001 - no cgroup to read (native): nothing to watch
            self.cgroup = None
        self.before = cgroups.oom_counters(self.cgroup) if self.cgroup else {}

    def _guest(self) -> int | None:
        try:
            return self.platform.guest_oom_kills(self.instance)
        except Exception:  # noqa: BLE001 - a guest that does not answer: the execution's own failure says so
            return None

    def kills(self) -> str | None:
        """Why the execution failed if the kernel OOM-killed something in it, else None."""
        if self.guest_before is not None:
            guest_after = self._guest()
            return None if guest_after is None else describe_kills(guest_after - self.guest_before, None, self.limit)
        if not self.cgroup:
            return None
        after = cgroups.oom_counters(self.cgroup)
        return describe_kills(cgroups.oom_kills(after) - cgroups.oom_kills(self.before), self.cgroup, self.limit)


def describe_kills(count: int, cgroup: str | None, limit: int | None) -> str | None:
    """The failure reason for `count` new OOM kills in `cgroup`, or in a guest (cgroup None:
    its limit is its RAM); None when there were none."""
    if count <= 0:
        return None
    where = f"memory cgroup {cgroup}" if cgroup else "the guest kernel's count, /proc/vmstat"
    where += f", {'limit' if cgroup else 'guest RAM'} {limit / 2**20:g} MiB" if limit else ""
    return f"out of memory: the kernel's OOM killer killed {count} process{'es' if count > 1 else ''} ({where})"

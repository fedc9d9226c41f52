"""OOM kills during one execution: a tool the kernel killed for memory is a failed sample
that says so, never a result.

A tool killed by the OOM killer exits with SIGKILL (or, when a child was killed, may even
exit 0 with partial output). The runner reads the instance's memory cgroup counters
(platforms.cgroups: v2 memory.events `oom_kill`, v1 memory.oom_control `oom_kill`) before
and after each execution: any new kill fails the execution with the count, the cgroup and
the limit, whatever the tool printed.
"""
from __future__ import annotations

from ...platforms import cgroups
from ...platforms.base import Instance, Platform


class OomWatch:
    """The instance's OOM-kill count at the start of an execution, compared at its end."""

    def __init__(self, platform: Platform, instance: Instance) -> None:
        self.limit = getattr(platform.options, "memory", None)
        try:
            self.cgroup = platform.memory_cgroup(instance)
        except Exception:  # noqa: BLE001 - no cgroup to read (native, a VM's guest): nothing to watch
            self.cgroup = None
        self.before = cgroups.oom_counters(self.cgroup) if self.cgroup else {}

    def kills(self) -> str | None:
        """Why the execution failed if the kernel OOM-killed something in it, else None."""
        if not self.cgroup:
            return None
        after = cgroups.oom_counters(self.cgroup)
        return describe_kills(cgroups.oom_kills(after) - cgroups.oom_kills(self.before), self.cgroup, self.limit)


def describe_kills(count: int, cgroup: str, limit: int | None) -> str | None:
    """The failure reason for `count` new OOM kills in `cgroup` (None when there were none)."""
    if count <= 0:
        return None
    where = f"memory cgroup {cgroup}" + (f", limit {limit / 2**20:g} MiB" if limit else "")
    return f"out of memory: the kernel's OOM killer killed {count} process{'es' if count > 1 else ''} ({where})"

"""An allocation above a memory limit must come out as an OOM kill, not as a result.

An instance of the platform (`selftest --platform P`, runc by default) limited to 64 MiB (and
no swap, where the host swaps) runs sysbench memory with one 256 MiB block: sysbench
allocates and writes the whole block, so the kernel's OOM
killer must stop it. The runner must store a failed execution that names the OOM kill (from
the cgroup's own counters, experiments.benchmarks.oomwatch), and no sample: numbers from a killed tool are
not a measurement. The limit itself held when nothing completed (recorded for P by the suite,
platforms/enforcement.py), even where the platform's failure does not name the OOM kill.

A VM's memory limit is its guest's RAM (256 MiB here, where it boots under emulation too): four
sysbench threads each allocate their own 128 MiB block (one block above the RAM would be refused
by the guest's overcommit check, not killed), and the guest kernel's OOM kill is read from the
guest's /proc/vmstat (oomwatch).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from ..platforms import cgroups
from ..registry import PLATFORMS
from .base import Check, Judgement, Skip
from .context import Context

LIMIT_MIB = 64
ALLOCATION_MIB = 256
BENCHMARK: dict[str, Any] = {"name": "sysbench-memory", "block_size": f"{ALLOCATION_MIB}M", "oper": "write",
                             "time": 1}
VM_RAM_MIB = 256
VM_BENCHMARK: dict[str, Any] = BENCHMARK | {"block_size": f"{VM_RAM_MIB // 2}M", "threads": 4, "scope": "local"}
"""Four blocks of half the guest's RAM: each allocation passes the guest's overcommit check,
their writes together do not fit."""
MARK = "out of memory"
"""What the runner's failure reason says for an OOM kill (experiments.benchmarks.oomwatch)."""


def judge(errors: list[str], values: int) -> Judgement:
    """Every execution failed with an OOM reason, and no value was stored."""
    if values:
        return Judgement(False, f"{values} value(s) stored", "the allocation above the limit was recorded as a result")
    if not errors:
        return Judgement(False, "no execution", "nothing ran")
    oom = [e for e in errors if MARK in e]
    shown = f"{len(oom)} of {len(errors)} executions failed as OOM kills"
    if len(oom) == len(errors):
        return Judgement(True, shown)
    other = next(e for e in errors if MARK not in e)
    return Judgement(False, shown, f"a failure without the OOM reason: {other[:200]}")


def host_swaps(meminfo: Path = Path("/proc/meminfo")) -> bool:
    for line in meminfo.read_text().splitlines():
        if line.startswith("SwapTotal:"):
            return int(line.split()[1]) > 0
    return False


class Oom(Check):
    name: ClassVar[str] = "oom"
    title: ClassVar[str] = "an allocation above the memory limit is a failed sample naming the OOM kill"
    limit: ClassVar[str | None] = "memory"

    def expected(self) -> str:
        if self.on and PLATFORMS.get(self.on).kind == "vm":
            return (f"an OOM kill by the guest's kernel, stored as a failed sample with its reason ({self.on}, "
                    f"memory: {VM_RAM_MIB}M, sysbench memory: 4 threads writing {VM_RAM_MIB // 2} MiB each)")
        return (f"an OOM kill, stored as a failed sample with its reason ({self.on}, memory: {LIMIT_MIB}M, "
                f"sysbench memory writing {ALLOCATION_MIB} MiB)")

    def measure(self, ctx: Context) -> tuple[Judgement, dict[str, Any]]:
        ctx.require_platform(ctx.platform)
        vm = PLATFORMS.get(ctx.platform).kind == "vm"
        platform: dict[str, Any] = {"name": "limited", "type": ctx.platform,
                                    "memory": f"{VM_RAM_MIB if vm else LIMIT_MIB}M"}
        if not vm and host_swaps():  # a guest has no swap: its RAM is the whole limit
            if not cgroups.swap_accounting():
                raise Skip("this host swaps and its kernel cannot limit a container's swap (no swap accounting): "
                           "the allocation would swap instead of being killed", "boot with swapaccount=1")
            if "swap" not in PLATFORMS.get(ctx.platform).Options.model_fields:
                raise Skip(f"this host swaps and {ctx.platform} takes no swap limit here: the allocation would "
                           "swap instead of being killed", "run the check on a host without swap")
            platform["swap"] = 0
        m = ctx.run({"name": "selftest-oom", "baseline": "limited", "repetitions": 1, "warmups": 0,
                     "platforms": [platform], "benchmarks": [VM_BENCHMARK if vm else BENCHMARK]})
        values = sum(r.n for r in m.rows if r.platform == "limited" and r.category != "lifecycle")
        errors = [f["error"] for f in m.failures if f["benchmark"] == "sysbench-memory"]
        j = judge(errors, values)
        shown = j.measured + (f": {errors[0].split(';')[0]}" if j.passed and errors else "")
        return Judgement(j.passed, shown, j.reason), {"run": m.run_id, "errors": errors, "values": values,
                                                      "platform": ctx.platform,
                                                      "held": None if not errors and not values else values == 0}

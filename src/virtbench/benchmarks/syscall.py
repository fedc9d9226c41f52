"""syscall: the cost of one system call, `perf bench syscall basic` (Debian linux-perf).

It calls getppid() in a loop: the cheapest real system call, so the time is the price of
entering and leaving the kernel and nothing else. Here the platforms differ most: a container
pays what the host pays, a VM close to it (no exit for a system call), while gVisor's Sentry
intercepts every call (with the ptrace platform, through two context switches of the host):
tens of times the native cost. That one number explains most of a sandbox's slowdown on
system-call-heavy work (`dd bs=1`, small-packet I/O).
"""
from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from . import perf_bench
from .base import Benchmark, Metric, Params


class SyscallParams(Params):
    calls: int = Field(300_000, ge=1000, le=1_000_000_000,
                       description="getppid() calls (native: about 0.5 us each; gVisor ptrace: 20 us)")


class Syscall(Benchmark):
    """Nanoseconds per system call (getppid), lower is better."""

    name: ClassVar[str] = "syscall"
    tool: ClassVar[str] = "perf"
    packages: ClassVar[tuple[str, ...]] = (perf_bench.PACKAGE,)
    Params: ClassVar[type[Params]] = SyscallParams
    description: ClassVar[str] = "perf bench syscall basic: ns per system call (getppid)"
    study: ClassVar[dict[str, Any]] = {"calls": 10_000_000}
    """The `full` profile: perf's default loop count."""

    params: SyscallParams

    def metrics(self) -> list[Metric]:
        return [Metric("syscall_ns", "ns", False, "kernel",
                       f"time per getppid() system call, mean of {self.params.calls} calls")]

    def command(self, workdir: str) -> list[str]:
        return ["perf", "bench", "syscall", "basic", "--loop", str(self.params.calls)]

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        us = perf_bench.usecs_per_op(stdout, r"^# Executed ([0-9]+) getppid\(\) calls$",
                                     self.params.calls, source)
        return {"syscall_ns": us * 1000.0}

    def version_command(self) -> list[str]:
        return perf_bench.version_command()

    def execution_timeout(self) -> float:
        # 200 us per call: gVisor ptrace on a loaded host, or a guest under emulation
        return self.params.calls * 200e-6 + 60.0

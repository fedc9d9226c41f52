"""A cgroup I/O throttle of a known IOPS must read as that IOPS.

Two runc containers identical but for `device_read_iops` (the OCI blockIO throttle, which
runc writes to cgroup v1 blkio.throttle.read_iops_device or v2 io.max) run fio random 4 KiB
reads with O_DIRECT on their scratch directory, which lies on the disk the throttle names.
The throttled one must read the throttle's rate within 5 %; the free twin shows that the
disk is fast enough for the throttle to be what limits (else the check is skipped: a disk
slower than the throttle cannot tell a working throttle from a broken one).
"""
from __future__ import annotations

from typing import Any, ClassVar

from ..errors import UnavailableError
from ..platforms import throttle
from .base import Check, Judgement, Skip
from .context import Context

RATE = 200
TOLERANCE = 0.05
HEADROOM = 2.0
"""The free twin must read at least this multiple of RATE for the throttle to be what limits."""
METRIC = "rand_read_iops"
BENCHMARK: dict[str, Any] = {"name": "fio", "size": "64M", "runtime": 2, "ramp_time": 1, "iodepth": 16,
                             "jobs": [METRIC]}


def judge(iops: float | None, rate: float = RATE, tolerance: float = TOLERANCE) -> Judgement:
    """The throttled reads must come out at `rate` IOPS +- `tolerance` (relative)."""
    if iops is None:
        return Judgement(False, "-", "no value: the throttled runs produced none")
    off = iops / rate - 1
    shown = f"{iops:.1f} IOPS ({off * 100:+.1f} %)"
    if abs(off) <= tolerance + 1e-9:
        return Judgement(True, shown)
    why = ("the throttle is not applied to these reads (wrong device, or I/O bypassing the cgroup)"
           if off > 0 else "the reads are slower than the throttle: something else limits them")
    return Judgement(False, shown, f"{iops:.1f} IOPS is outside {rate} +- {tolerance:.0%}: {why}")


def headroom_gap(free_iops: float | None, rate: float = RATE, headroom: float = HEADROOM) -> str | None:
    """Why the disk is too slow for the check (None when it is fast enough)."""
    if free_iops is not None and free_iops >= headroom * rate:
        return None
    return (f"the disk under the state directory reads only {free_iops or 0:.0f} random 4 KiB IOPS unthrottled, "
            f"less than {headroom:g} x the {rate} IOPS throttle: a throttle cannot be told from the disk's own limit")


class IoThrottle(Check):
    name: ClassVar[str] = "io-throttle"
    title: ClassVar[str] = "a cgroup read-IOPS throttle reads as its rate (fio random reads, O_DIRECT)"

    def expected(self) -> str:
        return f"{RATE} IOPS +- {TOLERANCE:.0%} (runc, device_read_iops: {RATE}, fio 4 KiB random reads, direct)"

    def measure(self, ctx: Context) -> tuple[Judgement, dict[str, Any]]:
        ctx.require_platform("runc")
        try:
            major, minor = throttle.whole_disk(ctx.paths.instances)
        except UnavailableError as exc:
            raise Skip(exc.message, exc.fix) from None
        m = ctx.run({"name": "selftest-io-throttle", "baseline": "free", "repetitions": 2, "warmups": 0,
                     "platforms": [{"name": "free", "type": "runc"},
                                   {"name": "throttled", "type": "runc", "device_read_iops": RATE}],
                     "benchmarks": [BENCHMARK]})
        ctx.require_values(m)
        throttled, free = m.row("throttled", METRIC), m.row("free", METRIC)
        details = {"run": m.run_id, "device": f"{major}:{minor}", "throttled_values": throttled.values,
                   "free_values": free.values}
        if (gap := headroom_gap(free.median)) is not None:
            raise Skip(gap, "point VIRTBENCH_STATE_DIR at a faster disk to run this check")
        j = judge(throttled.median)
        return Judgement(j.passed, f"{j.measured}; unthrottled twin {free.median:.0f} IOPS, disk {major}:{minor}",
                         j.reason), details

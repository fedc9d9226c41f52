"""A 50 % CPU quota must read as half of the unconstrained twin on a CPU-bound benchmark.

Two runc containers identical but for `cpus: 0.5` (a CFS quota of 50 ms per 100 ms) run
openssl speed with wall-clock rates (-elapsed): a quota that works gives 0.50 of the twin's
throughput. A reading far above 0.5 means the quota is not enforced (or the twin itself got
less than a CPU: a loaded host); far below, that the quota costs more than its share.
"""
from __future__ import annotations

from typing import Any, ClassVar

from .base import Check, Judgement
from .context import Context

QUOTA = 0.5
TOLERANCE = 0.03
BENCHMARK: dict[str, Any] = {"name": "openssl", "algorithm": "aes-128-cbc", "bytes": 1024, "multi": 1, "seconds": 2}
METRIC = "throughput"


def judge(ratio: float | None, ci: list[float] | None = None, quota: float = QUOTA,
          tolerance: float = TOLERANCE) -> Judgement:
    """The quota's throughput as a share of the twin's must be `quota` +- `tolerance`."""
    if ratio is None:
        return Judgement(False, "-", "no ratio: the runs produced no values")
    shown = f"{ratio:.3f}" + (f" [{ci[0]:.3f}-{ci[1]:.3f}]" if ci else "")
    if abs(ratio - quota) <= tolerance + 1e-9:  # 0.53 - 0.5 is 0.0300000001 in floats
        return Judgement(True, shown)
    why = ("the quota is not enforced, or the unconstrained twin got less than one CPU (a loaded host)"
           if ratio > quota else "the quota cost more than its share of the CPU")
    return Judgement(False, shown, f"{ratio:.3f} is outside {quota:.2f} +- {tolerance:.2f}: {why}")


class CpuQuota(Check):
    name: ClassVar[str] = "cpu-quota"
    title: ClassVar[str] = "a 50 % CPU quota halves a CPU-bound benchmark against its unconstrained twin"

    def expected(self) -> str:
        return f"{QUOTA:.2f} +- {TOLERANCE:.2f} of the unconstrained twin (runc, cpus: {QUOTA:g}, openssl)"

    def measure(self, ctx: Context) -> tuple[Judgement, dict[str, Any]]:
        ctx.require_platform("runc")
        ctx.require_real_cpu("a quota's share of throughput is no known answer where a CPU-second's work varies")
        m = ctx.run({"name": "selftest-cpu-quota", "baseline": "twin", "repetitions": 3, "warmups": 1,
                     "platforms": [{"name": "twin", "type": "runc"}, {"name": "quota", "type": "runc", "cpus": QUOTA}],
                     "benchmarks": [BENCHMARK]})
        ctx.require_values(m)
        quota, twin = m.row("quota", METRIC), m.row("twin", METRIC)
        judgement = judge(quota.relative, quota.relative_ci95)
        unit = quota.unit
        details = {"run": m.run_id, "ratio": quota.relative, "ratio_ci95": quota.relative_ci95,
                   "quota_values": quota.values, "twin_values": twin.values, "unit": unit}
        text = f"{judgement.measured} ({_mean(quota.mean, unit)} vs {_mean(twin.mean, unit)})"
        return Judgement(judgement.passed, text, judgement.reason), details


def _mean(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value / 1e6:,.0f} MB/s" if unit == "B/s" else f"{value:,.1f} {unit}"

"""virtbench must not perturb what it measures: the native platform through the runner
against the same tool run directly must agree within 1 %.

The same argv (openssl speed, 1 s, wall clock) from the same image runs in turns: once as a
one-round campaign on the native platform through `runner.execute` (bind mounts, chroot,
clean environment, the store), once by a bare `chroot <image> env -i ... openssl ...`,
alternating which goes first (AB BA ...), after one discarded turn of each. Medians are
compared, and the verdict rule (analysis.verdict, with the 1 % margin) must not call them different.
"""
from __future__ import annotations

import statistics
from typing import Any, ClassVar

from .. import proc
from ..analysis import verdict as vd
from ..images import build as images
from ..platforms.base import EXEC_ENV
from ..registry import BENCHMARKS
from .base import Check, Judgement
from .context import Context

TOLERANCE = 0.01
PAIRS = 8
PARAMS: dict[str, Any] = {"algorithm": "aes-128-cbc", "bytes": 1024, "multi": 1, "seconds": 1}
METRIC = "throughput"


def judge(through: list[float], direct: list[float], tolerance: float = TOLERANCE) -> Judgement:
    """Medians within `tolerance` of each other, and no difference by the verdict rule."""
    if len(through) < 2 or len(direct) < 2:
        return Judgement(False, "-", "too few values to compare")
    ratio = statistics.median(through) / statistics.median(direct)
    turns = list(range(min(len(through), len(direct))))  # pair i ran through virtbench and directly in turn i
    v = vd.decide(through, direct, True, min_effect=tolerance, rounds=turns, base_rounds=turns)
    shown = f"{ratio:.4f} of direct (medians; verdict at +-{tolerance:.0%}: {v.verdict}, {v.reason})"
    if abs(ratio - 1) > tolerance + 1e-9:
        return Judgement(False, shown, f"the harness changes the result by {(ratio - 1) * 100:+.2f} %")
    if v.verdict in ("slower", "faster"):
        return Judgement(False, shown, f"the verdict rule finds the harness {v.verdict}: {v.reason}")
    return Judgement(True, shown)


class HarnessOverhead(Check):
    name: ClassVar[str] = "harness-overhead"
    title: ClassVar[str] = "native through virtbench equals the same tool run directly (harness overhead)"

    def expected(self) -> str:
        return f"1.00 +- {TOLERANCE:.2f} (native via virtbench / direct chroot, openssl, medians of {PAIRS} interleaved pairs)"

    def measure(self, ctx: Context) -> tuple[Judgement, dict[str, Any]]:
        ctx.require_platform("native")
        bench_cls = BENCHMARKS.get("openssl")
        bench = bench_cls(bench_cls.Params(**PARAMS))
        image = images.build(images.recipe_for("quick"), log=ctx.log)
        # The native platform's own argv, minus its instance: the image's rootfs itself, no bind
        # mounts, no runner, no store; the same clean environment.
        argv = ["chroot", str(image.rootfs), "/usr/bin/env", "-i", *[f"{k}={v}" for k, v in EXEC_ENV.items()],
                *bench.command("/tmp")]
        campaign = {"name": "selftest-overhead", "repetitions": 1, "warmups": 0, "platforms": ["native"],
                    "benchmarks": [{"name": "openssl", **PARAMS}]}

        def through() -> float:
            m = ctx.run(campaign)
            ctx.require_values(m)
            return m.row("native", METRIC).values[0]

        def direct() -> float:
            r = proc.run(argv, timeout=bench.execution_timeout())
            return bench.parse(r.stdout, r.stderr, source="openssl run directly")[METRIC]

        through(), direct()  # warm-up turn, discarded
        via: list[float] = []
        bare: list[float] = []
        for i in range(PAIRS):
            for turn in (through, direct) if i % 2 == 0 else (direct, through):  # AB BA AB ...
                (via if turn is through else bare).append(turn())
        j = judge(via, bare)
        return j, {"through_virtbench": via, "direct": bare, "argv_direct": argv}

"""virtbench must not perturb what it measures: the native platform through the runner
against the same tool run directly must agree within 1 %.

The same argv (openssl speed, 1 s, wall clock) from the same image runs in turns: once as a
one-round campaign on the native platform through `runner.execute` (bind mounts, chroot,
clean environment, the store), once by a bare `chroot <image> env -i ... openssl ...`,
alternating which goes first (AB BA ...), after one discarded turn of each. Each pair's ratio
compares two runs a second apart, so the machine's drift cancels; their geometric mean is the
estimate, and the verdict rule (analysis.verdict, paired by turn, 1 % margin) judges it. Pairs are
added while undecided (like the quick campaign's adaptive rounds), up to MAX_PAIRS:
- 'same' (the equivalence interval within +-1 %) passes;
- the 95 % interval wholly beyond +-1 % fails (the harness measurably changes the result);
- still undecided at the cap: passes when the estimate is within 1 %, fails beyond it.
A CI run once failed on the ratio of the two sides' medians (+1.19 %, 8 pairs) while the paired
estimate was +0.7 % [-0.3 to +1.7 %]: medians of unpaired halves carry the drift the pairing removes.
"""
from __future__ import annotations

import statistics
from typing import Any, ClassVar

from .. import proc
from ..analysis import verdict as vd
from ..analysis.tables import geomean
from ..images import build as images
from ..platforms.base import EXEC_ENV
from ..registry import BENCHMARKS
from .base import Check, Judgement
from .context import Context

TOLERANCE = 0.01
PAIRS = 8
MAX_PAIRS = 24
PARAMS: dict[str, Any] = {"algorithm": "aes-128-cbc", "bytes": 1024, "multi": 1, "seconds": 1}
METRIC = "throughput"


def _decide(through: list[float], direct: list[float], tolerance: float) -> vd.Verdict:
    turns = list(range(min(len(through), len(direct))))  # pair i ran through virtbench and directly in turn i
    return vd.decide(through, direct, True, min_effect=tolerance, rounds=turns, base_rounds=turns)


def _beyond(v: vd.Verdict, tolerance: float) -> bool:
    """The 95 % interval lies wholly outside +-tolerance: shown to change the result by more."""
    return v.ci is not None and (v.ci[1] < 1 / (1 + tolerance) or v.ci[0] > 1 + tolerance)


def decided(through: list[float], direct: list[float], tolerance: float = TOLERANCE) -> bool:
    """True when more pairs would not change the judgement: shown within, or shown beyond, the tolerance."""
    if len(through) < 2 or len(direct) < 2:
        return False
    v = _decide(through, direct, tolerance)
    return v.verdict == "same" or _beyond(v, tolerance)


def judge(through: list[float], direct: list[float], tolerance: float = TOLERANCE) -> Judgement:
    """Within the tolerance by the verdict rule's equivalence test passes; shown beyond it fails;
    undecided (at the pair cap), the paired estimate decides.

    A difference the interval shows but smaller than the tolerance passes: the check's claim is
    'within 1 %', and failing on 'significant' alone would fail a sound harness in about one run
    of twenty by chance once pairs are added while undecided."""
    if len(through) < 2 or len(direct) < 2 or any(v <= 0 for v in (*through, *direct)):
        return Judgement(False, "-", "too few (positive) values to compare")
    ratio = geomean(t / d for t, d in zip(through, direct)) or 0.0  # per turn; values checked positive above
    medians = statistics.median(through) / statistics.median(direct)
    v = _decide(through, direct, tolerance)
    shown = (f"{ratio:.4f} of direct (paired, {min(len(through), len(direct))} pairs; medians {medians:.4f}; "
             f"verdict at +-{tolerance:.0%}: {v.verdict}, {v.reason})")
    if _beyond(v, tolerance) or (v.verdict != "same" and abs(ratio - 1) > tolerance + 1e-9):
        return Judgement(False, shown, f"the harness changes the result by {(ratio - 1) * 100:+.2f} % "
                                       f"(more than +-{tolerance:.0%}: {v.reason})")
    return Judgement(True, shown)


class HarnessOverhead(Check):
    name: ClassVar[str] = "harness-overhead"
    title: ClassVar[str] = "native through virtbench equals the same tool run directly (harness overhead)"

    def expected(self) -> str:
        return (f"1.00 +- {TOLERANCE:.2f} (native via virtbench / direct chroot, openssl, {PAIRS} to {MAX_PAIRS} "
                "interleaved pairs, paired)")

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
        i = 0
        while i < PAIRS or (i < MAX_PAIRS and not decided(via, bare)):
            for turn in (through, direct) if i % 2 == 0 else (direct, through):  # AB BA AB ...
                (via if turn is through else bare).append(turn())
            i += 1
        j = judge(via, bare)
        return j, {"through_virtbench": via, "direct": bare, "argv_direct": argv}

"""A/A: a platform compared against itself must come out `same`, not slower or faster.

Two native platforms, identical but for their names, run openssl in interleaved rounds
with the adaptive repetition the quick campaign uses (extra rounds only while undecided,
capped). The report's own verdict rule (analysis.verdict, +-2 %) must call them the same:
"slower" or "faster" here would be a false difference, the error a user must never see.

The rule's own false-difference rate on A/A data is at most 5 % by design (measured by
simulation, README): one A/A comparison that differs can be that chance. So a difference is
measured again, and the check fails only when the second comparison differs too (two
chance differences in a row: at most 0.25 % with a correct rule; a systematic one, say the
platform run first always gaining, repeats). Both comparisons are in the details.
"""
from __future__ import annotations

from typing import Any, ClassVar

from ..analysis.stats import MIN_EFFECT
from .base import Check, Judgement
from .context import Context

BENCHMARK: dict[str, Any] = {"name": "openssl", "algorithm": "aes-128-cbc", "bytes": 1024, "multi": 1, "seconds": 1}
METRIC = "throughput"
ADAPTIVE: dict[str, Any] = {"until": "decided", "target": MIN_EFFECT, "max_repetitions": 20, "max_minutes": 1.5}


DIFFERENT = ("slower", "faster")


def judge(verdict: str | None, reason: str | None, first: tuple[str, str] | None = None) -> Judgement:
    """verdict/reason: the (last) comparison; first: an earlier comparison that differed, when
    this one is its repetition."""
    shown = f"{verdict or '-'}: {reason or ''}".rstrip(": ")
    if first is not None:
        shown += f" (measured again after a first comparison came out {first[0]}: {first[1]})"
    if verdict == "same":
        return Judgement(True, shown)
    if verdict in DIFFERENT:
        again = " twice in a row" if first is not None and first[0] in DIFFERENT else ""
        return Judgement(False, shown, f"a platform against itself came out {verdict}{again}: a false difference")
    return Judgement(False, shown, "the comparison stayed undecided within the repetition cap: the host is "
                                   "too noisy for a verdict (see the load)")


class AA(Check):
    name: ClassVar[str] = "aa"
    title: ClassVar[str] = "a platform compared with itself comes out the same"

    def expected(self) -> str:
        return f"same (within +-{MIN_EFFECT:.0%}; native A against native B, openssl)"

    def measure(self, ctx: Context) -> tuple[Judgement, dict[str, Any]]:
        ctx.require_platform("native")
        comparisons: list[dict[str, Any]] = []
        first = None
        for _ in range(2):
            m = ctx.run({"name": "selftest-aa", "baseline": "a", "repetitions": 5, "warmups": 1, "adaptive": ADAPTIVE,
                         "platforms": [{"name": "a", "type": "native"}, {"name": "b", "type": "native"}],
                         "benchmarks": [BENCHMARK]})
            ctx.require_values(m)
            b, a = m.row("b", METRIC), m.row("a", METRIC)
            comparisons.append({"run": m.run_id, "a_values": a.values, "b_values": b.values, "ratio": b.relative,
                                "ratio_ci95": b.relative_ci95, "verdict": b.verdict,
                                "verdict_reason": b.verdict_reason})
            if b.verdict not in DIFFERENT or first is not None:
                break
            ctx.log(f"aa: the first comparison came out {b.verdict} ({b.verdict_reason}); measuring again")
            first = (b.verdict, b.verdict_reason or "")
        return judge(b.verdict, b.verdict_reason, first), {**comparisons[-1], "comparisons": comparisons}

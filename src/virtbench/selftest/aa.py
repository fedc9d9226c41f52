"""A/A: a platform compared against itself must come out `same`, not slower or faster.

Two native platforms, identical but for their names, run openssl in interleaved rounds
with the adaptive repetition the quick campaign uses (extra rounds only while undecided,
capped). The report's own verdict rule (analysis.verdict, +-2 %) must call them the same:
"slower" or "faster" here would be a false difference, the error a user must never see.
"""
from __future__ import annotations

from typing import Any, ClassVar

from ..analysis.stats import MIN_EFFECT
from .base import Check, Judgement
from .context import Context

BENCHMARK: dict[str, Any] = {"name": "openssl", "algorithm": "aes-128-cbc", "bytes": 1024, "multi": 1, "seconds": 1}
METRIC = "throughput"
ADAPTIVE: dict[str, Any] = {"until": "decided", "target": MIN_EFFECT, "max_repetitions": 20, "max_minutes": 1.5}


def judge(verdict: str | None, reason: str | None) -> Judgement:
    shown = f"{verdict or '-'}: {reason or ''}".rstrip(": ")
    if verdict == "same":
        return Judgement(True, shown)
    if verdict in ("slower", "faster"):
        return Judgement(False, shown, f"a platform against itself came out {verdict}: a false difference")
    return Judgement(False, shown, "the comparison stayed undecided within the repetition cap: the host is "
                                   "too noisy for a verdict (see the load)")


class AA(Check):
    name: ClassVar[str] = "aa"
    title: ClassVar[str] = "a platform compared with itself comes out the same"

    def expected(self) -> str:
        return f"same (within +-{MIN_EFFECT:.0%}; native A against native B, openssl)"

    def measure(self, ctx: Context) -> tuple[Judgement, dict[str, Any]]:
        ctx.require_platform("native")
        m = ctx.run({"name": "selftest-aa", "baseline": "a", "repetitions": 5, "warmups": 1, "adaptive": ADAPTIVE,
                     "platforms": [{"name": "a", "type": "native"}, {"name": "b", "type": "native"}],
                     "benchmarks": [BENCHMARK]})
        ctx.require_values(m)
        b, a = m.row("b", METRIC), m.row("a", METRIC)
        return judge(b.verdict, b.verdict_reason), {"run": m.run_id, "a_values": a.values, "b_values": b.values,
                                                    "ratio": b.relative, "ratio_ci95": b.relative_ci95}

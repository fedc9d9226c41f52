"""A self-test check: a known answer measured through virtbench's own runner (toy-words counts
five words on bare metal and on the toy platform), judged by a pure function."""
from __future__ import annotations

from typing import Any, ClassVar

from virtbench.selftest.base import Check, Judgement


def judge(words: dict[str, float]) -> Judgement:
    """Five words on every platform, exactly."""
    wrong = {p: w for p, w in words.items() if w != 5.0}
    shown = ", ".join(f"{p} {w:g}" for p, w in sorted(words.items()))
    return Judgement(bool(words) and not wrong, shown, f"not 5 words: {wrong}" if wrong else "")


class FiveWords(Check):
    name: ClassVar[str] = "toy-five-words"
    title: ClassVar[str] = "toy-words counts the five words it is given, on every platform (a plugin test's check)"

    def expected(self) -> str:
        return "5 words on native and on the toy platform"

    def measure(self, ctx: Any) -> tuple[Judgement, dict[str, Any]]:
        m = ctx.run({"name": "selftest-toy", "repetitions": 1, "warmups": 0, "platforms": ["native", "toy"],
                     "benchmarks": [{"name": "toy-words", "words": 5}],
                     "image": {"profile": "auto"}})  # the quick profile holds the built-in benchmarks' tools
        words = {r.platform: r.mean for r in m.rows if r.metric == "words"}
        return judge(words), {"run": m.run_id, "words": words}

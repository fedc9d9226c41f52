"""The built-in kind `benchmarks`: every benchmark on every platform, the classic campaign.

It is the default when a campaign has no `experiment:` key. Its loop (rounds, interleaved
platform order, adaptive repetition) is the runner's own (`runner.execute`), which knows
this kind by `uses_benchmarks`; the class exists so the kind is listed, validated and
documented like any other.
"""
from __future__ import annotations

from typing import ClassVar

from ..base import Experiment, ExperimentContext


class Benchmarks(Experiment):
    name: ClassVar[str] = "benchmarks"
    description: ClassVar[str] = "every benchmark on every platform, interleaved rounds, verdicts against the baseline"
    uses_benchmarks: ClassVar[bool] = True
    uses_probes: ClassVar[bool] = True

    def run(self, ctx: ExperimentContext) -> None:
        raise RuntimeError("the benchmarks kind runs in the runner's own loop (runner.execute.execute)")

"""A benchmark: one module, its metric declared with unit and direction, argv and a parser."""
from __future__ import annotations

from typing import ClassVar

from virtbench.benchmarks.base import Benchmark, Metric, Params, search


class ToyParams(Params):
    words: int = 3


class ToyWords(Benchmark):
    name: ClassVar[str] = "toy-words"
    tool: ClassVar[str] = "wc"
    packages: ClassVar[tuple[str, ...]] = ("coreutils",)
    Params = ToyParams
    description: ClassVar[str] = "counts words with wc (a plugin test's benchmark)"

    def metrics(self) -> list[Metric]:
        return [Metric("words", "count", True, "kernel", "words wc counted")]

    def command(self, workdir: str) -> list[str]:  # noqa: ARG002 - writes nothing
        return ["sh", "-c", 'echo "$1" | wc -w', "sh", " ".join(["toy"] * self.params.words)]

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:  # noqa: ARG002
        return {"words": float(search(r"^\s*(\d+)\s*$", stdout, self.tool, source, 8).group(1))}

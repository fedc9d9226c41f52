"""Error rates of the verdict rule (analysis/verdict.py) by simulation with known truth.

For each noise level (coefficient of variation per sample) and repetition count, draws
`--trials` comparisons of a platform against a baseline whose true ratio is 1.0 (A/A: how
often is a platform falsely called slower?) and 0.95 (a true 5 % cost: how often is it
called slower?), and counts every verdict.

    .venv/bin/python benchmarks/verdict_rates.py [--trials 20000]
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence

import numpy as np

from virtbench.analysis.verdict import decide


def rates(true_ratio: float, cv: float, n: int, trials: int, seed: int = 0,
          higher_is_better: bool = True) -> dict[str, float]:
    """Share of each verdict over `trials` simulated comparisons (normal noise, mean 100)."""
    rng = np.random.default_rng([seed, n, int(cv * 1e4), int(true_ratio * 1e4)])
    centre = 100 * true_ratio if higher_is_better else 100 / true_ratio
    base = rng.normal(100, 100 * cv, size=(trials, n))
    plat = rng.normal(centre, centre * cv, size=(trials, n))
    counts = Counter(decide(p, b, higher_is_better).verdict for p, b in zip(plat, base))
    return {v: counts.get(v, 0) / trials for v in ("slower", "faster", "same", "inconclusive")}


def table(cvs: Sequence[float], ns: Sequence[int], trials: int) -> list[tuple[int, float, dict, dict]]:
    return [(n, cv, rates(1.0, cv, n, trials), rates(0.95, cv, n, trials)) for n in ns for cv in cvs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20000)
    args = ap.parse_args()
    print("| repetitions | CV per sample | A/A: slower | A/A: same | 5 % cost: slower | 5 % cost: inconclusive |")
    print("|---|---|---|---|---|---|")
    for n, cv, aa, cost in table((0.005, 0.01, 0.015, 0.02, 0.03, 0.05), (3, 5, 10), args.trials):
        print(f"| {n} | {cv:.1%} | {aa['slower']:.1%} | {aa['same']:.1%} | {cost['slower']:.1%} | "
              f"{cost['inconclusive']:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

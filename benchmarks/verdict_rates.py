"""Error rates of the verdict rule (analysis/verdict.py) by simulation with known truth.

For each noise level and repetition count, draws `--trials` comparisons of a platform against
a baseline whose true ratio is 1.0 (A/A: how often is a platform falsely called slower?) and
0.95 (a true 5 % cost: how often is it called slower?), and counts every verdict.

The noise has two parts, as on a shared machine: a round effect (log-normal, `round_cv`)
that moves every platform of a round alike (load drifting from round to round), and the
per-sample noise (`cv`) of each value on its own. The rule is applied as the report applies
it: paired by round (the rounds are known), or unpaired (Welch) when `paired=False`. With
`adaptive`, the quick campaign's adaptive rounds are simulated too: after `n` rounds, one
more round while the verdict is inconclusive, up to `adaptive` rounds; the verdict at the
stop counts (so the error rates include stopping on a decision).

    .venv/bin/python benchmarks/verdict_rates.py [--trials 20000]
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence

import numpy as np

from virtbench.analysis.verdict import decide
from virtbench.runner.adaptive import STOP_CONFIDENCE

VERDICTS = ("slower", "faster", "same", "inconclusive")


def rates(true_ratio: float, cv: float, n: int, trials: int, seed: int = 0,
          higher_is_better: bool = True, *, round_cv: float = 0.0, paired: bool = True,
          adaptive: int | None = None, stop_confidence: float = STOP_CONFIDENCE) -> dict[str, float]:
    """Share of each verdict over `trials` simulated comparisons (mean 100; see the module)."""
    rng = np.random.default_rng([seed, n, int(cv * 1e4), int(true_ratio * 1e4), int(round_cv * 1e4),
                                 adaptive or 0])
    centre = 100 * true_ratio if higher_is_better else 100 / true_ratio
    cap = max(n, adaptive or n)
    shared = rng.normal(0.0, round_cv, size=(trials, cap))
    base = 100 * np.exp(shared + rng.normal(0.0, cv, size=(trials, cap)))
    plat = centre * np.exp(shared + rng.normal(0.0, cv, size=(trials, cap)))
    rounds = list(range(cap))
    counts: Counter[str] = Counter()
    for p, b in zip(plat, base):
        k = n
        while k < cap:  # adaptive: stop once decided at the stricter stop_confidence
            r = rounds[:k] if paired else None
            if decide(p[:k], b[:k], higher_is_better, rounds=r, base_rounds=r,
                      confidence=stop_confidence).verdict != "inconclusive":
                break
            k += 1
        r = rounds[:k] if paired else None
        counts[decide(p[:k], b[:k], higher_is_better, rounds=r, base_rounds=r).verdict] += 1
    return {v: counts.get(v, 0) / trials for v in VERDICTS}


def table(cvs: Sequence[float], ns: Sequence[int], trials: int, **kw: float | int | bool | None
          ) -> list[tuple[int, float, dict[str, float], dict[str, float]]]:
    return [(n, cv, rates(1.0, cv, n, trials, **kw), rates(0.95, cv, n, trials, **kw))  # type: ignore[arg-type]
            for n in ns for cv in cvs]


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--trials", type=int, default=20000)
    args = ap.parse_args()
    print("| rule | repetitions | round effect CV | CV per sample | A/A: slower | A/A: same | "
          "5 % cost: slower | 5 % cost: inconclusive |")
    print("|---|---|---|---|---|---|---|---|")
    setups: list[tuple[str, str, dict[str, float | int | bool | None], Sequence[float], Sequence[int]]] = [
        ("unpaired", "", {"paired": False}, (0.01, 0.02), (3, 5)),
        ("paired", "", {}, (0.005, 0.01, 0.02), (3, 5)),
        ("unpaired", "", {"paired": False, "round_cv": 0.03}, (0.01,), (5,)),
        ("paired", "", {"round_cv": 0.03}, (0.01,), (5,)),
        ("paired", " + adaptive to 12", {"adaptive": 12}, (0.005, 0.01, 0.02, 0.03, 0.05), (5,)),
        ("paired", " + adaptive to 12", {"round_cv": 0.03, "adaptive": 12}, (0.01, 0.03), (5,)),
    ]
    for rule, extra, kw, cvs, ns in setups:
        for n, cv, aa, cost in table(cvs, ns, args.trials, **kw):
            print(f"| {rule} | {n}{extra} | {float(kw.get('round_cv') or 0):.0%} | {cv:.1%} | {aa['slower']:.1%} | "
                  f"{aa['same']:.1%} | {cost['slower']:.1%} | {cost['inconclusive']:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

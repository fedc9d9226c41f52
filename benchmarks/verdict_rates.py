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
stop counts (so the error rates include stopping on a decision). `outliers` adds heavy tails
as measured under load: that share of the values is 10-40 % slower (a disturbed run). A true
2 % cost (the margin of "same") shows how often the equivalence verdict is wrong.

    .venv/bin/python benchmarks/verdict_rates.py [--trials 20000]
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence

import numpy as np

from virtbench.analysis.verdict import decide
from virtbench.experiments.benchmarks.adaptive import STOP_CONFIDENCE, STOP_EQUIVALENCE
from virtbench.experiments.benchmarks.quick import ADAPTIVE, REPETITIONS

VERDICTS = ("slower", "faster", "same", "inconclusive")


def rates(true_ratio: float, cv: float, n: int, trials: int, seed: int = 0,
          higher_is_better: bool = True, *, round_cv: float = 0.0, paired: bool = True,
          adaptive: int | None = None, stop_confidence: float = STOP_CONFIDENCE,
          stop_equivalence: float = STOP_EQUIVALENCE, outliers: float = 0.0) -> dict[str, float]:
    """Share of each verdict over `trials` simulated comparisons (mean 100; see the module)."""
    rng = np.random.default_rng([seed, n, int(cv * 1e4), int(true_ratio * 1e4), int(round_cv * 1e4),
                                 adaptive or 0])
    centre = 100 * true_ratio if higher_is_better else 100 / true_ratio
    cap = max(n, adaptive or n)
    shared = rng.normal(0.0, round_cv, size=(trials, cap))
    base = 100 * np.exp(shared + rng.normal(0.0, cv, size=(trials, cap)) + _spikes(rng, outliers, (trials, cap)))
    plat = centre * np.exp(shared + rng.normal(0.0, cv, size=(trials, cap)) + _spikes(rng, outliers, (trials, cap)))
    rounds = list(range(cap))
    counts: Counter[str] = Counter()
    for p, b in zip(plat, base):
        k = n
        while k < cap:  # adaptive: stop once decided at the stricter stop_confidence
            r = rounds[:k] if paired else None
            if decide(p[:k], b[:k], higher_is_better, rounds=r, base_rounds=r,
                      confidence=stop_confidence, equivalence=stop_equivalence).verdict != "inconclusive":
                break
            k += 1
        r = rounds[:k] if paired else None
        counts[decide(p[:k], b[:k], higher_is_better, rounds=r, base_rounds=r).verdict] += 1
    return {v: counts.get(v, 0) / trials for v in VERDICTS}


def _spikes(rng: np.random.Generator, share: float, shape: tuple[int, int]) -> np.ndarray:
    """Heavy tails as measured under load: a share of the values 10-40 % slower (a disturbed run)."""
    if not share:
        return np.zeros(shape)
    return (rng.random(shape) < share) * rng.uniform(np.log(1.1), np.log(1.4), shape)


def table(cvs: Sequence[float], ns: Sequence[int], trials: int, **kw: float | int | bool | None
          ) -> list[tuple[int, float, dict[str, float], dict[str, float], dict[str, float]]]:
    """(n, cv, A/A rates, rates at a true 5 % cost, rates at a true 2 % cost: the margin of 'same')."""
    return [(n, cv, rates(1.0, cv, n, trials, **kw), rates(0.95, cv, n, trials, **kw),  # type: ignore[arg-type]
             rates(0.98, cv, n, trials, **kw))  # type: ignore[arg-type]
            for n in ns for cv in cvs]


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--trials", type=int, default=20000)
    args = ap.parse_args()
    cap = int(ADAPTIVE["max_repetitions"])
    print("| rule | rounds | round effect | noise per sample | disturbed runs | identical called slower | "
          "identical called the same | a true 5 % cost called slower | a true 2 % cost called the same |")
    print("|---|---|---|---|---|---|---|---|---|")
    quick = f"paired, adaptive to {cap} (quick)"
    setups: list[tuple[str, dict[str, float | int | bool | None], Sequence[float], Sequence[int]]] = [
        ("unpaired", {"paired": False}, (0.01, 0.02), (3, 5)),
        ("paired", {}, (0.01, 0.02), (5,)),
        ("unpaired", {"paired": False, "round_cv": 0.03}, (0.01,), (5,)),
        ("paired", {"round_cv": 0.03}, (0.01,), (5,)),
        (quick, {"adaptive": cap}, (0.005, 0.01, 0.02, 0.03, 0.05), (REPETITIONS,)),
        (quick, {"round_cv": 0.03, "adaptive": cap}, (0.01, 0.03), (REPETITIONS,)),
        (quick, {"outliers": 0.15, "adaptive": cap}, (0.01, 0.03), (REPETITIONS,)),
    ]
    for rule, kw, cvs, ns in setups:
        for n, cv, aa, cost, margin in table(cvs, ns, args.trials, **kw):
            rounds = f"{n}-{cap}" if kw.get("adaptive") else str(n)
            spikes = f"{float(kw.get('outliers') or 0):.0%}, +10-40 %" if kw.get("outliers") else "-"
            print(f"| {rule} | {rounds} | {float(kw.get('round_cv') or 0):.0%} | {cv:.1%} | {spikes} | "
                  f"{aa['slower']:.1%} | {aa['same']:.1%} | {cost['slower']:.1%} | {margin['same']:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

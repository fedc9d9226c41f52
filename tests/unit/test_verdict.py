"""The verdict rule against synthetic data with known truth (figures for the README come from
benchmarks/verdict_rates.py with more trials)."""
import sys
from pathlib import Path

import pytest

from virtbench.analysis.verdict import decide, log_ratio_interval, repetitions_needed

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from verdict_rates import rates  # noqa: E402

TRIALS = 2000


def test_aa_false_slower_rate_at_most_5_percent_at_3_repetitions():
    for cv in (0.01, 0.03):
        aa = rates(1.0, cv, 3, TRIALS)
        assert aa["slower"] <= 0.05 and aa["faster"] <= 0.05, (cv, aa)


def test_a_true_5_percent_cost_is_called_slower_90_percent_of_the_time_at_3_repetitions():
    """At 1 % noise per sample (the quick benchmarks' stable settings), both directions of metric."""
    assert rates(0.95, 0.01, 3, TRIALS)["slower"] >= 0.90
    assert rates(0.95, 0.01, 3, TRIALS, higher_is_better=False)["slower"] >= 0.90
    assert rates(0.95, 0.01, 3, TRIALS)["faster"] == 0.0


def test_verdicts_carry_their_number():
    base = [100.0, 100.5, 99.5]
    slow = decide([90.0, 90.4, 89.6], base, True)
    assert slow.verdict == "slower" and slow.reason.startswith("slower by 10.0 % [")
    assert slow.ci[1] < 1
    fast = decide([1.0, 1.01, 0.99], [1.2, 1.21, 1.19], False)  # lower is better: less time is faster
    assert fast.verdict == "faster" and fast.reason.startswith("faster by 20.0 %")
    same = decide([100.1, 100.3, 99.9], base, True)
    assert same.verdict == "same" and same.reason.startswith("same within +-2%")


def test_inconclusive_says_the_noise_and_what_would_decide():
    base = [100.0, 91.0, 109.0]
    v = decide([97.0, 88.0, 106.0], base, True)
    assert v.verdict == "inconclusive"
    assert "noise +-" in v.reason and ("needs about" in v.reason or "more than" in v.reason)
    assert v.needed is None or v.needed > 3
    # The advice holds: at that many repetitions and the same spread, the interval is narrow enough.
    n = repetitions_needed([100.0, 101.0, 99.0], [100.0, 101.0, 99.0], 0.01)
    assert n is not None and n > 3


def test_interval_is_exact_without_noise_and_undefined_without_two_values():
    assert log_ratio_interval([2.0, 2.0], [1.0, 1.0], True)[:3] == pytest.approx((2.0, 2.0, 2.0))
    assert log_ratio_interval([2.0], [1.0, 1.0], True) is None
    assert decide([0.0, 0.0], [1.0, 1.0], True).verdict == "inconclusive"

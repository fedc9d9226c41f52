"""The verdict rule against synthetic data with known truth (figures for the README come from
benchmarks/verdict_rates.py with more trials)."""
import math
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


def test_a_true_5_percent_cost_is_called_slower_90_percent_of_the_time_at_3_repetitions_unpaired():
    """At 1 % noise per sample, both directions of metric, when the rounds are unknown (Welch)."""
    assert rates(0.95, 0.01, 3, TRIALS, paired=False)["slower"] >= 0.90
    assert rates(0.95, 0.01, 3, TRIALS, higher_is_better=False, paired=False)["slower"] >= 0.90
    assert rates(0.95, 0.01, 3, TRIALS, paired=False)["faster"] == 0.0


def test_quick_settings_paired_with_adaptive_rounds_keep_both_error_rates():
    """The quick campaign: 5 rounds paired, extra rounds up to 12 while undecided (stopping at
    99 %, deciding at 95 %), with load drifting 3 % from round to round and 3 % noise per sample."""
    aa = rates(1.0, 0.03, 5, 1000, round_cv=0.03, adaptive=12)
    assert aa["slower"] <= 0.05 and aa["faster"] <= 0.05, aa
    cost = rates(0.95, 0.03, 5, 1000, round_cv=0.03, adaptive=12, higher_is_better=False)
    assert cost["slower"] >= 0.90 and cost["faster"] == 0.0, cost


def test_pairing_by_round_cancels_load_that_moves_both_sides_of_a_round():
    """Rounds 10 % apart (load drift), 0.3 % noise within a round: unpaired the drift is noise,
    paired the platform is the same as the baseline."""
    drift = [1.00, 1.10, 0.95, 1.05, 0.90]
    base = [100 * d for d in drift]
    plat = [p * d for p, d in zip([100.3, 99.8, 100.1, 99.9, 100.2], drift)]
    assert decide(plat, base, True).verdict == "inconclusive"
    paired = decide(plat, base, True, rounds=[1, 2, 3, 4, 5], base_rounds=[1, 2, 3, 4, 5])
    assert paired.verdict == "same" and "5 rounds paired" in paired.reason
    slow = decide([0.95 * p for p in plat], base, True, rounds=[1, 2, 3, 4, 5], base_rounds=[1, 2, 3, 4, 5])
    assert slow.verdict == "slower" and slow.reason.startswith("slower by 4.9 % [")


def test_pairs_only_common_rounds_and_falls_back_to_welch_below_three():
    base, plat = [100.0, 101.0, 99.0, 100.5], [90.0, 91.0, 89.0, 90.5]
    # the platform's round 4 failed: three common rounds still pair
    v = decide(plat[:3], base, True, rounds=[1, 2, 3], base_rounds=[1, 2, 3, 4])
    assert v.verdict == "slower" and "3 rounds paired" in v.reason
    # two common rounds: unpaired, without the word
    v = decide(plat[:2] + [89.0], base[:3], True, rounds=[1, 2, 7], base_rounds=[1, 2, 3])
    assert v.verdict == "slower" and "paired" not in v.reason
    # rounds that do not match the values are ignored, never misaligned
    assert "paired" not in decide(plat, base, True, rounds=[1, 2], base_rounds=[1, 2, 3, 4]).reason


def test_several_values_of_one_round_count_once_as_their_mean():
    from virtbench.analysis.verdict import paired_log_ratios
    logs = paired_log_ratios([2.0, 4.0, 3.0, 3.0], [1, 1, 2, 3], [1.0, 1.0, 1.0], [1, 2, 3], True)
    assert logs == pytest.approx([math.log(3.0)] * 3)


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

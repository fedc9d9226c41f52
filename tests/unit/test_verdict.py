"""The verdict rule against synthetic data with known truth (figures for the README come from
benchmarks/verdict_rates.py with more trials)."""
import math
import sys
from pathlib import Path

import pytest

from virtbench.analysis.verdict import decide, log_ratio_interval, repetitions_needed

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from verdict_rates import rates  # noqa: E402
from virtbench.experiments.benchmarks.quick import ADAPTIVE, REPETITIONS  # noqa: E402

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
    """The quick campaign: 5 rounds paired, extra rounds up to its cap while undecided (stopping
    at 99 % / 95 %, deciding at 95 % / 90 %), with load drifting 3 % from round to round and 3 %
    noise per sample; with heavy tails (15 % of the runs disturbed, 10-40 % slower) the false
    'slower' stays bounded too (its power falls: why the quick benchmarks report medians)."""
    cap = ADAPTIVE["max_repetitions"]
    aa = rates(1.0, 0.03, REPETITIONS, 1000, adaptive=cap, round_cv=0.03)
    assert aa["slower"] <= 0.05 and aa["faster"] <= 0.05, aa
    cost = rates(0.95, 0.03, REPETITIONS, 1000, adaptive=cap, round_cv=0.03, higher_is_better=False)
    assert cost["slower"] >= 0.90 and cost["faster"] == 0.0, cost
    heavy = rates(1.0, 0.03, REPETITIONS, 1000, adaptive=cap, outliers=0.15)
    assert heavy["slower"] <= 0.05 and heavy["faster"] <= 0.05, heavy


def test_quick_settings_decide_identical_platforms_the_same_at_one_percent_noise():
    """What the quick benchmarks' settings must reach: at 1 % noise per sample nearly every
    A/A comparison ends 'same' within the cap, and a true 2 % cost (the margin) is called the
    same rarely despite the repeated looks."""
    cap = ADAPTIVE["max_repetitions"]
    aa = rates(1.0, 0.01, REPETITIONS, 1000, adaptive=cap)
    assert aa["same"] >= 0.95, aa
    assert rates(0.98, 0.02, REPETITIONS, 1000, adaptive=cap)["same"] <= 0.10


def test_same_is_read_from_the_90_percent_interval_tost():
    """Noise where the 95 % interval pokes out of +-2 % and the 90 % one (TOST at 5 % each) fits."""
    base = [100.0, 100.0, 100.0, 100.0, 100.0, 100.0]
    plat = [102.1, 97.9, 102.0, 98.0, 102.2, 97.8]
    r = list(range(6))
    v = decide(plat, base, True, rounds=r, base_rounds=r)
    assert v.verdict == "same" and "90 % interval, 6 rounds paired" in v.reason
    assert v.ci[0] < 1 / 1.02  # the reported 95 % interval is wider than the margin
    assert decide(plat, base, True, rounds=r, base_rounds=r, equivalence=0.95).verdict == "inconclusive"


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


def test_an_effect_inside_the_margin_but_off_1_is_forecast_as_the_difference_it_will_be_shown():
    """-1.5 % against +-2 %: its interval leaves 1 long before it fits inside the margin. The
    forecast asked only for the equivalence (about 60 rounds here), so the adaptive rule left such
    cells without rounds as out of reach (#38's quick pod campaign: 4 of 25 cells)."""
    steps = [0.985 * (1 + d) for d in (0.02, -0.02, 0.015, -0.015, 0.01, -0.01)]
    base = [100.0] * 6
    values = [100.0 * s for s in steps]
    v = decide(values, base, True, min_effect=0.02, rounds=list(range(6)), base_rounds=list(range(6)))
    assert v.verdict == "inconclusive" and v.needed is not None and v.needed <= 12, v
    more = decide(values * 2, base * 2, True, min_effect=0.02, rounds=list(range(12)), base_rounds=list(range(12)))
    assert more.verdict == "slower", more  # what the forecast said would decide it did

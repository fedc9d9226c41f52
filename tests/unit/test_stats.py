"""analysis.stats against scipy and hand-computed values, including degenerate inputs."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sst

from virtbench.analysis import stats as st


@pytest.fixture
def sample():
    return np.random.default_rng(7).normal(100, 5, 25)


def test_resampled_medians_are_the_medians_of_the_resamples():
    """The count-matrix shortcut equals np.median of each resample rebuilt from its counts."""
    for n in (1, 2, 5, 6, 9, 10):
        values = np.random.default_rng(n).integers(0, 4, n).astype(float) + np.arange(n) % 2 * 0.5  # ties
        means, medians = st.resampled(values, resamples=300, seed=3)
        counts, _, _ = st._counts(n, 0, 300, 3)
        s = np.sort(values)
        for b in range(0, 300, 37):
            rebuilt = np.repeat(s, counts[b].astype(int))
            assert rebuilt.size == n
            assert medians[b] == pytest.approx(np.median(rebuilt))
            assert means[b] == pytest.approx(rebuilt.mean())


def test_resampling_is_reproducible_and_streams_independent(sample):
    a = st.resampled(sample)[0]
    assert np.array_equal(a, st.resampled(sample)[0])
    b = st.resampled(sample, stream=1)[0]
    assert not np.array_equal(a, b)
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.1


def test_mean_and_median_ci_match_scipy_bootstrap(sample):
    """Percentile intervals within Monte-Carlo error of scipy.stats.bootstrap's."""
    for fn, stat in ((st.mean_ci_boot, np.mean), (st.median_ci, np.median)):
        ours = fn(sample)
        ref = sst.bootstrap((sample,), stat, n_resamples=20000, method="percentile", random_state=1).confidence_interval
        width = ref.high - ref.low
        assert ours[0] == pytest.approx(ref.low, abs=0.12 * width)
        assert ours[1] == pytest.approx(ref.high, abs=0.12 * width)


def test_ratio_ci_matches_scipy_two_sample_bootstrap():
    rng = np.random.default_rng(11)
    x, y = rng.normal(90, 4, 20), rng.normal(100, 4, 15)
    ours = st.ratio_ci(x, y, higher_is_better=True)
    ref = sst.bootstrap((x, y), lambda a, b, axis=-1: np.mean(a, axis=axis) / np.mean(b, axis=axis),
                        n_resamples=20000, method="percentile", paired=False, random_state=2).confidence_interval
    width = ref.high - ref.low
    assert ours[0] == pytest.approx(ref.low, abs=0.12 * width) and ours[1] == pytest.approx(ref.high, abs=0.12 * width)
    lo, hi = st.ratio_ci(1 / x, 1 / y, higher_is_better=False)  # times instead of rates: still below 1
    assert lo < np.mean(1 / y) / np.mean(1 / x) < hi < 1.0


def test_chunked_path_for_large_samples_agrees(monkeypatch, sample):
    big = np.random.default_rng(5).normal(50, 2, 400)
    cached = st.mean_ci_boot(big)
    monkeypatch.setattr(st, "CACHE_LIMIT", 10_000)
    chunked = st.mean_ci_boot(big)
    assert chunked == pytest.approx(cached, rel=2e-3)
    assert st.median_ci(big) == pytest.approx(st.median_ci(big), rel=0)


def test_degenerate_inputs():
    assert st.mean_ci_boot([5.0]) is None and st.median_ci([5.0]) is None
    assert st.ratio_ci([1.0], [1.0, 2.0], True) is None
    assert st.mean_ci_boot([3.0, 3.0, 3.0]) == [3.0, 3.0]
    assert st.median_ci([3.0, 3.0]) == [3.0, 3.0]
    assert st.ratio_ci([2.0, 2.0], [4.0, 4.0], True) == [0.5, 0.5]
    assert st.ratio_ci([0.0, 0.0], [1.0, 1.0], False) is None  # division by zero everywhere
    assert st.cv([1.0]) is None and st.cv([0.0, 0.0]) is None
    with pytest.raises(ValueError):
        st.resampled([])


def test_rank_test_matches_scipy_and_hand_values():
    x, y = [1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0]
    t = st.rank_test(x, y)
    assert t.p == pytest.approx(2 / math.comb(10, 5))  # exact: 2/252
    assert t.effect == -1.0  # every value below every baseline value
    assert st.rank_test(y, x).effect == 1.0
    rng = np.random.default_rng(3)
    a, b = rng.normal(0, 1, 30), rng.normal(0.5, 1, 30)
    assert st.rank_test(a, b).p == pytest.approx(sst.mannwhitneyu(a, b, alternative="two-sided").pvalue)
    # U = 4.5 of 9 pairs with every value tied: effect 0
    assert st.rank_test([1.0, 1.0, 1.0], [1.0, 1.0, 1.0]) == st.RankTest(1.0, 0.0)
    assert st.rank_test([1.0], [2.0]).p == 1.0
    assert st.rank_test([], [1.0]) is None


def test_min_attainable_p():
    assert st.min_attainable_p(5, 5) == pytest.approx(2 / 252)
    assert st.min_attainable_p(3, 3) == pytest.approx(0.1)
    assert st.min_attainable_p(1, 1) == 1.0
    assert st.min_attainable_p(0, 4) == 1.0


def test_holm_against_a_hand_example():
    # sorted 0.005 0.01 0.03 0.04 -> x4 x3 x2 x1 = 0.02 0.03 0.06 0.04 -> monotone 0.02 0.03 0.06 0.06
    assert st.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert st.holm([0.5, None, float("nan"), 0.01]) == [pytest.approx(0.5), None, None, pytest.approx(0.02)]
    assert st.holm([0.9, 0.8]) == [1.0, 1.0]  # capped at 1 (0.8 x 2 = 1.6)
    assert st.holm([]) == []
    assert st.holm([0.02]) == [0.02]


def test_holm_decisions_equal_the_step_down_procedure():
    """Adjusted p < alpha rejects exactly the hypotheses Holm's step-down procedure rejects."""
    rng = np.random.default_rng(9)
    for _ in range(200):
        p = list(rng.uniform(0, 0.08, rng.integers(1, 12)))
        alpha, m = 0.05, len(p)
        rejected = set()
        for k, i in enumerate(sorted(range(m), key=p.__getitem__)):
            if p[i] > alpha / (m - k):
                break
            rejected.add(i)
        assert {i for i, a in enumerate(st.holm(p)) if a <= alpha} == rejected


def test_verdict():
    assert st.verdict(0.8, 0.01) == "worse"
    assert st.verdict(1.2, 0.01) == "better"
    assert st.verdict(0.99, 0.01) == "negligible"
    assert st.verdict(0.99, 0.01, min_effect=0.0) == "worse"
    assert st.verdict(0.5, 0.2) == "not significant"
    assert st.verdict(None, None) == "no data"


def test_precision_and_needs_more():
    base = [100.0, 101.0, 99.0, 100.5, 99.5]
    assert st.precision([100.0, 100.0], [100.0, 100.0], True) == 0.0
    assert st.precision([1.0], base, True) is None
    p = st.precision([90.0, 91.0, 89.0, 90.5, 89.5], base, True)
    assert 0 < p < 0.02
    noisy = list(np.random.default_rng(1).normal(90, 9, 5))
    assert st.precision(noisy, base, True) > p
    assert st.needs_more([90.0], base, True).more  # too few
    assert "fewer than 3" in st.needs_more([90.0], base, True).reason
    assert not st.needs_more([90.0, 91.0, 89.0, 90.5, 89.5], base, True, target=0.05)
    need = st.needs_more(noisy, base, True, target=0.01)
    assert need and need.precision > 0.01 and "wider than" in need.reason
    capped = st.needs_more(noisy * 6, base, True, target=0.0001, max_n=30)
    assert not capped and "cap" in capped.reason
    assert not st.needs_more([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], True)  # undefined ratio: do not loop forever


def test_batched_resampling_equals_one_by_one(monkeypatch):
    rng = np.random.default_rng(4)
    samples = [list(rng.normal(10, 1, n)) for n in (5, 5, 5, 8, 1)] + [[], [3.0, 3.0, 3.0, 3.0, 3.0]]
    batched = st.resampled_many(samples)
    for values, got in zip(samples, batched):
        if not values:
            assert got is None
            continue
        want = st.resampled(values)
        assert np.allclose(got[0], want[0], rtol=1e-12) and np.array_equal(got[1], want[1])
    monkeypatch.setattr(st, "CACHE_LIMIT", 10)  # every sample through the chunked path
    assert np.allclose(st.resampled_many(samples[:2])[1][0], st.resampled(samples[1])[0])


def test_batched_rank_tests_equal_one_call_per_pair():
    """Grouping by ties keeps scipy's method choice (exact/asymptotic) what each pair alone gets."""
    rng = np.random.default_rng(8)
    base = list(rng.normal(10, 1, 6))
    pairs = [(list(rng.normal(10.5, 1, 6)), base) for _ in range(5)]
    pairs += [([10.0, 10.0, 11.0, 12.0, 9.0, 9.5], base), ([1.0, 2.0], base)]  # ties / other size
    big = list(rng.normal(0, 1, 30))
    pairs += [(list(rng.normal(0.3, 1, 30)), big) for _ in range(4)] + [([], base), ([5.0] * 3, [5.0] * 4)]
    for (x, y), got in zip(pairs, st.rank_tests(pairs)):
        if not x:
            assert got is None
            continue
        if np.ptp(x + y) == 0:
            assert got == st.RankTest(1.0, 0.0)
            continue
        ref = sst.mannwhitneyu(x, y, alternative="two-sided")
        assert got.p == pytest.approx(ref.pvalue, rel=1e-12)
        assert got.effect == pytest.approx(2 * ref.statistic / (len(x) * len(y)) - 1)


def test_percentile_cis_equal_one_by_one():
    rng = np.random.default_rng(6)
    dists = [rng.normal(0, 1, 500), None, rng.normal(5, 2, 500), np.r_[rng.normal(0, 1, 499), np.inf]]
    for d, got in zip(dists, st.percentile_cis(dists)):
        assert got == (None if d is None else pytest.approx(st.percentile_ci(d, 0.95)))


def test_median_from_one_sort_is_numpys_float():
    """stats.median (a report row's median) gives float(np.median(...)) exactly: odd and even
    sizes, ties, huge and tiny values, nan anywhere gives nan."""
    import math

    import numpy as np

    from virtbench.analysis import stats as st

    rng = np.random.default_rng(7)
    for n in [1, 2, 3, 4, 5, 10, 44, 219, 220, 435]:
        for scale in (1.0, 1e-300, 1e300, -3.0):
            a = rng.lognormal(3, 1, n) * scale
            assert st.median(a) == float(np.median(a))
            r = np.round(a, 0)
            assert st.median(r) == float(np.median(r))
    assert math.isnan(st.median(np.array([1.0, np.nan, 2.0]))) and math.isnan(st.median(np.array([])))

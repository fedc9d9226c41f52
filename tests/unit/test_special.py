"""analysis.special computes what scipy computes (the reference), without importing scipy.stats."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy import special as ssp
from scipy import stats as sst

from virtbench.analysis import quality, special, stats


@pytest.mark.parametrize("df", [1, 1.5, 2, 2.7, 3, 4, 5, 7.3, 11, 29, 30.5, 99, 250, 1e4, 1e7])
@pytest.mark.parametrize("q", [0.5, 0.6, 0.9, 0.95, 0.975, 0.995, 0.9995, 0.025, 0.005])
def test_t_quantile_is_scipys(q: float, df: float) -> None:
    assert special.t_ppf(q, df) == pytest.approx(float(sst.t.ppf(q, df)), rel=1e-11, abs=1e-13)
    assert stats.t_quantile(q, df) == pytest.approx(float(ssp.stdtrit(df, q)), rel=1e-11, abs=1e-13)


@pytest.mark.parametrize("a,b", [(0.5, 0.5), (1, 1), (2.5, 0.5), (0.5, 40), (3, 3), (50, 50), (400, 0.5)])
def test_betainc_and_t_sf_are_scipys(a: float, b: float) -> None:
    for x in np.linspace(0, 1, 23):
        assert special.betainc(a, b, float(x)) == pytest.approx(float(ssp.betainc(a, b, x)), rel=1e-12, abs=1e-15)
    for t in (-30.0, -2.0, -0.1, 0.0, 0.3, 1.96, 4.0, 60.0):
        assert special.t_sf(t, 2 * a) == pytest.approx(float(sst.t.sf(t, 2 * a)), rel=1e-11, abs=1e-15)


def _pairs(rng: np.random.Generator) -> list[tuple[list[float], list[float]]]:
    """Sizes on both sides of scipy's exact/asymptotic switch, with and without ties."""
    out = []
    for n1, n2 in [(3, 3), (3, 5), (8, 8), (2, 30), (9, 9), (5, 40), (40, 40), (12, 7), (1, 6)]:
        for shift in (0.0, 0.4, 3.0):
            out.append((list(rng.normal(shift, 1, n1)), list(rng.normal(0, 1, n2))))
            out.append((list(np.round(rng.normal(shift, 1, n1))), list(np.round(rng.normal(0, 1, n2)))))
    return out


def test_rank_tests_are_scipys_mannwhitneyu() -> None:
    rng = np.random.default_rng(7)
    pairs = _pairs(rng)
    got = stats.rank_tests(pairs)
    for (x, y), test in zip(pairs, got):
        ref = sst.mannwhitneyu(x, y, alternative="two-sided")
        assert test is not None
        assert test.p == pytest.approx(float(ref.pvalue), rel=1e-10, abs=1e-15), (len(x), len(y))
        assert test.effect == pytest.approx(2 * float(ref.statistic) / (len(x) * len(y)) - 1, abs=1e-12)


def test_batched_u_test_chooses_the_method_for_the_batch_like_scipy() -> None:
    rng = np.random.default_rng(3)
    xs = rng.normal(0, 1, (6, 5))
    xs[2, 1] = xs[2, 0]  # a tie in one row: scipy then uses the normal approximation for the whole batch
    y = rng.normal(0.5, 1, 6)
    u, p = special.mannwhitneyu(xs, y)
    ref = sst.mannwhitneyu(xs, y[None, :], alternative="two-sided", axis=1)
    np.testing.assert_allclose(u, ref.statistic, rtol=1e-12)
    np.testing.assert_allclose(p, ref.pvalue, rtol=1e-10)


def test_exact_distribution_of_larger_unequal_samples() -> None:
    rng = np.random.default_rng(11)
    x, y = rng.normal(0, 1, 8), rng.normal(0.3, 1, 300)
    _, p = special.mannwhitneyu(x[None, :], y)
    assert p[0] == pytest.approx(float(sst.mannwhitneyu(x, y, method="exact").pvalue), rel=1e-9)


def test_drift_p_is_spearmans() -> None:
    rng = np.random.default_rng(5)
    for n in (5, 6, 9, 30, 200):
        rounds = list(range(n))
        values = list(np.arange(n) * 0.02 + rng.normal(0, 1, n))
        rho, p = sst.spearmanr(rounds, values)
        ranks_r, _ = special.rankdata(np.asarray([rounds], dtype=float))
        ranks_v, _ = special.rankdata(np.asarray([values], dtype=float))
        np.testing.assert_allclose(ranks_v[0], sst.rankdata(values))
        r = np.corrcoef(ranks_r[0], ranks_v[0])[0, 1]
        assert r == pytest.approx(rho, rel=1e-12)
        assert special.pearson_p(np.array([r]), n)[0] == pytest.approx(p, rel=1e-9, abs=1e-15)
    trend = [1.0 + 0.1 * i + 0.01 * (i % 3) for i in range(12)]
    flag = quality.drift(trend, list(range(12)))
    assert flag is not None and flag.value == pytest.approx(sst.spearmanr(range(12), trend).statistic)


def test_report_statistics_do_not_import_scipy() -> None:
    """The point of the module: computing a report's statistics leaves scipy unimported."""
    code = ("import sys, random\nfrom virtbench.analysis import summary\nrandom.seed(1)\n"
            "s = [('b', 'm', p, random.gauss(10 + i, 1), 's', False, 'cpu', r, False) "
            "for i, p in enumerate(['native', 'docker']) for r in range(12)]\n"
            "rows = summary.summarize(s, {}, ['native', 'docker'], 'native')\n"
            "assert rows[1].p_value is not None and rows[1].verdict and rows[1].relative_ci95\n"
            "print(sorted(m for m in sys.modules if m.startswith('scipy')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_per_round_means_are_the_plain_python_ones() -> None:
    """verdict.per_round in numpy gives exactly the floats of a per-round sum()/len()."""
    from virtbench.analysis import verdict

    rng = np.random.default_rng(2)
    values = list(rng.lognormal(3, 1, 500))
    rounds = [int(r) for r in rng.integers(0, 120, 500)]
    ref: dict[int, list[float]] = {}
    for r, v in zip(rounds, values):
        ref.setdefault(r, []).append(v)
    assert verdict.per_round(values, rounds) == {r: sum(vs) / len(vs) for r, vs in ref.items()}
    assert verdict.per_round([], []) == {}
    one_each = list(range(50))
    assert verdict.per_round(values[:50], one_each) == dict(zip(one_each, values[:50]))


def test_rankdata_with_ties_is_scipys() -> None:
    rng = np.random.default_rng(9)
    a = np.round(rng.normal(0, 2, (7, 25)))
    ranks, sizes = special.rankdata(a)
    np.testing.assert_array_equal(ranks, sst.rankdata(a, axis=1))
    for row, sz in zip(a, sizes):
        _, counts = np.unique(row, return_counts=True)
        assert sorted(sz.tolist()) == sorted(c for c in counts for _ in range(c))

"""Statistics against values computed by hand or by scipy directly."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from virtbench.analysis.summary import SampleView, mean_ci, relative, summarize
from virtbench.analysis.verdict import log_ratio_interval


def sv(platform, value, metric="rate", hib=True):
    return SampleView("b", metric, platform, value, "op/s", hib, "cpu")


def test_mean_ci_matches_scipy():
    values = [10.0, 12.0, 11.0, 13.0, 9.0]
    lo, hi = mean_ci(values)
    ref = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
    assert lo == pytest.approx(ref[0]) and hi == pytest.approx(ref[1])


def test_degenerate_inputs():
    assert mean_ci([5.0]) is None
    assert mean_ci([3.0, 3.0, 3.0]) == [3.0, 3.0]
    assert log_ratio_interval([1.0], [1.0, 2.0], True) is None


def test_relative_is_direction_aware():
    assert relative(50.0, 100.0, higher_is_better=True) == 0.5
    assert relative(2.0, 1.0, higher_is_better=False) == 0.5   # twice the time = half the performance


def test_the_unpaired_interval_brackets_the_ratio_of_means():
    rng = np.random.default_rng(1)
    base = rng.normal(100, 2, 30)
    slow = rng.normal(80, 2, 30)
    r_, lo, hi, _ = log_ratio_interval(slow, base, True)
    r = slow.mean() / base.mean()
    assert r_ == pytest.approx(r)
    assert lo < r < hi and hi - lo < 0.05


def test_summarize_rows_failures_and_missing_platforms():
    samples = [sv("native", v) for v in (100, 102, 98)] + [sv("docker", v) for v in (90, 92, 88)]
    rows = summarize(samples, {("podman", "b"): 3}, ["native", "docker", "podman"], "native",
                     {"b": [("rate", "op/s", True, "cpu")]})
    by = {r.platform: r for r in rows}
    assert by["native"].relative == 1.0 and by["native"].relative_ci95 == [1.0, 1.0]
    assert by["docker"].relative == pytest.approx(90 / 100)
    assert by["docker"].n == 3 and by["docker"].stdev == pytest.approx(2.0)
    assert by["podman"].n == 0 and by["podman"].failed == 3 and by["podman"].mean is None


def test_lifecycle_has_no_relative():
    samples = [SampleView("lifecycle", "create_s", p, v, "s", False, "lifecycle")
               for p, v in (("native", 0.01), ("native", 0.02), ("docker", 0.1), ("docker", 0.2))]
    rows = summarize(samples, {}, ["native", "docker"], "native")
    assert all(r.relative is None for r in rows)
    assert math.isclose(rows[0].mean, 0.15) or math.isclose(rows[1].mean, 0.15)

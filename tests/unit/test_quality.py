"""Quality checks: drift, outliers, warm-up effect, variation, host conditions."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sst

from virtbench.analysis import quality as q


def test_drift_found_in_a_trend_and_not_in_noise():
    rounds = list(range(1, 13))
    rising = [100 + 0.8 * r + n for r, n in zip(rounds, np.random.default_rng(1).normal(0, 0.3, 12))]
    flag = q.drift(rising, rounds)
    assert flag and flag.check == "drift" and "rise" in flag.message
    assert flag.value == pytest.approx(sst.spearmanr(rounds, rising).statistic)
    assert q.drift(list(reversed(rising)), rounds).value < 0
    noise = list(np.random.default_rng(2).normal(100, 1, 12))
    assert q.drift(noise, rounds) is None


def test_drift_degenerate():
    assert q.drift([1.0, 2.0, 3.0, 4.0], [1, 2, 3, 4]) is None  # fewer than 5
    assert q.drift([5.0] * 8, list(range(8))) is None  # constant values
    assert q.drift([1.0, 2.0, 3.0, 4.0, 5.0], [3] * 5) is None  # one round


def test_outliers_by_mad():
    values = [10.0, 10.2, 9.9, 10.1, 9.8, 10.0, 30.0]
    flag = q.outliers(values, list(range(7)))
    assert flag and flag.value == 1.0 and "round 6" in flag.message
    mad = sst.median_abs_deviation(values, scale="normal")
    assert abs(30.0 - np.median(values)) / mad > q.OUTLIER_Z
    assert q.outliers([10.0, 10.2, 9.9, 10.1, 9.8]) is None
    assert q.outliers([1.0, 2.0]) is None


def test_outliers_with_zero_mad():
    assert q.outliers([5.0, 5.0, 5.0, 5.0, 9.0]).value == 1.0
    assert q.outliers([1000.0, 1000.0, 1000.0, 1001.0]) is None  # within 1% of the median
    assert q.outliers([7.0, 7.0, 7.0]) is None


def test_warmup_effect():
    measured = [100.0, 101.0, 99.0, 100.0]
    flag = q.warmup_effect([80.0], measured, higher_is_better=True)
    assert flag and "20% slower" in flag.message
    assert "faster" in q.warmup_effect([2.0], [2.5, 2.6, 2.4], higher_is_better=False).message
    assert q.warmup_effect([100.5], measured, True) is None  # inside the measured range
    assert q.warmup_effect([], measured, True) is None
    assert q.warmup_effect([80.0], [100.0], True) is None


def test_variation():
    assert q.variation([100.0, 101.0, 99.0]) is None
    flag = q.variation([100.0, 110.0, 90.0])
    assert flag and flag.value == pytest.approx(0.1) and flag.severity == "warn"
    assert q.variation([100.0, 110.0, 90.0], severity="info").severity == "info"
    assert q.variation([1.0]) is None and q.variation([0.0, 0.0]) is None


def test_check_values_order_and_lifecycle_leniency():
    flags = q.check_values([1.0, 1.5, 0.5, 1.0, 1.2], [1, 2, 3, 4, 5], [], False, "lifecycle")
    assert [f.check for f in flags] == ["variation"] and flags[0].severity == "info"


def test_host_conditions():
    quiet = {"cpus": 8, "loadavg": [0.1, 0.1, 0.1], "governor": "performance", "turbo": "off",
             "virtualization": {"vm": "none", "container": "none"}}
    assert q.host_conditions(quiet) == []
    busy = {**quiet, "loadavg": [2.5, 1, 1], "governor": "powersave", "turbo": "on",
            "virtualization": {"vm": "kvm", "container": "none"}}
    checks = {f.message.split()[0]: f.severity for f in q.host_conditions(busy)}
    messages = " ".join(f.message for f in q.host_conditions(busy))
    assert "load average 2.50" in messages and "powersave" in messages and "turbo" in messages
    assert "itself a VM (kvm)" in messages and "warn" in checks.values()
    unknown = q.host_conditions({**quiet, "governor": "unknown (no cpufreq)"})
    assert [f.severity for f in unknown] == ["info"]
    assert q.host_conditions({}) == []
    tcg = " ".join(f.message for f in q.host_conditions({**quiet, "virtualization": {"vm": "qemu"}}))
    assert "emulated machine (QEMU TCG" in tcg and "itself a VM" not in tcg  # an emulated board (#20)


def test_run_checks():
    assert q.run_checks({"warmups": 1, "shuffle": True}) == []
    checks = [f.check for f in q.run_checks({"warmups": 0, "shuffle": False})]
    assert checks == ["warmup", "order"]


def test_batched_checks_equal_scipy_one_by_one():
    rng = np.random.default_rng(12)
    items = []
    for k in range(12):
        n = (6, 6, 9)[k % 3]
        rounds = list(range(n))
        values = list(np.arange(n) * rng.uniform(-1, 1) + rng.normal(0, 1, n))
        if k == 4:
            values[2] = 80.0  # an outlier
        items.append((values, rounds))
    for (values, rounds), got in zip(items, q.drift_many(items)):
        ref = sst.spearmanr(rounds, values)
        want = q._drift_flag(float(ref.statistic), float(ref.pvalue))
        assert (got is None) == (want is None)
        if got:
            assert got.value == pytest.approx(want.value) and got.message == want.message
    for (values, _rounds), got in zip(items, q.outliers_many(items)):
        med, mad = np.median(values), sst.median_abs_deviation(values, scale="normal")
        count = int((np.abs(np.asarray(values) - med) / mad > q.OUTLIER_Z).sum())
        assert (got.value if got else 0) == count
    assert q.check_many([]) == []


def test_spreads_below_one_percent_are_neither_drift_nor_outliers():
    """openssl's CPU-time throughput in the quick run of 2026-11-25: every cell carried a flag."""
    native = [1.403e9, 1.419e9, 1.422e9, 1.415e9, 1.419e9]  # 1.403: 1.1 % off the median, z = 3.6
    assert q.outliers([1.423e9, 1.419e9, 1.422e9, 1.409e9, 1.419e9]) is None  # 0.7 % off: MAD-far, immaterial
    flagged = q.outliers(native)
    assert flagged is not None and flagged.value == 1.0
    rising = [1.420e9, 1.421e9, 1.423e9, 1.424e9, 1.425e9]  # rho = +1, 0.35 % in all
    assert q.drift(rising, [1, 2, 3, 4, 5]) is None
    assert q.drift([100.0, 101.0, 102.0, 103.0, 104.0], [1, 2, 3, 4, 5]) is not None

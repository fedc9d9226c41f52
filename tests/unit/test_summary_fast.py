"""The report's batched statistics give what the per-row reference functions give.

summarize() computes descriptive statistics once per row and per-round means in numpy; each
is checked here against the plain reference on synthetic data: mean_ci, stats.cv, and
verdict.decide on the same values, whose estimate, interval and p every row shows."""
from __future__ import annotations

import numpy as np
import pytest

from virtbench.analysis import stats as st
from virtbench.analysis import summary, verdict


def _samples(seed: int, rounds: int) -> list[tuple]:
    rng = np.random.default_rng(seed)
    out = []
    for metric, hib in (("rate", True), ("latency", False), ("count", True)):
        for i, platform in enumerate(("native", "docker", "kvm")):
            for r in range(rounds + 1):
                value = 100 * (1 + 0.03 * i) * rng.lognormal(0, 0.02) + rng.normal(0, 0.5)
                if metric == "count":
                    value = float(round(value / 10))  # ties
                if (platform, r) == ("kvm", 2):
                    continue  # a round that failed
                out.append(("bench", metric, platform, value, "x", hib, "cpu", r, r == 0))
    return out


@pytest.mark.parametrize("seed,rounds", [(1, 3), (2, 5), (3, 12), (4, 40)])
def test_summarize_equals_the_reference_per_row(seed: int, rounds: int) -> None:
    rows = summary.summarize(_samples(seed, rounds), {}, ["native", "docker", "kvm"], "native")
    assert rows
    for r in rows:
        base = next(b for b in rows if b.metric == r.metric and b.platform == "native")
        assert r.mean == float(np.mean(r.values))
        assert r.ci95 == summary.mean_ci(r.values)
        assert r.cv == st.cv(r.values)
        assert r.stdev == (float(np.std(r.values, ddof=1)) if r.n > 1 else None)
        if r.platform == "native":
            continue
        v = verdict.decide(r.values, base.values, r.higher_is_better, rounds=r.rounds, base_rounds=base.rounds)
        assert (r.verdict, r.verdict_reason, r.repetitions_needed) == (v.verdict, v.reason, v.needed)
        assert r.relative_ci95 == (list(v.ci) if v.ci else None)
        assert (r.relative, r.p_value) == (v.ratio, v.p), "the verdict's own estimate and test, nothing else"
        assert r.relative_ci95[0] <= r.relative <= r.relative_ci95[1]
        assert (r.p_value is not None and r.p_value < 0.05) == (r.verdict in ("slower", "faster", "same"))


def test_report_cache_gives_back_the_very_rows() -> None:
    """report.cache packs values and rounds as arrays: decoding gives equal rows, floats bit for bit."""
    from dataclasses import asdict

    from virtbench.report import cache

    rows = summary.summarize(_samples(5, 9), {("kvm", "bench"): 1}, ["native", "docker", "kvm"], "native")
    rows[0].values.append(0.1 + 0.2)  # not a short decimal
    failures = [{"platform": "kvm", "benchmark": "bench", "round": 2, "error": "exit 1"}]
    back, fails = cache.decode(cache.encode(rows, failures))
    assert [asdict(r) for r in back] == [asdict(r) for r in rows] and fails == failures
    assert all(type(v) is float for r in back for v in r.values) and all(type(v) is int for r in back for v in r.rounds)


def test_verdicts_only_give_the_same_ratios_and_verdicts() -> None:
    """summarize_grouped(inference=False), for hosts side by side: the shown fields are the full ones."""
    grouped: summary.Group = {}
    warm: summary.Group = {}
    meta = {}
    for b, m, p, v, u, hib, c, rnd, w in _samples(6, 8):
        g = (warm if w else grouped).setdefault((b, m, p), summary.new_group())
        g[0].append(rnd)
        g[1].append(v)
        meta[(b, m)] = (u, hib, c)
    args = (grouped, warm, meta, {}, ["native", "docker", "kvm"], "native")
    full = summary.summarize_grouped(*args)
    light = summary.summarize_grouped(*args, inference=False)
    shown = ("relative", "relative_ci95", "p_value", "verdict", "verdict_reason", "mean", "n", "failed", "ci95", "cv")
    assert [[getattr(r, f) for f in shown] for r in light] == [[getattr(r, f) for f in shown] for r in full]
    assert all(r.mean_boot_ci95 is None and not r.quality for r in light)
    assert any(r.mean_boot_ci95 is not None for r in full)


def test_without_bootstrap_only_the_intervals_not_shown_are_left_out() -> None:
    samples = _samples(8, 10) + [("lifecycle", "start_s", p, 0.1 + 0.01 * r + 0.001 * i, "s", False, "lifecycle", r,
                                  False) for i, p in enumerate(("native", "docker", "kvm")) for r in range(1, 8)]
    full = summary.summarize(samples, {}, ["native", "docker", "kvm"], "native")
    grouped: summary.Group = {}
    warm: summary.Group = {}
    meta = {}
    for b, m, p, v, u, hib, c, rnd, w in samples:
        g = (warm if w else grouped).setdefault((b, m, p), summary.new_group())
        g[0].append(rnd)
        g[1].append(v)
        meta.setdefault((b, m), (u, hib, c))
    light = summary.summarize_grouped(grouped, warm, meta, {}, ["native", "docker", "kvm"], "native", bootstrap=False)
    for f, lt in zip(full, light):
        assert (lt.p_value, lt.relative, lt.quality, lt.verdict, lt.relative_ci95) == \
            (f.p_value, f.relative, f.quality, f.verdict, f.relative_ci95)
        if f.category == "lifecycle":
            assert lt.mean_boot_ci95 == f.mean_boot_ci95 is not None
        else:
            assert lt.mean_boot_ci95 is None and lt.median_ci95 is None

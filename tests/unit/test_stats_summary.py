"""summarize(): one estimate per cell (the verdict's), its interval and the p of the test that
decided; warm-up kept apart; the JSON contract."""
from __future__ import annotations

import numpy as np
import pytest

from virtbench.analysis import stats as st
from virtbench.analysis import synthetic
from virtbench.analysis.summary import SampleView, summarize
from virtbench.report import builder
from virtbench.store.db import Store

CORE_RESULT_FIELDS = {"benchmark", "metric", "unit", "higher_is_better", "platform", "n", "failed", "mean", "median",
                      "stdev", "ci95", "relative", "relative_ci95"}
CORE_TOP_FIELDS = {"run", "name", "status", "baseline", "host", "image", "platforms", "benchmarks", "results",
                   "failures"}


def sv(platform, value, metric="rate", rnd=0, warmup=False, hib=True):
    return SampleView("b", metric, platform, value, "op/s", hib, "cpu", rnd, warmup)


def samples(platform, values, metric="rate", warm=()):
    out = [sv(platform, v, metric, i + len(warm)) for i, v in enumerate(values)]
    return out + [sv(platform, v, metric, i, True) for i, v in enumerate(warm)]


def test_positional_sampleview_of_the_core_still_works():
    s = SampleView("b", "m", "p", 1.0, "s", False, "cpu")
    assert (s.round, s.warmup) == (0, False)


def test_one_estimate_its_interval_and_the_deciding_p_per_cell():
    base = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.1]
    slow = [80.0, 81.0, 79.0, 80.5, 79.5, 80.2, 79.8, 80.1]
    same = [100.3, 99.7, 100.1, 99.9, 100.6, 99.4, 100.0, 100.2]
    tiny = [v * 0.99 for v in base]
    rows = summarize(samples("native", base) + samples("slow", slow) + samples("same", same) + samples("tiny", tiny),
                     {}, ["native", "slow", "same", "tiny"], "native")
    by = {r.platform: r for r in rows}
    assert by["native"].verdict == "baseline" and by["native"].p_value is None and by["native"].relative == 1.0
    assert by["slow"].verdict == "slower" and by["slow"].p_value < 0.05
    logs = np.log(np.asarray(slow) / np.asarray(base))  # paired by round: the mean log ratio's t test
    t = logs.mean() / (logs.std(ddof=1) / np.sqrt(logs.size))
    assert by["slow"].relative == pytest.approx(float(np.exp(logs.mean())))
    assert by["slow"].p_value == pytest.approx(2 * st.special.t_sf(abs(t), logs.size - 1))
    assert all(by[p].p_value < 0.05 for p in ("same", "tiny")), "TOST: the test that decided 'same'"
    assert by["slow"].verdict_reason.startswith("slower by 20.0 % [")
    assert by["same"].verdict == "same" and by["same"].verdict_reason.startswith("same within +-2%")
    assert by["tiny"].verdict == "same", "1 % slower is within the 2 % margin"
    for p in ("slow", "same", "tiny"):
        assert by[p].relative_ci95[0] <= by[p].relative <= by[p].relative_ci95[1]
        assert not hasattr(by[p], "p_holm") and not hasattr(by[p], "relative_boot_ci95")
    assert by["slow"].ratio_of_means == pytest.approx(np.mean(slow) / np.mean(base))
    assert by["slow"].median_ci95 and by["slow"].mean_boot_ci95


def test_warmup_samples_are_not_in_the_statistics_but_are_checked():
    rows = summarize(samples("native", [100.0, 101.0, 99.0], warm=[70.0]) + samples("x", [90.0, 91.0, 89.0]),
                     {}, ["native", "x"], "native")
    native = next(r for r in rows if r.platform == "native")
    assert native.n == 3 and native.mean == pytest.approx(100.0)
    assert native.warmup_values == [70.0] and native.warmup_rounds == [0] and native.rounds == [1, 2, 3]
    assert [f["check"] for f in native.quality] == ["warmup"]


def test_degenerate_rows():
    rows = summarize(samples("native", [5.0]) + samples("one", [4.0]) + samples("flat", [5.0, 5.0, 5.0]),
                     {("dead", "b"): 3}, ["native", "one", "flat", "dead"], "native",
                     {"b": [("rate", "op/s", True, "cpu")]})
    by = {r.platform: r for r in rows}
    assert by["one"].relative == pytest.approx(0.8) and by["one"].relative_ci95 is None
    assert by["one"].p_value is None and by["one"].verdict == "inconclusive"
    assert "at least 2" in by["one"].verdict_reason
    assert by["flat"].mean_boot_ci95 == [5.0, 5.0] and by["flat"].cv == 0.0 and by["flat"].quality == []
    assert by["dead"].n == 0 and by["dead"].failed == 3 and by["dead"].verdict == "inconclusive"
    assert by["dead"].verdict_reason == "no values: all 3 executions failed (see the failures)"
    assert by["native"].relative_ci95 is None  # n=1: no interval, not a fake [1, 1]


def test_every_execution_failed():
    rows = summarize([], {("native", "b"): 2, ("x", "b"): 2}, ["native", "x"], "native",
                     {"b": [("rate", "op/s", True, "cpu")]})
    assert [(r.n, r.failed, r.mean, r.relative) for r in rows] == [(0, 2, None, None)] * 2
    assert [r.verdict for r in rows] == [None, "inconclusive"]


def test_no_baseline_data():
    rows = summarize(samples("x", [1.0, 2.0]), {("native", "b"): 2}, ["native", "x"], "native")
    x = next(r for r in rows if r.platform == "x")
    assert x.verdict == "inconclusive" and x.verdict_reason == "the baseline has no values to compare with"


def test_json_keeps_the_core_contract_and_adds(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    synthetic.fill(store, "r1", repetitions=4, fail={("docker", "sim-mbw"): [1]},
                   facts=synthetic.host_facts("h", governor="powersave", loadavg=[3.0, 1, 1]))
    _report = builder.build(store, "r1")
    run, rows, failures = _report.run, _report.rows, _report.failures
    doc = builder.to_json(run, rows, failures)
    assert CORE_TOP_FIELDS <= set(doc)
    for result in doc["results"]:
        assert CORE_RESULT_FIELDS <= set(result)
        assert {"p_value", "ratio_of_means", "verdict", "verdict_reason", "median_ci95", "mean_boot_ci95",
                "quality"} <= set(result)
        assert not {"p_holm", "effect_size", "relative_boot_ci95"} & set(result)
        assert "values" not in result and "rounds" not in result
    assert doc["failures"][0]["platform"] == "docker" and "device busy" in doc["failures"][0]["output_tail"]
    host = [w["message"] for w in doc["warnings"] if w["scope"] == "host"]
    assert any("powersave" in m for m in host) and any("load average 3.00" in m for m in host)
    assert "correction" not in doc["statistics"] and "test that decided" in doc["statistics"]["p_value"]
    assert doc["tables"]["stacks"] and doc["tables"]["best"]["vm"][0]["best"] == "qemu"
    assert doc["tables"]["platform_kinds"]["qemu-docker"] == {"kind": "container", "inside": "qemu"}
    import json
    json.dumps(doc, allow_nan=False, default=str)  # valid JSON: no NaN anywhere


def test_three_repetitions_reach_verdicts_and_the_rest_say_what_would_decide(tmp_path):
    """With 3 against 3 (where no rank test can be significant) clear differences are decided."""
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    synthetic.fill(store, "r1", repetitions=3, warmups=0)
    doc = builder.report_json(builder.build(store, "r1"))
    verdicts = {r["verdict"] for r in doc["results"]}
    assert verdicts <= {None, "baseline", "slower", "faster", "same", "inconclusive"}
    qemu = next(r for r in doc["results"] if r["platform"] == "qemu" and r["metric"] == "randread_iops")
    assert qemu["verdict"] == "slower", "a 20 % cost at 3 % noise is decided at 3 repetitions"
    for r in doc["results"]:
        if r["verdict"] == "inconclusive":
            assert "noise +-" in r["verdict_reason"] and "repetitions" in r["verdict_reason"]
    power = [w for w in doc["warnings"] if w["check"] == "power"]
    if "inconclusive" in verdicts:
        assert power and "comparisons are inconclusive" in power[0]["message"]
    assert any(w["check"] == "warmup" and w["scope"] == "run" for w in doc["warnings"])


def test_relative_ci_agrees_with_summarize_and_numpy():
    rng = np.random.default_rng(2)
    base, x = list(rng.normal(10, 0.5, 12)), list(rng.normal(12, 0.5, 12))
    rows = summarize(samples("native", base) + samples("x", x), {}, ["native", "x"], "native")
    r = next(r for r in rows if r.platform == "x")
    assert r.ratio_of_means == pytest.approx(np.mean(x) / np.mean(base))
    assert r.relative == pytest.approx(float(np.exp(np.mean(np.log(np.asarray(x) / np.asarray(base))))))
    assert r.median == pytest.approx(np.median(x)) and r.stdev == pytest.approx(np.std(x, ddof=1))

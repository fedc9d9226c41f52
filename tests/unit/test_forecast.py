"""The verdict rate to expect at the host's noise (analysis.forecast), the noise check's rounds
(experiments.benchmarks.schedule) and the comparisons the caps cannot decide (experiments.benchmarks.adaptive)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from virtbench.analysis import forecast
from virtbench.analysis.forecast import note_lines as noise_lines
from virtbench.analysis.verdict import decide
from virtbench.config import parse_campaign
from virtbench.experiments.benchmarks.adaptive import OUT_OF_REACH, needs_decision
from virtbench.experiments.benchmarks.schedule import schedule, unmeasured_rounds


def test_the_reach_matches_the_verdict_rule_it_forecasts():
    """A platform exactly `beyond` off the baseline, at the forecast's noise, sits on the edge of
    'slower' at the stopping confidence; one `within` off sits on the edge of 'same'."""
    noise, rounds = 0.02, 10
    r = forecast.reach(noise, rounds, 0.02)
    logs = np.random.default_rng(1).normal(0, 1, rounds)
    logs = (logs - logs.mean()) / logs.std(ddof=1) * noise  # exactly this spread
    for effect, expect in ((r.beyond * 1.01, "slower"), (r.beyond * 0.99, None)):
        base = [1.0] * rounds
        vals = [math.exp(x - math.log1p(effect)) for x in logs]
        v = decide(vals, base, True, rounds=list(range(rounds)), base_rounds=list(range(rounds)),
                   confidence=forecast.DIFFERENCE_CONFIDENCE, equivalence=forecast.SAME_CONFIDENCE)
        assert (v.verdict == expect) if expect else v.verdict != "slower"
    vals = [math.exp(x - math.log1p(r.within * 0.99)) for x in logs]
    v = decide(vals, [1.0] * rounds, True, rounds=list(range(rounds)), base_rounds=list(range(rounds)),
               confidence=forecast.DIFFERENCE_CONFIDENCE, equivalence=forecast.SAME_CONFIDENCE)
    assert v.verdict == "same"


def test_quiet_hosts_decide_everything_and_noisy_ones_say_so():
    quiet, noisy = forecast.reach(0.01, 16, 0.02), forecast.reach(0.08, 10, 0.02)
    assert quiet.share == 1.0 and "decide every comparison" in quiet.describe()
    assert noisy.within == 0 and noisy.share < 0.2 and "never the same" in noisy.describe()
    assert forecast.pair_noise([1.0]) is None
    assert forecast.pair_noise([1.0, 1.0, 1.0]) == 0
    assert forecast.pair_noise([100, 102, 98]) == pytest.approx(0.02 * math.sqrt(2), rel=0.01)
    assert forecast.rounds_within(60, 20, 3, 16) == 3 and forecast.rounds_within(600, 20, 3, 16) == 16


def test_the_noise_lines_say_the_expected_rate_and_when_the_host_is_too_noisy():
    note = {"cells": 15, "expected_decided": 9, "rounds": 10, "spread": 0.1,
            "metrics": {"sqlite total_cpu_s": {"describe": "noise +-8.0 % a pair: ..."}}}
    lines = noise_lines(note)
    assert "expect about 9 of 15 comparisons decided" in lines[0] and "too noisy" in lines[0]
    assert lines[1] == "  sqlite total_cpu_s: noise +-8.0 % a pair: ..."
    assert "too noisy" not in noise_lines({**note, "expected_decided": 14})[0]
    assert "close to the margin" in noise_lines({**note, "expected_decided": 14})[0]
    assert noise_lines({**note, "expected_decided": 15})[0].endswith("0-10%)")


def test_the_noise_check_rounds_run_the_baseline_alone_as_warm_ups():
    c = parse_campaign({"name": "n", "platforms": ["native", "docker", "runc"], "benchmarks": ["openssl"],
                        "repetitions": 3, "warmups": 1, "adaptive": {"until": "decided", "noise_check": 2}})
    units = schedule(c, 7)
    assert unmeasured_rounds(c) == 3
    assert [(u.round, u.platform) for u in units if u.round in (1, 2)] == [(1, "native"), (2, "native")]
    assert all(u.warmup for u in units if u.round < 3) and not any(u.warmup for u in units if u.round >= 3)
    assert len([u for u in units if u.round == 0]) == 3 and len(units) == 3 + 2 + 3 * 3
    # spread through the warm-up round, as far apart as a round's pairs (not back to back)
    order = [u.round for u in units[:5]]
    assert order[0] == 0 and order[-1] == 0 and order.index(2) - order.index(1) > 1
    plain = parse_campaign({"name": "n", "platforms": ["native", "docker"], "benchmarks": ["openssl"],
                            "repetitions": 3, "warmups": 1})
    assert unmeasured_rounds(plain) == 1 and len(schedule(plain, 7)) == 8


def test_a_comparison_the_caps_cannot_decide_gets_no_more_rounds():
    rng = np.random.default_rng(3)
    base = list(rng.normal(100, 10, 4))
    vals = list(rng.normal(100, 10, 4))
    r = list(range(4))
    need = needs_decision(vals, base, True, target=0.02, max_n=16, rounds=r, base_rounds=r, budget=16)
    assert not need and need.reason.startswith(OUT_OF_REACH) and "about 16 rounds" in need.reason
    assert needs_decision(vals, base, True, target=0.02, max_n=16, rounds=r, base_rounds=r).more  # no budget: as before


def test_extra_rounds_go_only_to_comparisons_the_caps_can_decide(tmp_path):
    """A comparison with 40 % noise per round cannot decide in 16 rounds: after 5
    rounds it is left out of reach (no extra round), while a close one gets its rounds; the
    first extra round carries the forecast the terminal prints."""
    from datetime import timedelta

    from virtbench.analysis import synthetic
    from virtbench.experiments.benchmarks.adaptive import plan_next, progress_lines
    from virtbench.store.db import Store, now

    store = Store(f"sqlite:///{tmp_path}/s.db")
    metric = synthetic.SimMetric("total_s", "s", False, "application", 3.0, cv=0.4)
    calm = synthetic.SimMetric("score", "1/s", True, "cpu", 100.0, cv=0.03)
    benches = [synthetic.SimBenchmark("wild", "wild", {}, (metric,)),
               synthetic.SimBenchmark("calm", "calm", {}, (calm,))]
    platforms = synthetic.default_platforms()[:2]  # native, docker (cpu 0.99: close to the 2 % margin)
    synthetic.fill(store, "r", repetitions=5, warmups=1, platforms=platforms, benchmarks=benches, seed=5)
    campaign = parse_campaign({"name": "r", "platforms": ["native", "docker"], "benchmarks": ["openssl"],
                               "adaptive": {"until": "decided", "max_repetitions": 16, "max_minutes": 6}})
    entry = plan_next(store, campaign, "r", 6, now() - timedelta(minutes=1))
    assert entry is not None
    assert "wild" not in entry["benchmarks"]["docker"]
    assert "out of reach" in entry["forecast"] and "1 out of reach" in entry["forecast"]
    assert progress_lines(entry)[0] == entry["forecast"]


def test_a_run_stopped_by_out_of_reach_comparisons_says_so(tmp_path):
    """Before: the stop entry said 'repetition cap reached for docker' when the only open
    comparison was out of reach at its noise (its reason names the caps), with time left."""
    from datetime import timedelta

    from virtbench.analysis import synthetic
    from virtbench.experiments.benchmarks.adaptive import log_of, plan_next
    from virtbench.store.db import Store, now

    store = Store(f"sqlite:///{tmp_path}/s.db")
    wild = synthetic.SimBenchmark("wild", "wild", {}, (synthetic.SimMetric("total_s", "s", False, "application",
                                                                           3.0, cv=0.4),))
    synthetic.fill(store, "r", repetitions=5, warmups=1, platforms=synthetic.default_platforms()[:2],
                   benchmarks=[wild], seed=5)
    campaign = parse_campaign({"name": "r", "platforms": ["native", "docker"], "benchmarks": ["openssl"],
                               "adaptive": {"until": "decided", "max_repetitions": 16, "max_minutes": 6}})
    assert plan_next(store, campaign, "r", 6, now() - timedelta(minutes=1)) is None
    stop = log_of(store, "r")[-1]["stop"]
    assert stop == "out of reach at their noise within the time left: docker wild", stop

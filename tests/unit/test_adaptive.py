"""Adaptive repetition until every comparison is decided (the quick campaign's rule)."""
from __future__ import annotations

import numpy as np

from virtbench.config import parse_campaign
from virtbench.experiments.benchmarks.adaptive import needs_decision
from virtbench.experiments.benchmarks.schedule import extra_round


def _sample(mean: float, cv: float, n: int, seed: int) -> list[float]:
    return list(np.random.default_rng(seed).normal(mean, mean * cv, n))


def test_a_clear_difference_is_decided():
    need = needs_decision(_sample(90, 0.01, 5, 1), _sample(100, 0.01, 5, 2), True, target=0.02, max_n=10)
    assert not need and "decided: slower by" in need.reason


def test_a_precise_equality_is_decided_as_the_same():
    need = needs_decision(_sample(100, 0.002, 5, 3), _sample(100, 0.002, 5, 4), True, target=0.02, max_n=10)
    assert not need and "decided: same within +-2%" in need.reason


def test_noise_wider_than_the_band_asks_for_more_with_the_interval():
    need = needs_decision(_sample(100, 0.10, 5, 5), _sample(100, 0.10, 5, 6), False, target=0.02, max_n=10)
    assert need and "undecided: noise" in need.reason and "repetitions" in need.reason and need.precision > 0.02


def test_caps_and_minimum():
    assert needs_decision([1.0, 1.1], [1.0, 1.2, 1.1], True, target=0.02, max_n=10).more  # fewer than 3
    capped = needs_decision(_sample(100, 0.1, 10, 7), _sample(100, 0.1, 10, 8), True, target=0.02, max_n=10)
    assert not capped and "cap of 10" in capped.reason


def test_extra_round_runs_only_the_undecided_benchmarks():
    c = parse_campaign({"name": "a", "platforms": ["native", "docker", "runc"],
                        "benchmarks": ["openssl", "fio", "sqlite"],
                        "adaptive": {"until": "decided", "max_repetitions": 8}})
    entry = {"round": 6, "platforms": ["docker", "native"],
             "benchmarks": {"docker": ["sqlite"], "native": ["sqlite"]}}
    units = extra_round(c, 1, entry)
    assert sorted(u.platform for u in units) == ["docker", "native"]
    assert all(u.benchmarks == ("sqlite",) and u.round == 6 for u in units)
    # an entry of the older form (no benchmarks) still runs everything
    assert all(len(u.benchmarks) == 3 for u in extra_round(c, 1, {"round": 6, "platforms": ["docker"]}))


def test_progress_shows_one_short_line_per_undecided_comparison():
    """The quick run of 2026-11-25 printed each extra round as one line of 1,000+ characters."""
    from virtbench.experiments.benchmarks.adaptive import progress_lines

    reason = "noise +-24.9 % (-9.4 % [-29.3 to +16.3 %, 5 rounds paired]): needs about 14 repetitions"
    entry = {"round": 6, "platforms": ["containerd", "docker", "native"],
             "reasons": {"containerd": "fio rand_read_iops_cpu: undecided: " + reason, "docker": "x"},
             "cells": {"containerd fio rand_read_iops_cpu": reason, "docker sqlite total_cpu_s": reason}}
    lines = progress_lines(entry)
    assert lines[0] == "extra round 7: 2 comparisons undecided"
    assert lines[1] == "  containerd fio rand_read_iops_cpu: " + reason
    assert len(lines) == 3 and all(len(line) <= 130 for line in lines)
    old = progress_lines({k: v for k, v in entry.items() if k != "cells"})  # stored before cells existed
    assert old[0] == "extra round 7: 2 platforms undecided" and old[2] == "  docker: x"


def test_progress_names_the_comparisons_left_out_of_reach_and_why_the_rounds_stopped():
    """The fresh quick run of 2026-11-28 said "extra round 14: 1 comparison undecided", then its
    table showed 3: the two given no more rounds (out of reach) were never named."""
    from virtbench.experiments.benchmarks.adaptive import progress_lines, stop_line

    reason = "noise +-3.4 % (-3.0 % [-6.2 to +0.3 %, 9 rounds paired]): needs about 11 repetitions"
    far = ("out of reach: noise +-2.9 % (-0.8 % [-3.6 to +2.0 %, 8 rounds paired]): needs about 19 "
           "repetitions; the caps allow about 4 rounds")
    entry = {"round": 13, "platforms": ["podman", "native"], "reasons": {"podman": "sqlite total_cpu_s: " + reason},
             "cells": {"podman sqlite total_cpu_s": reason}, "out_of_reach": {"containerd sqlite total_cpu_s": far}}
    lines = progress_lines(entry)
    assert lines[0] == "extra round 14: 1 comparison undecided (1 more left undecided: out of reach at their noise)"
    assert lines[2] == "  containerd sqlite total_cpu_s: left, " + far
    # the next round counts it, naming only what it newly left (the fresh run of 2026-11-28 18:17
    # repeated the same two wrapped lines for every comparison left, at every later round)
    later = {**entry, "round": 14, "out_of_reach": {**entry["out_of_reach"], "runc sqlite total_cpu_s": far}}
    lines = progress_lines(later, [{"round": 12}, entry, later])  # the run's log, this round stored last
    assert lines[0] == "extra round 15: 1 comparison undecided (2 more left undecided: out of reach at their noise)"
    assert lines[1:] == ["  podman sqlite total_cpu_s: " + reason, "  runc sqlite total_cpu_s: left, " + far]
    assert stop_line([{"round": 13}]) is None
    stop = "out of reach at their noise within the time left: containerd sqlite"
    assert stop_line([{"round": 13}, {"stop": stop}]) == "no more extra rounds: " + stop

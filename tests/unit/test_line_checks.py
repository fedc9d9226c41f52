"""The line experiment's counters and plausibility checks: rescheduling interrupts per CPU from
recorded /proc/interrupts, dTLB misses as a share of loads from recorded perf output, and the
flags on results physics rules out (a longer line or a container faster beyond the noise)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from virtbench.experiments.line import counters, plausible


def text(data_dir, *parts: str) -> str:
    return data_dir.joinpath(*parts).read_text()


def test_rescheduling_interrupts_per_cpu_from_recorded_proc_interrupts(data_dir):
    before = counters.per_cpu(text(data_dir, "interrupts", "before.txt"))
    after = counters.per_cpu(text(data_dir, "interrupts", "after.txt"))
    assert before == [3676967, 2614651] and after == [3676968, 2614653]  # the RES line, CPU0 and CPU1
    assert counters.delta(before, after) == [1, 2]
    assert counters.per_cpu(text(data_dir, "interrupts", "before.txt"), "LOC")[0] > 0
    assert counters.delta(before, after[:1]) == [] and counters.per_cpu("") == []  # a CPU gone: no count


def test_dtlb_share_of_loads_from_recorded_perf_output(data_dir):
    nopmu = text(data_dir, "perf", "line_stat_nopmu.stderr.txt")
    got = counters.read(nopmu, {"net_rx": 10}, [1, 2], [])
    assert got["dtlb_miss_pct"] is None and got["values"]["dTLB-loads"] is None
    assert any("no PMU" in n for n in got["notes"]) and any("share of loads" in n for n in got["notes"])
    assert got["values"]["res_interrupts"] == 3 and got["res_per_cpu"] == [1, 2]
    assert got["values"]["context-switches"] > 0  # software events are counted without a PMU
    # the same output where a PMU counted (the recorded lines with numbers in place of <not supported>)
    counted = nopmu.replace("<not supported>,,dTLB-loads", "2000000,,dTLB-loads") \
                   .replace("<not supported>,,dTLB-load-misses", "260000,,dTLB-load-misses")
    assert counters.read(counted, {}, [], [])["dtlb_miss_pct"] == pytest.approx(13.0)  # the paper's 64-node share


def _rates(values: dict) -> dict:
    return {point: {"ndr_pps": v, "pdr_pps": v} for point, v in values.items()}


def test_a_longer_line_faster_beyond_the_noise_is_flagged_and_rechecked():
    rates = _rates({("lxc", "none", 1): [116_000.0], ("lxc", "none", 8): [225_000.0], ("lxc", "none", 4): [110_000.0],
                    ("netns", "none", 1): [118_000.0], ("netns", "none", 0): [1e6]})
    found = plausible.suspects(rates, "netns")
    assert {(s.point, s.metric) for s in found} == {(("lxc", "none", 8), m) for m in plausible.METRICS}
    s = found[0]
    assert s.other == 110_000.0 and "lxc 8 nodes" in s.why and "4-node line" in s.why  # its largest excess
    assert plausible.to_recheck(found) == [("lxc", "none", 8)]


def test_within_the_noise_nothing_is_flagged():
    rates = _rates({("lxc", "node", 1): [100_000.0, 80_000.0], ("lxc", "node", 2): [96_000.0, 110_000.0]})
    assert plausible.suspects(rates, "netns") == []  # rounds spread 22 %: 103/90 is within it
    assert plausible.suspects(_rates({("lxc", "node", 1): [100_000.0], ("lxc", "node", 2): [104_000.0]}), "netns") == []
    assert plausible.suspects(_rates({("lxc", "node", 1): [100_000.0], ("lxc", "node", 2): [104_000.0]}), "netns",
                              floor=0.01) != []


def test_a_container_faster_than_the_bare_namespace_is_flagged():
    rates = _rates({("netns", "core", 4): [50_000.0], ("lxc", "core", 4): [80_000.0]})
    (s, _) = plausible.suspects(rates, "netns")
    assert s.against == ("netns", "core", 4) and "netns (the baseline)" in s.why


def test_noise_floor_follows_the_search():
    assert plausible.noise_floor(SimpleNamespace(method="ndr-pdr", precision=0.05)) == pytest.approx(0.10)
    assert plausible.noise_floor(SimpleNamespace(method="steps", precision=0.01)) == plausible.MIN_NOISE
    rates = _rates({("lxc", "node", 1): [3000.0], ("lxc", "node", 2): [4000.0]})
    assert plausible.suspects(rates, "netns", step_pps=1000) == []  # one step of 1000 pkt/s is the resolution


def test_the_report_says_what_was_flagged_and_what_the_re_measurement_gave():
    from virtbench.experiments.line import report

    rates = _rates({("lxc", "none", 1): [116_000.0], ("lxc", "none", 8): [225_000.0],
                    ("lxc", "node", 1): [100_000.0], ("lxc", "node", 2): [150_000.0],
                    ("lxc", "core", 1): [100_000.0], ("lxc", "core", 2): [150_000.0]})
    found = plausible.suspects(rates, "netns")
    rechecks = {("lxc", "none", 8): {"ndr_pps": 60_000.0, "pdr_pps": 61_000.0},
                ("lxc", "node", 2): {"ndr_pps": 149_000.0, "pdr_pps": 150_000.0}}
    flags = {(f["pinning"], f["metric"]): f for f in report._flags(found, rechecks)}
    gone = flags[("none", "pdr_pps")]
    assert gone["recheck_pps"] == 61_000.0 and gone["confirmed"] is False and "most likely disturbed" in gone["recheck"]
    kept = flags[("node", "ndr_pps")]
    assert kept["confirmed"] is True and "still implausible" in kept["recheck"]
    assert flags[("core", "ndr_pps")]["recheck_pps"] is None  # not measured again: said so
    (table,) = report._flag_table(list(flags.values()))
    assert "measured again" in table.columns and len(table.rows) == 6

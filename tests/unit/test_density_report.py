"""The density report explains its maximum by what each instance cost the confined host."""
from __future__ import annotations

from virtbench.experiments.density import report as density

MIB = 2**20


def _entry(**over):
    top = {"count": 398, "ok": True, "parent_memory_peak_bytes": 933.8 * MIB, "overlap": 0.51}
    entry = {"platform": "lxc-64m", "confined": True, "host_memory": 1024 * MIB, "mem_total": 24105 * MIB,
             "max_count": 398, "stop_reason": "guard", "stop_detail": "confined host of 1024 MiB: ...",
             "stop_evidence": {}, "memory_per_instance_bytes": 0.2 * MIB, "points": [top],
             "confined_memory_per_instance_bytes": density.confined_cost(top), "min_overlap": 0.5}
    return {**entry, **over}


def test_the_confined_cost_is_the_parent_peak_over_the_count():
    # the run of 2026-11-26: 398 LXC containers, parent peak 933.8 MiB: 2.3 MiB each, not the 0.2
    # MiB their own cgroups count
    assert round(density.confined_cost({"count": 398, "parent_memory_peak_bytes": 933.8 * MIB}) / MIB, 2) == 2.35
    assert density.confined_cost(None) is None
    assert density.confined_cost({"count": 4, "parent_memory_peak_bytes": None}) is None


def test_the_notes_say_why_the_maximum_is_where_it_is():
    text = "\n".join(density.notes([_entry()]))
    assert "why the maximum is 398" in text
    assert "933.8 MiB" in text and "2.3 MiB per instance" in text and "0.2 MiB at idle" in text


def test_an_unconfined_run_says_nothing_of_a_parent():
    text = "\n".join(density.notes([_entry(confined=False)]))
    assert "why the maximum" not in text


def test_the_header_of_a_density_run_speaks_of_its_steps_not_of_repetitions():
    from types import SimpleNamespace

    from virtbench.report import units

    density_run = SimpleNamespace(campaign={"experiment": "density", "repetitions": 5})
    assert units.rounds_measured(density_run, []) == "a density run, in steps of its own (its section below)"
    benchmarks_run = SimpleNamespace(campaign={"repetitions": 5})
    assert units.rounds_measured(benchmarks_run, []) == "5 repetitions asked, none measured"
    # nor of warm-up rounds, which density does not run (its header said "after 1 warm-up")
    assert units.warmups(SimpleNamespace(campaign={**density_run.campaign, "warmups": 1}), []) is None
    assert units.warmups(SimpleNamespace(campaign={"repetitions": 5, "warmups": 1}), []) == 1

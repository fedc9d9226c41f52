"""Sweeps for figures come from the run's stored campaign: tool parameters and `instances`."""
from __future__ import annotations

from virtbench.config import parse_campaign
from virtbench.report.figures import bench_points, sweeps
from virtbench.store.models import Run, RunBenchmark


def stored_run(benchmarks: list) -> Run:
    """A run as the store holds it (campaign in canonical form, one row per benchmark key)."""
    campaign = parse_campaign({"name": "s", "platforms": ["native"], "benchmarks": benchmarks})
    return Run(campaign=campaign.model_dump(mode="json"),
               benchmarks=[RunBenchmark(position=i, key=b.key, name=b.name, params=b.params)
                           for i, b in enumerate(campaign.benchmarks)])


def test_an_instances_sweep_is_a_sweep_although_instances_is_not_a_tool_parameter():
    run = stored_run([{"name": "openssl", "seconds": 1, "sweep": {"instances": [1, 2, 4]}}, "fio"])
    points = bench_points(run)
    assert [p.params for p in points[:3]] == [{"seconds": 1, "instances": n} for n in (1, 2, 4)]
    assert points[3].params == run.benchmarks[3].params  # no instances given: the tool's own
    (sweep,) = sweeps(points)
    assert sweep[:3] == ("openssl", "instances", {})
    assert [x for x, _ in sweep[3]] == [1, 2, 4]
    assert sweeps(run.benchmarks) == []  # the tool's parameters alone do not vary


def test_a_tool_parameter_sweep():
    run = stored_run([{"name": "sysbench-cpu", "time": 1, "sweep": {"threads": [1, 2]}}])
    (sweep,) = sweeps(bench_points(run))
    assert sweep[1] == "threads" and [x for x, _ in sweep[3]] == [1, 2]

"""The density cost model and its sizing advice: least squares with intervals, the calibration
on the measured failure, predictions for other confined and real hosts, the pod overhead, and
the report's `sizing` section on every surface (JSON data, tables, notes, figure)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from virtbench.experiments.density import model as M
from virtbench.experiments.density.report import STOP_KEY
from virtbench.experiments.density.report import sizing as S

MIB = 1 << 20


def test_least_squares_with_intervals():
    f = M.fit([1, 2, 4, 8, 16], [10.5, 12.0, 14.6, 20.2, 30.9])
    assert f.slope == pytest.approx(1.35, abs=0.05) and f.intercept == pytest.approx(9.3, abs=0.3)
    assert f.slope_ci[0] < f.slope < f.slope_ci[1] and f.intercept_ci[0] < f.intercept < f.intercept_ci[1]
    assert f.n == 5 and f.r2 > 0.99 and f.x_range == (1.0, 16.0)
    exact = M.fit([1, 2], [3, 5])
    assert (exact.slope, exact.intercept, exact.slope_ci) == (2.0, 1.0, None)  # two points: no interval
    assert M.fit([4, 4], [1, 2]) is None and M.fit([1], [1]) is None


def _point(count, held_mib, ok=True, grown=True, peak_mib=None, host_mib=None, cpu=None, start=None):
    cost = {"fleet_grown": 1.0 if grown else 0.0, "parent_held_idle": held_mib * MIB}
    if host_mib is not None:
        cost |= {"host_side_pss": host_mib * MIB, "host_side_pss_outside_parent": host_mib * MIB}
    if cpu is not None:
        cost["idle_cpu"] = cpu
    if start is not None:
        cost["start_s_per_instance"] = start
    return {"count": count, "ok": ok, "memory_per_instance_bytes": 0.3 * MIB,
            "parent_memory_peak_bytes": None if peak_mib is None else peak_mib * MIB, "cost": cost}


def _entry(max_count=511, limit_mib=1024, reason="guard", per_mib=1.6, fixed_mib=20.0, pod=False):
    counts = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    points = [_point(c, fixed_mib + per_mib * c, peak_mib=fixed_mib + 1.7 * c + 10, host_mib=2.0 + 0.9 * c,
                     cpu=0.0004 * c, start=0.05 + 0.0002 * c) for c in counts]
    points.append(_point(300, fixed_mib + per_mib * 300 + 40, grown=False))  # a kept fleet's count: not fitted
    return {"platform": "lxc", "host": None, "confined": True, "host_memory": limit_mib * MIB, "max_count": max_count,
            "stop_reason": reason, "stop_evidence": {}, "points": points, "pod": pod}


def test_the_model_fits_grown_fleets_only_and_predicts_from_the_measured_failure():
    e = _entry()
    fits = M.costs(e)
    assert fits["memory_inside"].slope == pytest.approx(1.6 * MIB) and fits["memory_inside"].n == 9
    assert fits["host_side_outside_parent"].slope == pytest.approx(0.9 * MIB)
    assert fits["idle_cpu"].slope == pytest.approx(0.0004)
    cal = M.calibrate(e, fits["memory_inside"], {})
    assert cal.measured_max == 511
    # the model reproduces the measured maximum on the size it was calibrated on
    assert M.predict_confined(cal, 1024 * MIB, {})["count"] == 511
    half = M.predict_confined(cal, 512 * MIB, {})
    assert half["range"][0] <= half["count"] <= half["range"][1]
    assert half["count"] == pytest.approx((512 * 0.9 - 20) / ((1024 * 0.9 - 20) / 511.5) - 0.5, abs=1)


def test_a_prediction_across_sizes_within_5_percent_on_a_linear_host():
    """A host where each instance holds c at the limit and the floor is 10 %: the 512 MiB run
    predicts the 1 GiB maximum (the done-when check, on numbers)."""
    c, fixed = 1.75 * MIB, 22 * MIB

    def measured(limit):
        return int((0.9 * limit - fixed) // c)
    small = _entry(max_count=measured(512 * MIB), limit_mib=512, per_mib=1.6, fixed_mib=22.0)
    cal = M.calibrate(small, M.costs(small)["memory_inside"], {})
    predicted = M.predict_confined(cal, 1024 * MIB, {})["count"]
    assert abs(predicted - measured(1024 * MIB)) / measured(1024 * MIB) <= 0.05, (predicted, measured(1024 * MIB))


@pytest.mark.parametrize("reason, evidence, limit", [
    ("oom", {}, "memory"), ("guard", {}, "memory"), ("cpu_starvation", {}, "cpu"),
    ("throughput_collapse", {}, "cpu"), ("kernel_limit", {}, "kernel_limit"),
    ("start_failure", {"limit": "memory (the runtime could not allocate)"}, "memory"),
    ("start_failure", {"limit": None}, "start"), ("max_reached", {}, "none")])
def test_which_limit_stopped_the_search(reason, evidence, limit):
    assert M.stopped_by({"stop_reason": reason, "stop_evidence": evidence}) == limit


def test_a_search_not_stopped_by_memory_is_not_calibrated():
    e = _entry(reason="cpu_starvation")
    assert M.calibrate(e, M.costs(e)["memory_inside"], {}) is None


def test_floors_follow_the_campaign_s_guard():
    assert M.confined_floor(1024 * MIB, {}) == pytest.approx(102.4 * MIB)
    assert M.confined_floor(1024 * MIB, {"confined_min_available": 50 * MIB}) == 50 * MIB
    assert M.host_floor(1 << 30, {}) == 256 * MIB and M.host_floor(8 << 30, {}) == pytest.approx(819.2 * MIB)
    assert M.predict_host(2 * MIB, 0, 1 << 30, {}) == 384


def test_the_pod_overhead_covers_the_upper_end_of_what_was_measured():
    fits = M.costs(_entry())
    over = M.pod_overhead(fits)
    mem_mib = int(over["memory"].removesuffix("Mi"))
    assert mem_mib >= 1.6 + 0.9 and mem_mib == 3  # 2.5 MiB at the upper interval end, rounded up
    assert over["cpu"] == "1m"


def _store(entries):
    """A store holding one density run's summaries and counts, as the kind writes them."""
    execs, samples = [], []
    for i, e in enumerate(entries):
        for j, p in enumerate(e["points"]):
            eid = 1000 * i + j + 1
            execs.append(SimpleNamespace(id=eid, host="", platform=e["platform"], benchmark=f"density[count={p['count']}]",
                                         round=1 if p["cost"]["fleet_grown"] else 2, status="ok", error="",
                                         duration_s=3.0))
            samples += [SimpleNamespace(execution_id=eid, metric=k, instance=0, value=v, category="cost", unit="B")
                        for k, v in p["cost"].items()]
            samples.append(SimpleNamespace(execution_id=eid, metric="throughput", instance=0, value=1e6,
                                           category="cpu", unit="B/s"))
            samples += [SimpleNamespace(execution_id=eid, metric=m, instance=0, value=p[k], category="sync", unit="")
                        for m, k in (("overlap", "overlap"), ("start_spread", "start_spread_s")) if k in p]
            if p["parent_memory_peak_bytes"] is not None:
                samples.append(SimpleNamespace(execution_id=eid, metric="parent_memory_peak", instance=0,
                                               value=p["parent_memory_peak_bytes"], category="memory", unit="B"))
        summary = {k: e[k] for k in ("platform", "max_count", "stop_reason", "confined", "host_memory", "pod")}
        summary["stop_evidence"] = {}
        execs.append(SimpleNamespace(id=1000 * i + 999, host="", platform=e["platform"], benchmark=STOP_KEY, round=0,
                                     status="ok", error="", stdout=json.dumps(summary), duration_s=1.0))
    return SimpleNamespace(executions=lambda run_id: execs, samples=lambda run_id, per_instance=True: samples)


def test_the_sizing_section_on_every_surface():
    entry = _entry(pod=True)
    run = SimpleNamespace(id="r", campaign={"experiment": "density", "density": {"guard": {}}})
    section = S.build(_store([entry]), run)
    assert section.key == "sizing" and section.data[0]["stopped_by"] == "memory"
    d = section.data[0]
    assert d["costs"]["memory_inside"]["slope"] == pytest.approx(1.6 * MIB)
    confined = [p for p in d["predictions"] if p["where"] == "confined host"]
    assert [p["measured"] for p in confined if p["memory_bytes"] == 1024 * MIB] == [511]
    assert any(p["where"] == "host" and p["memory_bytes"] == 8 << 30 for p in d["predictions"])
    assert d["pod_overhead"] == {"memory": "3Mi", "cpu": "1m"}
    titles = [t.title for t in section.tables]
    assert any("What one instance costs" in t for t in titles) and any("podFixed" in t for t in titles)
    assert any(n.startswith("lxc: on a host with 8 GiB, keeping the guard's floor, about ") for n in section.notes)
    assert any("Assumed" in n for n in section.notes)
    fig = section.figures[0]
    assert fig.id == "sizing-memory" and [s.style for s in fig.series] == ["points", "dashed"]
    json.dumps(section.data)  # the JSON surface
    assert S.build(_store([entry]), SimpleNamespace(id="r", campaign={"experiment": "benchmarks"})) is None


def test_a_calibration_count_whose_workloads_did_not_run_together_gives_lower_bounds():
    """Measured (runc, 2 CPUs, 2026-11-30): calibrated at 287 on 512 MiB (start spread 3.2 s of a
    2 s workload, overlap 0), the model predicted 575 for 1 GiB, where 657 ran (spread 18 s): the
    workload's memory held at once fell with the CPU's share per instance. The report says so."""
    entry = _entry(max_count=256, limit_mib=512)
    entry["points"][-2] |= {"overlap": 0.0, "start_spread_s": 3.2}  # the count 256, grown from empty
    run = SimpleNamespace(id="r", campaign={"experiment": "density", "density": {}})
    d = S.build(_store([entry]), run).data[0]
    assert d["calibration"]["not_together"] == {"count": 256, "overlap": 0.0, "start_spread_s": 3.2}
    notes = S.build(_store([entry]), run).notes
    assert any("did not run together" in n and "lower bounds" in n for n in notes)
    entry["points"][-2]["overlap"] = 0.8
    assert S.build(_store([entry]), run).data[0]["calibration"]["not_together"] is None
    assert not any("lower bounds" in n for n in S.build(_store([entry]), run).notes)


def test_a_cpu_bound_search_gives_memory_s_ceiling_only():
    entry = _entry(reason="cpu_starvation", max_count=120)
    run = SimpleNamespace(id="r", campaign={"experiment": "density", "density": {}})
    section = S.build(_store([entry]), run)
    d = section.data[0]
    assert d["stopped_by"] == "cpu" and d.get("memory_ceiling_only") and "calibration" not in d
    assert any("not memory" in n for n in section.notes)


def test_host_side_processes_are_found_by_name_and_their_pss_read():
    """This test's own interpreter stands in for a runtime's shim: found by its command name,
    its PSS and CPU time read; inside an instance's cgroup it would not count."""
    import os
    from pathlib import Path

    from virtbench.experiments.density import costs
    from virtbench.platforms import cgroups

    comm = Path(f"/proc/{os.getpid()}/comm").read_text().strip()
    hs = costs.host_side((comm,), [], None)
    assert hs.processes >= 1 and hs.pss > 1 << 20 and hs.pss_outside_parent == hs.pss and hs.names[comm] >= 1
    mine = cgroups.memory_cgroup_of(os.getpid()) or "/"
    inside = costs.host_side((comm,), [mine], None)  # in "an instance's cgroup": not host side
    assert inside.processes < hs.processes or mine == "/"
    assert costs.host_side((), [], None).processes == 0
    before = costs.IdleReading(0.0, 4, 100 * MIB, 90 * MIB, 1_000_000_000, costs.HostSide(2, 0, 0, 0))
    after = costs.IdleReading(1.0, 4, 101 * MIB, 91 * MIB, 1_040_000_000, costs.HostSide(2, 8 * MIB, 8 * MIB,
                                                                                         20_000_000))
    got = {s["metric"]: s["value"] for s in costs.idle_samples(before, after)}
    assert got == {"parent_usage_idle": 101 * MIB, "parent_held_idle": 91 * MIB, "host_side_pss": 8 * MIB,
                   "host_side_pss_outside_parent": 8 * MIB, "idle_cpu": pytest.approx(0.04),
                   "host_side_idle_cpu": pytest.approx(0.02)}

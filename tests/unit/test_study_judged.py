"""#41 item 3: a paper value agrees or differs only where this host's interval decides it; else
'undecided at this scale' with what would decide it. Before: `study report 003` after a quick run
(HPL 1.41 of native, interval -99 to +298 %) called Table 7's container CPU range 'differs', and
158 of its 164 text lines were wider than 100 columns."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from virtbench.analysis.summary import Row
from virtbench.studies import claims, text
from virtbench.studies import compare as C
from virtbench.studies import judge as J
from virtbench.studies import paper as P
from virtbench.studies import report as sreport
from virtbench.studies import verdicts as V
from virtbench.studies.registry import study

BENCHES = [("hpcc", "hpl", "cpu"), ("hpcc", "stream_triad", "memory"), ("fio", "seq_read_bw", "storage"),
           ("ping", "rtt_avg", "network"), ("iperf3", "throughput", "network"), ("blender", "render_s", "application"),
           ("sqlite", "total_s", "application"), ("gan", "train_s", "application"),
           ("nginx-wrk", "requests_per_second", "network")]


def _lsbs(ratios: dict[str, tuple[float, float, float]]):
    """A quick lsbs run's report: every benchmark's row for native and each platform given, each
    platform's ratio with its interval."""
    platforms = [SimpleNamespace(name=n, type=n, config={}) for n in ("native", *ratios)]
    rows = []
    for bench, metric, cat in BENCHES:
        for name, (rel, lo, hi) in ratios.items():
            rows.append(Row(bench, metric, "x", True, cat, name, 3, 0, mean=1.0, ci95=[0.9, 1.1], relative=rel,
                            relative_ci95=[lo, hi], verdict="inconclusive"))
        rows.append(Row(bench, metric, "x", True, cat, "native", 3, 0, mean=1.0, ci95=[0.9, 1.1], relative=1.0,
                        relative_ci95=[1.0, 1.0], verdict="baseline"))
    run = SimpleNamespace(name="study003-lsbs-quick", id="q1", platforms=platforms, benchmarks=[], campaign={},
                          host=None, host_facts={"cpus": 2, "aes": True})
    return SimpleNamespace(run=run, rows=rows, sections=[])


def _values() -> dict[str, P.PaperValue]:
    return {v.id: v for v in P.load("003").values}


def test_a_wide_interval_is_undecided_and_says_what_decides():
    runs = sreport.part_runs(study("003"), [_lsbs({"docker": (1.41, 0.01, 3.98), "containerd": (1.2, 0.02, 3.5)})])
    out = V.judge(_values()["t7-cpu-container"], C.Matcher(runs), {}, P.load("003").categories, 20)
    assert out["verdict"] == "undecided at this scale" and out["yours"] == pytest.approx(1.41)
    assert "repetitions would decide it" in out["detail"] or "noise dominates" in out["detail"]


def test_narrow_intervals_decide_inside_and_outside_the_range():
    # Table 6's "Containerd" column is the paper's k0s: pods (the kubernetes platform), #38
    runs = sreport.part_runs(study("003"), [_lsbs({"docker": (0.80, 0.78, 0.82), "containerd": (0.5, 0.48, 0.52),
                                                   "kubernetes": (0.5, 0.48, 0.52)})])
    cats = P.load("003").categories
    assert V.judge(_values()["t7-cpu-container"], C.Matcher(runs), {}, cats)["verdict"] == "agrees"  # 0.28-0.86
    assert V.judge(_values()["t7-network-container"], C.Matcher(runs), {}, cats)["verdict"] == "differs"  # 0.95-1.12
    out = V.judge(_values()["t6-cpu"], C.Matcher(runs), {}, cats)
    assert out["yours"] == "Docker" and out["verdict"] == "differs"  # the paper's own 1 % gap: a tie


def test_no_agrees_or_differs_without_a_deciding_interval_and_the_text_fits_100_columns():
    reports = [_lsbs({"docker": (0.97, 0.6, 1.5), "containerd": (0.99, 0.96, 1.02)})]
    section = sreport.build(study("003"), sreport.part_runs(study("003"), reports))
    for c in section.data["comparisons"]:
        if c["verdict"] in ("agrees", "differs") and c["kind"] in ("range", "relative", "value"):
            assert c["ci95"], c
            lo, hi = c["ci95"]
            band = c["paper"] if c["kind"] == "range" else None
            if band:
                assert hi < band[0] or lo > band[1] or band[0] <= lo <= hi <= band[1], c
        if c["verdict"] == "not measured here":
            assert "virtbench study run 003" in c["detail"] or "no preset" in c["detail"], c
    lines = list(text.report_lines(section))
    assert max(map(len, lines)) <= 100
    assert any("undecided at this scale" in line for line in lines)
    assert section.data["differences"] and section.data["quick_scale"]["lsbs"]


def test_the_decision_rule():
    est = J.Estimate(1.0, (0.9, 1.1), 3)
    assert J.decide(est, 0.8, 1.2) == "agrees" and J.decide(est, 1.2, 1.4) == "differs"
    assert J.decide(est, 1.05, 1.4) == "undecided at this scale"
    assert J.decide(J.Estimate(1.0), 0.5, 2.0) == "undecided at this scale"  # one observation: no interval
    assert "3 runs or more" in J.to_decide(J.Estimate(1.0), 0.5, 2.0)
    assert J.to_decide(est, 1.05, 1.4).startswith("about ")
    g = J.geomean([J.Estimate(1.0, (0.9, 1.1), 3), J.Estimate(1.0, (0.8, 1.25), 3)])
    assert g is not None and g.ci is not None and 0.8 < g.ci[0] < 0.95
    assert J.of_values([1.0, 1.2, 1.1]).ci is not None and J.of_values([1.0]).ci is None


def test_claims_by_cells_need_every_cell_decided():
    e = P.Expect(within=0.1)
    rows = [Row("b", "m", "s", True, "cpu", "docker", 3, 0, relative=0.98, relative_ci95=[0.95, 1.01])]
    assert claims.by_cells(rows, e)[0] == "agrees"
    rows.append(Row("c", "m", "s", True, "cpu", "docker", 3, 0, relative=0.95, relative_ci95=[0.6, 1.3]))
    assert claims.by_cells(rows, e)[0] == "undecided at this scale"
    rows.append(Row("d", "m", "s", True, "cpu", "docker", 3, 0, relative=0.5, relative_ci95=[0.45, 0.55]))
    verdict, why = claims.by_cells(rows, e)
    assert verdict == "differs" and "d" in why


def test_a_run_across_hosts_is_matched_as_the_paper_ran_it_and_plans_validate():
    """--hosts for 001 and 003 (#41): the network tests' other end on the second host; the container
    receiving TCP becomes -R to that host; its points still answer the paper's values."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_studies import FixedCapabilities

    from virtbench.studies import run as srun

    assert C.as_paper_ran({"mode": "tcp-reverse", "client": "instance", "server": {"host": "b"}}) == \
        {"mode": "tcp", "client": "host", "server": "instance"}
    assert C.as_paper_ran({"mode": "udp", "server": {"host": "b"}})["server"] == "host"
    caps = FixedCapabilities(have={"second_host"}, platforms_ok={"native", "docker", "containerd"})
    caps.hosts = ("local", "pi-b")
    suite = srun.plan(study("001"), "paper", caps, ["suite"])[0].campaign
    assert [h.name for h in suite.hosts] == ["local", "pi-b"]
    servers = {b.key: b.params.get("server") for b in suite.benchmarks if b.name == "iperf3"}
    assert sum(1 for s in servers.values() if s == {"host": "pi-b"}) == 4  # tcp both ways, udp out at 2 rates
    assert {p.name: p.options.get("network") for p in suite.platforms}["docker"] == "host"
    lsbs = srun.plan(study("003"), "quick", caps, ["lsbs"])[0].campaign
    assert {b.params.get("server", {}).get("host") for b in lsbs.benchmarks if b.name in ("ping", "iperf3")} == {"pi-b"}
    caps.hosts = ()
    alone = srun.plan(study("001"), "quick", caps, ["suite"])[0].campaign
    assert not alone.hosts and all(b.params.get("server") != {"host": "pi-b"} for b in alone.benchmarks)


def test_every_stored_value_is_measured_by_a_part_or_says_what_would_measure_it():
    """#41 item 4: no claim stored and never judged: each value names its data (`yours`) or what would
    measure it (`how`), each claim has a rule; without runs each says the command."""
    for sid in ("000", "001", "002", "003", "004"):
        for v in P.load(sid).values:
            assert v.yours is not None or v.how, (sid, v.id)
            if v.kind == "claim" and v.yours is not None:
                assert v.judge or v.expect or v.yours.stacks or v.yours.overall, (sid, v.id)
        section = sreport.build(study(sid), [])
        for c in section.data["comparisons"]:
            assert c["verdict"] == "not measured here"
            assert "virtbench study run" in c["detail"] or "virtbench run" in c["detail"] or \
                "on a Raspberry Pi" in c["detail"], (sid, c["id"], c["detail"])

"""Aggregate tables (categories, best per kind, availability, stacks, hosts), compare, figure specs."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from virtbench.analysis import synthetic, tables
from virtbench.analysis.compare import compare
from virtbench.analysis.summary import Row, SampleView, summarize
from virtbench.cli import cli
from virtbench.report import figures
from virtbench.store.db import Store


def row(platform, rel, bench="b", metric="m", category="cpu", ci=None, **kw):
    return Row(bench, metric, "u", True, category, platform, n=5, failed=0, mean=rel, relative=rel,
               relative_ci95=ci, **kw)


def info(name, kind, ptype=None, inside=None, **config):
    return tables.PlatformInfo(name, ptype or name, kind, inside, config)


def test_category_geometric_mean_by_hand():
    rows = [row("native", 1.0, metric="a"), row("native", 1.0, metric="b"),
            row("vm", 0.5, metric="a"), row("vm", 2.0, metric="b"), row("vm", 0.9, metric="c", category="memory"),
            row("vm", None, metric="d"), Row("lifecycle", "create_s", "s", False, "lifecycle", "vm", 3, 0)]
    cat = tables.category_table(rows)
    assert list(cat) == ["cpu", "memory"]
    assert cat["cpu"]["vm"].geomean == pytest.approx(1.0)  # sqrt(0.5 * 2)
    assert (cat["cpu"]["vm"].metrics, cat["cpu"]["vm"].low, cat["cpu"]["vm"].high) == (2, 0.5, 2.0)
    assert cat["memory"]["vm"].geomean == pytest.approx(0.9)
    assert tables.geomean([]) is None and tables.geomean([0.8, 0.8]) == pytest.approx(0.8)


def test_best_of_kind_follows_the_verdicts_not_the_ratios():
    rows = [row("kvm", 0.99, verdict="same"), row("xen", 0.8, verdict="slower"), row("hv", 0.85, verdict="slower"),
            row("kvm-docker", 0.99, verdict="same"),
            row("docker", 0.95, category="memory", verdict="slower"),
            row("podman", 0.951, category="memory", verdict="slower")]
    cat = tables.category_table(rows)
    plats = [info("kvm", "vm"), info("xen", "vm"), info("hv", "vm"), info("kvm-docker", "container", "docker", "kvm"),
             info("docker", "container"), info("podman", "container")]
    [vm_cpu, vm_mem] = tables.best_of_kind(cat, plats, "vm")
    assert (vm_cpu.best, vm_cpu.worst, vm_cpu.decided) == ("kvm", None, True)  # xen and hv: both slower, a tie
    assert vm_mem.values == {} and vm_mem.best is None
    ct = {b.category: b for b in tables.best_of_kind(cat, plats, "container")}
    assert "kvm-docker" not in ct["cpu"].values  # stacked platforms are not runtimes on the host
    assert ct["memory"].best is None and ct["memory"].worst is None  # both slower: a tie


def test_best_of_kind_names_nobody_while_a_candidate_is_undecided():
    """The quick run of 2026-11-25: raw ratios 0.92-0.94, no cell decided, yet 'worst podman'."""
    rows = [row("docker", 0.9237, verdict="inconclusive"), row("podman", 0.916, verdict="slower"),
            row("lxc", 0.9405, verdict="inconclusive"),
            row("docker", 1.004, category="memory", verdict="same"),
            row("podman", 0.9, category="memory", verdict="slower"), row("lxc", 1.001, category="memory", verdict="same")]
    plats = [info(n, "container") for n in ("docker", "podman", "lxc")]
    got = {b.category: b for b in tables.best_of_kind(tables.category_table(rows), plats, "container")}
    assert (got["cpu"].best, got["cpu"].worst, got["cpu"].decided) == (None, None, False)
    assert (got["memory"].best, got["memory"].worst) == (None, "podman")  # docker and lxc: both the same


def test_availability_range_over_hosts():
    plats = [info("native", "baseline"), info("kvm", "vm"), info("xen", "vm"), info("docker", "container")]
    host_a = tables.category_table([row("kvm", 0.9), row("xen", 0.7), row("docker", 0.97)])
    host_b = tables.category_table([row("kvm", 0.6), row("xen", 0.8), row("docker", 1.05)])
    [cpu] = tables.availability({"a": host_a, "b": host_b}, {"a": plats, "b": plats})
    assert cpu["vm"]["min"] == pytest.approx(0.8) and cpu["vm"]["max"] == pytest.approx(0.9)  # best VM per host
    assert cpu["container"]["hosts"] == {"a": pytest.approx(0.97), "b": pytest.approx(1.05)}
    ranges = tables.category_ranges({"a": host_a, "b": host_b})
    assert ranges["cpu"]["kvm"]["min"] == pytest.approx(0.6) and ranges["cpu"]["kvm"]["max"] == pytest.approx(0.9)


def test_stack_prediction_by_hand():
    rows = [row("native", 1.0), row("qemu", 0.9), row("docker", 0.85), row("qemu-docker", 0.7, ci=[0.68, 0.72]),
            row("docker-cpus1", 0.5)]
    plats = [info("native", "baseline", "native"), info("qemu", "vm"),
             info("docker-cpus1", "container", "docker", cpus=1), info("docker", "container", "docker"),
             info("qemu-docker", "container", "docker", "qemu")]
    [s] = tables.stack_predictions(rows, plats)
    assert (s.outer, s.inner) == ("qemu", "docker")  # same options preferred over docker-cpus1
    assert s.predicted == pytest.approx(0.765)  # 0.9 x 0.85, the LSBS example
    assert s.error == pytest.approx(0.765 / 0.7 - 1)
    assert tables.stack_predictions(rows, plats[:-1]) == []


def test_hosts_matrix():
    m = tables.hosts_matrix({"a": [row("vm", 0.9)], "b": [row("vm", 0.7), row("x", None)]})
    vm = next(x for x in m if x["platform"] == "vm")
    assert set(vm["hosts"]) == {"a", "b"} and (vm["min"], vm["max"]) == (0.7, 0.9)
    assert next(x for x in m if x["platform"] == "x")["min"] is None


def _rows(values_by_platform, hib=True):
    s = [SampleView("b", "m", p, v, "u", hib, "cpu", i) for p, vs in values_by_platform.items()
         for i, v in enumerate(vs)]
    return summarize(s, {}, list(values_by_platform), "native")


def test_compare_runs():
    before = _rows({"native": [100.0, 101, 99, 100, 100.5, 99.5], "docker": [90.0, 91, 89, 90, 90.5, 89.5]})
    after = _rows({"native": [100.2, 100.8, 99.1, 100, 100.4, 99.6], "docker": [80.0, 81, 79, 80, 80.5, 79.5]})
    by = {r.platform: r for r in compare(before, after)}
    assert by["docker"].ratio == pytest.approx(80 / 90) and by["docker"].verdict == "slower"
    assert by["docker"].ratio_ci95[0] < by["docker"].ratio < by["docker"].ratio_ci95[1]
    assert by["native"].verdict == "same"
    assert by["docker"].p_value < 0.05 and by["native"].p_value < 0.05, "the p of the test that decided each"
    assert not hasattr(by["docker"], "p_holm")


def test_compare_decides_at_three_against_three_rounds():
    """Before: the p shown was a rank test's, which cannot go below 0.1 at 3 against 3 (p(Holm)
    1.0 beside 'slower'); now the verdict and its p come from the report's rule."""
    before = _rows({"native": [100.0, 101, 99], "docker": [90.0, 91, 89]})
    after = _rows({"native": [100.2, 100.8, 99.1], "docker": [80.0, 81, 79]})
    docker = next(r for r in compare(before, after) if r.platform == "docker")
    assert docker.verdict == "slower" and docker.p_value < 0.05
    assert docker.ratio_ci95[0] <= docker.ratio <= docker.ratio_ci95[1]


def test_compare_command(tmp_path):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = Store(url)
    synthetic.fill(store, "a", repetitions=12, seed=1)
    synthetic.fill(store, "b", repetitions=12, seed=2, host_speed=0.8)  # everything 20% slower after the "upgrade"
    res = CliRunner().invoke(cli, ["compare", "a", "b", "--json", "--db", url])
    assert res.exit_code == 0, res.output
    import json
    doc = json.loads(res.output)
    hpl = next(r for r in doc["results"] if r["metric"] == "HPL_Gflops" and r["platform"] == "native")
    assert hpl["ratio"] == pytest.approx(0.8, abs=0.03) and hpl["verdict"] == "slower"
    # every platform 20 % slower, the baseline too: the host moved, which the comparison says (#42)
    assert doc["hosts"] == ["sim-host", "sim-host"] and len(doc["notes"]) == 1
    assert "the baseline native itself moved" in doc["notes"][0]
    text = CliRunner().invoke(cli, ["compare", "a", "b", "--db", url])
    assert text.exit_code == 0 and "slower" in text.output
    assert max(len(line) for line in text.output.splitlines()) <= 100, "fits in 100 columns"


def test_compare_refuses_a_run_compared_with_itself(tmp_path):
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'c.db'}"
    synthetic.fill(Store(url), "a", repetitions=3, seed=1)
    res = subprocess.run([sys.executable, "-m", "virtbench", "compare", "a", "a", "--db", url],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1 and "same run" in res.stderr


def test_percentile_names():
    assert figures.percentile_of("p50") == ("|", 0.5)
    assert figures.percentile_of("p99_9") == ("|", pytest.approx(0.999))
    assert figures.percentile_of("p99_999") == ("|", pytest.approx(0.99999))
    assert figures.percentile_of("lat_p99_us") == ("lat_|_us", pytest.approx(0.99))
    assert figures.percentile_of("HPL_Gflops") is None and figures.percentile_of("p100") is None
    vals, labels = figures.hdr_ticks([0.5, 0.99, 0.999])
    assert vals == pytest.approx([2, 100, 1000]) and labels == ["50%", "99%", "99.9%"]


def test_figure_specs_of_a_synthetic_run(tmp_path):
    from virtbench.report import builder, runinfo

    store = Store(f"sqlite:///{tmp_path / 'f.db'}")
    synthetic.fill(store, "r", repetitions=6, drift={"runc": 0.05})
    _report = builder.build(store, "r")
    run, rows = _report.run, _report.rows
    cat = tables.category_table(rows)
    stacks = tables.stack_predictions(rows, runinfo.platform_infos(run))
    specs = figures.all_figures(rows, "native", run.benchmarks, cat, stacks)
    kinds = {s.kind for s in specs}
    assert kinds == {"bar", "box", "trend", "sweep", "count", "latency", "stack"}
    lat = next(s for s in specs if s.kind == "latency")
    assert lat.xlog and lat.xticks[1] == ["50%", "99%", "99.9%", "99.99%", "99.999%"]
    assert lat.series[0].x == pytest.approx([2, 100, 1000, 1e4, 1e5])
    sweep = next(s for s in specs if s.kind == "sweep")
    assert sweep.meta["param"] == "l" and sweep.series[0].x == [64.0, 1024.0, 16384.0, 65000.0] and sweep.xlog
    count = next(s for s in specs if s.kind == "count")
    assert count.meta["param"] == "instances" and count.series[-1].style == "dashed"
    trend = next(s for s in specs if s.kind == "trend" and "HPL" in s.title)
    assert any(s.style == "hollow" for s in trend.series) and "runc" in trend.note  # drift flagged
    bars = next(s for s in specs if s.id == "bar-sim-iperf3")
    assert bars.series[0].x == ["[l=64] throughput", "[l=1024] throughput", "[l=16384] throughput",
                                "[l=65000] throughput"]
    assert len({s.id for s in specs}) == len(specs)


def test_sweep_needs_exactly_one_varying_parameter():
    bench = [SimpleNamespace(key=f"x[a={a},b={b}]", name="x", params={"a": a, "b": b}) for a, b in ((1, 1), (2, 2))]
    assert figures.sweep_figures([row("native", 1.0, bench=bench[0].key)], bench) == []
    assert figures.finite(math.nan) is None and figures.finite(1.5) == 1.5


def test_crossed_parameters_give_one_sweep_per_fixed_value():
    combos = ((1, 64), (2, 64), (1, 1024))
    bench = [SimpleNamespace(key=f"openssl[bytes={b},multi={m}]", name="openssl", params={"multi": m, "bytes": b})
             for m, b in combos]
    found = {(param, tuple(fixed.items()), tuple(x for x, _ in pts)) for _, param, fixed, pts in figures.sweeps(bench)}
    assert found == {("multi", (("bytes", 64),), (1.0, 2.0)), ("bytes", (("multi", 1),), (64.0, 1024.0))}
    rows = [row(p, v, bench=b.key, metric="throughput") for b in bench for p, v in (("native", 1.0), ("runc", 0.9))]
    specs = figures.sweep_figures(rows, bench)
    assert sorted(s.kind for s in specs) == ["count", "sweep"]  # multi is an instance count
    assert len({s.id for s in specs}) == 2


def test_report_of_several_hosts_json_and_text(tmp_path):
    import json

    url = f"sqlite:///{tmp_path / 'm.db'}"
    store = Store(url)
    synthetic.fill(store, "a", hostname="alpha", repetitions=4, seed=1)
    synthetic.fill(store, "b", hostname="beta", repetitions=4, seed=2, host_speed=0.7)
    res = CliRunner().invoke(cli, ["report", "a", "b", "--json", "--db", url])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["hosts"] == ["alpha", "beta"] and [r["run"] for r in doc["runs"]] == ["a", "b"]
    line = next(x for x in doc["comparison"] if x["platform"] == "qemu" and x["metric"] == "HPL_Gflops")
    assert set(line["hosts"]) == {"alpha", "beta"} and line["min"] <= line["max"]
    assert doc["categories"]["cpu"]["qemu"]["hosts"].keys() == {"alpha", "beta"}
    assert {a["category"] for a in doc["availability"]} == {"cpu", "memory", "storage", "network", "application"}
    text = CliRunner().invoke(cli, ["report", "a", "b", "--db", url])
    assert text.exit_code == 0 and "alpha" in text.output and "beta" in text.output


def test_plotly_labels_cannot_become_markup():
    from virtbench.report import interactive

    spec = figures.FigureSpec("x", "bar", "<a href='http://evil'>t</a>", "x", "y",
                              [figures.Series("p<b>", ["m<i>"], [1.0], text=["<br>"])])
    fig = interactive.figure(spec, {})
    assert fig["layout"]["title"]["text"].startswith("&lt;a href=")
    trace = fig["data"][0]
    assert trace["name"] == "p&lt;b&gt;" and trace["x"] == ["m&lt;i&gt;"] and trace["text"] == ["&lt;br&gt;"]
    assert "</script" not in interactive.script_json({"s": "</script><!--"})


def test_figure_labels_are_escaped_in_bulk_as_one_by_one():
    """interactive.txts skips the per-label call when nothing needs escaping; whatever the mix,
    it gives what txt() of each value gives (< > & as entities, numbers and None untouched)."""
    from virtbench.report.interactive import txt, txts

    for values in (["round 1", "round 2"], [1.5, None, 3], ["a<b", "c&d", 2.0, None, "e>f"], ["plain", 7], [],
                   ["x", "<script>"]):
        assert txts(values) == [txt(v) for v in values]
    assert txts(["<b>"]) == ["&lt;b&gt;"]

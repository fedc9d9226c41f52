"""The terminal report: headline first, verdict tables, nothing wider than 100 columns."""
import re

from click.testing import CliRunner
from rich.console import Console

from virtbench.analysis import synthetic
from virtbench.cli import cli
from virtbench.report import builder, text
from virtbench.store.db import Store


def _many_platforms() -> list[synthetic.SimPlatform]:
    base = synthetic.default_platforms()
    docker = base[1]
    extra = [synthetic.SimPlatform(f"docker-with-a-rather-long-name-{i}", "docker", "container",
                                   {k: v * (0.97 + 0.01 * i) for k, v in docker.factors.items()}) for i in range(6)]
    return base + extra


def test_text_report_has_category_best_and_stack_tables(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    synthetic.fill(store, "sim", repetitions=4)
    report = builder.build(store, "sim")
    run = report.run
    console = Console(record=True, width=220)
    text.render(report, console)
    out = console.export_text()
    assert "Geometric mean of relative performance per category" in out
    assert "Container runtimes compared: the best of them per category" in out
    assert any(p.config.get("inside") for p in run.platforms), "the synthetic run has a stack"
    assert "measured against the product of the layers" in out


def test_headline_first_and_nothing_wider_than_100_columns(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    synthetic.fill(store, "sim", repetitions=3, platforms=_many_platforms())
    report = builder.build(store, "sim")
    console = Console(record=True, width=250)
    text.render(report, console, detail=True)
    out = console.export_text()
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    head = "\n".join(lines[:out[:out.index("Performance relative to native")].count("\n")])
    assert "Against native" in head and "biggest cost" in head
    qemu = next(line for line in lines[:20] if line.startswith("qemu "))
    assert " vm " in qemu and "▼" in qemu, "the VM's headline line carries its kind and a slower category"
    assert "qemu-docker" in head and "stack" in head.split("qemu-docker", 1)[1].splitlines()[0]
    assert out.index("Against native") < out.index("Performance relative to native")
    for i in range(6):  # every platform is in some table
        assert f"docker-with-a-rather-long-name-{i}" in out
    wide = Console(record=True, width=400)
    text.render(report, wide, wide=True)
    assert max(len(line) for line in wide.export_text().splitlines()) > 100, "--wide keeps the old layout"


def test_cli_report_wide_flag_and_json_headline(tmp_path):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    synthetic.fill(Store(url), "r", repetitions=3)
    res = CliRunner().invoke(cli, ["report", "r", "--db", url])
    assert res.exit_code == 0, res.output
    assert max(len(line) for line in res.output.splitlines()) <= 100
    assert CliRunner().invoke(cli, ["report", "r", "--wide", "--db", url]).exit_code == 0
    import json
    doc = json.loads(CliRunner().invoke(cli, ["report", "r", "--json", "--db", url]).output)
    kinds = {p["platform"]: p["kind"] for p in doc["headline"]["platforms"]}
    assert kinds == {"docker": "container", "runc": "container", "qemu": "vm", "qemu-docker": "stack"}
    qemu = next(p for p in doc["headline"]["platforms"] if p["platform"] == "qemu")
    storage = next(c for c in qemu["categories"] if c["category"] == "storage")
    assert storage["verdict"] == "slower" and qemu["biggest_cost"]["verdict_reason"].startswith("slower by")


def test_one_shot_commands_run_without_the_collector_and_restore_it(monkeypatch):
    """`report` runs inside commands.shared.one_shot: no cyclic collection and one OpenBLAS thread
    while it runs (both cost a report of 100,000 samples CPU), both restored after."""
    import gc
    import os

    from virtbench.commands.shared import one_shot

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    assert gc.isenabled()
    with one_shot():
        assert not gc.isenabled() and os.environ["OPENBLAS_NUM_THREADS"] == "1"
    assert gc.isenabled() and "OPENBLAS_NUM_THREADS" not in os.environ


def test_the_text_report_lists_warnings_undecided_results_rounds_and_human_units(tmp_path):
    """Before: platforms left out, the host load and the quality flags appeared in HTML and JSON
    only; an undecided cell was a bare '?'; 'repetitions' said what the campaign asked, not the
    rounds measured; lifecycle in seconds; a rate in B/s printed as 1.873e+09."""
    from virtbench.store.models import RunBenchmark

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    bench = synthetic.SimBenchmark("openssl", "openssl", {}, (
        synthetic.SimMetric("throughput_cpu", "B/s", True, "cpu", 1.873e9, 0.02),))
    synthetic.fill(store, "r", repetitions=7, warmups=0, benchmarks=[bench, *synthetic.default_benchmarks()[:2]],
                   facts=synthetic.host_facts("h", loadavg=[6.0, 5.0, 5.0]))
    run = store.run("r")
    store.update_run("r", campaign={**run.campaign, "repetitions": 3},
                     provenance={**run.provenance, "left_out": [
                         {"platform": "crun", "reason": "crun refuses hybrid cgroup hierarchies",
                          "fix": "use runc on this host"}]})
    with store.session.begin() as s:
        rb = s.query(RunBenchmark).filter_by(run_id="r", key="openssl").one()
        rb.metrics = [{"name": "throughput_cpu", "unit": "B/s", "higher_is_better": True, "category": "cpu",
                       "description": "per CPU second", "label": "{unit} of CPU time"}]
    report = builder.build(store, "r")
    console = Console(record=True, width=400)
    text.render(report, console, wide=True)  # no cell wrapped: each sentence on one line
    out = " ".join(console.export_text().split())
    assert "7 rounds measured (3 asked, 4 added to decide)" in out and not re.search(r"(?<![0-9])3 repetitions", out)
    assert "crun not measured: crun refuses hybrid cgroup hierarchies" in out and "use runc on this host" in out
    assert "host load average 6.00" in out, "the host's load in words"
    assert "GB/s of CPU time" in out and "e+09" not in out
    assert "median ms per step" in out and " UTC" in out
    undecided = [r for r in report.rows if r.verdict == "inconclusive"]
    for r in undecided:  # each undecided result with what would decide it
        assert " ".join(r.verdict_reason.split()) in out
    assert "disk" not in out.split("Against native")[1].split("\n")[0]

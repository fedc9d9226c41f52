"""Repeated runs of one campaign on one host, pooled on the dashboard and by `report RUN1 RUN2 ...` (#42).

Before: three identical quick runs gave lxc application ▼, = and ?; the dashboard showed them
side by side with nothing that pooled them or flagged the disagreement, and `report A B C`
laid them out as three hosts."""
from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from click.testing import CliRunner

from virtbench.analysis import synthetic
from virtbench.analysis.repeats import disagree
from virtbench.cli import cli
from virtbench.store.db import Store

from .helpers import make_client

RUNS = ("q0", "q1", "q2")


@pytest.fixture(scope="module")
def repeated(tmp_path_factory):
    """Three runs of one campaign on one host, the host 2 % slower each time (its drift between
    runs); docker's CPU cost moves between them (10 % faster, 10 % slower, the same), so their
    verdicts of its CPU results disagree."""
    store = Store(f"sqlite:///{tmp_path_factory.mktemp('rep') / 'rep.db'}")
    for i, (rid, docker_cpu) in enumerate(zip(RUNS, (1.1, 0.9, 1.0))):
        plats = synthetic.default_platforms()[:3]
        plats[1] = replace(plats[1], factors={**plats[1].factors, "cpu": docker_cpu})
        synthetic.fill(store, rid, repetitions=4, seed=10 + i, host_speed=1 - 0.02 * i, platforms=plats,
                       benchmarks=synthetic.default_benchmarks()[:3])  # few figures for the HTML file
    return store


def test_report_of_repeated_runs_pools_them_with_one_verdict_per_cell(repeated):
    res = CliRunner().invoke(cli, ["report", *RUNS, "--json", "--db", repeated.url])
    doc = json.loads(res.output)["repeats"]
    assert doc["runs"] == list(RUNS) and doc["baseline"] == "native"
    cells = {(c["benchmark"], c["metric"], c["platform"]): c for c in doc["cells"]}
    hpl = cells[("sim-hpcc", "HPL_Gflops", "docker")]
    assert hpl["verdicts"][:2] == ["faster", "slower"] and hpl["disagree"]
    assert doc["disagreements"] == sum(disagree(c["verdicts"]) for c in doc["cells"]) >= 1
    for c in doc["cells"]:
        if c["relative_ci95"]:
            assert c["relative_ci95"][0] <= c["relative"] <= c["relative_ci95"][1]
    # the host's drift between runs (2 % a run, every platform alike) is no platform's cost
    runc_cpu = doc["categories"]["runc"]["cpu"]
    assert runc_cpu["verdict"] != "slower" or runc_cpu["relative"] > 0.98
    text = CliRunner().invoke(cli, ["report", *RUNS, "--db", repeated.url]).output
    assert "3 repeated runs on sim-host, pooled" in text and re.search(r"\(runs ▲ ▼ .\) ⚑", text)


def test_the_dashboard_pools_repeated_runs_and_flags_disagreement(repeated):
    client = make_client(repeated)
    api = client.get("/api/dashboard").json()
    [group] = api["repeated"]
    assert group["runs"] == list(RUNS) and group["disagreements"] >= 1
    assert group["categories"]["docker"]["cpu"]["disagree"] >= 1
    page = client.get("/").text
    assert "Repeated runs, pooled" in page
    section = page[page.index("Repeated runs, pooled"):page.index("Recent results")]
    assert re.search(r"⚑\d", section) and all(f"/runs/{r}" in section for r in RUNS)


def test_the_html_file_of_repeated_runs_pools_them_too(repeated, tmp_path):
    out = tmp_path / "r.html"
    assert CliRunner().invoke(cli, ["report", *RUNS, "--html", str(out), "--db", repeated.url]).exit_code == 0
    page = out.read_text()
    assert "3 repeated runs on sim-host, pooled" in page and re.search(r"\(runs ▲ ▼ .\) ⚑", page)

"""One report model, rendered everywhere (#27): a stored run of every experiment kind (benchmarks:
the run stored by old code in tests/data/report and a synthetic one with a stack; density;
migration; line) goes through every surface: the terminal (`virtbench report`), `report --json`,
the HTML file (`report --html`), the web run page, `GET /api/runs/ID/report` and the web's JSON
and HTML downloads. Each surface must carry the same parts (the headline with each biggest cost,
the results, the undecided results, the warnings, every experiment section) and the same number
for each cell, inside its interval.

Before: the HTML file had no headline and no biggest cost, the web run page no warnings and no
charts, the API report and the downloads no experiment sections (`line`, `density`, ...), and a
cell's `relative` (a ratio of means) could lie outside its own interval."""
from __future__ import annotations

import json
import re
import shutil
from html import unescape
from pathlib import Path

import pytest
from click.testing import CliRunner

from virtbench.analysis import synthetic
from virtbench.cli import cli
from virtbench.notation import ratio_with_interval
from virtbench.report import builder, layout
from virtbench.report.layout import base_key
from virtbench.store.db import Store, now

DATA = Path(__file__).parents[1] / "data" / "report"


def _record(store, run_id, platform, key, rnd, values, *, unit="s", hib=False, category="migration",
            status="ok", stdout="", error="", per_instance=None):
    samples = [{"metric": m, "value": v, "unit": unit, "higher_is_better": hib, "category": category}
               for m, v in values.items()]
    samples += [{"metric": m, "value": v, "unit": unit, "higher_is_better": hib, "category": category,
                 "instance": i} for m, vs in (per_instance or {}).items() for i, v in enumerate(vs, 1)]
    store.record(run_id=run_id, round=rnd, warmup=False, platform=platform, benchmark=key, status=status,
                 started_at=now(), finished_at=now(), duration_s=1.0, error=error, stdout=stdout, samples=samples)


def _run(store, run_id, kind, platforms, extra=None, provenance=None, labels=None):
    campaign = {"name": kind, "experiment": kind, "baseline": platforms[0], "repetitions": 2, "warmups": 0,
                "platforms": [{"name": p, "type": "lxc"} for p in platforms], **(extra or {})}
    store.create_run(run_id=run_id, name=kind, campaign=campaign, source="", seed=1, status="finished",
                     host_id=None, host_facts=synthetic.host_facts("kind-host"), image={},
                     provenance=provenance or {}, benchmarks=[],
                     platforms=[{"name": p, "type": "lxc", "label": (labels or {}).get(p, p), "config": {}}
                                for p in platforms])


def _density(store):
    _run(store, "density", "density", ["lxc"])
    for count in (1, 2, 4):
        _record(store, "density", "lxc", f"density[count={count}]", 0, {"throughput_total": 100.0 * count},
                unit="MB/s", hib=True, category="cpu", per_instance={"throughput": [100.0] * count})
    stop = {"platform": "lxc", "label": "lxc", "type": "lxc", "max_count": 4, "stop_reason": "memory",
            "stop_detail": "MemAvailable below the guard", "stop_count": 8, "stop_evidence": {},
            "memory_per_instance_bytes": 5e6, "mem_available_drop_per_instance_bytes": 6e6, "confined": False,
            "host_memory": None, "mem_total": 2e10, "guard_thresholds": {}, "guard_series": [], "min_overlap": 0.8,
            "probes": [], "duration_s": 10.0, "image": {"name": "img", "release": "bookworm"}}
    _record(store, "density", "lxc", "density-stop", 0, {}, stdout=json.dumps(stop), error="memory: guard")


def _migration(store):
    _run(store, "migration", "migration", ["lxc"], {"migration": {"to": {"path": "/mnt/x"}, "counts": [1, 2]}},
         {"migration": {"storage": {"x": {"path": "/mnt/x", "filesystem": "xfs", "kind": "xfs on loop0",
                                          "write_MBps": 400.0, "read_MBps": 900.0}}}})
    for rnd, scale in ((0, 1.0), (1, 1.2)):
        for n in (1, 2):
            _record(store, "migration", "lxc", f"migration[count={n},to=x]", rnd,
                    {"stop_s": 0.1 * n * scale, "transfer_s": 0.5 * n * scale, "start_s": 0.2 * scale,
                     "total_s": (0.3 + 0.5 * n) * scale, "downtime_s": (0.3 + 0.5 * n) * scale})


def _line(store):
    # lxc with options, labelled as the stored line run (tests/data/line) has it: made by code
    # before #42, its label has Python reprs the report must not repeat
    _run(store, "line", "line", ["netns", "lxc"], labels={"lxc": "lxc(lxcfs=False,init=none)"})
    for rnd in (0, 1):
        for p, cost in (("netns", 1.0), ("lxc", 0.8)):
            for n in (1, 2):
                _record(store, "line", p, f"line[length={n},pinning=none]", rnd,
                        {"ndr_pps": 1e5 * cost / n + rnd, "pdr_pps": 1.1e5 * cost / n + rnd},
                        unit="pps", hib=True, category="network")


def _pods(store):
    """Pods created 1 and 10 at once (migration's lifecycle mode on the kubernetes platform): the
    `pods` part with start-up percentiles (#38)."""
    _run(store, "pods", "migration", ["pod"], {"migration": {"mode": "lifecycle", "counts": [1, 10]}})
    run = store.run("pods")
    store.update_run("pods", campaign={**run.campaign, "platforms": [{"name": "pod", "type": "kubernetes"}]})
    for rnd in (0, 1):
        for n in (1, 10):
            ready = [0.8 + 0.1 * i + rnd for i in range(n)]
            _record(store, "pods", "pod", f"migration[count={n}]", rnd,
                    {"create_s": 0.05 * n, "start_s": max(ready), "stop_s": 1.0, "remove_s": 1.5,
                     "pod_ready_s": sum(ready) / n}, category="lifecycle",
                    per_instance={"pod_ready_s": ready} if n > 1 else None)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("surfaces")
    shutil.copy(DATA / "store-0003.sqlite", tmp / "s.db")  # the run stored by old code, migrated when opened
    s = Store(f"sqlite:///{tmp / 's.db'}")
    synthetic.fill(s, "bench", repetitions=4, drift={"runc": 0.03}, fail={("qemu", "sim-fio"): [2]})
    _density(s)
    _migration(s)
    _line(s)
    _pods(s)
    return s


RUNS = ("fixture-0003", "bench", "density", "migration", "line", "pods")


def _parts(store, run_id):
    """The parts a report of this run must show: (section key, what it is known by: its first table's
    title with rows, else its first note, else its own title) of every section with something to
    show, and the biggest-cost notes of its headline."""
    report = builder.build(store, run_id)
    parts = [(base_key(s.key), next((t.title for t in s.tables if t.rows), s.notes[0] if s.notes else s.title))
             for s in layout.of(report) if not s.detail and (any(t.rows for t in s.tables) or s.figures or s.notes)]
    costs = [n for s in layout.of(report) if s.key == "headline" for n in s.notes if ": biggest cost " in n]
    return report, parts, costs


def _web(store):
    from fastapi.testclient import TestClient

    from virtbench.web.app import create_app
    from virtbench.web.settings import Settings

    return TestClient(create_app(Settings(db_url=store.url, token="t" * 24), store), base_url="http://testserver")


def _text_of(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", " ", html))


@pytest.mark.usefixtures("figures_drawn_once")
@pytest.mark.parametrize("run_id", RUNS)
def test_every_surface_carries_the_same_parts_and_numbers(store, run_id, tmp_path, monkeypatch):
    monkeypatch.setattr("virtbench.report.html.plotly_js", lambda: "")
    report, parts, costs = _parts(store, run_id)
    kind = report.run.campaign.get("experiment") or "benchmarks"
    keys = {k for k, _ in parts}
    if kind != "benchmarks":
        assert kind in keys, f"the {kind} section is a part of the report"
    else:
        assert {"headline", "results", "warnings", "charts"} <= keys and costs
    if run_id == "pods":
        assert "pods" in keys, "the pods' start-up percentiles are a part of the report"
    runner = CliRunner()
    terminal = runner.invoke(cli, ["report", run_id, "--db", store.url], env={"COLUMNS": "100"}).output
    doc = json.loads(runner.invoke(cli, ["report", run_id, "--json", "--db", store.url]).output)
    html_file = tmp_path / "r.html"
    assert runner.invoke(cli, ["report", run_id, "--html", str(html_file), "--db", store.url]).exit_code == 0
    client = _web(store)
    page = client.get(f"/runs/{run_id}").text
    api = client.get(f"/api/runs/{run_id}/report").json()
    download = client.get(f"/api/runs/{run_id}/download/json?table=report").json()
    download_html = client.get(f"/api/runs/{run_id}/download/html").text

    # the JSON surfaces are one document: every top-level part, every section
    assert api == download
    assert json.loads(json.dumps(doc).replace("NaN", "null")).keys() == api.keys()
    assert api["results"] == json.loads(json.dumps(doc["results"]).replace("NaN", "null"))
    for key in ("headline", "warnings", "tables", "statistics"):
        assert key in api
    for s in report.sections:
        if s.in_json:
            assert s.key in api, f"{s.key} in the API report"
    # the rendered surfaces: every part by its title, every biggest cost
    html_text = _text_of(html_file.read_text())
    for name, text in (("terminal", terminal), ("HTML file", html_text), ("web run page", _text_of(page)),
                       ("HTML download", _text_of(download_html))):
        flat = " ".join(text.split())
        for key, title in parts:
            if key in ("statistics", "charts_detail"):
                continue
            if key == "charts" and name == "terminal":
                assert "charts: in the HTML report" in flat
                continue
            assert title in flat, f"{name} lacks the {key} part ({title})"
        for cost in costs:
            assert " ".join(cost.split()) in flat, f"{name} lacks '{cost}'"
    # one number per cell, inside its interval, the same in the tables of every surface
    for r in doc["results"]:
        if r["relative"] is None or r["verdict"] in (None, "baseline") or not r["relative_ci95"]:
            continue
        lo, hi = r["relative_ci95"]
        assert lo <= r["relative"] <= hi, (r["benchmark"], r["metric"], r["platform"])
        cell = ratio_with_interval(r['relative'], [lo, hi])  # the one notation (#42)
        for name, text in (("HTML file", html_text), ("web run page", _text_of(page))):
            assert cell in " ".join(text.split()), f"{name} lacks {cell} of {r['benchmark']} {r['platform']}"
        assert f"{r['relative']:.3f}" in terminal

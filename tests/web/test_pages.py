"""The HTML pages render what they should, and the schedule form queues a run."""
from __future__ import annotations

import re

from dbsupport import running_owner
from virtbench.store.models import Run

from .helpers import login


def test_every_page_renders(client):
    pages = {
        "/": ["Hosts", "sim-host", "other-host", "Recent results", "No worker is running"],
        "/runs": ["r1", "r2", "finished"],
        "/runs?status=finished": ["r1"],
        "/runs/r1": ["Results", "sim-hpcc", "v-slower", "Downloads", "Executions", "Provenance"],
        "/runs/r1/verify": ["<svg", "All metrics", "/executions/"],
        "/runs/r1/verify?benchmark=sim-fio&metric=randread_iops": ["failed: exit status 1: device busy", "drift"],
        "/compare": ["Runs and hosts"],
        "/compare?run=r1&run=r2": ["Per category", "<svg", "Every metric", "Welch t interval"],
        "/compare?host=sim-host&host=other-host&by_host=true": ["Per category, per host", "hosts as columns"],
        "/schedule": ['name="p0.use"', "sysbench-cpu", "Or a YAML campaign file"],
        "/api": ["/api/runs/{run_id}/progress", "Bearer"],
        "/login": ['name="token"'],
    }
    for path, expected in pages.items():
        r = client.get(path)
        assert r.status_code == 200, path
        for text in expected:
            assert text in r.text, (path, text)
    ex = client.get("/api/runs/r1/executions", params={"limit": 1}).json()[0]
    page = client.get(f"/executions/{ex['id']}")
    assert "sim output" in page.text and "Values parsed from this output" in page.text
    assert client.get("/runs/nope").status_code == 404 and "no run" in client.get("/runs/nope").text


def test_schedule_through_the_form(client, filled):
    csrf = login(client)
    form = {"csrf": csrf, "mode": "form", "name": "quick-web", "baseline": "native", "repetitions": "2",
            "warmups": "0", "shuffle": "on", "profile": "auto", "target_host": "",
            "p0.use": "on", "p0.name": "native", "p0.type": "native",
            "p1.use": "on", "p1.name": "runc", "p1.type": "runc",
            "p9.use": "on", "p9.name": "runc-1cpu", "p9.type": "runc", "p9.opt.cpus": "1", "p9.opt.memory": "",
            "p2.name": "docker", "p2.type": "docker",
            "b0.use": "on", "b0.name": "sysbench-cpu", "b0.param.time": "1", "b0.param.threads": "",
            "b1.name": "fio", "b1.param.size": "bogus"}
    r = client.post("/schedule", data=form, follow_redirects=False)
    assert r.status_code == 303, r.text
    run_id = r.headers["location"].rsplit("/", 1)[1]
    with filled.session() as s:
        run = s.get(Run, run_id)
    assert run.status == "queued" and run.name == "quick-web"
    assert [p["name"] for p in run.campaign["platforms"]] == ["native", "runc", "runc-1cpu"]
    assert run.campaign["platforms"][2]["options"] == {"cpus": 1.0}
    [bench] = run.campaign["benchmarks"]
    assert (bench["key"], bench["name"], bench["params"]) == ("sysbench-cpu", "sysbench-cpu", {"time": 1})
    assert "name: quick-web" in run.campaign_source  # the form's campaign as YAML, as a file would hold it
    page = client.get(r.headers["location"])
    assert 'data-progress-run="' + run_id in page.text and "queued" in page.text and 'id="cancel"' in page.text


def test_comma_separated_values_sweep_a_parameter(client, filled):
    csrf = login(client)
    form = {"csrf": csrf, "mode": "form", "name": "sweep-web", "baseline": "native", "repetitions": "2",
            "warmups": "0", "profile": "auto", "p0.use": "on", "p0.name": "native", "p0.type": "native",
            "b0.use": "on", "b0.name": "sysbench-cpu", "b0.param.time": "1", "b0.param.threads": "1, 2,4"}
    r = client.post("/schedule", data=form, follow_redirects=False)
    assert r.status_code == 303, r.text
    with filled.session() as s:
        run = s.get(Run, r.headers["location"].rsplit("/", 1)[1])
    points = [(b["key"], b["params"]) for b in run.campaign["benchmarks"]]
    assert [p["threads"] for _, p in points] == [1, 2, 4] and all(p["time"] == 1 for _, p in points)
    assert "sweep:" in run.campaign_source and "threads:" in run.campaign_source


def test_refused_form_keeps_what_was_typed(client):
    csrf = login(client)
    r = client.post("/schedule", data={"csrf": csrf, "name": "keep-me", "repetitions": "0", "p0.use": "on",
                                       "p0.name": "native", "p0.type": "native", "b0.use": "on",
                                       "b0.name": "sysbench-cpu", "b0.param.time": "3"})
    assert r.status_code == 400
    assert "campaign form: repetitions" in r.text
    assert 'value="keep-me"' in r.text and 'value="3"' in r.text


def test_cancel_and_delete_through_pages(client, filled):
    csrf = login(client)
    r = client.post("/runs/r1/delete", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303 and client.get("/runs/r1").status_code == 404
    filled.update_run("r2", status="running")
    r = client.post("/runs/r2/cancel", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303
    with filled.session() as s:
        assert s.get(Run, "r2").cancel_requested
    assert client.post("/runs/r2/delete", data={"csrf": csrf}).status_code == 409
    out = client.post("/logout", data={"csrf": csrf}, follow_redirects=False)
    assert out.status_code == 303 and not re.search(r"vb_session=[^;]+;", out.headers.get("set-cookie", "").replace(
        'vb_session="";', ""))


def test_a_worker_host_without_facts_yet_shows(client, filled):
    """A worker has registered but not yet stored its host's facts (it probes first)."""
    import os

    from virtbench.store.db import now
    from virtbench.store.models import Worker as WorkerRow
    from virtbench.store.queue import hostname

    with filled.session.begin() as s:
        s.add(WorkerRow(id="fresh", hostname=hostname(), pid=os.getpid(), state="probing", started_at=now(),
                        heartbeat_at=now(), facts={}))
    page = client.get("/")
    assert page.status_code == 200 and "probing" in page.text and "No worker is running" not in page.text
    assert client.get("/api/hosts").status_code == 200


def test_list_parameters_are_comma_separated():
    from virtbench.web import forms

    botan = next(b for b in forms.catalog()["benchmarks"] if b["name"] == "botan")
    algorithms = next(p for p in botan["params"] if p["name"] == "algorithms")
    assert algorithms["kind"] == "list" and "AES-256" in algorithms["choices"]
    model = forms.default_form()
    model["name"] = "lists"
    for row in model["benchmarks"]:
        if row["name"] == "botan":
            row["use"], row["param"] = True, {"algorithms": "AES-128, Twofish", "msec": "200"}
    campaign, text = forms.from_form(model)
    [b] = campaign.benchmarks
    assert b.params == {"algorithms": ["AES-128", "Twofish"], "msec": 200} and "Twofish" in text


def test_before_after_page_and_api_compare_two_runs_and_refuse_one_with_itself(client):
    """The web's A/B comparison is `virtbench compare A B`: B against A by the report's rule."""
    page = client.get("/compare/before-after", params={"a": "r1", "b": "r2"})
    assert page.status_code == 200 and "Before / after" in page.text and 'id="before-after-table"' in page.text
    doc = client.get("/api/compare/before-after", params={"a": "r1", "b": "r2"}).json()
    assert doc["a"] == "r1" and doc["b"] == "r2" and doc["results"]
    for r in doc["results"]:
        if r["ratio_ci95"]:
            assert r["ratio_ci95"][0] <= r["ratio"] <= r["ratio_ci95"][1]
        assert "p_holm" not in r
    same = client.get("/compare/before-after", params={"a": "r1", "b": "r1"})
    assert same.status_code == 400 and "same run" in same.text
    assert client.get("/api/compare/before-after", params={"a": "r1", "b": "r1"}).status_code == 400
    assert "Platforms across runs" in client.get("/compare").text and "Before / after" in client.get("/").text


def test_progress_of_an_adaptive_run_counts_done_of_planned_never_over_100_percent(client, filled):
    """Before: '254/96 executions' (265 %) once adaptive rounds ran: the planned count was the
    campaign's declared rounds only."""
    run = filled.run("r1")
    done = client.get("/api/runs/r1/progress").json()["executions"]
    filled.update_run("r1", status="running", campaign={**run.campaign, "repetitions": 2,
                                                         "adaptive": {"max_repetitions": 16}},
                      provenance={**run.provenance, "adaptive": [
                          {"round": 3, "platforms": ["docker", "native"], "reasons": {}}]})
    p = client.get("/api/runs/r1/progress").json()
    assert p["executions"] == done and p["planned"] >= done and p["expected"] == p["planned"]
    assert p["percent"] <= 100 and p["cap"] > p["planned"]
    page = client.get("/runs/r1").text
    assert f"{done}/{p['planned']}" in page and f"adaptive cap {p['cap']}" in page
    listed = client.get("/runs").text
    assert f"{done}/{p['planned']}" in listed and f"{done}/{queries_expected(filled)}" not in listed


def test_progress_of_a_running_run_has_an_eta_and_the_most_it_may_take(client, filled):
    """Before: no ETA on the web (only the terminal's bar had one). The planned executions at the
    rate since the run started; with adaptive rounds also the most it may take (its caps)."""
    from datetime import timedelta

    from virtbench.store.db import now

    run = filled.run("r1")
    assert client.get("/api/runs/r1/progress").json()["eta"] == ""  # finished: nothing left
    filled.update_run("r1", status="running", started_at=now() - timedelta(minutes=10),
                      campaign={**run.campaign, "repetitions": 8,
                                "adaptive": {"max_repetitions": 16, "max_minutes": 60}})
    p = client.get("/api/runs/r1/progress").json()
    assert p["planned"] > p["executions"] > 0
    rate = p["executions"] / 600
    assert abs(p["eta_seconds"] - (p["planned"] - p["executions"]) / rate) <= 3
    assert p["eta_seconds"] < p["eta_most_seconds"] <= 50 * 60 + p["cap"] / rate  # the 60 minutes bound it
    assert re.fullmatch(r"ETA \d+:\d\d(:\d\d)?, at most \d+:\d\d(:\d\d)?", p["eta"])
    page = client.get("/runs/r1").text
    assert re.search(r'id="eta">ETA \d+:\d\d', page)


def queries_expected(store) -> int:
    """What the store's run list says the run will record (the campaign's rounds only)."""
    from virtbench.web import queries

    return next(r["expected"] for r in queries.list_runs(store) if r["id"] == "r1")


def test_killed_run_can_be_cancelled_and_deleted_through_pages(client, filled):
    """The run page of a run whose process was killed with SIGKILL offers cancel and delete."""
    p = running_owner(filled.url, "stuck")
    csrf = login(client)
    assert 'id="delete"' not in client.get("/runs/stuck").text  # it measures
    p.kill()
    p.wait()
    page = client.get("/runs/stuck").text
    assert 'id="cancel"' in page and 'id="delete"' in page and "interrupted" in page
    assert client.post("/runs/stuck/cancel", data={"csrf": csrf}, follow_redirects=False).status_code == 303
    assert client.post("/runs/stuck/delete", data={"csrf": "wrong"}, follow_redirects=False).status_code == 403
    assert client.post("/runs/stuck/delete", data={"csrf": csrf}, follow_redirects=False).status_code == 303
    assert client.get("/runs/stuck").status_code == 404


def test_run_page_shows_headline_warnings_and_charts(client):
    """#29: the run page has the report's headline first, its warnings and its charts (the one
    report model every renderer shows, report/layout.py)."""
    page = client.get("/runs/r1").text
    sections = re.findall(r'<h3 id="([a-z_]+)">', page)
    assert sections[0] == "headline" and {"warnings", "charts", "results"} <= set(sections)
    charts = page.split('<h3 id="charts">', 1)[1].split("<h3 ", 1)[0]
    assert charts.count("<svg") >= 2
    warnings = page.split('<h3 id="warnings">', 1)[1].split("<h3 ", 1)[0]
    assert "drift" in warnings  # r1's docker drifts (helpers.fill)

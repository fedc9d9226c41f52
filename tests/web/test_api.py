"""The JSON API on a store with two synthetic runs: reads, schedule, cancel, delete, downloads."""
from __future__ import annotations

import subprocess
import sys

import pytest

from dbsupport import running_owner
from virtbench.config import load_yaml, parse_campaign
from virtbench.errors import InputError

QUICK = {"name": "quick", "repetitions": 2, "warmups": 0, "platforms": ["native", "runc"],
         "benchmarks": [{"name": "sysbench-cpu", "time": 1}]}


def test_openapi_documents_every_route_and_marks_the_writes(client):
    doc = client.get("/openapi.json").json()
    paths = doc["paths"]
    for path in ("/api/status", "/api/dashboard", "/api/hosts", "/api/catalog", "/api/runs", "/api/runs/{run_id}",
                 "/api/runs/{run_id}/progress", "/api/runs/{run_id}/report", "/api/runs/{run_id}/verify",
                 "/api/runs/{run_id}/executions", "/api/executions/{execution_id}", "/api/compare",
                 "/api/runs/{run_id}/cancel", "/api/campaigns/validate", "/api/runs/{run_id}/download/{fmt}"):
        assert path in paths, path
    secured = {(m, p) for p, ops in paths.items() for m, op in ops.items() if op.get("security")}
    assert secured == {("post", "/api/runs"), ("post", "/api/runs/{run_id}/cancel"), ("delete", "/api/runs/{run_id}"),
                       ("post", "/api/campaigns/validate")}
    assert doc["components"]["securitySchemes"]["bearerToken"]["scheme"] == "bearer"
    assert all(op.get("summary") for ops in paths.values() for op in ops.values())
    page = client.get("/api")
    assert page.status_code == 200 and "/api/runs/{run_id}/verify" in page.text
    assert client.get("/docs").status_code == 404  # FastAPI's docs load a CDN: off


def test_reads(client):
    status = client.get("/api/status").json()
    assert status["runs"]["finished"] == 2 and status["schema"] == status["schema_head"] >= "0002"
    runs = client.get("/api/runs").json()
    assert [r["id"] for r in runs] == ["r2", "r1"]
    r1 = client.get("/api/runs/r1").json()
    assert r1["status"] == "finished" and r1["platforms"][0] == "native" and r1["failed"] == 1
    assert r1["executions"] == r1["expected"] == 7 * 5 * (13 + 1)
    dash = client.get("/api/dashboard").json()
    assert dash["counts"]["finished"] == 2 and [r["id"] for r in dash["recent_results"]] == ["r2", "r1"]
    assert dash["recent_results"][0]["table"]["qemu"]["cpu"] < 1
    hosts = {h["hostname"] for h in client.get("/api/hosts").json()}
    assert hosts == {"sim-host", "other-host"}
    prog = client.get("/api/runs/r1/progress").json()
    assert prog["percent"] == 100 and prog["status"] == "finished"
    report = client.get("/api/runs/r1/report").json()
    assert report["run"] == "r1" and report["baseline"] == "native" and report["results"]
    failed = client.get("/api/runs/r1/executions", params={"status": "failed"}).json()
    assert [(e["platform"], e["benchmark"], e["round"]) for e in failed] == [("runc", "sim-fio", 2)]
    raw = client.get(f"/api/executions/{failed[0]['id']}").json()
    assert raw["stderr"] == "sim: error: device busy" and raw["exit_code"] == 1
    cat = client.get("/api/catalog").json()
    assert {"native", "runc"} <= {p["type"] for p in cat["platforms"]}
    assert "time" in {p["name"] for b in cat["benchmarks"] if b["name"] == "sysbench-cpu" for p in b["params"]}


def test_verify_shows_every_repetition_with_flags(client):
    doc = client.get("/api/runs/r1/verify", params={"benchmark": "sim-hpcc", "metric": "HPL_Gflops"}).json()
    assert (doc["benchmark"], doc["metric"]) == ("sim-hpcc", "HPL_Gflops")
    by = {p["platform"]: p for p in doc["platforms"]}
    assert set(by) == {"native", "docker", "runc", "qemu", "qemu-docker"}
    assert len(by["native"]["points"]) == 7 and sum(p["warmup"] for p in by["native"]["points"]) == 1
    assert by["docker"]["drift"] and not by["native"]["drift"]
    assert all(p["execution_id"] for p in by["native"]["points"])
    fio = client.get("/api/runs/r1/verify", params={"benchmark": "sim-fio", "metric": "randread_iops"}).json()
    runc = next(p for p in fio["platforms"] if p["platform"] == "runc")
    assert [f["round"] for f in runc["failures"]] == [2] and runc["n"] == 5


def test_verify_marks_an_outlier(store):
    from virtbench.store.db import now

    from .helpers import make_client

    store.create_run(run_id="o1", name="o", campaign={"baseline": "native"}, source="", seed=1, host_id=None,
                     host_facts={}, image={}, provenance={}, platforms=[{"name": "native", "type": "native",
                                                                         "label": "native", "config": {}}],
                     benchmarks=[], status="finished")
    for rnd, value in enumerate([10.0, 10.1, 9.9, 10.0, 10.05, 30.0, 9.95]):
        store.record(run_id="o1", round=rnd, warmup=False, platform="native", benchmark="b", status="ok",
                     started_at=now(), finished_at=now(), duration_s=1, samples=[
                         {"metric": "m", "value": value, "unit": "s", "higher_is_better": False, "category": "cpu"}])
    doc = make_client(store).get("/api/runs/o1/verify", params={"benchmark": "b", "metric": "m"}).json()
    [native] = doc["platforms"]
    assert [p["round"] for p in native["points"] if p["outlier"]] == [5]
    assert any(f["check"] == "outliers" for f in native["flags"])


def test_compare_pools_runs_or_puts_hosts_side_by_side(client):
    one = client.get("/api/compare", params={"run": "r1"}).json()
    both = client.get("/api/compare", params=[("run", "r1"), ("run", "r2")]).json()
    n1 = {(r["benchmark"], r["metric"], r["platform"]): r["n"] for r in one["results"]}
    n2 = {(r["benchmark"], r["metric"], r["platform"]): r["n"] for r in both["results"]}
    assert n2[("sim-hpcc", "HPL_Gflops", "qemu")] == 2 * n1[("sim-hpcc", "HPL_Gflops", "qemu")] == 12
    assert both["categories"]["cpu"]["qemu"]["geomean"] < 1
    qemu = next(r for r in both["results"] if r["metric"] == "HPL_Gflops" and r["platform"] == "qemu")
    assert qemu["verdict"] == "slower" and qemu["relative_ci95"][1] < 1 and qemu["p_value"] < 0.05
    assert qemu["relative_ci95"][0] <= qemu["relative"] <= qemu["relative_ci95"][1] and "p_holm" not in qemu
    assert qemu["verdict_reason"].startswith("slower by")
    hosts = client.get("/api/compare", params={"host": ["sim-host", "other-host"], "by_host": "true"}).json()
    assert set(hosts["hosts"]) == {"sim-host", "other-host"} and hosts["matrix"]
    assert client.get("/api/compare").status_code == 400
    assert client.get("/api/compare", params={"run": "nope"}).status_code == 404


def test_schedule_cancel_delete(client, auth):
    r = client.post("/api/runs", json={"campaign": QUICK}, headers=auth)
    assert r.status_code == 201, r.text
    run_id = r.json()["run_id"]
    run = client.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "queued" and run["expected"] == 2 * 2 * 2
    y = client.post("/api/runs", json={"yaml": "name: y\nplatforms: [native]\nbenchmarks: [sysbench-cpu]\n",
                                       "target_host": "lab-1"}, headers=auth).json()
    assert client.get(f"/api/runs/{y['run_id']}").json()["target_host"] == "lab-1"
    assert client.delete("/api/runs/r1", headers=auth).json() == {"run_id": "r1", "deleted": True}
    assert client.get("/api/runs/r1").status_code == 404
    c = client.post(f"/api/runs/{run_id}/cancel", headers=auth).json()
    assert c["status"] == "cancelled"
    assert client.post(f"/api/runs/{run_id}/cancel", headers=auth).status_code == 409
    assert client.post("/api/runs/r2/cancel", headers=auth).status_code == 409  # finished
    assert client.delete(f"/api/runs/{run_id}", headers=auth).status_code == 200
    assert client.post("/api/runs/nope/cancel", headers=auth).status_code == 404


def test_running_run_cannot_be_deleted_and_cancel_is_a_flag(client, filled, auth):
    filled.update_run("r2", status="running")
    assert client.delete("/api/runs/r2", headers=auth).status_code == 409
    c = client.post("/api/runs/r2/cancel", headers=auth).json()
    assert c == {"run_id": "r2", "status": "running", "cancel_requested": True}


BAD = [
    ("name: x\nplatforms: [native]\nbenchmarks: [{name: sysbnech-cpu}]\n", "benchmarks[0].name"),
    ("name: x\nplatforms: [native]\nbenchmarks: [{name: sysbench-cpu, time: 0}]\n", "time"),
    ("name: x\nplatfroms: [native]\nbenchmarks: [sysbench-cpu]\n", "platforms"),
    ("name: [unclosed\n", "not valid YAML"),
    ("name: x\nbaseline: docker\nplatforms: [native]\nbenchmarks: [sysbench-cpu]\n", "baseline 'docker'"),
]


@pytest.mark.parametrize("text,expect", BAD)
def test_refused_campaign_has_the_cli_message(client, auth, text, expect):
    try:
        parse_campaign(load_yaml(text, "campaign"), "campaign")
    except InputError as exc:
        cli = exc
    r = client.post("/api/runs", json={"yaml": text}, headers=auth)
    assert r.status_code == 400
    assert r.json()["detail"] == cli.message and expect in cli.message
    assert r.json().get("fix") == cli.fix
    v = client.post("/api/campaigns/validate", json={"yaml": text}, headers=auth)
    assert v.status_code == 400 and v.json()["detail"] == cli.message
    assert client.get("/api/runs", params={"status": "queued"}).json() == []


def test_form_upload_message_equals_the_cli_output(client, tmp_path):
    """The real CLI on the same file: its `error:` line is what the page shows."""
    from .helpers import login

    text = "name: x\nplatforms: [native, {name: d1, type: docker, cpus: -1}]\nbenchmarks: [sysbench-cpu]\n"
    (tmp_path / "bad.yaml").write_text(text)
    cli = subprocess.run([sys.executable, "-m", "virtbench", "run", "bad.yaml"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert cli.returncode == 2
    line = next(x for x in cli.stderr.splitlines() if x.startswith("error: ")).removeprefix("error: ")
    line = line.split(" (fix: ")[0]  # the page shows the cause, and the fix beside it
    csrf = login(client)
    page = client.post("/schedule", data={"csrf": csrf, "mode": "yaml"},
                       files={"campaign_file": ("bad.yaml", text.encode(), "text/yaml")})
    assert page.status_code == 400
    from html import escape
    assert escape(line) in page.text


def test_validate_and_downloads(client, auth):
    ok = client.post("/api/campaigns/validate", json={"campaign": QUICK}, headers=auth).json()
    assert ok["valid"] and ok["expected_executions"] == 8
    rep = client.get("/api/runs/r1/download/json")
    assert rep.status_code == 200 and "attachment" in rep.headers["content-disposition"]
    assert rep.json()["run"] == "r1"
    csv = client.get("/api/runs/r1/download/csv", params={"table": "samples"})
    assert csv.status_code == 200 and csv.text.startswith("format_version,run_id,host,execution_id")
    links = client.get("/api/runs/r1").json()["downloads"]
    assert {"csv", "json"} <= {d["format"] for d in links}
    for link in links:
        r = client.get(link["url"])
        assert r.status_code == 200 and r.content, link
    assert client.get("/api/runs/r1/download/exe").status_code == 422


def test_run_of_a_process_killed_with_sigkill_is_interrupted_cancelled_and_deleted(client, filled, auth):
    """A `virtbench run` killed with -9 stayed `running`: neither cancel nor delete worked."""
    p = running_owner(filled.url, "stuck")
    try:
        assert client.get("/api/runs/stuck").json()["status"] == "running"
        assert client.delete("/api/runs/stuck", headers=auth).status_code == 409  # it measures: never deleted
    finally:
        p.kill()
        p.wait()
    assert client.get("/api/runs/stuck").json()["status"] == "interrupted"
    assert "stuck" in [r["id"] for r in client.get("/api/runs", params={"status": "interrupted"}).json()]
    assert client.post("/api/runs/stuck/cancel").status_code == 401  # still the token, as every change
    c = client.post("/api/runs/stuck/cancel", headers=auth).json()
    assert c["status"] == "cancelled"
    assert client.delete("/api/runs/stuck", headers=auth).json() == {"run_id": "stuck", "deleted": True}

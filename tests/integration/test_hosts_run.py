"""A campaign on this machine and a second host (a network namespace with its own sshd), from
one command: both measured into one run, the second host killed mid-run, then resumed."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time

import pytest
import yaml

from hostsupport.netns_host import netns_host

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _cli(env, *args, timeout=1200):
    return subprocess.run([sys.executable, "-m", "virtbench", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def _rows(db, sql, *args):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def _second_dies_after_its_first_result(env, tmp_path, campaign: dict, second) -> tuple[str, str, subprocess.Popen]:
    """Run the campaign; the second host dies (its sshd killed) once it has delivered one result."""
    db = env["VIRTBENCH_DB"].removeprefix("sqlite:///")
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(campaign))
    run = subprocess.Popen([sys.executable, "-m", "virtbench", "run", str(path), "--no-report"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and run.poll() is None:
        try:
            if _rows(db, "SELECT count(*) FROM executions WHERE host = ?", second.spec.name)[0][0] >= 1:
                break
        except sqlite3.OperationalError:  # not created yet
            pass
        time.sleep(0.2)
    second.kill_sshd()
    out, err = run.communicate(timeout=900)
    return out, err, run


def test_two_hosts_one_killed_mid_run_then_resumed(env, tmp_path):
    db = env["VIRTBENCH_DB"].removeprefix("sqlite:///")
    with netns_host() as second:
        name = second.spec.name
        campaign = {"name": "two-hosts", "repetitions": 3, "warmups": 0,
                    "hosts": ["local", second.spec.model_dump(exclude_none=True)],
                    "platforms": ["native", {"name": "runc", "network": "host"}],
                    "benchmarks": [{"name": "openssl", "seconds": 1},
                                   {"name": "iperf3", "time": 1, "server": {"host": name}},
                                   {"name": "sockperf", "time": 1, "server": {"host": name}}]}
        out, err, run = _second_dies_after_its_first_result(env, tmp_path, campaign, second)
        assert run.returncode == 1, out + err
        run_id = _rows(db, "SELECT id FROM runs")[0][0]
        status = dict(_rows(db, "SELECT host, status FROM executions WHERE run_id = ? AND status = 'ok'", run_id))
        by_host = {h: _rows(db, "SELECT status, error FROM executions WHERE run_id = ? AND host = ?", run_id, h)
                   for h in ("local", name)}
        # this machine's part is complete; the lost host kept what it delivered, the rest failed with the
        # reason, and so did the pairs whose server was on it
        local_own = [s for s, e in by_host["local"] if not e.startswith("not reached:")]
        assert len(local_own) == 3 * 2 * 2 and all(s == "ok" for s in local_own), by_host["local"]
        assert len(by_host["local"]) == 3 * 2 * 2 + 3 * 2 * 2
        assert len(by_host[name]) == 12
        lost = [e for s, e in by_host[name] if s == "failed"]
        assert lost and all(e.startswith("not reached:") and name in e for e in lost), lost
        assert any(s == "ok" for s, _ in by_host[name]) and status
        assert _rows(db, "SELECT status FROM runs")[0][0] == "failed"
        # nothing left running on the lost host: its agent cleaned up when the session died
        deadline = time.monotonic() + 60
        while second.pids() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not second.pids(), second.pids()

        second.start_sshd()
        res = _cli(env, "run", "--resume", run_id, "--no-report")
        assert res.returncode == 0, res.stdout + res.stderr
        assert "already there" in " ".join(res.stdout.split())  # nothing shipped again
        rows = _rows(db, "SELECT host, status FROM executions WHERE run_id = ?", run_id)
        assert len(rows) == 36 and all(s == "ok" for _, s in rows), rows
        report = json.loads(_cli(env, "report", run_id, "--json").stdout)
        assert {r["host"] for r in report["results"]} == {"local", name}
        assert set(report["hosts"]["hosts"]) == {"local", name}
        shipped = report["hosts"]["hosts"][name]["shipped"]
        assert shipped is not None
        pairs = report["hosts"]["pairs"]
        assert {(p["benchmark"], p["platform"]) for p in pairs} == {
            (b, p) for b in ("iperf3", "sockperf") for p in ("native", "runc")}
        assert all(p["valid"] and p["server_host"] == name and p["n"] == 3 for p in pairs)
        throughput = next(p for p in pairs if p["benchmark"] == "iperf3" and p["metric"] == "throughput")
        assert throughput["mean"] > 10  # Mbit/s through the veth link to the namespace
        # one machine, one clock: the true offset is 0, and an NTP-style reading is within half its
        # round trip of the truth, however loaded the machine (so this test need not run alone)
        clock = report["hosts"]["hosts"][name]["clock"]
        assert abs(clock["offset_s"]) <= clock["uncertainty_s"] + 1e-3, clock
        text = _cli(env, "report", run_id).stdout
        assert f"host {name}" in text and "Hosts side by side" in text
        # the host's own cleanup, over SSH, under its own state: nothing of the run is left there
        res = _cli(env, "cleanup", "--host", name, "--run", run_id)
        assert res.returncode == 0 and "nothing to clean up" in res.stdout, res.stdout + res.stderr


@pytest.mark.measures  # density with the host guard: alone
def test_density_on_two_hosts_each_its_own_search_resumed_after_a_host_is_lost(env, tmp_path):
    """Another agents kind across hosts: `local` runs the density search here, the second host's
    agent there, each into the one run under its host's name. The second host dies after its
    first count; the resume gives its agent back what it measured, so its search goes on
    from there (no count measured twice), and the report keeps the hosts apart."""
    db = env["VIRTBENCH_DB"].removeprefix("sqlite:///")
    with netns_host() as second:
        name = second.spec.name
        campaign = {"name": "two-hosts-density", "experiment": "density", "parallel": False,
                    "hosts": ["local", second.spec.model_dump(exclude_none=True)], "platforms": ["runc"],
                    "density": {"workload": {"name": "openssl", "seconds": 1}, "counts": [1, 2, 3], "settle": 0,
                                "collapse": 0, "starved": 0}}
        out, err, run = _second_dies_after_its_first_result(env, tmp_path, campaign, second)
        assert run.returncode == 1 and "2 hosts x 1 platforms x experiment density" in out + err, out + err
        run_id = _rows(db, "SELECT id FROM runs")[0][0]
        before = _rows(db, "SELECT benchmark FROM executions WHERE host = ?", name)
        assert ("density[count=1]",) in before and ("density-stop",) not in before, before
        second.start_sshd()
        res = _cli(env, "run", "--resume", run_id, "--no-report")
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        counts = _rows(db, "SELECT benchmark, count(*) FROM executions WHERE host = ? GROUP BY benchmark", name)
        assert dict(counts) == {"density[count=1]": 1, "density[count=2]": 1, "density[count=3]": 1,
                                "density-stop": 1}, counts
        doc = json.loads(_cli(env, "report", run_id, "--json").stdout)
        entries = {e["host"]: e for e in doc["density"]}
        assert sorted(entries) == sorted(["local", name]), doc["density"]
        for entry in entries.values():
            assert (entry["platform"], entry["max_count"], entry["stop_reason"]) == ("runc", 3, "counts_done"), entry
            assert [p["count"] for p in entry["points"]] == [1, 2, 3] and len(entry["points"][2]["per_instance"]) == 3
        text = _cli(env, "report", run_id).stdout
        assert "runc on local" in text and f"runc on {name}" in text, text

"""Instance names with long and unusual platform names on real runtimes, and adaptive rounds
that run only the undecided comparisons (`until: decided`, the quick campaign's rule)."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

from virtbench.platforms import naming

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LONG = "runc-with-a-very-long-descriptive-platform-name-for-the-peer-x"  # 62 characters
ODD = "ctr--odd.name"  # valid for virtbench, not as a containerd id as is (separators twice)


def vb(env, *args, timeout=900):
    return subprocess.run([sys.executable, "-m", "virtbench", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def rows(env, sql):
    with sqlite3.connect(env["VIRTBENCH_DB"].removeprefix("sqlite:///")) as conn:
        return conn.execute(sql).fetchall()


def test_long_and_unusual_platform_names_run_with_peers(env, tmp_path):
    camp = tmp_path / "names.yaml"
    camp.write_text(f"name: names\nrepetitions: 2\nwarmups: 0\n"
                    f"platforms: [native, {{name: {LONG}, type: runc, network: bridge}},\n"
                    f"            {{name: {LONG[:-1]}y, type: runc, network: bridge}},\n"
                    f"            {{name: '{ODD}', type: containerd, network: host}}]\n"
                    "benchmarks: [{name: ping, count: 2}, {name: sysbench-cpu, time: 1}]\n")
    res = vb(env, "run", str(camp), "--no-report")
    assert res.returncode == 0, res.stdout + res.stderr
    execs = rows(env, "SELECT platform, round, instance, status FROM executions WHERE benchmark != 'lifecycle'")
    assert execs and all(status == "ok" for *_, status in execs), execs
    names = {(p, r): i for p, r, i, _ in execs}
    assert len(set(names.values())) == len(names), "two rounds or platforms shared an instance name"
    assert all(naming.valid(i) and naming.valid(i + "-peer") for i in names.values())


@pytest.mark.measures  # verdicts: alone
def test_decided_mode_reruns_only_what_is_undecided(env, tmp_path):
    camp = tmp_path / "decided.yaml"
    camp.write_text("name: decided\nrepetitions: 2\nwarmups: 0\nplatforms: [native, runc]\n"
                    "adaptive: {until: decided, target: 0.5, max_repetitions: 4, max_minutes: 30}\n"
                    "benchmarks: [{name: sysbench-cpu, time: 1}, {name: sqlite, rows: 20000}]\n")
    res = vb(env, "run", str(camp), "--no-report")
    assert res.returncode == 0, res.stdout + res.stderr
    [(provenance,)] = rows(env, "SELECT provenance FROM runs")
    log = json.loads(provenance)["adaptive"]
    extra = [e for e in log if "round" in e]
    assert extra and "stop" in log[-1]
    for entry in extra:
        ran = rows(env, f"SELECT platform, benchmark FROM executions WHERE round = {entry['round']} "
                        "AND benchmark != 'lifecycle'")
        assert sorted(ran) == sorted((p, b) for p, bs in entry["benchmarks"].items() for b in bs)
        assert all("undecided" in r or "fewer than" in r for r in entry["reasons"].values())


@pytest.mark.measures  # the host's noise: alone
def test_the_noise_check_runs_the_baseline_alone_and_says_what_to_expect_before_measuring(env, tmp_path):
    camp = tmp_path / "noise.yaml"
    camp.write_text("name: noise\nrepetitions: 3\nwarmups: 1\n"
                    "platforms: [native, {name: twin, type: native}]\n"
                    "adaptive: {until: decided, max_repetitions: 4, max_minutes: 10, noise_check: 2}\n"
                    "benchmarks: [{name: openssl, seconds: 1, clock: cpu}]\n")
    res = vb(env, "run", str(camp), "--no-report")
    assert res.returncode == 0, res.stdout + res.stderr
    said = res.stdout + res.stderr
    assert "host noise (A/A check): expect about" in said and "openssl throughput" in said, said
    ran = rows(env, "SELECT round, platform, warmup FROM executions WHERE benchmark = 'openssl' ORDER BY id")
    assert sorted(p for r, p, _ in ran if r in (1, 2)) == ["native", "native"]  # the baseline alone
    assert all(w for r, _, w in ran if r < 3) and not any(w for r, _, w in ran if r >= 3)
    assert sorted(p for r, p, _ in ran if r == 3) == ["native", "twin"]
    [(provenance,)] = rows(env, "SELECT provenance FROM runs")
    noise = json.loads(provenance)["noise"]
    [(name, metric)] = noise["metrics"].items()
    assert name.startswith("openssl") and len(metric["values"]) == 2 and metric["pair_noise"] > 0
    assert noise["cells"] == 1 and 0 <= noise["expected_decided"] <= 1 and noise["rounds"] >= 3
    report = vb(env, "report", "latest", "--json")
    assert report.returncode == 0, report.stderr
    [row] = [r for r in json.loads(report.stdout)["results"] if r["platform"] == "twin" and r["benchmark"] == "openssl"]
    assert row["n"] >= 3 and row["n"] <= 4  # the check's executions are not in the verdict

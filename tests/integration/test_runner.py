"""The runner end to end through the CLI, on real platforms (native chroot and runc).

Kills a run midway and resumes it, checks a crash leaves nothing after cleanup, that a
failing tool is a failed sample with its raw output, and that bad input starts nothing.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

CAMPAIGN = """
name: itest
repetitions: 2
warmups: 1
platforms: [native, runc]
benchmarks:
  - {name: sysbench-cpu, time: 1}
  - {name: sqlite, rows: 20000}
"""
UNITS_PER_ROUND = 2 * 3  # platforms x (benchmarks + lifecycle)


def vb(env, *args, timeout=900):
    return subprocess.run([sys.executable, "-m", "virtbench", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def db_rows(env, sql, *params):
    path = env["VIRTBENCH_DB"].removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        return conn.execute(sql, params).fetchall()


def leftovers(env) -> list[str]:
    state = env["VIRTBENCH_STATE_DIR"]
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
              if line.split()[4].startswith(state)]
    root = Path(env["VIRTBENCH_RUNTIME_DIR"]) / "runc"
    runc = subprocess.run(["runc", "--root", str(root), "list", "-q"], capture_output=True, text=True).stdout.split()
    return mounts + [f"runc:{c}" for c in runc]


def test_full_run_and_json_report(env, tmp_path):
    camp = tmp_path / "c.yaml"
    camp.write_text(CAMPAIGN)
    res = vb(env, "run", str(camp), "--no-report")
    assert res.returncode == 0, res.stdout + res.stderr
    rep = vb(env, "report", "--json")
    assert rep.returncode == 0, rep.stderr
    doc = json.loads(rep.stdout)
    assert doc["baseline"] == "native" and doc["status"] == "finished"
    rows = {(r["benchmark"], r["metric"], r["platform"]): r for r in doc["results"]}
    native = rows[("sysbench-cpu", "events_per_second", "native")]
    runc = rows[("sysbench-cpu", "events_per_second", "runc")]
    assert native["n"] == 2 and native["relative"] == 1.0 and native["unit"]
    assert runc["n"] == 2 and 0.3 < runc["relative"] < 3 and len(runc["relative_ci95"]) == 2
    assert rows[("lifecycle", "start_s", "runc")]["n"] == 2
    assert all(r["failed"] == 0 for r in doc["results"])
    assert doc["image"]["tar_sha256"] and doc["host"]["cpu_model"]
    assert leftovers(env) == []


def test_killed_run_resumes_without_loss_or_duplicates(env, tmp_path):
    camp = tmp_path / "c.yaml"
    camp.write_text(CAMPAIGN)
    p = subprocess.Popen([sys.executable, "-m", "virtbench", "run", str(camp), "--no-report"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            if db_rows(env, "SELECT count(*) FROM executions")[0][0] >= 4:
                break
        except sqlite3.Error:
            pass
        time.sleep(0.2)
    os.killpg(p.pid, signal.SIGKILL)  # a crash: no chance to clean up
    p.wait()
    [(run_id, status)] = db_rows(env, "SELECT id, status FROM runs")
    assert status == "running"
    before = db_rows(env, "SELECT round, platform, benchmark, started_at FROM executions")
    assert 4 <= len(before) < 3 * UNITS_PER_ROUND
    res = vb(env, "run", "--resume", run_id, "--no-report")
    assert res.returncode == 0, res.stdout + res.stderr
    after = db_rows(env, "SELECT round, platform, benchmark, started_at FROM executions")
    assert len(after) == 3 * UNITS_PER_ROUND
    assert set(before) <= set(after), "executions recorded before the kill were kept as they were"
    assert len({r[:3] for r in after}) == len(after)
    assert db_rows(env, "SELECT status FROM runs") == [("finished",)]
    assert leftovers(env) == []


def test_crash_leaves_nothing_after_cleanup(env, tmp_path):
    camp = tmp_path / "c.yaml"
    camp.write_text(CAMPAIGN.replace("time: 1", "time: 30"))
    log = tmp_path / "run.log"
    with log.open("w") as out:
        p = subprocess.Popen([sys.executable, "-m", "virtbench", "run", str(camp), "--no-report"], env=env,
                             stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    _wait_for_instance(env, p, log)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert leftovers(env), "SIGKILL gives no chance to clean up"
    res = vb(env, "cleanup")
    assert res.returncode == 0, res.stderr
    assert leftovers(env) == []


def _wait_for_instance(env, p: subprocess.Popen, log: Path, seconds: float = 600) -> None:
    """Until the run has an instance up; fails with the run's own output if it ended first or
    never got there (the image may be built first on a fresh machine)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and p.poll() is None and not leftovers(env):
        time.sleep(0.2)
    if not leftovers(env):
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        pytest.fail(f"no instance up after {seconds:.0f} s (run exit {p.returncode}):\n{log.read_text()[-4000:]}")


def _native_run(env, tmp_path, *, repetitions: int, seconds: int, **popen) -> tuple[subprocess.Popen, str]:
    """`virtbench run` of sysbench-cpu on native, once its instance is up; with the run id."""
    camp = tmp_path / "c.yaml"
    camp.write_text(f"name: native-only\nrepetitions: {repetitions}\nwarmups: 0\nplatforms: [native]\n"
                    f"benchmarks: [{{name: sysbench-cpu, time: {seconds}}}]\n")
    p = subprocess.Popen([sys.executable, "-m", "virtbench", "run", str(camp), "--no-report"], env=env, **popen)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (leftovers(env) and _run_started(env)):
        time.sleep(0.2)
    [(run_id,)] = db_rows(env, "SELECT id FROM runs")
    return p, run_id


def test_run_killed_with_sigkill_is_interrupted_and_cancel_removes_what_it_left(env, tmp_path):
    """Before, such a run stayed `running` forever and could be neither cancelled nor deleted."""
    p, run_id = _native_run(env, tmp_path, repetitions=2, seconds=30, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    refused = vb(env, "delete", run_id)
    assert refused.returncode == 2 and "is running (pid" in refused.stderr, refused.stderr
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert leftovers(env), "SIGKILL gives no chance to clean up"
    listed = vb(env, "runs")
    assert f"{run_id}  interrupted" in listed.stdout, listed.stdout + listed.stderr
    res = vb(env, "cancel", run_id)
    assert res.returncode == 0 and "removed leftover: native" in res.stdout, res.stdout + res.stderr
    assert leftovers(env) == []
    assert vb(env, "delete", run_id).returncode == 0
    assert db_rows(env, "SELECT count(*) FROM runs") == [(0,)]


def test_cancel_of_a_measuring_cli_run_stops_it_between_instances(env, tmp_path):
    p, run_id = _native_run(env, tmp_path, repetitions=3, seconds=3, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    res = vb(env, "cancel", run_id)
    assert res.returncode == 0 and "is measuring (pid" in res.stdout, res.stdout + res.stderr
    out, err = p.communicate(timeout=300)
    assert p.returncode == 130 and f"run {run_id} cancelled" in err, out + err
    assert db_rows(env, "SELECT status FROM runs") == [("cancelled",)]
    assert db_rows(env, "SELECT count(*) FROM executions")[0][0] < 3 * 2
    assert leftovers(env) == []


def test_sigterm_interrupts_cleanly(env, tmp_path):
    camp = tmp_path / "c.yaml"
    camp.write_text(CAMPAIGN.replace("time: 1", "time: 30"))
    p = subprocess.Popen([sys.executable, "-m", "virtbench", "run", str(camp), "--no-report"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (leftovers(env) and _run_started(env)):
        time.sleep(0.2)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, out + err
    assert "--resume" in err
    assert db_rows(env, "SELECT status FROM runs") == [("interrupted",)]
    assert leftovers(env) == []


def _run_started(env) -> bool:
    try:
        return bool(db_rows(env, "SELECT id FROM runs WHERE status = 'running'"))
    except sqlite3.Error:
        return False


def test_failing_tool_is_a_failed_sample_with_raw_output(env, tmp_path):
    camp = tmp_path / "c.yaml"
    camp.write_text("name: f\nrepetitions: 1\nwarmups: 0\nplatforms: [native]\n"
                    "benchmarks:\n  - {name: fio, size: 1M, bs_bandwidth: 64M, runtime: 1}\n")
    res = vb(env, "run", str(camp))
    assert res.returncode == 1, res.stdout + res.stderr
    [(status, stdout, stderr, error)] = db_rows(
        env, "SELECT status, stdout, stderr, error FROM executions WHERE benchmark='fio'")
    assert status == "failed" and error and (stdout or stderr)
    assert db_rows(env, "SELECT count(*) FROM samples WHERE benchmark='fio'") == [(0,)]
    doc = json.loads(vb(env, "report", "--json").stdout)
    row = next(r for r in doc["results"] if r["benchmark"] == "fio")
    assert row["n"] == 0 and row["failed"] == 1


@pytest.mark.parametrize("campaign, needle", [
    ("name: x\nplatforms: [native]\nbenchmarks: [nope]\n", "unknown benchmark 'nope'"),
    ("name: x\nplatforms: [native, {name: d, type: docker, cpus: many}]\nbenchmarks: [fio]\n", "platforms[1].cpus"),
    ("name: x\nrepetitons: 3\nplatforms: [native]\nbenchmarks: [fio]\n", "did you mean 'repetitions'"),
])
def test_bad_input_exits_2_before_anything_starts(env, tmp_path, campaign, needle):
    camp = tmp_path / "bad.yaml"
    camp.write_text(campaign)
    res = vb(env, "run", str(camp))
    assert res.returncode == 2
    assert needle in res.stderr and str(camp) in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1  # the error and its fix, one line
    assert not Path(env["VIRTBENCH_DB"].removeprefix("sqlite:///")).exists()


def test_adaptive_repetition_adds_logged_rounds_up_to_the_cap(env, tmp_path):
    camp = tmp_path / "a.yaml"
    camp.write_text("name: adaptive\nrepetitions: 2\nwarmups: 0\nplatforms: [native, runc]\n"
                    "adaptive: {target: 0.00001, max_repetitions: 4, max_minutes: 30}\n"
                    "benchmarks:\n  - {name: sysbench-cpu, time: 1}\n")
    res = vb(env, "run", str(camp), "--no-report")
    assert res.returncode == 0, res.stdout + res.stderr
    rounds = db_rows(env, "SELECT platform, count(*) FROM executions WHERE benchmark='sysbench-cpu' "
                          "GROUP BY platform ORDER BY platform")
    assert rounds == [("native", 4), ("runc", 4)]
    [(provenance,)] = db_rows(env, "SELECT provenance FROM runs")
    log = json.loads(provenance)["adaptive"]
    assert [e["round"] for e in log if "round" in e] == [2, 3]
    extra = [e for e in log if "round" in e]
    assert all(e["platforms"] == ["runc", "native"] and e["reasons"]["runc"] for e in extra)
    assert "fewer than 3" in extra[0]["reasons"]["runc"] and "target" in extra[1]["reasons"]["runc"]
    assert "cap" in log[-1]["stop"]


def test_several_instances_at_once_keep_each_value_and_the_total(env, tmp_path):
    camp = tmp_path / "m.yaml"
    camp.write_text("name: multi\nrepetitions: 1\nwarmups: 0\nplatforms: [native, runc]\n"
                    "benchmarks:\n  - {name: sysbench-cpu, time: 1, sweep: {instances: [1, 2]}}\n")
    res = vb(env, "run", str(camp), "--no-report")
    assert res.returncode == 0, res.stdout + res.stderr
    rows = db_rows(env, "SELECT platform, instance, value FROM samples "
                        "WHERE benchmark='sysbench-cpu[instances=2]' AND metric='events_per_second'")
    for platform in ("native", "runc"):
        per = {i: v for p, i, v in rows if p == platform}
        assert set(per) == {0, 1, 2}
        assert per[0] == pytest.approx((per[1] + per[2]) / 2)
    [(total,)] = db_rows(env, "SELECT value FROM samples WHERE platform='runc' AND metric='events_per_second_total' "
                              "AND benchmark='sysbench-cpu[instances=2]'")
    assert total == pytest.approx(sum(v for p, i, v in rows if p == "runc" and i > 0))
    [(stdout,)] = db_rows(env, "SELECT stdout FROM executions WHERE platform='runc' "
                               "AND benchmark='sysbench-cpu[instances=2]'")
    assert "### instance 1" in stdout and "### instance 2" in stdout
    assert leftovers(env) == []

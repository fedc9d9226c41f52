"""A run whose process was killed with SIGKILL is shown `interrupted` and can be cancelled and
deleted from the CLI; a run whose process lives refuses deletion in one line.

The process is real: a Python process that opens the store and sets a run running, as
`virtbench run` does, then is killed with SIGKILL (no chance to mark anything).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from dbsupport import running_owner
from virtbench.store import owner
from virtbench.store.db import Store


def kill9(p: subprocess.Popen[str]) -> None:
    p.send_signal(signal.SIGKILL)
    p.wait()


@pytest.fixture
def env(tmp_path) -> Iterator[dict[str, str]]:
    yield dict(os.environ, VIRTBENCH_DB=f"sqlite:///{tmp_path / 'r.db'}", VIRTBENCH_STATE_DIR=str(tmp_path / "state"),
               VIRTBENCH_RUNTIME_DIR=str(tmp_path / "run"))


def vb(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "virtbench", *args], env=env, capture_output=True, text=True,
                          timeout=300)


def status_in_runs(env: dict[str, str], run_id: str) -> str:
    res = vb(env, "runs")
    assert res.returncode == 0, res.stderr
    return next((line.split()[1] for line in res.stdout.splitlines() if line.startswith(run_id)), "")


def test_killed_run_is_interrupted_then_cancelled_and_deleted_from_the_cli(env):
    run_id = "20260101-000000-dead"
    p = running_owner(env["VIRTBENCH_DB"], run_id)
    try:
        assert status_in_runs(env, run_id) == "running"
        res = vb(env, "delete", run_id)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert f"run {run_id} is running (pid {p.pid} on " in res.stderr and "virtbench cancel" in res.stderr
    finally:
        kill9(p)
    assert status_in_runs(env, run_id) == "interrupted"
    run = Store(env["VIRTBENCH_DB"]).run(run_id)
    assert f"pid {p.pid}" in run.error and run.finished_at is not None
    res = vb(env, "cancel", run_id)
    assert res.returncode == 0 and f"run {run_id} cancelled" in res.stdout, res.stdout + res.stderr
    assert status_in_runs(env, run_id) == "cancelled"
    res = vb(env, "delete", run_id)
    assert res.returncode == 0 and f"run {run_id} deleted" in res.stdout, res.stdout + res.stderr
    assert status_in_runs(env, run_id) == ""


def test_killed_run_can_be_deleted_without_cancelling_and_resumed_runs_are_left_alone(env):
    url = env["VIRTBENCH_DB"]
    p = running_owner(url, "r-dead")
    kill9(p)
    store = Store(url)
    assert store.run("r-dead").status == "interrupted"
    res = vb(env, "delete", "r-dead")
    assert res.returncode == 0, res.stderr
    # the process that resumes a run owns it from then on: a live owner is never reaped
    store.create_run(run_id="r-live", name="x", campaign={}, source="", seed=1, host_id=None, host_facts={}, image={},
                     provenance={}, platforms=[], benchmarks=[], status="running")
    assert store.run("r-live").owner == owner.identity() and store.reap_dead() == []


def test_owner_identity_tells_a_reused_pid_another_boot_and_another_machine():
    me = owner.identity()
    host, machine, boot, pid, started = me.split("|")
    assert not owner.is_dead(me) and owner.on_this_host(me)
    assert owner.is_dead(f"{host}|{machine}|{boot}|{pid}|{int(started) + 1}")  # the pid names another process now
    assert owner.is_dead(f"{host}|{machine}|another-boot|{pid}|{started}")  # the machine rebooted since
    assert not owner.is_dead(f"elsewhere|{machine}|x|{pid}|{started}")  # another host: unknown, not dead
    assert not owner.is_dead(f"{host}|other-machine|x|{pid}|{started}")  # the same name, another machine
    assert not owner.is_dead(None)  # runs stored before owners were recorded

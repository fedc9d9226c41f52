"""The queue without runtimes: atomic claims, host pinning, dead-worker detection, progress."""
from __future__ import annotations

import os
import subprocess
from datetime import timedelta

from virtbench.config import parse_campaign
from virtbench.runner.execute import enqueue
from virtbench.runner.worker import LOG_LINES, ProgressReporter
from virtbench.store import queue as W
from virtbench.store.db import now
from virtbench.store.models import Run
from virtbench.store.models import Worker as WorkerRow

CAMPAIGN = parse_campaign({"name": "q", "platforms": ["native"], "benchmarks": ["sysbench-cpu"]})


def run_of(store, run_id) -> Run:
    with store.session() as s:
        return s.get(Run, run_id)


def test_claim_is_atomic(store):
    run_id = enqueue(store, CAMPAIGN)
    assert [W.claim(store, run_id, "w1", "h"), W.claim(store, run_id, "w2", "h")] == [True, False]
    assert run_of(store, run_id).worker == "w1" and run_of(store, run_id).worker_host == "h"
    assert W.claim_next(store, "w2", "h") is None


def test_oldest_first_and_host_pinning(store):
    first = enqueue(store, CAMPAIGN)
    pinned = enqueue(store, CAMPAIGN)
    store.update_run(pinned, target_host="lab-2")
    store.update_run(first, created_at=now() - timedelta(minutes=1))
    assert W.claim_next(store, "w1", "lab-1") == first
    assert W.claim_next(store, "w1", "lab-1") is None  # the other one waits for lab-2
    assert W.claim_next(store, "w2", "lab-2") == pinned


def test_cancelled_runs_are_never_claimed(store):
    run_id = enqueue(store, CAMPAIGN)
    store.update_run(run_id, cancel_requested=True)
    assert W.claim_next(store, "w1", "h") is None


def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def add_worker(store, wid, pid, age_s=0.0, host=None):
    with store.session.begin() as s:
        s.add(WorkerRow(id=wid, hostname=host or W.hostname(), pid=pid, state="busy", started_at=now(),
                        heartbeat_at=now() - timedelta(seconds=age_s), facts={}))


def test_orphans_are_runs_of_gone_workers_on_this_host(store):
    host = W.hostname()
    runs = {}
    for wid, pid, age, status in [("alive", os.getpid(), 0, "running"), ("killed", dead_pid(), 0, "running"),
                                  ("silent", os.getpid(), 3600, "interrupted"), ("stopped-mid-claim", dead_pid(), 0,
                                                                                 "queued")]:
        add_worker(store, wid, pid, age)
        runs[wid] = enqueue(store, CAMPAIGN)
        store.update_run(runs[wid], worker=wid, worker_host=host, status=status)
    elsewhere = enqueue(store, CAMPAIGN)  # another host's run: only a worker there may resume it
    store.update_run(elsewhere, worker="far", worker_host="far-away", status="running")
    found = {r.id for r in W.orphans(store, host, "me")}
    assert found == {runs["killed"], runs["silent"], runs["stopped-mid-claim"]}
    orphan = next(r for r in W.orphans(store, host, "me") if r.id == runs["killed"])
    assert W.take_over(store, orphan, "me") and not W.take_over(store, orphan, "other")
    assert run_of(store, runs["killed"]).worker == "me"


def test_progress_reporter_flushes_only_changes():
    rep = ProgressReporter()
    assert rep.snapshot()["step"].startswith("preparing")
    assert rep.snapshot() is None
    rep.begin(10, 2)
    rep.step("round 1 native: sysbench-cpu")
    rep.advance()
    rep.log("hello")
    doc = rep.snapshot()
    assert (doc["total"], doc["done"], doc["step"]) == (10, 3, "round 1 native: sysbench-cpu")
    assert doc["log"][-1].endswith("hello")
    for i in range(100):
        rep.log(str(i))
    assert len(rep.snapshot()["log"]) == LOG_LINES


def test_mark_cancelled_and_cancel_flag(store):
    run_id = enqueue(store, CAMPAIGN)
    assert not W.cancel_requested(store, run_id)
    store.update_run(run_id, cancel_requested=True)
    assert W.cancel_requested(store, run_id)
    W.mark_cancelled(store, run_id)
    r = run_of(store, run_id)
    assert r.status == "cancelled" and r.finished_at is not None


def test_a_second_worker_on_the_host_waits_as_a_standby(store, tmp_path):
    import threading

    from virtbench.platforms.base import Paths
    from virtbench.runner.worker import QueueWorker

    paths = Paths(state=tmp_path / "state", runtime=tmp_path / "run")
    first = QueueWorker(store, paths, probe=False, echo=lambda m: None)
    second = QueueWorker(store, paths, probe=False, poll_s=0.05, echo=lambda m: None)
    first._register()
    second._register()
    assert first._acquire_host_lock()
    threading.Timer(0.5, second.stop.set).start()
    assert second._acquire_host_lock() is False and second.state == "waiting"
    first._shutdown()  # releases the lock
    second.stop.clear()
    assert second._acquire_host_lock()
    second._shutdown()
    with store.session() as s:
        assert {w.state for w in s.query(WorkerRow)} == {"stopped"}


def claimed_by_a_worker(store, tmp_path, campaign):
    """A registered worker on private paths that has claimed a newly queued run of campaign."""
    from virtbench.platforms.base import Paths
    from virtbench.runner.worker import QueueWorker

    said: list[str] = []
    paths = Paths(state=tmp_path / "state", runtime=tmp_path / "run")
    worker = QueueWorker(store, paths, probe=False, poll_s=0.05, echo=said.append)
    worker._register()
    run_id = enqueue(store, campaign)
    assert W.claim_next(store, worker.id, worker.host) == run_id
    return worker, run_id, said


def test_worker_waits_for_a_cli_run_measuring_on_the_host(store, tmp_path):
    """`virtbench run` holds the host's measurement lock: a queued run waits, and a cancel
    while it waits ends it without it ever measuring."""
    import threading

    from virtbench.runner import hostlock

    worker, run_id, said = claimed_by_a_worker(store, tmp_path, CAMPAIGN)
    with hostlock.hold(worker.paths, "`virtbench run` of campaign 'cli'"):
        threading.Timer(0.5, lambda: store.update_run(run_id, cancel_requested=True)).start()
        worker._execute(run_id, resume=False)
    assert any("waiting: `virtbench run` of campaign 'cli'" in m for m in said), said
    r = run_of(store, run_id)
    assert r.status == "cancelled" and r.started_at is None  # it never started measuring
    worker._shutdown()


def test_a_queued_meter_runs_only_where_the_worker_allows_it(store, tmp_path):
    """A queued campaign came through the web app, from anyone: its energy meter is a program of
    its choosing, so a worker without --allow-meter fails the run naming the command and never
    runs it (before: the worker ran the meter as root while checking the probes)."""
    marker = tmp_path / "meter-ran"
    meter = ["/bin/sh", "-c", f"touch {marker}; echo 42"]
    campaign = parse_campaign({"name": "q", "platforms": ["native"], "benchmarks": ["sysbench-cpu"],
                               "probes": [{"name": "energy", "meter": meter}]})
    worker, run_id, _said = claimed_by_a_worker(store, tmp_path, campaign)
    worker._execute(run_id, resume=False)
    worker._shutdown()
    r = run_of(store, run_id)
    assert r.status == "failed" and "would run the command /bin/sh -c" in r.error and "needs --allow-meter" in r.error
    assert not marker.exists()

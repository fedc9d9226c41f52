"""The run queue in the store: atomic claims, host pinning, dead-worker detection, cancel.

Plain functions over the runs and workers tables, used by the worker process
(runner/worker.py), the web app and the tests: the only place the queue speaks SQL. Every
claim or take-over is one conditional UPDATE whose row count says who won, so it is atomic
on SQLite and PostgreSQL alike, for workers on one host or many.
"""
from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, or_, select, update

from .db import Store, now
from .models import Run
from .models import Worker as WorkerRow

STALE_S = 60.0
"""A worker whose heartbeat is older than this is considered gone."""
RESUMABLE = ("queued", "running", "interrupted")


def hostname() -> str:
    return socket.gethostname()


def claim(store: Store, run_id: str, worker_id: str, host: str) -> bool:
    """Take a queued run for this worker; False if another worker (or a cancel) got there first."""
    with store.engine.begin() as conn:
        res = conn.execute(update(Run).where(Run.id == run_id, Run.status == "queued", Run.worker.is_(None),
                                             Run.cancel_requested.is_(False))
                           .values(worker=worker_id, worker_host=host, heartbeat_at=now()))
        return res.rowcount == 1


def claim_next(store: Store, worker_id: str, host: str) -> str | None:
    """The oldest queued run meant for any host or for this one, claimed atomically."""
    with store.session() as s:
        candidates = s.scalars(select(Run.id).where(Run.status == "queued", Run.worker.is_(None),
                                                    Run.cancel_requested.is_(False),
                                                    or_(Run.target_host.is_(None), Run.target_host == host))
                               .order_by(Run.created_at, Run.id).limit(10)).all()
    for run_id in candidates:
        if not claim(store, run_id, worker_id, host):
            continue
        with store.session() as s:  # pinned to a host just after it was queued: not ours after all
            target = s.scalar(select(Run.target_host).where(Run.id == run_id))
        if target and target != host:
            give_back(store, run_id, worker_id)
            continue
        return run_id
    return None


def worker_alive(w: WorkerRow | None, host: str, at: datetime | None = None) -> bool:
    """Alive = fresh heartbeat and, on this host, a live pid (a kill -9 is seen at once)."""
    if w is None or w.state == "stopped":
        return False
    if (at or now()) - w.heartbeat_at > timedelta(seconds=STALE_S):
        return False
    if w.hostname == host:
        try:
            os.kill(w.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
    return True


def orphans(store: Store, host: str, me: str) -> list[Run]:
    """Runs a worker of this host claimed and left behind (killed, host rebooted, restarted)."""
    with store.session() as s:
        runs = s.scalars(select(Run).where(Run.worker_host == host, Run.worker.is_not(None), Run.worker != me,
                                           Run.status.in_(RESUMABLE)).order_by(Run.created_at)).all()
        ids = {r.worker for r in runs if r.worker}
        workers = {w.id: w for w in s.scalars(select(WorkerRow).where(WorkerRow.id.in_(ids)))}
    return [r for r in runs if not worker_alive(workers.get(r.worker or ""), host)]


def take_over(store: Store, run: Run, worker_id: str) -> bool:
    """Atomically move an orphaned run to this worker (another standby may try at once)."""
    with store.engine.begin() as conn:
        res = conn.execute(update(Run).where(Run.id == run.id, Run.worker == run.worker,
                                             Run.status.in_(RESUMABLE))
                           .values(worker=worker_id, heartbeat_at=now()))
        return res.rowcount == 1


def cancel_requested(store: Store, run_id: str) -> bool:
    with store.session() as s:
        return bool(s.scalar(select(Run.cancel_requested).where(Run.id == run_id)))


def mark_cancelled(store: Store, run_id: str) -> None:
    store.update_run(run_id, status="cancelled", finished_at=now(), error="cancelled by user")


def give_back(store: Store, run_id: str, worker_id: str) -> None:
    """A claimed run that never started goes back to the queue (if this worker still holds it)."""
    with store.engine.begin() as conn:
        conn.execute(update(Run).where(Run.id == run_id, Run.worker == worker_id, Run.status == "queued")
                     .values(worker=None, worker_host=None))


def release_unstarted(store: Store, worker_id: str) -> None:
    """Every run this worker claimed but never started goes back (the worker is stopping)."""
    with store.engine.begin() as conn:
        conn.execute(update(Run).where(Run.worker == worker_id, Run.status == "queued")
                     .values(worker=None, worker_host=None))


def register_worker(store: Store, worker_id: str, host: str, pid: int, facts: dict[str, Any],
                    *, forget_after: timedelta = timedelta(days=7)) -> None:
    """Add this worker's row; rows of long-gone workers only clutter the dashboard, so drop them."""
    with store.session.begin() as s:
        s.add(WorkerRow(id=worker_id, hostname=host, pid=pid, state="starting", started_at=now(),
                        heartbeat_at=now(), facts=facts))
    with store.session.begin() as s:
        s.execute(delete(WorkerRow).where(WorkerRow.heartbeat_at < now() - forget_after))


def set_worker_facts(store: Store, worker_id: str, facts: dict[str, Any]) -> None:
    with store.session.begin() as s:
        s.execute(update(WorkerRow).where(WorkerRow.id == worker_id).values(facts=facts))


def heartbeat(store: Store, worker_id: str, state: str, run_id: str | None) -> None:
    """The worker is alive in this state; so is its current run (if it still holds it)."""
    with store.engine.begin() as conn:
        conn.execute(update(WorkerRow).where(WorkerRow.id == worker_id)
                     .values(heartbeat_at=now(), state=state, run_id=run_id))
        if run_id:
            conn.execute(update(Run).where(Run.id == run_id, Run.worker == worker_id).values(heartbeat_at=now()))


def write_progress(store: Store, run_id: str, progress: dict[str, Any]) -> None:
    """The live progress document of a running run (the run page polls it)."""
    with store.engine.begin() as conn:
        conn.execute(update(Run).where(Run.id == run_id).values(progress=progress, heartbeat_at=now()))


def request_cancel(store: Store, run_id: str) -> bool:
    """Queued and unclaimed, or interrupted: cancelled at once (nothing runs it). Claimed or
    running: flagged, and the worker stops it between instances. False: nothing to cancel.
    A run whose process died is interrupted (Store.reap_dead), so cancelled at once."""
    store.reap_dead()
    with store.engine.begin() as conn:
        done = conn.execute(update(Run).where(Run.id == run_id, Run.status.in_(("queued", "interrupted")),
                                              Run.worker.is_(None) | (Run.status == "interrupted"))
                            .values(status="cancelled", cancel_requested=True, finished_at=now(),
                                    error="cancelled by user")).rowcount
        if not done:
            done = conn.execute(update(Run).where(Run.id == run_id, Run.status.in_(("queued", "running")))
                                .values(cancel_requested=True)).rowcount
    return bool(done)


def delete_idle(store: Store, run_id: str, deletable: tuple[str, ...]) -> bool:
    """Delete a run (cascading to its executions and samples) only if nothing works on it:
    its status is one of deletable, or it is queued and unclaimed. False if it was not deleted.
    A run whose process died is interrupted (Store.reap_dead), so it may be deleted."""
    store.reap_dead()
    with store.engine.begin() as conn:
        gone = conn.execute(delete(Run).where(Run.id == run_id, Run.status.in_(deletable) |
                                              ((Run.status == "queued") & Run.worker.is_(None)))).rowcount
    return bool(gone)

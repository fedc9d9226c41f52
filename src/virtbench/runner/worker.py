"""The queue worker: executes the runs the web app schedules, one at a time per host.

Why a separate process (`virtbench worker`, or the one `virtbench serve` starts): a
measurement must not share an interpreter with request handling, and the web server can
be restarted while a run goes on elsewhere.

- Claim: ``UPDATE runs SET worker=me WHERE id=? AND status='queued' AND worker IS NULL``
  is atomic on every database, so two workers (even on two hosts sharing a PostgreSQL
  store) never take the same run.
- One at a time per host: an exclusive flock on ``<runtime dir>/worker.lock``; a second
  worker on the same host waits on it as a standby. Two measurements at once would
  disturb each other, which is the one thing a benchmark must not do.
- Heartbeat: a thread writes the worker row and the run's heartbeat and live progress.
- Restart: runs claimed by a worker of this host that is gone (pid dead or heartbeat
  stale) are resumed with ``runner.execute.resume`` (no sample lost or duplicated), or
  given back to the queue if they never started, or finished cancelling.
- Cancel: the web app sets ``runs.cancel_requested``; ``stop_requested`` reads it between
  instances, so a cancel never cuts a measurement in half.
"""
from __future__ import annotations

import os
import secrets
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .. import __version__
from ..config import parse_campaign
from ..config.consent import require_consent
from ..errors import InputError, StoreError
from ..platforms.base import Paths
from ..store import queue
from ..store.db import Store, now
from ..store.queue import cancel_requested, claim_next, hostname, mark_cancelled, orphans, take_over
from . import execute, hostlock

HEARTBEAT_S = 10.0
"""Heartbeat period while nothing changes; progress is written within PROGRESS_S of a change."""
PROGRESS_S = 1.0
LOG_LINES = 40


class ProgressReporter:
    """The runner's Reporter, kept in memory and flushed to ``runs.progress`` by the heartbeat.

    Writing on every call would put a database write in the middle of measurements; the
    heartbeat thread writes at most once per PROGRESS_S instead, only when something changed.
    """

    def __init__(self, echo: Callable[[str], None] | None = None) -> None:
        self._lock = threading.Lock()
        self.total = self.done = 0
        self.step_text = "preparing (probing platforms, building the image)"
        self.lines: deque[str] = deque(maxlen=LOG_LINES)
        self.dirty = True
        self.echo = echo

    def begin(self, total: int, done: int) -> None:
        with self._lock:
            self.total, self.done, self.dirty = total, done, True

    def step(self, description: str) -> None:
        with self._lock:
            self.step_text, self.dirty = description, True

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done, self.dirty = self.done + n, True

    def log(self, message: str) -> None:
        with self._lock:
            self.lines.append(f"{now():%H:%M:%S} {message}")
            self.dirty = True
        if self.echo:
            self.echo(message)

    def end(self) -> None:
        with self._lock:
            self.step_text, self.dirty = "done", True

    def snapshot(self) -> dict[str, Any] | None:
        """The progress document if it changed since the last call, else None."""
        with self._lock:
            if not self.dirty:
                return None
            self.dirty = False
            return {"total": self.total, "done": self.done, "step": self.step_text,
                    "log": list(self.lines), "updated": now().isoformat(timespec="seconds")}


class QueueWorker:
    """One worker process's loop."""

    def __init__(self, store: Store, paths: Paths, *, poll_s: float = 2.0, once: bool = False,
                 probe: bool = True, echo: Callable[[str], None] | None = None,
                 after_run: Callable[[Store, str], None] | None = None, allow_meter: bool = False) -> None:
        self.store, self.paths, self.poll_s, self.once, self.probe = store, paths, poll_s, once, probe
        self.allow_meter = allow_meter
        """Queued campaigns come through the web app: their meter commands run only if the
        worker's operator allowed them (`--allow-meter`)."""
        self.after_run = after_run
        """Called with each stopped run (the web app stores its report then); the runner does not
        know the report layer, so the caller passes it in."""
        self.host = hostname()
        self.id = f"{self.host}:{os.getpid()}:{secrets.token_hex(3)}"
        self.echo = echo or (lambda m: print(f"worker: {m}", file=sys.stderr, flush=True))
        self.stop = threading.Event()
        self._done = threading.Event()
        """Set when the process is about to exit: the heartbeat goes on while a run winds down."""
        self.state = "starting"
        self.current: str | None = None
        self.reporter: ProgressReporter | None = None
        self._in_run_setup = False
        self._lock_fd: int | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def run(self) -> None:
        """Until SIGTERM/SIGINT (or, with once, until the queue is empty)."""
        self._register()
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        beat = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
        beat.start()
        try:
            if not self._acquire_host_lock():
                return
            self.echo(f"{self.id} ready; database {self.store.shown}")
            self._recover()
            if self.probe and not self.stop.is_set():
                self._check_platforms()
            while not self.stop.is_set():
                run_id = claim_next(self.store, self.id, self.host)
                if run_id is None:
                    if self.once:
                        break
                    self._set_state("idle")
                    self.stop.wait(self.poll_s)
                    continue
                self._execute(run_id, resume=False)
        except KeyboardInterrupt:
            self.echo("stopping")
        finally:
            self.stop.set()
            self._shutdown()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.stop.set()
        if self._in_run_setup:  # probing or building the image: give the run back to the queue
            raise KeyboardInterrupt(f"signal {signum}")

    def _register(self) -> None:
        queue.register_worker(self.store, self.id, self.host, os.getpid(), {"virtbench": __version__})

    def _acquire_host_lock(self) -> bool:
        """Wait (as a standby) until no other worker of this host holds the lock."""
        told: list[bool] = []

        def busy() -> None:
            if not told:
                self.echo("another worker runs on this host; waiting as a standby")
                told.append(True)
            self._set_state("waiting")

        self._lock_fd = hostlock.acquire(self.paths.runtime / "worker.lock", poll_s=self.poll_s,
                                         stop=self.stop.is_set, on_busy=busy, sleep=self.stop.wait)
        return self._lock_fd is not None

    def _shutdown(self) -> None:
        queue.release_unstarted(self.store, self.id)
        self._set_state("stopped")
        self._done.set()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        self.echo("stopped")

    # -- work ------------------------------------------------------------------------------
    def _recover(self) -> None:
        for run in orphans(self.store, self.host, self.id):
            if self.stop.is_set() or not take_over(self.store, run, self.id):
                continue
            if run.cancel_requested:
                self.echo(f"run {run.id}: finishing its cancel")
                for line in execute.cleanup(self.paths, run.id):
                    self.echo(f"removed leftover: {line}")
                mark_cancelled(self.store, run.id)
            elif run.status == "queued":
                self.echo(f"run {run.id}: claimed by a worker that is gone; back to the queue")
                queue.give_back(self.store, run.id, self.id)
            else:
                self.echo(f"run {run.id} was {run.status} when its worker stopped; resuming")
                self._execute(run.id, resume=True)

    def _execute(self, run_id: str, *, resume: bool) -> None:
        self.current, self.reporter = run_id, ProgressReporter(self.echo)
        say = self.reporter.log  # into the run's log on its page, and to the worker's stderr
        self._set_state("busy")
        say(f"run {run_id}: {'resuming' if resume else 'starting'} on {self.host} (worker {self.id})")

        def stop_requested() -> bool:
            return self.stop.is_set() or cancel_requested(self.store, run_id)

        self._in_run_setup = True
        try:
            require_consent(parse_campaign(self.store.run(run_id).campaign, f"run {run_id}"), self.allow_meter)
            with hostlock.hold(self.paths, f"web run {run_id} (worker {self.id})", wait=True, poll_s=self.poll_s,
                               stop=stop_requested, log=say):
                if resume:
                    outcome = execute.resume(self.store, run_id, self.paths, reporter=self.reporter,
                                             stop_requested=stop_requested)
                else:
                    outcome = execute.run_queued(self.store, run_id, self.paths, reporter=self.reporter,
                                                 stop_requested=stop_requested)
            if outcome.interrupted and cancel_requested(self.store, run_id):
                say(f"run {run_id}: cancelled")
                self._flush_progress()
                mark_cancelled(self.store, run_id)
                self._precompute(run_id)
            elif outcome.interrupted:
                self.stop.set()  # a signal: the next worker start resumes it
                say(f"run {run_id}: interrupted; it resumes when a worker starts again")
            else:
                say(f"run {run_id}: {'unfinished (' + outcome.unfinished + ')' if outcome.unfinished else 'finished'}, "
                    f"{outcome.executions} executions, {outcome.failed} failed")
                self._precompute(run_id)
        except KeyboardInterrupt:
            self.stop.set()
            say(f"run {run_id}: stopped before it started measuring")
        except hostlock.Stopped as exc:  # still waiting for a `virtbench run` of this host
            say(f"run {run_id}: {exc}")
            if cancel_requested(self.store, run_id):
                mark_cancelled(self.store, run_id)
        except StoreError as exc:  # the store could not be written: the run is interrupted, not failed
            say(f"run {run_id}: {exc.message}; it resumes when a worker starts again")
        except InputError as exc:  # e.g. resume refused: the image changed; retrying cannot help
            self.store.set_status(run_id, "failed", exc.message)
            say(f"run {run_id}: failed: {exc.message}")
        except Exception as exc:  # noqa: BLE001 - the runner recorded it; the worker goes on
            say(f"run {run_id}: failed: {type(exc).__name__}: {exc}")
        finally:
            self._in_run_setup = False
            self._flush_progress()
            self.current, self.reporter = None, None

    def _precompute(self, run_id: str) -> None:
        """The run's report, computed now and stored, so its pages open at once (measuring is over)."""
        if self.after_run is None:
            return
        try:
            self.after_run(self.store, run_id)
        except Exception as exc:  # noqa: BLE001 - the pages compute it themselves then
            self.echo(f"run {run_id}: could not store its report: {exc}")

    def _check_platforms(self) -> None:
        """Which platform types this host runs, for the schedule form (same probe as doctor)."""
        from .. import hostinfo as hostfacts
        from ..platforms.availability import availability_of
        from ..registry import PLATFORMS

        self._set_state("probing")
        self._in_run_setup = True
        try:
            self.store.upsert_host(hostfacts.stable_facts())
            # the same lock as a run: a probe's instances must not disturb a `virtbench run`
            with hostlock.hold(self.paths, f"worker {self.id} probing platforms", wait=True, poll_s=self.poll_s,
                               stop=self.stop.is_set, log=self.echo):
                verdicts = availability_of(PLATFORMS.names(), self.paths)
        except (KeyboardInterrupt, hostlock.Stopped):
            return
        except Exception as exc:  # noqa: BLE001 - availability is a hint for the form, not a must
            self.echo(f"probing platforms failed: {exc}")
            return
        finally:
            self._in_run_setup = False
        facts = {"virtbench": __version__, "platforms": {
            n: {"available": v.available, "reason": v.reason, "fix": v.fix} for n, v in verdicts.items()}}
        queue.set_worker_facts(self.store, self.id, facts)
        self.echo("platforms here: " + ", ".join(n for n, v in verdicts.items() if v.available))

    # -- heartbeat -------------------------------------------------------------------------
    def _set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self._beat()

    def _heartbeat_loop(self) -> None:
        last = 0.0
        while not self._done.wait(PROGRESS_S):
            try:
                if self._flush_progress() or time.monotonic() - last >= HEARTBEAT_S:
                    self._beat()
                    last = time.monotonic()
            except Exception as exc:  # noqa: BLE001 - a busy database must not kill the worker
                self.echo(f"heartbeat failed: {exc}")

    def _beat(self) -> None:
        queue.heartbeat(self.store, self.id, self.state, self.current)

    def _flush_progress(self) -> bool:
        reporter, run_id = self.reporter, self.current
        doc = reporter.snapshot() if reporter else None
        if doc is None or run_id is None:
            return False
        queue.write_progress(self.store, run_id, doc)
        return True


def main(db_url: str | None, *, once: bool = False, poll_s: float = 2.0, probe: bool = True,
         after_run: Callable[[Store, str], None] | None = None, allow_meter: bool = False) -> None:
    """Entry point of `virtbench worker`."""
    store = Store(db_url)
    QueueWorker(store, Paths.from_env().make_private(), poll_s=poll_s, once=once, probe=probe, after_run=after_run,
                allow_meter=allow_meter).run()

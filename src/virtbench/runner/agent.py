"""The remote side of a multi-host run: `virtbench agent`, started over SSH by the controller.

It reads one job (JSON) from stdin, runs its host's part of the run with the same runner as a
single-host run (same schedule code, same failure handling), and writes one JSON line per
finished execution to stdout, which the controller commits to its store as it arrives, and
one per change of the kind's state (the adaptive rule's log), which the controller keeps with
the run under the host's name. The host's results never wait in a local database: what the
controller has is what was measured. A job of another mode is the kind's own (Experiment.serve).

When the SSH session dies (stdin closes, SIGHUP) or the controller stops it, the unit in
progress is stopped and its instances removed like on Ctrl-C, then everything labelled with
this run's id is cleaned up: nothing is left running on the host.
"""
from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from ..config import parse_campaign
from ..errors import VirtbenchError
from ..experiments.base import Experiment, ExperimentContext, Forwarding, Interrupted
from ..experiments.registry import EXPERIMENTS
from ..platforms.base import Paths
from ..platforms.closing import NotRemoved
from . import hostlock
from .execute import cleanup, measure
from .wire import PastExecution, PastSample, encode


class Emitter:
    """One JSON object per line on stdout; a vanished controller is noticed, never fatal."""

    def __init__(self, out: TextIO) -> None:
        self.out, self.lock, self.broken = out, threading.Lock(), False

    def __call__(self, event: str, **data: Any) -> None:
        line = json.dumps({"event": event, **data}, default=encode)
        with self.lock:
            if self.broken:
                return
            try:
                self.out.write(line + "\n")
                self.out.flush()
            except (BrokenPipeError, OSError, ValueError):
                self.broken = True


class StreamStore(Forwarding):
    """The sink of the host's part: each execution sent to the controller, which stores it.

    What this host measured (before an interruption, from the controller's history, and in this
    part) is kept to be read back: the columns a kind goes on from (density's search, the
    adaptive rule's samples), not the raw output. The kind's state (the adaptive log) goes to
    the controller too, which keeps it with the run."""

    def __init__(self, emit: Emitter, done: set[tuple[int, str, str]],
                 history: dict[str, list[dict[str, Any]]] | None = None,
                 state: dict[str, Any] | None = None) -> None:
        self.emit, self.done = emit, done
        self.status = ""
        self.past = [PastExecution(**e) for e in (history or {}).get("executions", [])]
        self.past_samples = [PastSample(**s) for s in (history or {}).get("samples", [])]
        self._state = dict(state or {})
        self._next_id = -1  # ids of this part's executions: below every stored one

    def done_units(self, run_id: str) -> set[tuple[int, str, str]]:  # noqa: ARG002
        return set(self.done)

    def put(self, fields: dict[str, Any]) -> int:
        self.done.add((fields["round"], fields["platform"], fields["benchmark"]))
        self.emit("record", record=fields)
        eid, self._next_id = self._next_id, self._next_id - 1
        self.past.append(PastExecution(id=eid, round=fields["round"], platform=fields["platform"],
                                       benchmark=fields["benchmark"], status=fields["status"],
                                       error=fields["error"], warmup=fields["warmup"],
                                       duration_s=float(fields["duration_s"])))
        self.past_samples += [PastSample(execution_id=eid, instance=int(s.get("instance", 0)), metric=s["metric"],
                                         value=float(s["value"]), round=fields["round"], warmup=fields["warmup"],
                                         platform=fields["platform"], benchmark=fields["benchmark"],
                                         higher_is_better=bool(s.get("higher_is_better", True)))
                              for s in fields["samples"]]
        return 0

    def executions(self, run_id: str, *, status: str | None = None) -> list[Any]:  # noqa: ARG002
        """The controller holds them; a resumed part gets back the columns a kind resumes from."""
        return [e for e in self.past if status is None or e.status == status]

    def samples(self, run_id: str, *, include_warmup: bool = False, per_instance: bool = False) -> list[Any]:  # noqa: ARG002
        return [s for s in self.past_samples if (per_instance or s.instance == 0) and (include_warmup or not s.warmup)]

    def set_status(self, run_id: str, status: str, error: str = "") -> None:  # noqa: ARG002
        self.status = status
        self.emit("status", status=status, error=error)

    def state(self, run_id: str) -> dict[str, Any]:  # noqa: ARG002
        return dict(self._state)

    def set_state(self, run_id: str, key: str, value: Any) -> None:  # noqa: ARG002
        self._state[key] = value
        self.emit("state", key=key, value=value)


class EmitReporter:
    def __init__(self, emit: Emitter) -> None:
        self.emit = emit

    def begin(self, total: int, done: int) -> None:
        self.emit("begin", total=total, done=done)

    def step(self, description: str) -> None:
        self.emit("step", message=description)

    def advance(self, n: int = 1) -> None: ...

    def log(self, message: str) -> None:
        self.emit("log", message=message)

    def end(self) -> None: ...


def main(stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> int:
    """Run one job; the exit status is 0 when the part finished, 1 otherwise."""
    emit = Emitter(stdout)
    try:
        job = json.loads(stdin.readline())
    except json.JSONDecodeError as exc:
        emit("error", message=f"bad job: {exc}", fix="the agent is started by the controller", exit_code=2)
        return 2
    paths = Paths.from_env()
    mode = job.get("mode", "run")
    try:
        if mode == "cleanup":
            removed = cleanup(paths, job.get("run_id"))
            emit("end", status="cleaned", removed=[r for r in removed if not isinstance(r, NotRemoved)],
                 not_removed=[r for r in removed if isinstance(r, NotRemoved)])
            return 0
        campaign = parse_campaign(job["campaign"], f"run {job['run_id']}")
        kind = EXPERIMENTS.get(campaign.experiment)(campaign, paths)  # the controller's kind, run here
        kind.image_cache = Path(job["image_cache"])
        try:
            kind.prepare(lambda m: emit("log", message=m))
            emit("hello", details=kind.details())
            if mode == "check":
                emit("end", status="checked")
                return 0
            if mode != "run":  # a job of the kind's own (the benchmarks kind's pair-server)
                return _serve(job, kind, paths, emit, stdin)
            return _run(job, kind.host_part(), paths, emit, stdin)
        finally:
            kind.close()  # what prepare made for the part (a Kubernetes namespace, an imported image)
    except VirtbenchError as exc:
        emit("error", message=exc.message, fix=exc.fix or "", exit_code=exc.exit_code)
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - reported to the controller, which names the host
        emit("error", message=f"{type(exc).__name__}: {exc}", fix="", exit_code=1)
        return 1


def _run(job: dict[str, Any], kind: Experiment, paths: Paths, emit: Emitter, stdin: TextIO) -> int:
    run_id = job["instance_run_id"]
    sink = StreamStore(emit, {(int(r), str(p), str(b)) for r, p, b in job.get("done", [])}, job.get("history"),
                       job.get("state"))
    reporter = EmitReporter(emit)
    gone = threading.Event()
    _watch_stdin(stdin, gone)
    previous = signal.signal(signal.SIGHUP, _raise_interrupted)
    try:
        with hostlock.hold(paths, f"a part of run {job['run_id']} for its controller", wait=True,
                           log=lambda m: emit("log", message=m)):
            hostlock.announce_run(paths, run_id)
            # an earlier attempt of this part that died with its host (killed, power lost) left its
            # instances: removed before the part runs again, as a local resume does
            for line in cleanup(paths, run_id):
                emit("log", message=f"removed leftover: {line}")
            outcome = measure(kind, ExperimentContext(sink=sink, run_id=run_id, seed=int(job["seed"]), paths=paths,
                                                      log=reporter.log, step=reporter.step,
                                                      stop_requested=gone.is_set, reporter=reporter))
    finally:
        signal.signal(signal.SIGHUP, previous)
        for line in cleanup(paths, run_id):  # the backstop: nothing labelled with this run stays
            emit("log", message=f"removed leftover: {line}")
    emit("end", status="interrupted" if outcome.interrupted else "finished")
    return 1 if outcome.interrupted else 0


def _raise_interrupted(signum: int, frame: Any) -> None:  # noqa: ARG001
    raise Interrupted(f"signal {signum}: the SSH session ended")


def _watch_stdin(stdin: TextIO, gone: threading.Event, kill: Callable[[], None] | None = None) -> None:
    """The controller keeps stdin open for the whole part; EOF means it (or the link) is gone:
    stop now (SIGTERM to ourselves, which the runner turns into a clean interrupt)."""
    import os

    def watch() -> None:
        try:
            while stdin.readline():
                pass
        except (OSError, ValueError):
            pass
        gone.set()
        (kill or (lambda: os.kill(os.getpid(), signal.SIGTERM)))()

    threading.Thread(target=watch, name="agent-stdin", daemon=True).start()


def _serve(job: dict[str, Any], kind: Experiment, paths: Paths, emit: Emitter, stdin: TextIO) -> int:
    """The kind's own job (Experiment.serve) until the controller closes stdin; then everything
    labelled with this run's id is removed."""
    run_id = job["instance_run_id"]
    previous = signal.signal(signal.SIGHUP, _raise_interrupted)
    try:
        kind.serve(job, stdin, emit)
    except Interrupted:
        pass
    finally:
        signal.signal(signal.SIGHUP, previous)
        for line in cleanup(paths, run_id):
            emit("log", message=f"removed leftover: {line}")
    emit("end", status="finished")
    return 0

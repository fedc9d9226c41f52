"""One measurement at a time per host.

Two campaigns measuring at once on one machine disturb each other, and neither report
would show it. `virtbench run` and the web worker therefore both hold an exclusive flock on
`<runtime dir>/measure.lock` from the platform probe to the end of the run. The kernel drops
a flock when its holder dies, so a `kill -9` never leaves the host locked. The file names
the holder (pid, what it runs, since when, and the run id once known) so the refusal can
say who is measuring.

Everything else that starts instances or removes them takes the same lock: `doctor`, `study
list` and the worker's startup probe (a probe's tiny instance would disturb a measurement;
`doctor` and `study list` then answer from their last probe, commands/lastprobe.py), and `cleanup`
of everything (it would remove the instances of the run that is measuring). `cleanup --run
ID` of another run needs no lock: it only touches that run's objects, and refuses the run
that holds the lock.
"""
from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from ..errors import InputError
from ..platforms.base import Paths

LOCK_NAME = "measure.lock"


class HostBusy(InputError):
    """Another virtbench process is measuring on this host."""


class Stopped(Exception):
    """Waiting for the host was given up because a stop was requested."""


def lock_path(paths: Paths) -> Path:
    return paths.runtime / LOCK_NAME


def holder(paths: Paths) -> dict[str, object]:
    """Who holds the lock, as its holder wrote it ({} when unknown)."""
    try:
        data = json.loads(lock_path(paths).read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _describe(info: dict[str, object]) -> str:
    if not info:
        return "another virtbench process"
    return f"{info.get('what', 'a run')} (pid {info.get('pid', '?')}, since {info.get('since', '?')})"


def is_held(paths: Paths) -> bool:
    """Whether some process (this one included, through another open) holds the lock now."""
    try:
        fd = os.open(lock_path(paths), os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # releases what we just took
    return False


def announce_run(paths: Paths, run_id: str) -> None:
    """Record which run this process measures, once its id is known (cleanup --run reads it)."""
    info = holder(paths)
    if info.get("pid") == os.getpid():
        lock_path(paths).write_text(json.dumps({**info, "run_id": run_id}))


def refuse_if_measuring(paths: Paths, run_id: str) -> None:
    """cleanup --run of the run that is measuring right now would pull its instances away."""
    info = holder(paths)
    if info.get("pid") == os.getpid():
        return  # the measuring process itself, removing what its run left before (resume)
    if info.get("run_id") == run_id and is_held(paths):
        raise HostBusy(f"run {run_id} is measuring on this host ({_describe(info)}); cleaning it up now "
                       "would remove the instances it measures", "stop that run first (Ctrl-C or cancel), "
                       "then run virtbench cleanup --run again")


def acquire(path: Path, *, poll_s: float, stop: Callable[[], bool], on_busy: Callable[[], None],
            sleep: Callable[[float], object] = time.sleep) -> int | None:
    """Open path and take an exclusive flock on it, polling while another process holds it.

    on_busy() runs after each failed try (it may raise to give up); None once stop() is true.
    Returns the open descriptor: closing it releases the lock. The one lock loop of virtbench
    (the measurement lock below, the worker's standby lock)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                on_busy()
                if stop():
                    os.close(fd)
                    return None
                sleep(poll_s)
    except BaseException:
        os.close(fd)
        raise


@contextmanager
def hold(paths: Paths, what: str, *, wait: bool = False, poll_s: float = 2.0,
         stop: Callable[[], bool] | None = None, log: Callable[[str], None] = lambda _m: None) -> Iterator[None]:
    """Hold the host's measurement lock for the block.

    wait=False: raise HostBusy naming the holder at once. wait=True: poll until it is free,
    logging once; raise Stopped if `stop()` turns true meanwhile."""
    told: list[str] = []

    def busy() -> None:
        who = _describe(holder(paths))
        if not wait:
            raise HostBusy(f"{who} is measuring on this host; two runs at once would disturb "
                           "each other", "wait for it to finish, or add --wait to queue behind it")
        if not told:
            log(f"waiting: {who} is measuring on this host")
        told.append(who)

    fd = acquire(lock_path(paths), poll_s=poll_s, stop=stop or (lambda: False), on_busy=busy)
    if fd is None:
        raise Stopped(f"stopped while waiting for {told[-1] if told else 'another virtbench process'}")
    try:
        since = datetime.now(UTC).isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "what": what, "since": since}).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the flock

"""The test suite's own host lock: tests that time things or push the host run alone.

`make test` runs things side by side (the unit and web tests beside the integration tests,
integration modules on pytest-xdist workers, image and Kubernetes builds in the background).
The product's lock (runner/hostlock.py) cannot keep them apart: it lives in the runtime
directory, and every test has its own (the `env` and `paths` fixtures), so two workers'
campaigns would measure at once. This lock is the machine's, one file for every pytest process
and build of the machine: everything holds it shared while it runs, and a test marked
`measures` (density, the guard, OOM, the self-test, verdicts, anything asserting a timing)
holds it exclusive, so it runs with nothing else of the suite beside it.

A reader-writer lock of two flock(2) files: readers pass the gate (taking it shared for an
instant) and then hold the lock shared; a writer closes the gate (exclusive) while it waits
for the lock, so new readers queue behind it and a stream of short unit tests cannot starve
it. The kernel drops a flock when its holder dies: a killed worker never leaves it held.
Bash takes it the same way with flock(1) (tools/test-lanes, the background builds).
"""
from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_DIR_ENV = "VIRTBENCH_TEST_LOCK_DIR"
DEFAULT_DIR = Path("/run/virtbench-test")


def lock_dir() -> Path:
    d = Path(os.environ.get(LOCK_DIR_ENV) or DEFAULT_DIR)
    d.mkdir(parents=True, exist_ok=True)
    return d


def _open(name: str) -> int:
    return os.open(lock_dir() / name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


class Held:
    """A held suite lock (shared or exclusive); release() gives it back (idempotent)."""

    def __init__(self, fd: int, exclusive: bool, waited: float) -> None:
        self.fd: int | None = fd
        self.exclusive = exclusive
        self.waited = waited

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # drops the flock
            self.fd = None


def acquire(exclusive: bool, *, on_wait: Callable[[], None] = lambda: None) -> Held:
    """Take the suite lock; on_wait() runs once if it is not free at once."""
    t0 = time.monotonic()
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    told = []

    def take(fd: int) -> None:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            if not told:
                told.append(on_wait())
            fcntl.flock(fd, mode)

    gate = _open("suite.gate")
    lock = _open("suite.lock")
    try:
        try:
            take(gate)
            take(lock)
        finally:
            os.close(gate)  # a writer holds the gate only while it waits for the lock
    except BaseException:
        os.close(lock)
        raise
    return Held(lock, exclusive, time.monotonic() - t0)


@contextmanager
def shared() -> Iterator[Held]:
    held = acquire(False)
    try:
        yield held
    finally:
        held.release()


@contextmanager
def exclusive(on_wait: Callable[[], None] = lambda: None) -> Iterator[Held]:
    held = acquire(True, on_wait=on_wait)
    try:
        yield held
    finally:
        held.release()


def writer_waiting() -> bool:
    """Whether a measuring test waits for the lock now (it holds the gate closed)."""
    try:
        gate = _open("suite.gate")
    except OSError:
        return False
    try:
        fcntl.flock(gate, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(gate)

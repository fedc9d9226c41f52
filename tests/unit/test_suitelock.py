"""The suite lock (tests/hostsupport/suitelock.py): a measuring test runs with nothing of the
suite beside it, and readers arriving while it waits queue behind it (no starvation)."""
from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

from hostsupport import suitelock

TESTS = Path(__file__).resolve().parents[1]

HOLDER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
from hostsupport import suitelock
held = suitelock.acquire({exclusive})
Path({got!r}).write_text("got")
while not Path({release!r}).exists():
    time.sleep(0.01)
held.release()
"""


def _holder(tmp_path: Path, name: str, exclusive: bool) -> tuple[subprocess.Popen, Path, Path]:
    got, release = tmp_path / f"{name}.got", tmp_path / f"{name}.release"
    code = HOLDER.format(tests=str(TESTS), exclusive=exclusive, got=str(got), release=str(release))
    env = dict(os.environ, **{suitelock.LOCK_DIR_ENV: str(tmp_path / "locks")})
    return subprocess.Popen([sys.executable, "-c", code], env=env), got, release


def _until(cond, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_writer_waits_for_the_readers_and_later_readers_wait_for_it(tmp_path, monkeypatch):
    monkeypatch.setenv(suitelock.LOCK_DIR_ENV, str(tmp_path / "locks"))
    procs = []
    try:
        reader, reader_got, reader_release = _holder(tmp_path, "reader", False)
        procs.append(reader)
        _until(reader_got.exists, "a reader of a free lock gets it")
        other, other_got, other_release = _holder(tmp_path, "other", False)
        procs.append(other)
        _until(other_got.exists, "readers share the lock")
        other_release.touch()
        assert not suitelock.writer_waiting()
        writer, writer_got, writer_release = _holder(tmp_path, "writer", True)
        procs.append(writer)
        _until(suitelock.writer_waiting, "the waiting writer closes the gate")
        late, late_got, late_release = _holder(tmp_path, "late", False)
        procs.append(late)
        time.sleep(0.5)
        assert not writer_got.exists(), "the writer got the lock while a reader held it"
        assert not late_got.exists(), "a reader went past a waiting writer"
        reader_release.touch()
        _until(writer_got.exists, "the writer gets the lock once the readers are done")
        time.sleep(0.3)
        assert not late_got.exists(), "a reader got the lock while the writer held it"
        writer_release.touch()
        _until(late_got.exists, "the late reader gets it after the writer")
        late_release.touch()
        for p in procs:
            assert p.wait(timeout=30) == 0
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_a_holder_that_dies_releases_the_lock(tmp_path, monkeypatch):
    holder, got, _ = _holder(tmp_path, "dies", True)
    try:
        _until(got.exists, "the holder gets the lock")
    finally:
        holder.kill()
        holder.wait()
    waited = []
    monkeypatch.setenv(suitelock.LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setattr(fcntl, "flock", _no_blocking(fcntl.flock, waited))
    suitelock.acquire(True, on_wait=lambda: waited.append("waited")).release()
    assert waited == [], "the dead holder's lock was still held"


def _no_blocking(flock, waited):
    """flock that never blocks: a lock still held shows as a wait instead of hanging the test."""
    def call(fd, op):
        try:
            return flock(fd, op | fcntl.LOCK_NB)
        except BlockingIOError:
            waited.append("blocked")
            raise
    return call

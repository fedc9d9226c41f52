"""The in-instance stop of a background server (platforms/background.py), run here on the
host: the same fixed scripts run inside the instances, where only /proc and sh are assumed."""
from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from virtbench import proc
from virtbench.platforms.background import STOP_SCRIPT, WRAPPER


def sleepers(seconds: str) -> list[int]:
    """Live (non-zombie) `sleep SECONDS` processes on this host."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit():
                continue
            if (entry / "cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", seconds.encode()] and \
                    (entry / "stat").read_text().rsplit(") ", 1)[1][0] != "Z":
                found.append(int(entry.name))
        except OSError:
            pass
    return found


@pytest.mark.parametrize("leader", [True, False], ids=["group-leader", "not-leader"])
def test_stop_script_ends_the_server_and_its_children(tmp_path, leader):
    """A group leader (docker/podman exec) and a plain child (lxc-attach) both end, children too."""
    seconds = str(60000 + uuid.uuid4().int % 9999)
    pidfile = str(tmp_path / "server.pid")
    server = ["sh", "-c", WRAPPER, "sh", pidfile, "sh", "-c", f"sleep {seconds} & exec sleep {seconds}"]
    if not leader:
        server = ["sh", "-c", '"$@" & wait', "sh", *server]
    bg = proc.spawn(server)
    try:
        deadline = time.monotonic() + 10
        while len(sleepers(seconds)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(sleepers(seconds)) == 2
        started = time.monotonic()
        proc.run(["sh", "-c", STOP_SCRIPT, "sh", pidfile, "TERM", "20"], timeout=30)
        assert time.monotonic() - started < 5
        assert sleepers(seconds) == []
        assert not Path(pidfile).exists()
    finally:
        bg.stop()


def test_stop_script_without_a_server_is_a_no_op(tmp_path):
    """Nothing recorded (the server never started) or already gone: nothing to do, no error."""
    pidfile = tmp_path / "none.pid"
    assert proc.run(["sh", "-c", STOP_SCRIPT, "sh", str(pidfile), "TERM", "5"], timeout=30).ok
    pidfile.write_text("999999999\n")
    assert proc.run(["sh", "-c", STOP_SCRIPT, "sh", str(pidfile), "TERM", "5"], timeout=30).ok


def test_stop_script_kills_what_ignores_the_signal(tmp_path):
    """A server that ignores SIGTERM is SIGKILLed after the grace period."""
    seconds = str(70000 + uuid.uuid4().int % 9999)
    pidfile = str(tmp_path / "server.pid")
    bg = proc.spawn(["sh", "-c", WRAPPER, "sh", pidfile, "sh", "-c", f"trap '' TERM; sleep {seconds}; :"])
    try:
        deadline = time.monotonic() + 10
        while not sleepers(seconds) and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.run(["sh", "-c", STOP_SCRIPT, "sh", pidfile, "TERM", "5"], timeout=30)
        assert sleepers(seconds) == []
    finally:
        bg.stop()

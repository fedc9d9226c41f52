"""Fixtures shared by the integration tests that drive the real CLI."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

import pytest

from hostsupport import schedule
from hostsupport.k8s_node import stop_after as stop_k8s_node_after
from virtbench.platforms.qemu import guest


@pytest.fixture
def env(tmp_path):
    """The CLI's environment with its own database, state and runtime directories, so a test
    never touches a user's runs; whatever it left is cleaned up afterwards."""
    base = f"/var/lib/virtbench-test/cli-{uuid.uuid4().hex[:8]}"
    e = dict(os.environ, VIRTBENCH_DB=f"sqlite:///{tmp_path / 'results.db'}",
             VIRTBENCH_STATE_DIR=base, VIRTBENCH_RUNTIME_DIR=f"/run/virtbench-test/{Path(base).name}")
    yield e
    subprocess.run([sys.executable, "-m", "virtbench", "cleanup"], env=e, capture_output=True, timeout=300)
    for top in (e["VIRTBENCH_STATE_DIR"], e["VIRTBENCH_RUNTIME_DIR"]):
        _remove_empty(Path(top))


def _remove_empty(top: Path) -> None:
    """The test's directories, once cleanup emptied them (257 empty state directories had piled
    up here). rmdir only: a directory still holding a file or a mount stays, to be seen."""
    if not top.is_dir():
        return
    for d, _, _ in os.walk(top, topdown=False):  # deepest first
        try:
            os.rmdir(d)
        except OSError:
            pass


class _SharedGuest:
    """The reference host (tests/hostsupport/reference_host.py), booted on the first test that
    asks for it and stopped after the last: one boot per run for every test that needs a
    systemd + cgroup v2 host. A boot that failed or was skipped is not tried again: the later
    tests get the same outcome at once instead of another 15-minute boot timeout."""

    def __init__(self) -> None:
        self.stack: ExitStack | None = None
        self.host = None
        self.outcome: BaseException | None = None
        self.paused_at: float | None = None

    def get(self):
        if self.outcome is not None:
            raise self.outcome
        if self.host is None:
            from hostsupport.reference_host import reference_host, skip_unless_affordable

            try:
                skip_unless_affordable()
                self.stack = ExitStack()
                self.host = self.stack.enter_context(reference_host())
                self.stack.callback(schedule.while_waiting(self.pause, self.resume))
            except BaseException as exc:
                self.outcome = exc
                self.stop()
                raise
            print(f"reference host: {self.host.timings}")
            _first(self.host.pidfile)
        return self.host

    def pause(self) -> None:
        """Between two of its tests, while this worker waits for a measuring test elsewhere: the
        guest stopped (QMP), so it takes no CPU beside that test."""
        if self.host is not None and self.paused_at is None:
            guest.qmp(str(self.host.qmp_socket), "stop")
            self.paused_at = time.time()

    def resume(self) -> None:
        """Running again, its clock put forward by the pause (a stopped TCG guest's clock stops
        with it; the guest adds it to its own time, so the SSH round trip does not count)."""
        if self.host is not None and self.paused_at is not None:
            guest.qmp(str(self.host.qmp_socket), "cont")
            lag, self.paused_at = round(time.time() - self.paused_at), None
            self.host.ssh(["date", "-s", f"@$(( $(date +%s) + {lag} ))"], timeout=120, check=False)

    def stop(self) -> None:
        stack, self.stack, self.host, self.paused_at = self.stack, None, None, None
        if stack is not None:
            stack.close()


def _first(pidfile: Path) -> None:
    """The guest's threads at nice -5: under TCG the reference guest is CPU-bound and its tests
    are the run's longest chain, so the CPU goes to it first and the other tests fill the rest
    (none of them times anything: a measuring test finds the guest paused)."""
    try:
        pid = int(pidfile.read_text().split()[0])
        for tid in os.listdir(f"/proc/{pid}/task"):
            os.setpriority(os.PRIO_PROCESS, int(tid), -5)
    except (OSError, ValueError):
        pass  # not root, or the guest already gone: it runs at the default priority


_SHARED = _SharedGuest()


@pytest.fixture
def refhost():
    """A host as users have it (systemd as PID 1, unified cgroup v2, Debian's runtimes), shared by
    every test that uses this fixture: the tests using it are one xdist group (one worker, one
    after the other, tests/hostsupport/schedule.py) and the guest is stopped after the last of
    them. Each test keeps to its own: its own local state (the `env` fixture), its own run ids
    in the guest, and nothing of its runs left there (the tests check)."""
    return _SHARED.get()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        return (yield)
    finally:
        if "refhost" in item.fixturenames and (nextitem is None or "refhost" not in nextitem.fixturenames):
            _SHARED.stop()  # the last test that needs it: the guest does not run beside what follows
        stop_k8s_node_after(item, nextitem)  # the session's Kubernetes node, likewise after its group


def pytest_sessionfinish(session):
    _SHARED.stop()  # an interrupted session too: no guest outlives the tests

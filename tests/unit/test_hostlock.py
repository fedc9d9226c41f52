"""The host's measurement lock: refused, waited for, released by a killed holder."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from virtbench.platforms.base import Paths
from virtbench.runner import hostlock

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from virtbench.platforms.base import Paths
    from virtbench.runner import hostlock
    paths = Paths(state=Path(sys.argv[1]), runtime=Path(sys.argv[2]))
    with hostlock.hold(paths, "campaign 'other'"):
        print("held", flush=True)
        time.sleep(float(sys.argv[3]))
""")


def paths_in(tmp_path: Path) -> Paths:
    return Paths(state=tmp_path / "state", runtime=tmp_path / "run")


def hold_elsewhere(paths: Paths, seconds: float) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(paths.state), str(paths.runtime), str(seconds)],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


@contextmanager
def held_elsewhere(paths: Paths, seconds: float = 60) -> Iterator[subprocess.Popen]:
    """Another process holds the lock for the block; it is gone afterwards, whatever happened."""
    child = hold_elsewhere(paths, seconds)
    try:
        yield child
    finally:
        child.kill()
        child.wait()


def test_busy_host_is_refused_naming_the_holder(tmp_path: Path) -> None:
    paths = paths_in(tmp_path)
    with held_elsewhere(paths) as child:
        with pytest.raises(hostlock.HostBusy) as err:
            with hostlock.hold(paths, "mine"):
                pytest.fail("entered a held lock")
        assert f"campaign 'other' (pid {child.pid}" in err.value.message and "--wait" in (err.value.fix or "")
        assert err.value.exit_code == 2


def test_wait_until_free_then_hold(tmp_path: Path) -> None:
    paths = paths_in(tmp_path)
    child = hold_elsewhere(paths, 1.0)
    said: list[str] = []
    start = time.monotonic()
    with hostlock.hold(paths, "mine", wait=True, poll_s=0.1, log=said.append):
        assert time.monotonic() - start > 0.5
        assert hostlock.holder(paths)["pid"] == os.getpid() and hostlock.holder(paths)["what"] == "mine"
    child.wait()
    assert len(said) == 1 and "campaign 'other'" in said[0]
    assert hostlock.holder(paths) == {}  # released and cleared


def test_stop_while_waiting(tmp_path: Path) -> None:
    paths = paths_in(tmp_path)
    with held_elsewhere(paths):
        with pytest.raises(hostlock.Stopped, match="campaign 'other'"):
            with hostlock.hold(paths, "mine", wait=True, poll_s=0.05, stop=lambda: True):
                pytest.fail("entered a held lock")


def test_a_killed_holder_leaves_the_host_free(tmp_path: Path) -> None:
    paths = paths_in(tmp_path)
    child = hold_elsewhere(paths, 30)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    with hostlock.hold(paths, "mine"):
        pass


def test_cli_run_refuses_before_anything_starts(tmp_path: Path) -> None:
    paths = paths_in(tmp_path)
    campaign = tmp_path / "c.yaml"
    campaign.write_text("name: c\nplatforms: [native]\nbenchmarks: [{name: sysbench-cpu, time: 1}]\n")
    env = dict(os.environ, VIRTBENCH_STATE_DIR=str(paths.state), VIRTBENCH_RUNTIME_DIR=str(paths.runtime),
               VIRTBENCH_DB=f"sqlite:///{tmp_path / 'r.db'}")
    with held_elsewhere(paths):
        res = subprocess.run([sys.executable, "-m", "virtbench", "run", str(campaign)], env=env,
                             capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "is measuring on this host" in res.stderr and "--wait" in res.stderr
    from virtbench.store.db import Store

    assert Store(env["VIRTBENCH_DB"]).runs() == []  # nothing was recorded, nothing started


# -- commands that must not run beside a measurement (#10 item 7) ---------------------------
class _Recorder:
    """A platform class whose cleanup only records that it was asked."""

    calls: list[str | None] = []

    @classmethod
    def cleanup(cls, paths: Paths, run_id: str | None = None) -> list[str]:
        cls.calls.append(run_id)
        return []


@pytest.fixture
def recorded_cleanup(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    from virtbench.runner import execute

    _Recorder.calls = []
    monkeypatch.setattr(execute.PLATFORMS, "items", lambda: [("fake", _Recorder)])
    monkeypatch.setattr(execute.EXPERIMENTS, "items", lambda: [])
    return _Recorder.calls


def test_cleanup_of_everything_never_runs_beside_a_measuring_run(tmp_path: Path, recorded_cleanup) -> None:
    from virtbench.runner import execute

    paths = paths_in(tmp_path)
    with held_elsewhere(paths):
        with pytest.raises(hostlock.HostBusy, match="campaign 'other'"):
            execute.cleanup(paths)
    assert recorded_cleanup == []  # no platform was asked to remove anything
    assert execute.cleanup(paths) == [] and recorded_cleanup == [None]  # free again: it cleans


ANNOUNCING = HOLDER.replace('print("held", flush=True)', 'hostlock.announce_run(paths, "r-live"); print("held", flush=True)')


def test_cleanup_of_one_run_refuses_the_run_that_is_measuring(tmp_path: Path, recorded_cleanup) -> None:
    from virtbench.runner import execute

    paths = paths_in(tmp_path)
    child = subprocess.Popen([sys.executable, "-c", ANNOUNCING, str(paths.state), str(paths.runtime), "60"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        assert hostlock.holder(paths)["run_id"] == "r-live"
        with pytest.raises(hostlock.HostBusy, match="run r-live is measuring"):
            execute.cleanup(paths, "r-live")
        execute.cleanup(paths, "r-dead")  # another run's leftovers: cleaned at once
        assert recorded_cleanup == ["r-dead"]
    finally:
        child.kill()
        child.wait()


def test_doctor_waits_for_or_refuses_a_measuring_run(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from virtbench.cli import cli

    paths = paths_in(tmp_path)
    env = {"VIRTBENCH_STATE_DIR": str(paths.state), "VIRTBENCH_RUNTIME_DIR": str(paths.runtime)}
    with held_elsewhere(paths):
        result = CliRunner().invoke(cli, ["doctor", "--db", f"sqlite:///{tmp_path}/db.sqlite"], env=env)
    assert isinstance(result.exception, hostlock.HostBusy) and "campaign 'other'" in result.exception.message


def test_the_measuring_process_may_clean_up_its_own_run(tmp_path: Path, recorded_cleanup) -> None:
    """resume removes what its run left before, while holding the lock itself."""
    from virtbench.runner import execute

    paths = paths_in(tmp_path)
    with hostlock.hold(paths, "mine"):
        hostlock.announce_run(paths, "r-mine")
        execute.cleanup(paths, "r-mine")
    assert recorded_cleanup == ["r-mine"]

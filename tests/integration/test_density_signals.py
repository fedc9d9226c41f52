"""Density for real, when things go wrong around it: SIGTERM (twice, the second while the first
is being handled) in any phase of a probe removes every instance by itself, with no
`virtbench cleanup` afterwards; a full disk (the state directory, or the store, on a small
tmpfs) is one line and a `disk_full` stop with its evidence, nothing left behind."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from hostsupport.density import _campaign, leftovers, vb

pytestmark = [pytest.mark.integration, pytest.mark.measures]  # density runs with the guard: runs alone


def _attached(state: str, needle: bytes = b"") -> list[int]:
    """lxc-attach processes into this test's containers (a workload still running); with
    `needle`, only those whose command line holds it (the workload, not the short rehearsal)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        line = b" ".join(argv)
        if argv and argv[0].endswith(b"lxc-attach") and state.encode() in line and needle in line:
            out.append(int(pid))
    return out


def _workloads(state: str) -> set[bytes]:
    """The containers of this test running openssl (launched by each container's resident
    runner, so no lxc-attach holds it; `-multi 2` is three processes of one container)."""
    names = [n.encode() for n in _instances(state)]
    out = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            groups = Path(f"/proc/{pid}/cgroup").read_bytes()
        except OSError:
            continue
        if argv and argv[0].endswith(b"openssl") and b"speed" in argv:
            out |= {n for n in names if any(b"lxc.payload." + n + end in groups for end in (b"\n", b"/"))}
    return out


def _instances(state: str) -> list[str]:
    d = Path(state) / "lxc"
    return sorted(p.name for p in d.iterdir() if p.is_dir()) if d.is_dir() else []


@pytest.mark.parametrize("phase", ["starting", "workload"])
def test_sigterm_in_any_phase_removes_every_instance(env, tmp_path, phase):
    camp = _campaign(tmp_path, """
name: density-sigterm
experiment: density
platforms: [{name: lxc, type: lxc, memory: 64M, swap: 0}]
density:
  workload: {name: openssl, algorithm: des-ede3, bytes: 64, multi: 2, seconds: 12}
  counts: [1, 3]
  host_memory: 256M
  settle: 0
""")
    state = env["VIRTBENCH_STATE_DIR"]
    p = subprocess.Popen([sys.executable, "-m", "virtbench", "run", str(camp), "--no-report"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 300
    if phase == "starting":  # while instance 2 is being created or started (instance 1 measured)
        ready = lambda: any(n.endswith("-2") for n in _instances(state))  # noqa: E731
    else:  # while the 3 instances run the workload
        ready = lambda: len(_instances(state)) == 3 and len(_workloads(state)) == 3  # noqa: E731
    reached = False
    while time.monotonic() < deadline and not reached and p.poll() is None:
        reached = bool(ready())
        time.sleep(0.05)
    assert p.poll() is None and reached, "the run should be in the phase by now"
    if phase == "workload":
        time.sleep(2)
    p.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    p.send_signal(signal.SIGTERM)  # an impatient second signal while the first one's cleanup runs
    _, err = p.communicate(timeout=300)
    # 130: the second signal came while virtbench still ran; -15: it came after the run was
    # already handled and cleaned up, during the interpreter's exit (default action by then)
    assert p.returncode == 130 or (p.returncode == -signal.SIGTERM and "interrupted" in err), err
    assert "Traceback" not in err, err
    assert leftovers(env) == [] and _instances(state) == [] and _attached(state) == [], err  # no cleanup needed
    assert _workloads(state) == set(), err


@pytest.fixture
def small_tmpfs():
    """A tmpfs of a given size, unmounted afterwards."""
    made: list[Path] = []

    def make(size: str) -> Path:
        d = Path(f"/var/lib/virtbench-test/full-{uuid.uuid4().hex[:8]}")
        d.mkdir(parents=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "vb-test-full", str(d)], check=True)
        made.append(d)
        return d

    yield make
    for d in made:
        subprocess.run(["umount", "-l", str(d)], check=False)
        d.rmdir()


DISK_CAMPAIGN = """
name: density-disk
experiment: density
platforms: [{name: lxc, type: lxc, memory: 64M, swap: 0}]
density:
  workload: {name: openssl, algorithm: des-ede3, bytes: 64, multi: 1, seconds: 1}
  counts: {until: failure, max: 64}
  host_memory: 512M
  settle: 0
  collapse: 0
  starved: 0
"""


def test_a_full_state_disk_is_a_disk_full_stop_with_nothing_left(env, tmp_path, small_tmpfs):
    state = small_tmpfs("64k")
    env = dict(env, VIRTBENCH_STATE_DIR=str(state))
    res = vb(env, "run", str(_campaign(tmp_path, DISK_CAMPAIGN)), "--no-report")
    assert "Traceback" not in res.stderr, res.stderr
    entry = json.loads(vb(env, "report", "--json").stdout)["density"][0]
    assert entry["stop_reason"] == "disk_full", entry
    assert "host disk full" in entry["stop_detail"] and entry["stop_evidence"]["path"].startswith(str(state))
    assert entry["stop_evidence"]["size_bytes"] == 64 << 10
    assert [x for x in leftovers(env) if x != str(state)] == [] and _instances(str(state)) == []  # the tmpfs itself


def test_a_full_store_is_one_line_with_nothing_left(env, tmp_path, small_tmpfs):
    store = small_tmpfs("320k")
    env = dict(env, VIRTBENCH_DB=f"sqlite:///{store / 'results.db'}")
    res = vb(env, "run", str(_campaign(tmp_path, DISK_CAMPAIGN)), "--no-report")
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert "disk full" in lines[0] and "(fix: " in lines[0] and "--db" in lines[0], res.stderr
    assert leftovers(env) == [] and _instances(env["VIRTBENCH_STATE_DIR"]) == []

"""The density guard's thrashing rule on a real confined host (issue 12).

The rule that stops a density run when the *confined host* thrashes (PSI memory stalls while
the parent cgroup is at, or was recently at, its limit) had been tried on made-up readings
only: every real trip came from the available-memory floor. Here a real 64 MiB parent cgroup
(`cgroups.Confinement`, as `host_memory:` makes it) holds a real workload
(`hostsupport/thrash.py`, started inside it from its first page) that pins most of the limit
in anonymous memory (no swap: reclaim cannot take it) and reads a file on a disk filesystem,
larger than what is left, over and over. Each pass evicts the pages of the last one and
reads them back: the reader spends its time in reclaim and refaults, which the kernel counts
as memory stalls, while the parent sits at its limit, its available memory (limit minus what
reclaim cannot give back) stays above the floor and nothing is OOM-killed. A real Guard fed
the parent's real readings must trip on the confined host thrashing, naming the PSI values
and the parent's usage; the workload, the cgroup and the file are removed whatever happens.

cgroup v1 (this machine: hybrid, no per-cgroup PSI): the host's PSI is attributed to the
parent while it is at its limit. cgroup v2: the parent's own memory.pressure.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from virtbench.experiments.density_guard import MIB, NEAR_LIMIT, Guard, GuardSettings, read_parent
from virtbench.migrate.storage import mount_of
from virtbench.platforms import cgroups

pytestmark = [pytest.mark.integration, pytest.mark.slow]

THRASH = Path(__file__).resolve().parents[1] / "hostsupport" / "thrash.py"
LIMIT = 64 * MIB
ANON_MIB = 40
"""Pinned by the workload: with its interpreter (about 8 MiB) it leaves about 16 MiB of the
limit to page cache, well above the 6.4 MiB floor (10 % of the limit): the floor must not be
what trips."""
FILE_MIB = 48
"""Three times what is left for page cache: every pass must read the file back from disk."""
DISK_DIRS = ("/var/tmp", "/var/lib")
MEMORY_FS = {"tmpfs", "ramfs", "devtmpfs", "overlay", "squashfs"}
SOME, FULL = 40.0, 10.0
"""The guard's defaults: the workload makes the confined host thrash beyond them (measured
here: see the docstring of test_a_thrashing_confined_host_trips_the_guard)."""
DEADLINE = 30.0
INTERVAL = 0.5


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root: it creates a memory cgroup and moves a process into it"
    if not Path("/proc/pressure/memory").exists():
        return "no /proc/pressure/memory: the kernel has no PSI (CONFIG_PSI, or booted with psi=0)"
    if not (cgroups.root() / "memory").is_dir() and not cgroups.is_v2():
        return "no memory cgroup controller mounted"
    return None


def _disk_dir() -> Path:
    """A directory on a disk filesystem: a file in tmpfs is memory itself, never read back."""
    for d in map(Path, DISK_DIRS):
        if d.is_dir() and mount_of(d)[1] not in MEMORY_FS:
            return d
    pytest.skip(f"none of {', '.join(DISK_DIRS)} is on a disk filesystem")


def _file(path: Path, mib: int) -> None:
    """Incompressible data on disk, none of it left in the page cache: the workload's reads
    must be charged to the parent (a page is charged to the cgroup that first reads it)."""
    with open(path, "wb") as out:
        for _ in range(mib):
            out.write(os.urandom(MIB))
        out.flush()
        os.fsync(out.fileno())
        os.posix_fadvise(out.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def _psi_share(before: str, after: str, seconds: float) -> dict[str, float]:
    """Exact share of wall time stalled (%) between two /proc/pressure/memory readings."""
    from virtbench.probes.hostpressure import parse_psi

    a, b = parse_psi(before), parse_psi(after)
    out = {"some": (b.some_total_us - a.some_total_us) / 1e4 / seconds}
    if a.full_total_us is not None and b.full_total_us is not None:
        out["full"] = (b.full_total_us - a.full_total_us) / 1e4 / seconds
    return out


@pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")
def test_a_thrashing_confined_host_trips_the_guard():
    """Thresholds are the defaults (some 40 %, full 10 %)."""
    rel = f"virtbench-test-thrash-{os.getpid()}"
    conf = cgroups.Confinement(rel, LIMIT)
    data = _disk_dir() / f"virtbench-test-thrash-{os.getpid()}.bin"
    guard = Guard(GuardSettings(max_psi_some=SOME, max_psi_full=FULL, interval=INTERVAL),
                  parent=lambda: read_parent(rel, LIMIT))
    proc = None
    try:
        _file(data, FILE_MIB)
        conf.create()
        empty = guard.check("empty parent")
        assert empty is None or "confined host" not in empty.reason, empty.reason
        assert guard.series[-1]["parent_at_limit_recently"] is False
        guard.trip = None  # judged from here on: the workload's doing
        psi0, t0 = Path("/proc/pressure/memory").read_text(), time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "virtbench.platforms.cgroups", "exec", "--cgroup", rel, "--",
                                 sys.executable, str(THRASH), str(data), str(ANON_MIB)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        trip = None
        while trip is None and time.monotonic() - t0 < DEADLINE and proc.poll() is None:
            time.sleep(INTERVAL)
            trip = guard.check("workload")
        took = time.monotonic() - t0
        share = _psi_share(psi0, Path("/proc/pressure/memory").read_text(), took)
        alive = proc.poll() is None
        oom_kills = cgroups.subtree_oom_kills(rel)
    finally:
        if proc is not None:
            proc.kill()
            proc.wait(timeout=30)
        if cgroups.memory_dir(rel).is_dir():
            cgroups.kill_tasks(rel)  # anything the workload left (it starts none)
        conf.remove()
        data.unlink(missing_ok=True)
    assert [d for d in conf.dirs() if d.exists()] == [] and not data.exists(), "left behind"
    last = guard.series[-1]
    seen = (f"after {took:.1f} s, stalled some {share['some']:.1f} % full {share.get('full', 0):.1f} % of the time; "
            f"last reading: {last}")
    assert alive and oom_kills == 0, f"the workload died (OOM kills {oom_kills}): {proc.stderr.read() if proc.stderr else ''}"
    assert trip is not None, f"the guard did not trip on a thrashing confined host {seen}"
    assert "confined host of 64 MiB thrashing: PSI memory" in trip.reason, trip.reason
    source = "its own memory.pressure" if cgroups.is_v2() else "host PSI while the parent is at its limit"
    assert source in trip.reason, trip.reason
    parent = trip.reading["parent"]
    assert parent["limit"] == LIMIT and trip.reading["parent_at_limit_recently"] is True
    assert parent["usage"] >= NEAR_LIMIT * LIMIT or (parent["peak"] or 0) >= NEAR_LIMIT * LIMIT, parent
    assert trip.reading["confined_available"] >= trip.threshold["confined_min_available"]  # not the floor
    psi = parent if cgroups.is_v2() else trip.reading
    some, full = psi["psi_some_avg10"], psi["psi_full_avg10"]
    assert (full is not None and full > FULL) or some > SOME, trip.reading
    named = f"{full:.1f}%" if "full avg10" in trip.reason else f"{some:.1f}%"
    assert named in trip.reason, (named, trip.reason)
    print(f"tripped {seen}: {trip.reason}")

"""Finding, killing and cleaning up after QEMU processes on the host.

Cleanup must find a run's QEMUs by their command line and release their taps, cgroups and
files even when the instance directory is gone, both for a live VM and for a crashed run's
leftovers. They depend only on /proc, signals, cgroups and taps, not on a VM's definition,
so they live apart from the platform (qemu.py), which calls them from its lifecycle and
its cleanup; tests use qemu_processes to check that nothing was left running.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from ... import proc
from ...errors import VirtbenchError
from .. import bridge, cgroups, mounts
from ..base import Paths

SERIAL_TAIL = 15


def _rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


# -- QEMU processes -----------------------------------------------------------------------
def qemu_processes(markers: list[str]) -> list[int]:
    """Pids of QEMU system emulators whose command line holds any of markers."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        args = raw.decode(errors="replace").split("\0")
        if not args or not Path(args[0]).name.startswith("qemu-system"):
            continue
        if any(m in a for a in args for m in markers):
            pids.append(int(entry.name))
    return pids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie has released the VM's memory and files


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in pids if _alive(p)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.02)


def kill_qemus(pids: list[int], grace: float = 3.0) -> list[int]:
    """SIGTERM (QEMU exits at once, as on `quit`), then SIGKILL; returns those that died."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        left = _wait_gone(pids, wait)
        if not left:
            return pids
    raise VirtbenchError(f"QEMU processes {left} survive SIGKILL", "check them with ps; reboot if stuck in D state")


def serial_tail(path: Path | str, lines: int = SERIAL_TAIL) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return "(no serial log)"
    tail = [ln.rstrip() for ln in text.splitlines() if ln.strip()][-lines:]
    return " | ".join(tail) if tail else "(serial log empty)"


# -- cgroup CPU quota for the whole QEMU process --------------------------------------------
def limit_cpu(name: str, pid: int, cpus: float, confined: str | None = None) -> str:
    """The quota on virtbench/NAME, or (`confined`: the cgroup QEMU was started in, below a
    confining parent) on that cgroup itself, whose counters the density run and the self-test
    read: moved out to virtbench/NAME, its CPU periods and throttling were counted elsewhere."""
    quota, period = int(round(cpus * 100_000)), 100_000
    root, v2 = cgroups.CGROUP_ROOT, cgroups.cgroup_mode() == "v2"
    if confined is not None:
        cg = root / confined if v2 else root / "cpu" / confined
    elif v2:
        for parent in (root, root / "virtbench"):
            parent.mkdir(exist_ok=True)
            try:
                (parent / "cgroup.subtree_control").write_text("+cpu")
            except OSError:
                pass
        cg = root / "virtbench" / name
        cg.mkdir(exist_ok=True)
    else:
        cg = root / "cpu" / "virtbench" / name
        cg.mkdir(parents=True, exist_ok=True)
    if v2:
        (cg / "cpu.max").write_text(f"{quota} {period}")
    else:
        (cg / "cpu.cfs_period_us").write_text(str(period))
        (cg / "cpu.cfs_quota_us").write_text(str(quota))
    if confined is None:
        (cg / "cgroup.procs").write_text(str(pid))  # moves every thread of the process
    return str(cg)


def _make_tap(tap: str) -> None:
    bridge.ensure_bridge()
    proc.run(["ip", "tuntap", "add", "dev", tap, "mode", "tap"], timeout=30)
    proc.run(["ip", "link", "set", tap, "master", bridge.BRIDGE, "up"], timeout=30)


def _remove_cgroup(name: str, timeout: float = 5.0) -> list[str]:
    """rmdir the VM's cgroup; a killed QEMU holds it until its parent (init) has reaped it."""
    rel = f"virtbench/{name}"
    deadline = time.monotonic() + timeout
    removed = cgroups.remove_cgroups(rel)
    while [c for c in cgroups.CGROUP_ROOT.glob(f"*/{rel}")] + \
            ([cgroups.CGROUP_ROOT / rel] if (cgroups.CGROUP_ROOT / rel).is_dir() else []):
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)
        removed += cgroups.remove_cgroups(rel)
    return removed


def _teardown(paths: Paths, d: Path, meta: dict[str, Any]) -> list[str]:
    """Kill the VM's QEMU, then remove its tap, lease, cgroup, sockets and files."""
    done = []
    name = meta.get("name", d.name)
    pids = qemu_processes([f"{d}/"])
    if pids:
        kill_qemus(pids)
        done += [f"qemu process {p}" for p in pids]
    tap = meta.get("tap")
    if tap and bridge.delete_link(tap):
        done.append(f"tap {tap}")
    done += [f"lease {a}" for a in bridge.release_addresses(paths.runtime, name)]
    done += _remove_cgroup(name)
    sockdir = meta.get("sockdir")
    if sockdir and Path(sockdir).exists():
        _rmtree(Path(sockdir))
        done.append(f"sockets {sockdir}")
    if d.exists():
        mounts.safe_rmtree(d)
        done.append(f"instance dir {d}")
    return done

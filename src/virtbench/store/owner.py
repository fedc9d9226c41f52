"""Which process measures a run, and whether it still lives.

A run is `running` in the store from its start until its process marks it finished,
failed or interrupted; a `kill -9`, an OOM kill or a power cut never gets that far. So the
store records the process that set `running` (`runs.owner`, migration 0009): host name,
machine id, boot id, pid and the pid's start time, which together name one process on one
boot of one machine (a pid alone is reused; two machines sharing a PostgreSQL store may
share a host name). A reader on the same machine can then tell a live run from a dead one:
another boot id, or no process with that pid and start time, means it died. On another
machine nothing can be told, and the status stays as stored.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
MACHINE_ID = Path("/etc/machine-id")


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def boot_id() -> str:
    return _read(BOOT_ID)


def _machine() -> tuple[str, str]:
    return socket.gethostname(), _read(MACHINE_ID)


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22); None
    when there is no such process or it is a zombie (killed, not yet reaped by its parent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # the name in parentheses may hold spaces
    if not fields or fields[0] in ("Z", "X"):
        return None
    return fields[19] if len(fields) > 19 else None


def identity(pid: int | None = None) -> str:
    """This process (or pid) as `host|machine id|boot id|pid|start time`."""
    pid = os.getpid() if pid is None else pid
    host, machine = _machine()
    return f"{host}|{machine}|{boot_id()}|{pid}|{_start_time(pid) or ''}"


def _fields(owner: str | None) -> list[str] | None:
    parts = (owner or "").split("|")
    return parts if len(parts) == 5 and parts[3].isdigit() else None


def describe(owner: str | None) -> str:
    """`pid N on HOST` for messages."""
    parts = _fields(owner)
    return f"pid {parts[3]} on {parts[0]}" if parts else "an unknown process"


def on_this_host(owner: str | None) -> bool:
    """Whether the owner ran on this machine (so what it left, instances and mounts, is here)."""
    parts = _fields(owner)
    return parts is not None and tuple(parts[:2]) == _machine()


def is_dead(owner: str | None) -> bool:
    """True only when the owner certainly no longer runs: it ran on this machine and the
    machine rebooted since, or its process is gone. Unknown owners (older runs, other
    machines) are not dead as far as this one can tell."""
    parts = _fields(owner)
    if parts is None or not on_this_host(owner):
        return False
    host_boot, pid, started = parts[2], int(parts[3]), parts[4]
    if host_boot and host_boot != boot_id():
        return True
    now_started = _start_time(pid)
    return now_started is None or (bool(started) and now_started != started)

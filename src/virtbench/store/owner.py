"""Which process measures a run, and whether it still lives.

A run is `running` in the store from its start until its process marks it finished,
failed or interrupted; a `kill -9`, an OOM kill or a power cut never gets that far. So the
store records the process that set `running` (`runs.owner`, migration 0009): host name,
boot id, pid and the pid's start time, which together name one process on one boot of one
host (a pid alone is reused). A reader on the same host can then tell a live run from a
dead one: another boot id, or no process with that pid and start time, means it died.
On another host nothing can be told, and the status stays as stored.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


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
    """This process (or pid) as `host|boot id|pid|start time`."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}|{boot_id()}|{pid}|{_start_time(pid) or ''}"


def describe(owner: str | None) -> str:
    """`pid N on HOST` for messages."""
    parts = (owner or "").split("|")
    return f"pid {parts[2]} on {parts[0]}" if len(parts) == 4 else "an unknown process"


def on_this_host(owner: str | None) -> bool:
    """Whether the owner ran on this host (so what it left, instances and mounts, is here)."""
    return (owner or "").split("|")[0] == socket.gethostname()


def is_dead(owner: str | None) -> bool:
    """True only when the owner certainly no longer runs: it ran on this host and the host
    rebooted since, or its process is gone. Unknown owners (older runs, other hosts) are
    not dead as far as this host can tell."""
    parts = (owner or "").split("|")
    if len(parts) != 4 or parts[0] != socket.gethostname() or not parts[2].isdigit():
        return False
    host_boot, pid, started = parts[1], int(parts[2]), parts[3]
    if host_boot and host_boot != boot_id():
        return True
    now_started = _start_time(pid)
    return now_started is None or (bool(started) and now_started != started)

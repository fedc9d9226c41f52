"""Start the container daemons (containerd, dockerd) when they are not running.

Development and CI machines have no systemd as PID 1, so nothing starts the daemons for us;
a user's workstation usually has systemd, and there the unit must be used so the daemon runs
with the distribution's configuration and stays under systemd's supervision.
"""
from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import proc
from .errors import CommandError, UnavailableError

LOG_DIR = Path("/var/log/virtbench")
DAEMON_JSON = Path("/etc/docker/daemon.json")
OWN_DAEMON_JSON = Path("/run/virtbench/dockerd.json")
"""The configuration file of a dockerd virtbench starts: the user's, plus the sandbox runtimes."""
SANDBOX_RUNTIMES: dict[str, tuple[str, ...]] = {"runsc": ("--network=none",)}
"""Sandboxed OCI runtimes (and their arguments) the dockerd virtbench starts is told about when
installed. runsc gets --network=none: its own netstack ("sandbox" mode) needs a network namespace
it recognises as not the host's, and release 20221219 decides that by a file that newer kernels
show in every namespace, so every container would fail to start; virtbench's docker platforms
run with network none unless told otherwise."""
CONTAINERD_SOCKET = "/run/containerd/containerd.sock"
START_TIMEOUT = 60.0


@dataclass(frozen=True)
class Daemon:
    name: str
    probe: tuple[str, ...]
    """A cheap command that succeeds only when the daemon answers."""
    start: tuple[str, ...]
    unit: str
    package: str


CONTAINERD = Daemon(
    name="containerd",
    # Without --connect-timeout ctr waits 10 s for a socket that does not exist.
    probe=("ctr", "--address", CONTAINERD_SOCKET, "--connect-timeout", "2s", "--timeout", "10s", "version"),
    start=("containerd",),
    unit="containerd",
    package="containerd",
)
DOCKERD = Daemon(
    name="dockerd",
    probe=("docker", "info", "--format", "{{.ServerVersion}}"),
    # The system containerd, not a private one dockerd would spawn: one containerd serves
    # docker (namespace moby) and the containerd platform alike, as on a systemd host.
    start=("dockerd", f"--containerd={CONTAINERD_SOCKET}"),
    unit="docker",
    package="docker.io",
)


def systemd_running() -> bool:
    """sd_booted(3): systemd is PID 1 exactly when /run/systemd/system exists."""
    return Path("/run/systemd/system").is_dir() and proc.which("systemctl") is not None


def answers(daemon: Daemon, timeout: float = 15.0) -> bool:
    try:
        return proc.run(list(daemon.probe), timeout=timeout, check=False).ok
    except CommandError:  # timed out or the client is not installed
        return False


def ensure_containerd(log_dir: Path = LOG_DIR, timeout: float = START_TIMEOUT) -> None:
    """Make containerd answer on its socket, starting it if needed."""
    ensure(CONTAINERD, log_dir, timeout)


def ensure_dockerd(log_dir: Path = LOG_DIR, timeout: float = START_TIMEOUT) -> None:
    """Make dockerd answer, starting containerd and dockerd if needed."""
    if answers(DOCKERD):
        return
    if not systemd_running():  # docker.service pulls in containerd.service by itself
        ensure_containerd(log_dir, timeout)
    ensure(dataclasses.replace(DOCKERD, start=(*DOCKERD.start, *dockerd_start_flags())), log_dir, timeout)


def dockerd_config(config: Path = DAEMON_JSON) -> dict[str, Any] | None:
    """Configuration for the dockerd virtbench starts itself: the user's daemon.json plus each
    installed sandbox runtime it does not declare. None when there is nothing to add (or the
    file is unreadable: dockerd then reports it itself)."""
    try:
        user = json.loads(config.read_text())
    except FileNotFoundError:
        user = {}
    except (OSError, ValueError):
        return None
    if not isinstance(user, dict):
        return None
    runtimes = dict(user.get("runtimes") or {})
    added = {name: {"path": path, "runtimeArgs": list(args)} for name, args in SANDBOX_RUNTIMES.items()
             if name not in runtimes and (path := proc.which(name))}
    return {**user, "runtimes": {**runtimes, **added}} if added else None


def dockerd_start_flags(config: Path = DAEMON_JSON, out: Path = OWN_DAEMON_JSON) -> list[str]:
    """`--config-file` of virtbench's copy of the configuration (dockerd refuses a runtime given
    both as a flag and in its file, and `--add-runtime` cannot pass runtime arguments)."""
    doc = dockerd_config(config)
    if doc is None:
        return []
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return [f"--config-file={out}"]


def dockerd_runtime_names(config: Path = DAEMON_JSON) -> list[str]:
    """The runtimes a dockerd started by virtbench now would know."""
    doc = dockerd_config(config)
    if doc is None:
        try:
            doc = json.loads(config.read_text())
        except (OSError, ValueError):
            return []
    return sorted((doc or {}).get("runtimes") or {}) if isinstance(doc, dict) else []


def ensure(daemon: Daemon, log_dir: Path = LOG_DIR, timeout: float = START_TIMEOUT) -> None:
    """Make `daemon` answer its probe: via systemctl on a systemd host, else by starting it."""
    if answers(daemon):
        return
    for binary in (daemon.probe[0], daemon.start[0]):
        if proc.which(binary) is None:
            raise UnavailableError(f"{daemon.name}: {binary} is not installed",
                                   f"apt-get install {daemon.package}")
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{daemon.name}.log"
    # Two virtbench processes starting the same daemon at once would race for its lock.
    with open(log_dir / f".{daemon.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if answers(daemon):
            return
        if systemd_running():
            try:
                proc.run(["systemctl", "start", daemon.unit], timeout=timeout)
            except CommandError as exc:
                raise UnavailableError(f"{daemon.name} did not start: {exc}",
                                       f"journalctl -u {daemon.unit}; systemctl start {daemon.unit}") from None
            child = None
            log_hint = f"journalctl -u {daemon.unit}"
        else:
            child = _spawn(daemon, log)
            log_hint = str(log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if answers(daemon, timeout=max(1.0, min(15.0, deadline - time.monotonic()))):
                return
            if child is not None and child.poll() is not None:
                break  # it died; waiting longer cannot help
            time.sleep(0.2)
    status = "exited" if child is not None and child.poll() is not None else "does not answer"
    raise UnavailableError(
        f"{daemon.name} {status} after start ({log_hint}):\n{_tail(log) if child else ''}".rstrip(),
        f"read {log_hint}, fix the cause, then run `{' '.join(daemon.start)}` by hand "
        f"or `systemctl start {daemon.unit}` on a systemd host")


def _spawn(daemon: Daemon, log: Path) -> subprocess.Popen[bytes]:
    """Start the daemon detached.

    proc.run cannot do this: it waits for the command to exit, and a daemon never does.
    start_new_session puts it outside our process group, so Ctrl-C on virtbench or a
    timeout kill of a sibling does not take the daemon down with it; it outlives us and is
    reparented to PID 1 like any service."""
    with open(log, "ab") as out:
        out.write(f"\n--- virtbench starting {' '.join(daemon.start)} at "
                  f"{time.strftime('%Y-%m-%d %H:%M:%S')} ---\n".encode())
        out.flush()
        try:
            return subprocess.Popen(list(daemon.start), stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    close_fds=True, cwd="/")
        except OSError as exc:
            raise UnavailableError(f"{daemon.name} could not be started: {exc}",
                                   f"apt-get install {daemon.package}") from None


def _tail(path: Path, lines: int = 15) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 16384))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])

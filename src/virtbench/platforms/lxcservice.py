"""An LXC container's monitor as a delegated systemd service (hosts where systemd manages the
cgroups: users' hosts, the reference guest), and LXC's own word on a container's state."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .. import proc
from ..errors import VirtbenchError
from . import slices, units


def state(lxcpath: Path, name: str) -> str:
    r = proc.run(["lxc-info", "-P", str(lxcpath), "-n", name, "-sH"], timeout=30, check=False)
    return r.stdout.strip() if r.ok else "UNKNOWN"


def systemd_meta(parent: str | None, name: str) -> dict[str, Any]:
    """What an instance started as a delegated service records: its unit, its cgroup, its slice."""
    _, cgroup = slices.service_argv(parent, name, [])
    return {"service": f"{slices.UNIT_PREFIX}-{name}.service", "service_cgroup": cgroup, "service_parent": parent}


def service_start_argv(lxcpath: Path, name: str, parent: str | None) -> list[str]:
    """systemd-run argv of the container's monitor as a delegated service (systemd hosts)."""
    lxc_start = proc.which("lxc-start") or "/usr/bin/lxc-start"
    argv, _ = slices.service_argv(parent, name, [lxc_start, "-F", "-P", str(lxcpath), "-n", name,
                                                 "-o", str(lxcpath / name / "lxc.log"), "-l", "ERROR"])
    return argv


def start_service(lxcpath: Path, name: str, meta: dict[str, Any], timeout: float = 120.0) -> None:
    """Start the monitor as its service and wait until LXC says RUNNING; if the service ends
    first, its log says why."""
    unit = meta["service"]
    proc.run(service_start_argv(lxcpath, name, meta.get("service_parent")), timeout=60)
    deadline = time.monotonic() + timeout
    while (now := state(lxcpath, name)) != "RUNNING":
        active = proc.run(["systemctl", "is-active", unit], timeout=30, check=False).stdout.strip()
        if active not in ("active", "activating") or time.monotonic() > deadline:
            units.stop_unit(unit)
            log = lxcpath / name / "lxc.log"
            text = log.read_text(errors="replace") if log.exists() else ""
            errors = [ln for ln in text.splitlines() if " ERROR " in ln] or text.splitlines()[-10:]
            raise VirtbenchError(f"lxc-start {name} as {unit} did not reach RUNNING (container {now}, "
                                 f"unit {active}); log {log}:\n" + "\n".join(errors[-10:]),
                                 f"journalctl -u {unit}; lxc-checkconfig shows missing kernel features")
        time.sleep(0.05)

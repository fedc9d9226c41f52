"""systemd units of virtbench's: the slice every cgroup of ours goes in on a systemd host, the
name of a confining parent's slice, and starting and stopping them with systemctl.

Apart from slices.py (where virtbench puts cgroups) so that cgroups.py, which makes a
confining parent as a slice on such a host, needs no module that asks cgroups.py in turn.
"""
from __future__ import annotations

from pathlib import Path

from .. import proc

SLICE = "virtbench.slice"


def slice_unit(name: str) -> str:
    """The transient slice of a parent named `name` inside virtbench.slice. A dash in a slice's
    name means nesting to systemd, so the name's own dashes become underscores."""
    return f"virtbench-{name.replace('-', '_')}.slice"


def unit_of(relative: str) -> str | None:
    """The slice unit a relative cgroup path ends in (None: a plain cgroupfs path)."""
    last = Path(relative.strip("/")).name
    return last if last.endswith(".slice") else None


def create(relative: str, properties: dict[str, str]) -> None:
    """Start the transient slice at `relative` with these properties (MemoryMax=...)."""
    unit = unit_of(relative)
    assert unit is not None, relative
    argv = ["systemctl", "set-property", "--runtime", unit, *(f"{k}={v}" for k, v in properties.items())]
    proc.run(argv, timeout=60)
    proc.run(["systemctl", "start", unit], timeout=60)


def remove(relative: str) -> list[str]:
    """Stop the slice at `relative` (systemd kills what is left in it and removes its cgroup)
    and drop its runtime properties; what was removed."""
    unit = unit_of(relative)
    if unit is None:
        return []
    ran = stop_unit(unit)
    proc.run(["systemctl", "revert", unit], timeout=60, check=False)
    return [f"slice {unit}"] if ran else []


def stop_unit(unit: str) -> bool:
    """Stop a unit of ours (systemd kills what is left in its cgroup and removes it); whether it ran."""
    active = proc.run(["systemctl", "is-active", unit], timeout=30, check=False).stdout.strip()
    proc.run(["systemctl", "stop", unit], timeout=120, check=False)
    return active in ("active", "activating", "deactivating", "reloading")

"""Where virtbench puts cgroups: in systemd's tree by systemd's rules where systemd runs the
unified hierarchy, as plain cgroupfs directories where it does not.

On a systemd + cgroup v2 host (what users have) systemd owns the cgroup tree: a directory
made behind its back under the root is invisible to `systemctl`, and writes to the root's
`cgroup.subtree_control` fight systemd's own. There, everything virtbench places goes under
one `virtbench.slice`: a confining parent is the transient slice `virtbench-NAME.slice`
(limits set with `systemctl set-property --runtime`, removed with `systemctl stop` and
`systemctl revert`), runc, crun and containerd make their containers' scopes through systemd
(`--systemd-cgroup`, cgroupsPath `SLICE:vb:NAME`), LXC's monitor runs as a delegated transient
service `vb-NAME.service` whose cgroup LXC divides (`lxc.cgroup.relative`), and Docker and
Podman take the slice's name as `--cgroup-parent` when their driver is systemd (the driver
rejects a path).

Without systemd (these development machines, minimal guests, containers), or on a cgroup v1
or hybrid hierarchy, cgroups stay plain directories from the hierarchy's root, as before.
"""
from __future__ import annotations

from .. import proc, services
from ..errors import InputError, VirtbenchError
from . import cgroups
from .units import SLICE, remove, slice_unit, unit_of

UNIT_PREFIX = "vb"
"""runc/crun scopes in systemd mode are `vb-NAME.scope` (cgroupsPath `SLICE:vb:NAME`)."""


def systemd_managed() -> bool:
    """Whether systemd runs as PID 1 with the unified (v2) hierarchy: then cgroups go through it."""
    return services.systemd_running() and cgroups.is_v2()


def parent_path(name: str) -> str:
    """The relative cgroup path of a confining parent named `name` on this host."""
    return f"{SLICE}/{slice_unit(name)}" if systemd_managed() else name


def engine_parent(relative: str, driver: str | None, engine: str) -> str:
    """`--cgroup-parent` in the form the engine's active cgroup driver accepts: a slice name
    for the systemd driver, a path from the hierarchy's root for cgroupfs."""
    if (driver or "").lower() == "systemd":
        unit = unit_of(relative)
        if unit is None:
            raise InputError(f"{engine} uses the systemd cgroup driver, which takes a slice as --cgroup-parent, "
                             f"but the parent is the cgroup path {relative!r}",
                             "run virtbench as root on the host itself (it creates its parents in virtbench.slice)")
        return unit
    return "/" + relative.strip("/")


def attach(pid: int, relative: str, scope: str) -> bool:
    """Move a running process into a new transient scope of the slice at `relative`, through
    systemd (StartTransientUnit with its PID), as `systemd-run --scope` does for a new one."""
    unit = unit_of(relative)
    assert unit is not None, relative
    r = proc.run(["busctl", "call", "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                  "org.freedesktop.systemd1.Manager", "StartTransientUnit", "ssa(sv)a(sa(sv))", scope, "fail",
                  "2", "PIDs", "au", "1", str(pid), "Slice", "s", unit, "0"], timeout=60, check=False)
    return r.ok


def scope_path(parent: str | None, name: str) -> tuple[str, str]:
    """(cgroupsPath for runc/crun --systemd-cgroup, the relative cgroup it makes) of instance
    `name`, under `parent` (a slice path) or virtbench.slice."""
    unit = unit_of(parent) if parent else SLICE
    if unit is None:
        raise VirtbenchError(f"cgroup parent {parent!r} is not a slice, but systemd makes this host's cgroups",
                             "make parents with slices.parent_path")
    base = parent.strip("/") if parent else SLICE
    return f"{unit}:{UNIT_PREFIX}:{name}", f"{base}/{UNIT_PREFIX}-{name}.scope"


def service_argv(parent: str | None, name: str, argv: list[str]) -> tuple[list[str], str]:
    """(systemd-run argv running `argv` as the transient service vb-NAME.service with its cgroup
    delegated, in virtbench.slice or the parent's slice; the relative cgroup it gets): how a
    container manager that makes its own cgroups (LXC's monitor) goes by systemd's rules, as
    Debian's lxc@.service does (Type=simple, Delegate=yes, KillMode=mixed)."""
    unit = unit_of(parent) if parent else SLICE
    if unit is None:
        raise VirtbenchError(f"cgroup parent {parent!r} is not a slice, but systemd makes this host's cgroups",
                             "make parents with slices.parent_path")
    service = f"{UNIT_PREFIX}-{name}.service"
    base = parent.strip("/") if parent else SLICE
    return (["systemd-run", "--quiet", "--collect", f"--unit={service}", f"--slice={unit}",
             "--property=Delegate=yes", "--property=KillMode=mixed", "--", *argv], f"{base}/{service}")


def leftovers() -> list[str]:
    """virtbench's slices, scopes and services systemd still has (for cleanup and tests)."""
    r = proc.run(["systemctl", "list-units", "--all", "--plain", "--no-legend", "virtbench*.slice",
                  f"{UNIT_PREFIX}-*.scope", f"{UNIT_PREFIX}-*.service"], timeout=60, check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.split()]


def remove_if_empty() -> list[str]:
    """Stop virtbench.slice once nothing of virtbench is left in it (cleanup's last step): a
    slice another state directory's run still uses keeps its instances."""
    d = cgroups.root() / SLICE
    if not systemd_managed() or not d.is_dir() or any(p.is_dir() for p in d.iterdir()):
        return []
    return remove(SLICE)


def docker_cgroup_driver() -> str:
    """Docker's active cgroup driver, asked only when dockerd answers already (never started here)."""
    if proc.which("docker") is None:
        return "no docker"
    r = proc.run(["docker", "info", "--format", "{{.CgroupDriver}}"], timeout=15, check=False)
    return r.stdout.strip() if r.ok and r.stdout.strip() else "unknown (dockerd not running)"


def host_kind() -> str:
    """One line saying what kind of host this is for cgroups: the hierarchy, whether systemd
    runs as PID 1 (then virtbench places everything in virtbench.slice), Docker's driver."""
    mode = {"v2": "v2 (unified)", "hybrid": "v1 hybrid (v1 controllers beside cgroup2)", "v1": "v1"}[cgroups.cgroup_mode()]
    init = "systemd as PID 1" if services.systemd_running() else "no systemd"
    where = f"virtbench's cgroups in {SLICE}" if systemd_managed() else "virtbench's cgroups as cgroupfs directories"
    return f"cgroup {mode}, {init}, Docker cgroup driver {docker_cgroup_driver()}; {where}"

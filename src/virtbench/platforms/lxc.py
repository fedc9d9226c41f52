"""LXC system containers, configured entirely by virtbench in a private lxcpath.

No `lxc-create` template or download: the config is written here so the container runs the
same image as every other platform, through LXC's own overlay backend (the overlay is mounted
inside the container's mount namespace, so nothing is left mounted on the host).

Where systemd manages the unified hierarchy (platforms/slices.py) LXC's monitor runs as the
transient service vb-NAME.service in virtbench.slice (or a confining parent's slice) with its
cgroup delegated, as Debian's lxc@.service runs it (`lxc-start -F`, Delegate=yes), and
`lxc.cgroup.relative` makes LXC put its monitor and payload cgroups inside that service's
instead of under the root behind systemd's back. Elsewhere LXC makes lxc.payload.NAME and
lxc.monitor.NAME from the root (or the confining parent) itself, as before.
"""
from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from .. import proc
from ..errors import CommandError, InputError, VirtbenchError
from ..images.image import Image
from . import bridge, cgroups, iptables, lxcdisk, lxcproxmox, lxcservice, mounts, slices, units
from .base import EXEC_ENV, LABEL, Availability, Executor, Instance, Paths, Platform, PlatformOptions, Size, trial_dir

LOCKS = Path("/run/lxc/lock")
"""LXC (as root) keeps a lock file per container here, under the lxcpath's own path."""
COMMON_CONF = Path("/usr/share/lxc/config/common.conf")
"""What every distribution template includes: LXC's default caps, seccomp and devices."""


INITS = {"none": "/bin/sleep infinity", "systemd": "/lib/systemd/systemd", "image": "/sbin/init"}
"""lxc.init.cmd per `init` option: a bare sleep, systemd (added to the image), the image's own."""


class LXCOptions(PlatformOptions):
    lxcfs: bool = Field(False, description=(
        "keep the lxcfs hooks of LXC's common.conf: /proc/cpuinfo and meminfo then show the "
        "limits (when lxcfs runs), and every stop sleeps 0.5 s in lxc.reboot.hook"))
    init: Literal["none", "systemd", "image"] = Field("none", description=(
        "what runs as the container's pid 1: none (sleep, an application container), systemd "
        "(a system container like a Proxmox CT; systemd-sysv is added to the image), or image "
        "(the image's own /sbin/init, e.g. busybox init)"))
    swap: Size | None = Field(None, description=(
        "swap allowed on top of memory (memory+swap limit: memsw on cgroup v1, memory.swap.max "
        "on v2); 0 forbids swapping; needs memory"))
    disk: Size | None = Field(None, description=(
        "root filesystem of this size: an ext4 image file, loop-mounted by LXC inside the "
        "container (a write beyond it fails with ENOSPC); the image is copied into it"))
    proxmox: bool = Field(False, description=(
        "Proxmox VE's defaults: unprivileged (ids shifted by 100000), lxcfs (must run), `cpus: N` as a "
        "set of N CPUs instead of a quota (platforms/lxcproxmox.py)"))

    @model_validator(mode="after")
    def _swap_needs_memory(self) -> LXCOptions:
        if self.swap is not None and self.memory is None:
            raise ValueError("swap needs memory (the limit is memory+swap); set memory too")
        if self.disk is not None and self.disk < 64 << 20:
            raise ValueError("disk below 64M cannot hold the image; give e.g. disk: 2G")
        return self


APPARMOR_PROFILE = "lxc-container-default-cgns"
"""LXC's default profile, loaded by the apparmor package's service from /etc/apparmor.d/lxc-containers."""


def apparmor_usable() -> bool:
    """Whether LXC's default AppArmor profile can confine containers: the kernel has AppArmor on
    and the profile is loaded. A kernel with AppArmor but without its userspace (Debian's kernel
    in an image without the apparmor package) has no profile: lxc-start then fails with "Failed
    to change AppArmor profile", so containers run unconfined there instead."""
    try:
        if Path("/sys/module/apparmor/parameters/enabled").read_text().strip() != "Y":
            return False
        profiles = Path("/sys/kernel/security/apparmor/profiles").read_text()
    except OSError:
        return False
    return any(line.split(" (")[0] == APPARMOR_PROFILE for line in profiles.splitlines())


def lxc_cgroup_lines(options: PlatformOptions, mode: str) -> list[str]:
    """Limits as LXC keys: v1 file names on v1/hybrid hosts, v2 names on unified hosts."""
    lines = []
    if mode == "v2":
        if options.cpus is not None:
            lines.append(f"lxc.cgroup2.cpu.max = {int(round(options.cpus * 100000))} 100000")
        if options.cpuset is not None:
            lines.append(f"lxc.cgroup2.cpuset.cpus = {options.cpuset}")
        if options.memory is not None:
            lines.append(f"lxc.cgroup2.memory.max = {int(options.memory)}")
        if (swap := getattr(options, "swap", None)) is not None:
            lines.append(f"lxc.cgroup2.memory.swap.max = {int(swap)}")
        return lines
    if options.cpus is not None:
        lines += ["lxc.cgroup.cpu.cfs_period_us = 100000",
                  f"lxc.cgroup.cpu.cfs_quota_us = {int(round(options.cpus * 100000))}"]
    if options.cpuset is not None:
        lines.append(f"lxc.cgroup.cpuset.cpus = {options.cpuset}")
    if options.memory is not None:
        lines.append(f"lxc.cgroup.memory.limit_in_bytes = {int(options.memory)}")
    if (swap := getattr(options, "swap", None)) is not None and options.memory is not None:
        lines.append(f"lxc.cgroup.memory.memsw.limit_in_bytes = {int(options.memory) + int(swap)}")
    return lines


def lxc_net_lines(network: str, *, veth: str = "", address: str = "") -> list[str]:
    if network == "none":
        return ["lxc.net.0.type = empty"]
    if network == "host":
        return ["lxc.net.0.type = none"]
    return ["lxc.net.0.type = veth", f"lxc.net.0.link = {bridge.BRIDGE}", "lxc.net.0.flags = up",
            "lxc.net.0.name = eth0", f"lxc.net.0.veth.pair = {veth}", f"lxc.net.0.hwaddr = {bridge.mac_for(address)}",
            f"lxc.net.0.ipv4.address = {address}/24", f"lxc.net.0.ipv4.gateway = {bridge.GATEWAY}"]


def build_lxc_config(*, name: str, run_id: str, rootfs: str, options: PlatformOptions,
                     cgroup_mode: str, apparmor: bool, include: str | None = str(COMMON_CONF),
                     init: str = "/bin/sleep infinity", veth: str = "", address: str = "",
                     binds: Sequence[str] = (), cgroup_parent: str | None = None, systemd: bool = False) -> str:
    """The container's config file; rootfs is 'overlay:<lower>:<upper>' or 'dir:<path>'.
    systemd: started as a delegated service (see the module's docstring), whose cgroup (in the
    parent's slice) LXC then divides; else its cgroups hang from the root or cgroup_parent."""
    lines = [f"# virtbench instance; {LABEL} = {run_id}"]
    proxmox = bool(getattr(options, "proxmox", False))
    if proxmox:  # cores as a CPU set, no quota (Proxmox's `cores`), unprivileged
        options = options.model_copy(update={"cpus": None, "cpuset": options.cpuset or (
            lxcproxmox.cpuset_for(name, options.cpus) if options.cpus else None)})
        lines += lxcproxmox.idmap_lines()
    if include:
        lines.append(f"lxc.include = {include}")
        if not (getattr(options, "lxcfs", False) or proxmox):
            # an empty value clears the list: drops the lxcfs hooks common.conf.d adds
            lines += ["lxc.hook.mount =", "lxc.hook.post-stop ="]
    lines += [f"lxc.uts.name = {name}", f"lxc.rootfs.path = {rootfs}", f"lxc.init.cmd = {init}",
              "lxc.autodev = 1", "lxc.tty.max = 0"]
    if not apparmor:
        lines.append("lxc.apparmor.profile = unconfined")
    lines += [f"lxc.mount.entry = {b} {b.lstrip('/')} none bind,ro 0 0" for b in binds]
    lines += lxc_net_lines(options.network, veth=veth, address=address)
    lines += lxc_cgroup_lines(options, cgroup_mode)
    if systemd:  # monitor and payload inside the delegated service's cgroup
        lines.append("lxc.cgroup.relative = 1")
    elif cgroup_parent:  # confined (density host_memory): container and monitor under the parent
        lines += [f"lxc.cgroup.dir.container = {cgroup_parent}/lxc.payload.{name}",
                  f"lxc.cgroup.dir.monitor = {cgroup_parent}/lxc.monitor.{name}"]
    return "\n".join(lines) + "\n"


class LXC(Platform):
    confinable = True
    type = "lxc"
    host_processes = ("lxc-start",)
    """LXC's monitor of each container (`[lxc monitor]`, a forked lxc-start)."""
    quick_rank = 3
    live_migration = "criu"
    migrates_to_host = True
    needs_root = True
    Options = LXCOptions
    options: LXCOptions
    binaries = ("lxc-start", "lxc-attach", "lxc-stop", "lxc-info")
    packages = ("lxc",)
    description = "LXC system container from a virtbench-written config, overlay on the image"

    def __init__(self, name: str, options: PlatformOptions, paths: Paths,
                 executor: Executor | None = None) -> None:
        super().__init__(name, options, paths, executor)
        cgroups.check_limits(options, name)
        if getattr(options, "swap", None) is not None and not cgroups.swap_accounting():
            raise InputError(f"{name}: swap needs the kernel's swap accounting (cgroup v1 memory.memsw.*)",
                             "boot with swapaccount=1, or drop swap")
        if getattr(options, "proxmox", False):
            lxcproxmox.check_host(name)

    def image_packages(self) -> tuple[str, ...]:
        return ("systemd-sysv",) if self.options.init == "systemd" else ()

    def prepare(self, image: Image) -> None:
        init = INITS[self.options.init].split()[0]
        if self.options.init != "none" and not (image.rootfs / init.lstrip("/")).exists():
            raise InputError(f"{self.name}: init {self.options.init!r} needs {init} but image {image.short} "
                             f"has none", "use init: systemd (adds systemd-sysv), or an image with an init")
        if self.options.disk is not None:
            need = int(lxcdisk.tree_bytes(image.rootfs) * 1.2) + (16 << 20)  # ext4 metadata, journal
            if need > self.options.disk:
                raise InputError(f"{self.name}: disk {self.options.disk >> 20} MiB cannot hold image "
                                 f"{image.short}", f"give disk of at least {(need >> 20) + 1}M")

    @property
    def lxcpath(self) -> Path:
        return _lxcpath(self.paths)

    @classmethod
    def try_instance(cls, paths: Paths) -> Availability:
        name = "vb-probe"
        systemd = slices.systemd_managed()  # started where the platform's own containers are
        with trial_dir(paths, "lxc") as lxcpath:
            try:
                if systemd:
                    mounts.write_meta(lxcpath / name, {"platform": cls.type, "run_id": "probe", "name": name,
                                                       **lxcservice.systemd_meta(None, name)})
                binds = mounts.skeleton_rootfs(lxcpath / name / "rootfs")
                (lxcpath / name / "config").write_text(build_lxc_config(
                    name=name, run_id="probe", rootfs=f"dir:{lxcpath / name / 'rootfs'}",
                    options=PlatformOptions(), cgroup_mode=cgroups.cgroup_mode(),
                    apparmor=apparmor_usable(), include=None, init="/usr/bin/sleep infinity",
                    binds=binds, systemd=systemd))
                _start(lxcpath, name)
                proc.run(["lxc-attach", "-P", str(lxcpath), "-n", name, "--", "true"], timeout=30)
                return Availability(True, "lxc started a container and attached to it")
            finally:
                with suppress(Exception):  # best effort: `cleanup` removes what is left
                    _teardown(paths, lxcpath / name, name, lxcpath)

    @classmethod
    def unavailable(cls, exc: Exception, fix: str) -> Availability:
        return Availability(False, f"lxc could not start a container: {exc}",
                            "see the LXC log above; `lxc-checkconfig` lists missing kernel features")

    def versions(self) -> dict[str, str]:
        r = self.host.run(["lxc-start", "--version"], timeout=10, check=False)
        return {"lxc": r.stdout.strip() if r.ok else "unknown"}

    def describe(self) -> dict[str, Any]:
        mode = cgroups.cgroup_mode()
        rootfs = (f"ext4 image of {self.options.disk} bytes, loop-mounted by LXC (loop: backend)"
                  if self.options.disk is not None else "overlay (LXC backend)")
        where = (f"delegated service vb-NAME.service in {units.SLICE} (lxc.cgroup.relative)"
                 if slices.systemd_managed() else "lxc.payload.NAME from the cgroup root")
        return {**super().describe(), "rootfs": rootfs, "init": INITS[self.options.init], "cgroup": mode,
                "cgroup_config": lxc_cgroup_lines(self.options, mode), "cgroup_placement": where,
                "apparmor": "default" if apparmor_usable() else "unconfined",
                "include": str(COMMON_CONF) if COMMON_CONF.is_file() else None,
                "lxcfs_hooks": bool(getattr(self.options, "lxcfs", False) or self.options.proxmox),
                "proxmox": self.options.proxmox}

    def create(self, image: Image, name: str, run_id: str) -> Instance:
        name = mounts.instance_name(name)
        d = self.lxcpath / name
        if d.exists():
            raise VirtbenchError(f"container directory {d} already exists", "run virtbench cleanup")
        meta: dict[str, Any] = {"platform": self.type, "run_id": run_id, "name": name}
        systemd = slices.systemd_managed()
        if systemd:
            meta |= lxcservice.systemd_meta(self.cgroup_parent, name)
        try:
            mounts.write_meta(d, meta)  # inside: a full disk here leaves no directory behind
            lower = (lxcproxmox.shifted_rootfs(image.rootfs, self.lxcpath.parent / "lxc-idmap")
                     if self.options.proxmox else image.rootfs)
            if self.options.disk is not None:
                rootfs = f"loop:{lxcdisk.disk_image(d / 'rootdev', lower, self.options.disk)}"
            else:
                upper = d / "delta0"
                for p in (lower, upper):
                    mounts.check_overlay_path(p)
                upper.mkdir()
                if self.options.proxmox:  # the overlay is mounted as the mapped root: its dirs are its own
                    (d / "work").mkdir()
                    for p in (upper, d / "work"):
                        lxcproxmox.give_to_root(p)
                rootfs = f"overlay:{lower}:{upper}"
            if self.options.proxmox:
                for p in (d, lower):
                    lxcproxmox.traversable(p)
            if self.options.network == "bridge":
                bridge.ensure_bridge()
                iptables.allow_forwarding()  # dockerd may have started since the bridge was made
                meta |= {"veth": bridge.veth_name(name),
                         "address": bridge.allocate_address(self.paths.runtime, name)}
                mounts.write_meta(d, meta)
            (d / "config").write_text(build_lxc_config(
                name=name, run_id=run_id, rootfs=rootfs,
                options=self.options, cgroup_mode=cgroups.cgroup_mode(), apparmor=apparmor_usable(),
                include=str(COMMON_CONF) if COMMON_CONF.is_file() else None,
                init=INITS[self.options.init], veth=meta.get("veth", ""), address=meta.get("address", ""),
                cgroup_parent=self.cgroup_parent, systemd=systemd))
            if self.cgroup_parent and not systemd:
                meta["cgroup_parent"] = self.cgroup_parent
                mounts.write_meta(d, meta)
        except BaseException:
            _teardown(self.paths, d, name, self.lxcpath)
            raise
        return Instance(name, self.name, run_id, {"dir": str(d), **meta})

    def start(self, instance: Instance) -> None:
        with lxcdisk.attach_lock() if self.options.disk is not None else contextlib.nullcontext():
            _start(self.lxcpath, instance.name)
        self.wait_ready(instance)
        if self.options.init == "systemd":
            self._wait_booted(instance)

    def _wait_booted(self, instance: Instance, timeout: float = 300.0) -> None:
        """A system container is up when systemd says its boot is done (running or degraded);
        until its bus exists, systemctl fails, so ask again."""
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            r = self.exec(instance, ["systemctl", "is-system-running", "--wait"],
                          timeout=max(1.0, deadline - time.monotonic()), check=False)
            state = r.stdout.strip() or r.stderr.strip()
            if r.stdout.strip() in ("running", "degraded"):
                return
            time.sleep(0.2)
        raise VirtbenchError(f"lxc container {instance.name}: systemd did not finish booting in "
                             f"{timeout:g} s ({state})", f"see {Path(instance.data['dir']) / 'lxc.log'}")

    def init_pid(self, instance: Instance) -> int:
        """Host pid of the container's init (to read its cgroups from the host)."""
        r = self.host.run(["lxc-info", "-P", str(self.lxcpath), "-n", instance.name, "-pH"], timeout=30)
        return int(r.stdout.strip())

    def memory_cgroup(self, instance: Instance) -> str | None:
        """The payload cgroup LXC made: a systemd init moves itself into init.scope below it,
        so the init's own cgroup would count only part of the container."""
        parent = instance.data.get("cgroup_parent") or instance.data.get("service_cgroup")
        rel = f"{parent}/lxc.payload.{instance.name}" if parent else f"lxc.payload.{instance.name}"
        return rel if cgroups.memory_dir(rel).is_dir() else super().memory_cgroup(instance)

    def host_pid(self, instance: Instance) -> int | None:
        return self.init_pid(instance)

    def exec_argv(self, instance: Instance, argv: list[str]) -> list[str]:
        # lxc-attach always adds container=lxc (even with --clear-env) and keeps the caller's
        # cwd: env -i -C / gives the exact EXEC_ENV and the same cwd as runc and chroot.
        return ["lxc-attach", "-P", str(self.lxcpath), "-n", instance.name, "--clear-env", "--",
                "/usr/bin/env", "-i", "-C", "/", *[f"{k}={v}" for k, v in EXEC_ENV.items()], *argv]

    def stop(self, instance: Instance) -> None:
        _stop(self.lxcpath, instance.name)

    def remove(self, instance: Instance) -> None:
        _teardown(self.paths, Path(instance.data["dir"]), instance.name, self.lxcpath)

    def close(self) -> None:
        """LXC parks a stopping monitor in lxc.pivot (every hierarchy) and never removes it; the
        kernel refuses the rmdir while another container's monitor is parked there. The host
        bridge goes too once nothing uses it (no port, no lease of any run)."""
        cgroups.remove_cgroups("lxc.pivot")
        bridge.remove_bridge_if_unused()

    @property
    def image_per_instance(self) -> bool:  # type: ignore[override]  # per instance: by its options
        """A loop volume (`disk:`) holds the whole root filesystem, image included: it moves whole."""
        return self.options.disk is None

    def storage(self, instance: Instance) -> dict[str, Path]:
        """The container's writable layer, or its whole volume (`disk:`, a sparse ext4 file); the
        config stays (as Proxmox's cluster-wide config does)."""
        if self.options.disk is not None:
            return {"rootdev": Path(instance.data.get("rootdev") or Path(instance.data["dir"]) / "rootdev")}
        return {"upper": Path(instance.data.get("upper") or Path(instance.data["dir"]) / "delta0")}

    def relocate(self, instance: Instance, moved: dict[str, Path]) -> None:
        """Rewrite lxc.rootfs.path to the moved layer (and image copy); LXC makes its overlay
        work dir (olwork) next to the upper dir at the next start."""
        config = Path(instance.data["dir"]) / "config"
        text = config.read_text()
        if "rootdev" in moved:
            loop = re.search(r"^lxc\.rootfs\.path = loop:([^\n]+)$", text, re.M)
            if loop is None:
                raise VirtbenchError(f"{config}: no loop lxc.rootfs.path to relocate")
            config.write_text(text.replace(loop.group(0), f"lxc.rootfs.path = loop:{moved['rootdev']}"))
            instance.data["rootdev"] = str(moved["rootdev"])
            return
        current = re.search(r"^lxc\.rootfs\.path = overlay:([^:\n]+):([^\n]+)$", text, re.M)
        if current is None:
            raise VirtbenchError(f"{config}: no overlay lxc.rootfs.path to relocate")
        lower, upper = moved.get("lower", Path(current.group(1))), moved["upper"]
        for p in (lower, upper):
            mounts.check_overlay_path(p)
        config.write_text(text.replace(current.group(0), f"lxc.rootfs.path = overlay:{lower}:{upper}"))
        instance.data["upper"] = str(upper)

    @classmethod
    def cleanup(cls, paths: Paths, run_id: str | None = None) -> list[str]:
        lxcpath = _lxcpath(paths)
        found = {meta["name"]: d for d, meta in mounts.leftovers(lxcpath, cls.type, run_id)}
        if run_id is None and lxcpath.is_dir() and proc.which("lxc-ls"):
            for name in proc.run(["lxc-ls", "-P", str(lxcpath)], timeout=30, check=False).stdout.split():
                found.setdefault(name, lxcpath / name)
        removed, failed = [], []
        for name, d in sorted(found.items()):
            try:
                removed += _teardown(paths, d, name, lxcpath)
            except Exception as exc:  # noqa: BLE001 - try every leftover, then report
                failed.append(f"{name}: {exc}")
        if run_id is None:
            probes = paths.runtime / "probe"
            for p in sorted(probes.glob("lxc-*")) if probes.is_dir() else []:
                _teardown(paths, p / "vb-probe", "vb-probe", p)
                mounts.safe_rmtree(p)
                removed.append(f"probe dir {p}")
            removed += bridge.remove_bridge_if_unused()
            removed += cgroups.remove_cgroups("lxc.pivot")  # LXC parks its monitor there on stop
        if failed:
            raise VirtbenchError("lxc cleanup left: " + "; ".join(failed))
        return removed


def _lxcpath(paths: Paths) -> Path:
    return paths.state / "lxc"


def _start(lxcpath: Path, name: str) -> None:
    """Start detached; on failure start again at DEBUG level, because only the log says why."""
    meta = mounts.read_meta(lxcpath / name) or {}
    if meta.get("service"):
        lxcservice.start_service(lxcpath, name, meta)
        return
    log = lxcpath / name / "lxc.log"
    base = ["lxc-start", "-P", str(lxcpath), "-n", name, "-d", "-o", str(log)]
    try:
        proc.run([*base, "-l", "ERROR"], timeout=120, detached_children=True)
    except CommandError as exc:
        proc.run(["lxc-stop", "-P", str(lxcpath), "-n", name, "-k"], timeout=60, check=False)
        # a fixed lxc.cgroup.dir (confined) cannot take a suffix: the first attempt's cgroups
        # would make the second fail with ERANGE and hide the first error
        parent = (mounts.read_meta(lxcpath / name) or {}).get("cgroup_parent")
        for cg in (f"lxc.payload.{name}", f"lxc.monitor.{name}") if parent else ():
            cgroups.remove_cgroups(f"{parent}/{cg}")
        proc.run([*base, "-l", "DEBUG"], timeout=120, check=False, detached_children=True)
        proc.run(["lxc-stop", "-P", str(lxcpath), "-n", name, "-k"], timeout=60, check=False)
        text = log.read_text(errors="replace") if log.exists() else ""
        errors = [ln for ln in text.splitlines() if " ERROR " in ln] or text.splitlines()[-10:]
        first = (exc.stderr or "").strip().splitlines()[-3:] if isinstance(exc, CommandError) else []
        raise VirtbenchError(f"lxc-start {name} failed ({exc}; {' | '.join(first)}); log {log}:\n"
                             + "\n".join(errors[-10:]),
                             "lxc-checkconfig shows missing kernel features") from None


def _stop(lxcpath: Path, name: str, timeout: float = 30.0) -> None:
    proc.run(["lxc-stop", "-P", str(lxcpath), "-n", name, "-k"], timeout=60, check=False)
    deadline = time.monotonic() + timeout
    while lxcservice.state(lxcpath, name) not in ("STOPPED", "UNKNOWN"):
        if time.monotonic() > deadline:
            raise VirtbenchError(f"lxc container {name} still running {timeout:g} s after lxc-stop -k")
        time.sleep(0.02)


def _teardown(paths: Paths, d: Path, name: str, lxcpath: Path) -> list[str]:
    """Stop, then delete the container dir (config, upper layer) after proving nothing is mounted."""
    done = []
    if d.is_dir() and proc.which("lxc-stop") and lxcservice.state(lxcpath, name) not in ("STOPPED", "UNKNOWN"):
        _stop(lxcpath, name)
        done.append(f"lxc container {name}")
    if bridge.delete_link(bridge.veth_name(name)):
        done.append(f"veth {bridge.veth_name(name)}")
    done += [f"lease {a}" for a in bridge.release_addresses(paths.runtime, name)]
    meta = (mounts.read_meta(d) or {}) if d.is_dir() else {}
    if meta.get("service"):  # systemd removes the service's cgroup, LXC's inside it included
        if units.stop_unit(meta["service"]):
            done.append(f"unit {meta['service']}")
    else:
        parent = meta.get("cgroup_parent")
        for cg in (f"lxc.payload.{name}", f"lxc.monitor.{name}"):
            done += cgroups.remove_cgroups(f"{parent}/{cg}" if parent else cg)
    if d.exists():
        done += [f"unmounted {m}" for m in mounts.teardown_dir(d)]
        done.append(f"container dir {d}")
    _remove_lock(lxcpath, name)
    return done


def _remove_lock(lxcpath: Path, name: str) -> None:
    """LXC never deletes its lock files; drop ours and the then-empty dirs up to LOCKS."""
    d = LOCKS / os.path.realpath(lxcpath).lstrip("/")
    (d / f".{name}").unlink(missing_ok=True)
    while d != LOCKS and LOCKS in d.parents:
        try:
            d.rmdir()
        except OSError:
            return
        d = d.parent

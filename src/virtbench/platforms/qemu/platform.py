"""QEMU virtual machines booting the same guest image as every other platform.

The VM boots the image's VM variant (the same recipe plus Debian's cloud kernel, see
images/vmdisk.py) from a qcow2 copy-on-write overlay of a cached ext4 disk, with direct
kernel boot (no bootloader). Commands run through a virtio-serial agent (qemu/guest.py);
exec_argv builds `python -m virtbench.platforms.qemu.guest exec ...`, so proc.run stays the one
place that starts processes.

KVM is used when it works, and only then: `accel=auto` decides by booting a test guest
under KVM with a bounded timeout (a VM of a VM often has /dev/kvm but its guests hang), and
falls back to TCG emulation, saying why (qemu/accel.py). The verdict is cached
per host boot in paths.runtime/qemu/accel.json. The accelerator is part of the platform's
identity: a TCG VM measures emulation, not virtualization, and its label says so
(`qemu(tcg,2 vcpu)`).

A VM may host container platforms (a stack, `inside: vm` in the campaign): accept_inner adds
their runtimes to the VM image and the image archive to the disk (qemu/stack.py);
the runner then starts their engine in each VM and runs them through the agent.

Every QEMU process carries `-fw_cfg name=opt/org.virtbench,string=<run id>` and paths under
paths.instances/<instance>, so cleanup finds exactly its own VMs, even without their files
(qemu/host.py). The command line itself is built in qemu/argv.py.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from ... import proc
from ...errors import CommandError, InputError, UnavailableError, VirtbenchError
from ...images import vmdisk
from ...images.image import Image
from .. import bridge, cgroups, mounts, naming
from ..base import EXEC_ENV, Availability, Executor, Instance, Paths, Platform, PlatformOptions, trial_dir
from . import guest
from . import stack as qemu_stack
from .accel import AccelVerdict, accel_verdict, probe_kernel, try_stub
from .argv import ARCHES, FW_CFG_LABEL, HOST_ARCH, VMSpec, cpu_model, qemu_argv
from .host import (
    _alive,
    _make_tap,
    _rmtree,
    _teardown,
    _wait_gone,
    kill_qemus,
    limit_cpu,
    qemu_processes,
    serial_tail,
)
from .options import MiB, QemuOptions

STOP_TIMEOUT = 10.0
QBOOT = Path("/usr/share/qemu/qboot.rom")
"""Minimal x86 firmware (QEMU's): direct kernel boot without SeaBIOS's device scan."""


def _arch() -> tuple[str, str, str, str]:
    try:
        return ARCHES[HOST_ARCH]
    except KeyError:
        raise UnavailableError(f"QEMU VMs are not supported on {HOST_ARCH}",
                               f"use a host of {', '.join(ARCHES)}") from None


class Qemu(Platform):
    confinable = True
    type = "qemu"
    kind = "vm"
    holds_inner = True
    live_migration = "qmp"
    image_per_instance = False  # a copy-on-write disk over the image's, not a copy
    Options = QemuOptions
    binaries = (ARCHES.get(HOST_ARCH, ARCHES["x86_64"])[0], "qemu-img", "mkfs.ext4", "debugfs")
    packages = (ARCHES.get(HOST_ARCH, ARCHES["x86_64"])[1], "qemu-utils", "e2fsprogs")
    description = ("QEMU VM (KVM when it works, else TCG emulation) booting the image plus "
                   "Debian's cloud kernel from a copy-on-write disk; commands via virtio-serial")

    @classmethod
    def uses_kvm(cls, options: Mapping[str, Any]) -> bool:
        return options.get("accel", "auto") in ("kvm", "auto")

    @classmethod
    def network_gap(cls, options: PlatformOptions, need: Literal["inbound", "to_host"]) -> str | None:
        """user-mode NAT reaches the host (10.0.2.2 is the host's loopback) but nothing reaches
        the guest; none has no NIC at all."""
        network = getattr(options, "network", "none")
        if network == "none":
            return "network 'none' (no network card)"
        if network == "user" and need == "inbound":
            return "network 'user' (QEMU's NAT): nothing outside can reach the guest"
        return None

    def __init__(self, name: str, options: PlatformOptions, paths: Paths,
                 executor: Executor | None = None) -> None:
        super().__init__(name, options, paths, executor)
        cgroups.check_limits(options, name)  # cpus/cpuset limit the QEMU process on this host
        self.options: QemuOptions
        self._disks: dict[str, vmdisk.VMDisk] = {}
        self._base: Image | None = None
        self._verdict: AccelVerdict | None = None
        self._inner: dict[str, Platform] = {}
        """Platforms stacked inside this one's VMs (accept_inner), by name."""

    # -- discovery -----------------------------------------------------------------------
    @classmethod
    def try_instance(cls, paths: Paths) -> Availability:
        _arch()
        verdict = accel_verdict(paths, probe_kernel())
        if verdict.kvm:
            return Availability(True, verdict.reason)
        with trial_dir(paths, "qemu") as work:
            why = try_stub(HOST_ARCH, "tcg", work)
        if why is not None:
            return Availability(False, f"{verdict.reason}; and TCG emulation failed too: {why}",
                                "apt-get install " + " ".join(cls.packages))
        return Availability(True, f"{verdict.reason}; using TCG emulation",
                            "for KVM: run on bare metal, or enable nested virtualization")

    def verdict(self, kernel: Path | None = None) -> AccelVerdict:
        if kernel is not None or self._verdict is None:
            self._verdict = accel_verdict(self.paths, kernel or probe_kernel())
        return self._verdict

    def accel(self) -> Literal["kvm", "tcg"]:
        """The accelerator this platform's VMs use."""
        if self.options.accel == "tcg":
            return "tcg"
        verdict = self.verdict() if self._verdict is None else self._verdict
        if self.options.accel == "kvm":
            if not verdict.kvm:
                raise UnavailableError(f"{self.name}: accel=kvm but KVM does not work here: {verdict.reason}",
                                       "use accel: auto or tcg, or run on a host with working KVM")
            return "kvm"
        return "kvm" if verdict.kvm else "tcg"

    def versions(self) -> dict[str, str]:
        binary = _arch()[0]
        out = {}
        for key, argv in ((binary, [binary, "--version"]), ("qemu-img", ["qemu-img", "--version"])):
            r = self.host.run(argv, timeout=30, check=False)
            out[key] = r.stdout.splitlines()[0].strip() if r.ok and r.stdout else "unknown"
        out["host_kernel"] = os.uname().release
        for disk in self._disks.values():
            out["guest_kernel"] = disk.kernel_version
            installed = disk.image.manifest.get("installed", {})
            for package in qemu_stack.inner_packages(self._inner):
                out[f"guest {package}"] = installed.get(package, "?")
        return out

    def describe(self) -> dict[str, Any]:
        accel = self.accel()
        d: dict[str, Any] = {
            **super().describe(), "accel_used": accel, "accel_reason": self.verdict().reason
            if self.options.accel != "tcg" else "accel=tcg requested",
            "cpu_model": cpu_model(self.options, accel),
            "machine": self.options.machine or _arch()[3],
            "firmware": str(self._firmware() or "default"),
            "disk": {"format": "qcow2 overlay on a raw ext4 image", "bus": self.options.disk_bus,
                     "cache": self.options.cache, "aio": self.options.aio},
            "channel": "virtio-serial agent (bash) in the guest",
            "guest_init": "vb-init (bash, no services)",
        }
        if self._inner:
            d["guest_init"] += "; cgroup2, mqueue and overlay/bridge modules for container engines"
            d["inner"] = {name: {"type": p.type, "packages": list(p.packages)}
                          for name, p in self._inner.items()}
            d["guest_image"] = vmdisk.GUEST_IMAGE_DIR
        for disk in self._disks.values():
            d["vm_image"] = disk.image.recipe_hash
            d["vm_image_tar_sha256"] = disk.image.tar_sha256
            d["vm_disk"] = disk.provenance()
            if self._base is not None:
                d["base_image"] = self._base.recipe_hash
                d["version_drift"] = vmdisk.version_drift(self._base, disk.image)
        return d

    def label(self) -> str:
        o = self.options
        parts = [self.accel(), f"{o.vcpus} vcpu"]
        defaults = QemuOptions()
        for key in ("memory", "cpu", "cache", "aio", "disk_bus", "network", "machine", "cpus", "cpuset"):
            value = getattr(o, key)
            if value != getattr(defaults, key):
                if key == "memory":
                    value = f"{int(value) // MiB}MiB"
                parts.append(f"{key}={value}")
        return f"{self.type}({','.join(parts)})"

    # -- stacking ------------------------------------------------------------------------
    def accept_inner(self, inner: Platform) -> None:
        """The VM image gets inner's runtime packages and the disk the image archive
        (before prepare); inner's commands are refused until a VM of ours is up."""
        qemu_stack.check_inner(self.name, inner)
        self._inner[inner.name] = inner
        self._disks.clear()  # a disk made before lacks the packages

    def inner_image(self, image: Image) -> Image:
        """The image as the VM's disk carries it (vmdisk.GUEST_IMAGE_DIR)."""
        if not self._inner:
            raise InputError(f"{self.name} hosts no inner platform, so its VMs carry no image archive",
                             f"declare the inner platform with `inside: {self.name}`")
        return qemu_stack.guest_image(image)

    # -- lifecycle -----------------------------------------------------------------------
    def prepare(self, image: Image, log=print) -> None:
        """Build (or find) the VM image and disk, and decide the accelerator with its kernel."""
        self._disk(image, log=log)

    def _disk(self, image: Image, log=print) -> vmdisk.VMDisk:
        if image.recipe_hash not in self._disks:
            if self.options.accel == "kvm":  # where KVM cannot even run a stub: say so before building a disk
                self._verdict = accel_verdict(self.paths, None)
                self.accel()
            disk = vmdisk.prepare(image, int(self.options.disk_headroom),
                                  inner_packages=qemu_stack.inner_packages(self._inner),
                                  stack=bool(self._inner), log=log)
            self._disks[image.recipe_hash] = disk
            self._base = image
            if self.options.accel != "tcg":
                self.verdict(disk.kernel)
            self.accel()  # accel=kvm on a host without working KVM fails here, before any boot
        return self._disks[image.recipe_hash]

    def _firmware(self) -> Path | None:
        return QBOOT if HOST_ARCH == "x86_64" and QBOOT.is_file() and self.options.machine in (None, "q35", "pc") \
            else None

    def _sockdir(self, name: str) -> Path:
        d = self.paths.runtime / "qemu" / hashlib.sha1(str(self.paths.instances / name).encode()).hexdigest()[:12]
        if len(str(d / "agent.sock.lock")) > 100:
            raise InputError(f"runtime directory {self.paths.runtime} is too long for unix sockets",
                             "use a shorter VIRTBENCH_RUNTIME_DIR")
        return d

    def create(self, image: Image, name: str, run_id: str) -> Instance:
        name = mounts.instance_name(name)
        d = self.paths.instances / name
        if d.exists():
            raise VirtbenchError(f"instance directory {d} already exists", "run virtbench cleanup")
        disk = self._disk(image)
        accel = self.accel()
        sockdir = self._sockdir(name)
        meta: dict[str, Any] = {"platform": self.type, "run_id": run_id, "name": name,
                                "sockdir": str(sockdir)}
        mounts.write_meta(d, meta)
        try:
            sockdir.mkdir(parents=True, exist_ok=True)
            overlay = d / "disk.qcow2"
            self.host.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(disk.disk), "-F", "raw",
                           str(overlay)], timeout=60)
            tap = address = None
            if self.options.network == "bridge":
                tap, address = bridge.veth_name(name), bridge.allocate_address(self.paths.runtime, name)
                meta |= {"tap": tap, "address": address}
                mounts.write_meta(d, meta)
                _make_tap(tap)
            spec = VMSpec(name=name, run_id=run_id, accel=accel, options=self.options, kernel=disk.kernel,
                          initrd=disk.initrd, overlay=overlay, agent_socket=sockdir / "agent.sock",
                          qmp_socket=sockdir / "qmp.sock", pidfile=d / "qemu.pid",
                          serial_log=d / "serial.log", tap=tap,
                          address=f"{address}/24" if address else None, firmware=self._firmware())
            argv = qemu_argv(spec)
            if self.cgroup_parent:  # QEMU starts inside the confining parent: its RAM is charged there
                argv = [sys.executable, "-m", "virtbench.platforms.cgroups", "exec", "--cgroup",
                        f"{self.cgroup_parent}/{name}", "--", *argv]
            (d / "qemu.argv.json").write_text(json.dumps(argv, indent=1))
        except BaseException:
            _teardown(self.paths, d, meta)
            raise
        return Instance(name, self.name, run_id, {
            "dir": str(d), "argv": argv, "agent": str(spec.agent_socket), "qmp": str(spec.qmp_socket),
            "pidfile": str(spec.pidfile), "serial": str(spec.serial_log), "accel": accel,
            "address": address, **meta})

    def start(self, instance: Instance) -> None:
        data = instance.data
        try:
            r = self.host.run(data["argv"], timeout=120, check=False, detached_children=True)
        except BaseException as exc:
            self._kill(instance)  # a QEMU stuck before daemonizing: its child may exist
            if not isinstance(exc, Exception):
                raise
            raise VirtbenchError(f"QEMU could not start VM {instance.name}: {exc}; "
                                 f"serial log: {serial_tail(data['serial'])}") from None
        if not r.ok:
            self._kill(instance)
            raise VirtbenchError(f"QEMU could not start VM {instance.name}: "
                                 f"{' | '.join((r.stderr or r.stdout).strip().splitlines()[-3:])}",
                                 _start_fix(r.stderr))
        if self.options.cpus is not None:
            pid = self._pid(instance)
            try:
                if pid is None:
                    raise VirtbenchError("QEMU exited right after it started")
                limit_cpu(instance.name, pid, self.options.cpus,
                          self.memory_cgroup(instance) if self.cgroup_parent else None)
            except Exception as exc:  # noqa: BLE001 - any failure here stops the VM, then reports
                self._kill(instance)
                raise VirtbenchError(f"VM {instance.name}: cannot apply cpus={self.options.cpus:g}: {exc}; "
                                     f"serial log: {serial_tail(data['serial'])}",
                                     "check the cgroup cpu controller on the host") from None
        ready = self.host.run(self._channel_argv(instance, ["true"], wait=self.options.boot_timeout),
                              timeout=self.options.boot_timeout + 30, check=False)
        if ready.ok:
            return
        died = self._pid(instance) is None
        self._kill(instance)
        why = (ready.stderr.strip().splitlines() or [f"status {ready.returncode}"])[-1]
        why = why.replace(guest.MARK, "").strip()
        what = "QEMU exited during boot" if died else \
            f"the guest agent did not answer within {self.options.boot_timeout:g} s"
        raise VirtbenchError(f"VM {instance.name} did not start ({self.accel()}): {what}: {why}; "
                             f"serial log: {serial_tail(data['serial'])}",
                             "see the serial log above; raise boot_timeout for slow emulation")

    def _channel_argv(self, instance: Instance, argv: list[str], *, timeout: float | None = None,
                      wait: float | None = None) -> list[str]:
        limit = (["--timeout", f"{timeout:g}"] if timeout is not None
                 else ["--wait", f"{wait:g}"] if wait is not None else [])
        env = [a for k, v in EXEC_ENV.items() for a in ("--env", f"{k}={v}")]
        return [sys.executable, "-m", "virtbench.platforms.qemu.guest", "exec", "--socket", instance.data["agent"],
                *limit, *env, "--", *argv]

    def exec_argv(self, instance: Instance, argv: list[str], timeout: float | None = None) -> list[str]:
        """With timeout, the guest itself kills the command after it (status 124)."""
        return self._channel_argv(instance, argv, timeout=timeout)

    def exec(self, instance: Instance, argv: list[str], *, timeout: float | None = None,
             check: bool = True) -> proc.Result:
        full = self.exec_argv(instance, argv, timeout=timeout)
        host_timeout = None if timeout is None else timeout + guest.GRACE + 15
        r = self.host.run(full, timeout=host_timeout, check=False)
        if r.returncode == guest.TIMED_OUT and f"{guest.MARK} timed out" in r.stderr:
            raise CommandError(full, None, r.stdout, r.stderr, timed_out=True, timeout=timeout)
        if check and r.returncode != 0:
            raise CommandError(full, r.returncode, r.stdout, r.stderr)
        return r

    def stop(self, instance: Instance) -> None:
        """sync and power off through the agent; QMP quit if it does not; then kill."""
        pid = self._pid(instance)
        if pid is None:
            self._kill(instance)
            return
        self.host.run(self._channel_argv(instance, ["/bin/sh", "-c", "sync; echo o >/proc/sysrq-trigger"],
                                         wait=STOP_TIMEOUT), timeout=STOP_TIMEOUT + 30, check=False)
        if not _wait_gone([pid], STOP_TIMEOUT):
            return
        self.host.run([sys.executable, "-m", "virtbench.platforms.qemu.guest", "qmp", "--socket",
                       instance.data["qmp"], "quit"], timeout=30, check=False)
        if _wait_gone([pid], 5.0):
            self._kill(instance)

    def storage(self, instance: Instance) -> dict[str, Path]:
        """The VM's own disk: its copy-on-write overlay (the base disk is the image's, shared)."""
        return {"disk": Path(instance.data.get("disk") or Path(instance.data["dir"]) / "disk.qcow2")}

    def relocate(self, instance: Instance, moved: dict[str, Path]) -> None:
        """The next start boots from the moved overlay: the drive's file= in the argv changes."""
        if "lower" in moved:
            raise InputError("a VM's base disk is shared by its overlays; moving the image with it is not supported",
                             "set with_image: false")
        old, new = str(self.storage(instance)["disk"]), str(moved["disk"])
        if "," in new:
            raise InputError(f"path {new} contains ',', which QEMU options cannot hold")
        instance.data["argv"] = [a.replace(f"file={old},", f"file={new},") for a in instance.data["argv"]]
        instance.data["disk"] = new
        (Path(instance.data["dir"]) / "qemu.argv.json").write_text(json.dumps(instance.data["argv"], indent=1))

    def remove(self, instance: Instance) -> None:
        _teardown(self.paths, Path(instance.data["dir"]), instance.data)

    def close(self) -> None:
        """What the VMs leave when the last goes: the parent of their cgroups (/virtbench, empty)
        and, a bridged VM's tap gone, the host bridge once nothing uses it."""
        cgroups.remove_cgroups("virtbench")
        bridge.remove_bridge_if_unused()

    def memory_cgroup(self, instance: Instance) -> str | None:
        """Confined (density host_memory): the cgroup QEMU was started in, below the parent."""
        if self.cgroup_parent:
            return f"{self.cgroup_parent}/{instance.name}"
        return super().memory_cgroup(instance)

    def guest_oom_kills(self, instance: Instance) -> int | None:
        """The guest kernel's count (/proc/vmstat oom_kill, Linux 4.13+); None if unreadable."""
        r = self.exec(instance, ["cat", "/proc/vmstat"], timeout=30, check=False)
        return vmstat_oom_kills(r.stdout) if r.returncode == 0 else None

    def _pid(self, instance: Instance) -> int | None:
        """The VM's QEMU pid, if it runs (the pidfile checked against the command line)."""
        try:
            pid = int(Path(instance.data["pidfile"]).read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if pid in qemu_processes([instance.data["dir"] + "/"]) and _alive(pid) else None

    def _kill(self, instance: Instance) -> None:
        pids = qemu_processes([instance.data["dir"] + "/"])
        if pids:
            kill_qemus(pids)

    @classmethod
    def cleanup(cls, paths: Paths, run_id: str | None = None) -> list[str]:
        removed, failed = [], []
        for d, meta in mounts.leftovers(paths.instances, cls.type, run_id):
            try:
                removed += _teardown(paths, d, meta)
            except Exception as exc:  # noqa: BLE001 - try every leftover, then report
                failed.append(f"{d}: {exc}")
        # QEMUs whose instance dir is gone: found by their label and paths.
        marker = f"{paths.instances}/{naming.INSTANCE_PREFIX}"
        label = f"name={FW_CFG_LABEL},string="
        orphans = []
        for pid in qemu_processes([marker]):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            if run_id is None or f"{label}{run_id}" in cmdline:
                orphans.append(pid)
        if orphans:
            try:
                kill_qemus(orphans)
                removed += [f"qemu process {p}" for p in orphans]
            except VirtbenchError as exc:
                failed.append(str(exc))
        if run_id is None:
            qdir = paths.runtime / "qemu"
            for d in sorted(qdir.iterdir()) if qdir.is_dir() else []:
                if d.is_dir():  # socket dirs and probe dirs; accel.json (the verdict) stays
                    _rmtree(d)
                    removed.append(f"runtime dir {d}")
            removed += bridge.remove_bridge_if_unused()
            removed += cgroups.remove_cgroups("virtbench")
        if failed:
            raise VirtbenchError("qemu cleanup left: " + "; ".join(failed))
        return removed


def _start_fix(stderr: str) -> str:
    if "Cannot allocate memory" in stderr or "cannot set up guest memory" in stderr:
        return "lower the VM's memory option, or free memory on the host"
    if "CPU model" in stderr:
        return f"pick a model from `{_arch()[0]} -cpu help`"
    if "O_DIRECT" in stderr or "Invalid argument" in stderr:
        return "the state directory's filesystem may not support O_DIRECT: use cache: writeback"
    return "check the QEMU options of this platform"


def vmstat_oom_kills(vmstat: str) -> int | None:
    """`oom_kill N` of a /proc/vmstat text: the kernel's OOM kills since boot."""
    for line in vmstat.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None

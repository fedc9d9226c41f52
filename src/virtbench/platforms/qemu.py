"""QEMU virtual machines booting the same guest image as every other platform.

The VM boots the image's VM variant (the same recipe plus Debian's cloud kernel, see
images/vmdisk.py) from a qcow2 copy-on-write overlay of a cached ext4 disk, with direct
kernel boot (no bootloader). Commands run through a virtio-serial agent (platforms/guest.py);
exec_argv builds `python -m virtbench.platforms.guest exec ...`, so proc.run stays the one
place that starts processes.

KVM is used when it works, and only then: `accel=auto` decides by booting a test guest
under KVM with a bounded timeout (a VM of a VM often has /dev/kvm but its guests hang), and
falls back to TCG emulation, saying why. The verdict is cached per host boot in
paths.runtime/qemu/accel.json. The accelerator is part of the platform's identity: a TCG
VM measures emulation, not virtualization, and its label says so (`qemu(tcg,2 vcpu)`).

A VM may host container platforms (a stack, `inside: vm` in the campaign): accept_inner adds
their runtimes to the VM image and the image archive to the disk (platforms/qemu_stack.py);
the runner then starts their engine in each VM and runs them through the agent.

Every QEMU process carries `-fw_cfg name=opt/org.virtbench,string=<run id>` and paths under
paths.instances/<instance>, so cleanup finds exactly its own VMs, even without their files.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform as pyplatform
import signal
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .. import proc
from ..errors import CommandError, InputError, UnavailableError, VirtbenchError
from ..images import vmdisk
from ..images.image import Image
from . import guest, mounts, qemu_stack
from .base import (EXEC_ENV, Size, LABEL, Availability, Executor, Instance, Paths, Platform,
                   PlatformOptions)

MiB = 1 << 20
ARCHES = {
    # machine: (QEMU binary, Debian package, console, default machine type)
    "x86_64": ("qemu-system-x86_64", "qemu-system-x86", "ttyS0", "q35"),
    "aarch64": ("qemu-system-aarch64", "qemu-system-arm", "ttyAMA0", "virt"),
}
HOST_ARCH = pyplatform.machine()
KVM_CHECK_TIMEOUT = 20.0
"""Seconds a test guest may take under KVM before KVM is declared unusable here."""
STOP_TIMEOUT = 10.0
QBOOT = Path("/usr/share/qemu/qboot.rom")
"""Minimal x86 firmware (QEMU's): direct kernel boot without SeaBIOS's device scan."""
FW_CFG_LABEL = "opt/" + LABEL
SERIAL_TAIL = 15


def _arch() -> tuple[str, str, str, str]:
    try:
        return ARCHES[HOST_ARCH]
    except KeyError:
        raise UnavailableError(f"QEMU VMs are not supported on {HOST_ARCH}",
                               f"use a host of {', '.join(ARCHES)}") from None


class QemuOptions(PlatformOptions):
    """A VM's shape. cpus/cpuset limit the QEMU process on the host (all vCPU threads)."""

    memory: Size = Field(1 << 30, description="guest RAM (default 1G)")
    network: Literal["none", "user", "bridge"] = Field(
        "none", description="none: no NIC (the agent uses virtio-serial); user: QEMU user-mode "
                            "NAT, restricted to the host; bridge: tap on the host bridge vbbr0")
    vcpus: int = Field(2, ge=1, le=512, description="virtual CPUs")
    cpu: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.,=+-]*$",
                            description="CPU model (default: host under KVM, max under TCG)")
    accel: Literal["auto", "kvm", "tcg"] = Field(
        "auto", description="auto: KVM if a test guest boots under it, else TCG emulation")
    cache: Literal["none", "writeback", "writethrough", "unsafe", "directsync"] = Field(
        "none", description="host page cache for the disk; none and directsync use O_DIRECT "
                            "(the host filesystem must support it, tmpfs does not)")
    aio: Literal["threads", "native", "io_uring"] = Field(
        "threads", description="QEMU's disk I/O backend (native needs cache none or directsync)")
    disk_bus: Literal["virtio-blk", "virtio-scsi"] = "virtio-blk"
    machine: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.=-]*$",
                                description="machine type (default q35 on x86, virt on arm64)")
    disk_headroom: Size = Field(4 << 30,
                                    description="free space on the guest's root disk (sparse)")
    boot_timeout: float = Field(300.0, gt=0, le=3600, description="seconds until the agent answers")

    @field_validator("memory")
    @classmethod
    def _vm_memory(cls, v: int) -> int:
        if v < 128 * MiB:
            raise ValueError("a VM needs at least 128M of memory to boot the Debian kernel")
        return v

    @model_validator(mode="after")
    def _aio(self) -> "QemuOptions":
        if self.aio == "native" and self.cache not in ("none", "directsync"):
            raise ValueError("aio=native needs cache=none or cache=directsync (O_DIRECT)")
        return self


# -- the QEMU command line (pure) -------------------------------------------------------------
@dataclass(frozen=True)
class VMSpec:
    name: str
    run_id: str
    accel: Literal["kvm", "tcg"]
    options: QemuOptions
    kernel: Path
    initrd: Path
    overlay: Path
    agent_socket: Path
    qmp_socket: Path
    pidfile: Path
    serial_log: Path
    arch: str = HOST_ARCH
    tap: str | None = None
    address: str | None = None
    """ADDRESS/PREFIX of the guest on the host bridge (network=bridge)."""
    firmware: Path | None = None


def cpu_model(options: QemuOptions, accel: str) -> str:
    return options.cpu or ("host" if accel == "kvm" else "max")


def mac_address(name: str) -> str:
    h = hashlib.sha1(name.encode()).digest()
    return "52:54:00:" + ":".join(f"{b:02x}" for b in h[:3])


def kernel_cmdline(spec: VMSpec) -> str:
    console = ARCHES[spec.arch][2]
    net = {"none": "none", "user": "user"}.get(spec.options.network, spec.address or "none")
    return (f"console={console} root=LABEL={vmdisk.DISK_LABEL} rootfstype=ext4 rw "
            f"init={vmdisk.INIT_PATH} panic=-1 quiet fsck.mode=skip net.ifnames=0 "
            f"vb.hostname={spec.name} vb.net={net} vb.port={guest.PORT_NAME}")


def qemu_argv(spec: VMSpec) -> list[str]:
    """The full command that starts (and daemonizes) the VM."""
    o = spec.options
    binary, _pkg, _console, default_machine = ARCHES[spec.arch]
    for p in (spec.overlay, spec.agent_socket, spec.qmp_socket, spec.pidfile, spec.serial_log,
              spec.kernel, spec.initrd):
        if "," in str(p):
            raise InputError(f"path {p} contains ',', which QEMU options cannot hold",
                             "use state, runtime and cache directories without commas")
    machine = o.machine or default_machine
    if spec.arch == "aarch64" and machine == "virt":
        machine += ",gic-version=" + ("host" if spec.accel == "kvm" else "max")
    accel = "kvm" if spec.accel == "kvm" else "tcg,thread=multi"
    argv = []
    if o.cpuset is not None:
        argv += ["taskset", "-c", o.cpuset]
    argv += [binary, "-name", spec.name, "-machine", machine, "-accel", accel,
             "-cpu", cpu_model(o, spec.accel), "-smp", str(o.vcpus), "-m", f"{int(o.memory) // MiB}M",
             "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot"]
    if spec.firmware is not None:
        argv += ["-bios", str(spec.firmware)]
    argv += ["-kernel", str(spec.kernel), "-initrd", str(spec.initrd), "-append", kernel_cmdline(spec)]
    argv += ["-drive", f"file={spec.overlay},format=qcow2,if=none,id=vbdisk,cache={o.cache},aio={o.aio}"]
    if o.disk_bus == "virtio-blk":
        argv += ["-device", "virtio-blk-pci,drive=vbdisk"]
    else:
        argv += ["-device", "virtio-scsi-pci,id=vbscsi", "-device", "scsi-hd,drive=vbdisk,bus=vbscsi.0"]
    argv += ["-device", "virtio-serial-pci,id=vbserial",
             "-chardev", f"socket,id=vbagent,path={spec.agent_socket},server=on,wait=off",
             "-device", f"virtserialport,bus=vbserial.0,chardev=vbagent,name={guest.PORT_NAME}",
             "-device", "virtio-rng-pci"]
    mac = mac_address(spec.name)
    if o.network == "user":
        argv += ["-netdev", "user,id=vbnet,restrict=on", "-device", f"virtio-net-pci,netdev=vbnet,mac={mac}"]
    elif o.network == "bridge":
        if not spec.tap:
            raise ValueError("network=bridge needs a tap device")
        argv += ["-netdev", f"tap,id=vbnet,ifname={spec.tap},script=no,downscript=no",
                 "-device", f"virtio-net-pci,netdev=vbnet,mac={mac}"]
    argv += ["-qmp", f"unix:{spec.qmp_socket},server=on,wait=off",
             "-serial", f"file:{spec.serial_log}",
             "-fw_cfg", f"name={FW_CFG_LABEL},string={spec.run_id}",
             "-pidfile", str(spec.pidfile), "-daemonize"]
    return argv


# -- is KVM usable? -----------------------------------------------------------------------
@dataclass(frozen=True)
class AccelVerdict:
    kvm: bool
    reason: str
    tested: str


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def _stub_firmware(arch: str) -> bytes:
    """A guest that does nothing but ask QEMU to exit: proves the accelerator runs guest code.

    x86: 64 KiB BIOS whose reset vector writes 0x31 to isa-debug-exit (QEMU exits with 99).
    arm64: a raw kernel calling PSCI SYSTEM_OFF through hvc (QEMU exits with 0)."""
    if arch == "x86_64":
        fw = bytearray(b"\xf4" * 65536)
        code = bytes([0xB0, 0x31, 0xE6, 0xF4, 0xF4, 0xEB, 0xFD])  # mov al,0x31; out 0xf4,al; hlt; jmp
        fw[0xFFF0:0xFFF0 + len(code)] = code
        return bytes(fw)
    words = [0x52800100, 0x72B08000, 0xD4000002, 0x14000000]  # w0=0x84000008 (SYSTEM_OFF); hvc #0; b .
    return b"".join(w.to_bytes(4, "little") for w in words)


def _stub_argv(arch: str, accel: str, stub: Path) -> tuple[list[str], int]:
    binary = ARCHES[arch][0]
    base = [binary, "-accel", accel, "-nodefaults", "-no-user-config", "-display", "none",
            "-serial", "none", "-monitor", "none", "-m", "64M"]
    cpu = ["-cpu", "host"] if accel == "kvm" else []
    if arch == "x86_64":
        return [*base, *cpu, "-machine", "q35", "-bios", str(stub),
                "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"], 99
    return [*base, *(cpu or ["-cpu", "max"]), "-machine", "virt", "-kernel", str(stub)], 0


def _kernel_check_argv(arch: str, kernel: Path, log: Path) -> list[str]:
    binary, _pkg, console, machine = ARCHES[arch]
    return [binary, "-accel", "kvm", "-cpu", "host", "-machine", machine, "-m", "256M", "-smp", "1",
            "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-serial", f"file:{log}", "-kernel", str(kernel),
            "-append", f"console={console} panic=-1 loglevel=3 root=/dev/nonexistent"]


def _first_error(exc: Exception) -> str:
    text = (getattr(exc, "stderr", "") or "").strip() or str(exc)
    lines = [ln for ln in text.splitlines() if "error" in ln.lower() or "fail" in ln.lower()]
    return (lines or text.splitlines() or [str(exc)])[0][:300]


def try_stub(arch: str, accel: str, workdir: Path, timeout: float = KVM_CHECK_TIMEOUT) -> str | None:
    """None if the stub guest ran under accel, else why not."""
    workdir.mkdir(parents=True, exist_ok=True)
    stub = workdir / "stub.bin"
    stub.write_bytes(_stub_firmware(arch))
    argv, want = _stub_argv(arch, accel, stub)
    try:
        r = proc.run(argv, timeout=timeout, check=False)
    except CommandError as exc:
        if exc.timed_out:
            return f"a test guest did not finish within {timeout:g} s"
        return _first_error(exc)
    if r.returncode != want:
        return _first_error(CommandError(argv, r.returncode, r.stdout, r.stderr))
    return None


def _kernel_desc(kernel: Path) -> str:
    try:
        return "Linux " + json.loads((kernel.parent / "disk.json").read_text())["kernel_version"]
    except (OSError, ValueError, KeyError):
        return f"Linux {kernel.name}"


def try_kernel(arch: str, kernel: Path, workdir: Path, timeout: float = KVM_CHECK_TIMEOUT
               ) -> tuple[str | None, float]:
    """Boot kernel under KVM until it panics for want of a root disk: (None, seconds) if it
    got there, else (why not, seconds). The panic proves the whole kernel init ran."""
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "kernel-check.log"
    argv = _kernel_check_argv(arch, kernel, log)
    t0 = time.monotonic()
    try:
        r = proc.run(argv, timeout=timeout, check=False)
    except CommandError as exc:
        if exc.timed_out:
            return f"a test guest ({_kernel_desc(kernel)}) did not boot within {timeout:g} s", time.monotonic() - t0
        return _first_error(exc), time.monotonic() - t0
    seconds = time.monotonic() - t0
    text = log.read_text(errors="replace") if log.exists() else ""
    if "Kernel panic" in text or "VFS:" in text:
        return None, seconds
    if r.returncode != 0:
        return _first_error(CommandError(argv, r.returncode, r.stdout, r.stderr)), seconds
    return f"a test guest ({_kernel_desc(kernel)}) exited without reaching the end of kernel init", seconds


def probe_kernel() -> Path | None:
    """A kernel for the KVM check when no image is at hand: a cached VM disk's, or the host's."""
    from ..images.build import DEFAULT_CACHE

    found = sorted(DEFAULT_CACHE.glob("*/vm/*/vmlinuz"), key=lambda p: p.stat().st_mtime, reverse=True) \
        if DEFAULT_CACHE.is_dir() else []
    if not found:
        found = sorted(Path("/boot").glob("vmlinuz-*"), reverse=True)
    return found[0] if found else None


def accel_verdict(paths: Paths, kernel: Path | None = None, arch: str = HOST_ARCH) -> AccelVerdict:
    """Whether KVM runs a guest here, decided by trying, cached per host boot and kernel."""
    cache_file = paths.runtime / "qemu" / "accel.json"
    key = str(kernel) if kernel else "stub"
    try:
        cached = json.loads(cache_file.read_text())
    except (OSError, ValueError):
        cached = {}
    if cached.get("boot_id") != _boot_id():
        cached = {"boot_id": _boot_id(), "verdicts": {}}
    verdicts = cached.setdefault("verdicts", {})
    for k in (key, "any"):
        if k in verdicts:
            return AccelVerdict(**verdicts[k])
    verdict, scope = _decide(paths, kernel, arch)
    verdicts["any" if scope == "any" else key] = verdict.__dict__
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache_file.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(cached, indent=1))
    tmp.replace(cache_file)
    return verdict


def _decide(paths: Paths, kernel: Path | None, arch: str) -> tuple[AccelVerdict, str]:
    nested = " (nested virtualization: this host is itself a VM?)" if _host_is_vm() else ""
    if not Path("/dev/kvm").exists():
        return AccelVerdict(False, "no /dev/kvm (no virtualization extensions, kvm module not "
                                   f"loaded, or a VM without nested virtualization){nested}", "none"), "any"
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC))
    except OSError as exc:
        return AccelVerdict(False, f"cannot open /dev/kvm: {exc.strerror}", "none"), "any"
    work = paths.runtime / "qemu" / f"probe-{uuid.uuid4().hex[:8]}"
    try:
        why = try_stub(arch, "kvm", work)
        if why is not None:
            return AccelVerdict(False, f"KVM present but a test guest failed: {why}{nested}",
                                "firmware stub"), "any"
        if kernel is None:
            return AccelVerdict(True, "KVM ran a firmware stub guest (no kernel at hand to boot)",
                                "firmware stub"), "key"
        why, seconds = try_kernel(arch, kernel, work)
        if why is not None:
            return AccelVerdict(False, f"KVM present but {why}{nested}", f"Linux {kernel}"), "key"
        return AccelVerdict(True, f"KVM works: a test guest booted {_kernel_desc(kernel)} in {seconds:.1f} s",
                            f"Linux {kernel}"), "key"
    finally:
        _rmtree(work)


def _host_is_vm() -> bool:
    try:
        return " hypervisor" in Path("/proc/cpuinfo").read_text().split("\n\n", 1)[0]
    except OSError:
        return False


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
def limit_cpu(name: str, pid: int, cpus: float) -> str:
    quota, period = int(round(cpus * 100_000)), 100_000
    root = mounts.CGROUP_ROOT
    if mounts.cgroup_mode() == "v2":
        for parent in (root, root / "virtbench"):
            parent.mkdir(exist_ok=True)
            try:
                (parent / "cgroup.subtree_control").write_text("+cpu")
            except OSError:
                pass
        cg = root / "virtbench" / name
        cg.mkdir(exist_ok=True)
        (cg / "cpu.max").write_text(f"{quota} {period}")
    else:
        cg = root / "cpu" / "virtbench" / name
        cg.mkdir(parents=True, exist_ok=True)
        (cg / "cpu.cfs_period_us").write_text(str(period))
        (cg / "cpu.cfs_quota_us").write_text(str(quota))
    (cg / "cgroup.procs").write_text(str(pid))  # moves every thread of the process
    return str(cg)


class Qemu(Platform):
    type = "qemu"
    kind = "vm"
    Options = QemuOptions
    binaries = (ARCHES.get(HOST_ARCH, ARCHES["x86_64"])[0], "qemu-img", "mkfs.ext4", "debugfs")
    packages = (ARCHES.get(HOST_ARCH, ARCHES["x86_64"])[1], "qemu-utils", "e2fsprogs")
    description = ("QEMU VM (KVM when it works, else TCG emulation) booting the image plus "
                   "Debian's cloud kernel from a copy-on-write disk; commands via virtio-serial")

    def __init__(self, name: str, options: PlatformOptions, paths: Paths,
                 executor: Executor | None = None) -> None:
        super().__init__(name, options, paths, executor)
        mounts.check_limits(options, name)  # cpus/cpuset limit the QEMU process on this host
        self.options: QemuOptions
        self._disks: dict[str, vmdisk.VMDisk] = {}
        self._base: Image | None = None
        self._verdict: AccelVerdict | None = None
        self._inner: dict[str, Platform] = {}
        """Platforms stacked inside this one's VMs (accept_inner), by name."""

    # -- discovery -----------------------------------------------------------------------
    @classmethod
    def probe(cls, paths: Paths) -> Availability:
        try:
            _arch()
        except UnavailableError as exc:
            return Availability(False, exc.message, exc.fix or "")
        fix = "apt-get install " + " ".join(cls.packages)
        for b in cls.binaries:
            if not proc.which(b):
                return Availability(False, f"{b} is not installed", fix)
        try:
            verdict = accel_verdict(paths, probe_kernel())
            if verdict.kvm:
                return Availability(True, verdict.reason)
            work = paths.runtime / "qemu" / f"probe-{uuid.uuid4().hex[:8]}"
            try:
                why = try_stub(HOST_ARCH, "tcg", work)
            finally:
                _rmtree(work)
            if why is not None:
                return Availability(False, f"{verdict.reason}; and TCG emulation failed too: {why}", fix)
            return Availability(True, f"{verdict.reason}; using TCG emulation",
                                "for KVM: run on bare metal, or enable nested virtualization")
        except Exception as exc:  # noqa: BLE001 - probe reports, never raises
            return Availability(False, f"QEMU test failed: {type(exc).__name__}: {exc}", fix)

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
        inner.host = qemu_stack.Outside(inner.name, self.name)

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
                tap, address = mounts.veth_name(name), mounts.allocate_address(self.paths.runtime, name)
                meta |= {"tap": tap, "address": address}
                mounts.write_meta(d, meta)
                _make_tap(tap)
            spec = VMSpec(name=name, run_id=run_id, accel=accel, options=self.options, kernel=disk.kernel,
                          initrd=disk.initrd, overlay=overlay, agent_socket=sockdir / "agent.sock",
                          qmp_socket=sockdir / "qmp.sock", pidfile=d / "qemu.pid",
                          serial_log=d / "serial.log", tap=tap,
                          address=f"{address}/24" if address else None, firmware=self._firmware())
            argv = qemu_argv(spec)
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
                limit_cpu(instance.name, pid, self.options.cpus)
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
        return [sys.executable, "-m", "virtbench.platforms.guest", "exec", "--socket", instance.data["agent"],
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
        self.host.run([sys.executable, "-m", "virtbench.platforms.guest", "qmp", "--socket",
                       instance.data["qmp"], "quit"], timeout=30, check=False)
        if _wait_gone([pid], 5.0):
            self._kill(instance)

    def remove(self, instance: Instance) -> None:
        _teardown(self.paths, Path(instance.data["dir"]), instance.data)

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
        marker = f"{paths.instances}/{mounts.INSTANCE_PREFIX}"
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
            removed += mounts.remove_bridge_if_unused()
            removed += mounts.remove_cgroups("virtbench")
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


def _make_tap(tap: str) -> None:
    mounts.ensure_bridge()
    proc.run(["ip", "tuntap", "add", "dev", tap, "mode", "tap"], timeout=30)
    proc.run(["ip", "link", "set", tap, "master", mounts.BRIDGE, "up"], timeout=30)


def _remove_cgroup(name: str, timeout: float = 5.0) -> list[str]:
    """rmdir the VM's cgroup; a killed QEMU holds it until its parent (init) has reaped it."""
    rel = f"virtbench/{name}"
    deadline = time.monotonic() + timeout
    removed = mounts.remove_cgroups(rel)
    while [c for c in mounts.CGROUP_ROOT.glob(f"*/{rel}")] + \
            ([mounts.CGROUP_ROOT / rel] if (mounts.CGROUP_ROOT / rel).is_dir() else []):
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)
        removed += mounts.remove_cgroups(rel)
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
    if tap and mounts.delete_link(tap):
        done.append(f"tap {tap}")
    done += [f"lease {a}" for a in mounts.release_addresses(paths.runtime, name)]
    done += _remove_cgroup(name)
    sockdir = meta.get("sockdir")
    if sockdir and Path(sockdir).exists():
        _rmtree(Path(sockdir))
        done.append(f"sockets {sockdir}")
    if d.exists():
        mounts.safe_rmtree(d)
        done.append(f"instance dir {d}")
    return done

"""Whether KVM works on this host, decided by booting throwaway test guests.

A VM of a VM often has /dev/kvm while its guests hang, so the only trustworthy answer is to
try, with a bounded timeout, and cache the verdict per host boot. That probing (stub
firmware, a kernel that must reach its panic, the verdict cache) has nothing to do with
running a benchmark VM, so it lives here and the platform (qemu.py) only asks for a verdict.
"""
from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from ... import proc
from ...errors import CommandError
from ..base import Paths
from .argv import ARCHES, HOST_ARCH
from .host import _rmtree

KVM_CHECK_TIMEOUT = 20.0
"""Seconds a test guest may take under KVM before KVM is declared unusable here."""
BOOT = Path("/boot")
"""Where the host's own kernels are (vmlinuz-*): one the KVM check can boot when no VM disk is cached."""


@dataclass(frozen=True)
class AccelVerdict:
    kvm: bool
    reason: str
    tested: str

    @property
    def booted_linux(self) -> bool:
        """KVM ran a Linux test guest to the end of its init, as a VM's own check does; a
        firmware stub alone proves less (on a VM of a VM the stub may run and Linux hang)."""
        return self.kvm and self.tested.startswith("Linux")


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


def probe_kernel(cache: Path | None = None, boot: Path | None = None) -> Path | None:
    """A kernel for the KVM check when no image is at hand: a cached VM disk's (the kernel a
    VM boots), else the host's own in /boot; None on a fresh machine without either.
    cache, boot: the image cache and the boot directory (None: images.build.DEFAULT_CACHE, BOOT)."""
    from ...images import build

    cache = build.DEFAULT_CACHE if cache is None else cache
    boot = BOOT if boot is None else boot
    found = sorted(cache.glob("*/vm/*/vmlinuz"), key=lambda p: p.stat().st_mtime, reverse=True) \
        if cache.is_dir() else []
    if not found:
        found = sorted(boot.glob("vmlinuz-*"), reverse=True)
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
    if arch != HOST_ARCH:
        return AccelVerdict(False, f"KVM runs only guests of this host's own architecture ({HOST_ARCH}): "
                                   f"an {arch} guest runs under TCG emulation", "none"), "key"
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

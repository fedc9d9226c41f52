"""Host facts recorded with every run: what the numbers were measured on.

Stable facts (CPU, memory, kernel) identify the host; conditions (load, governor, turbo,
busy processes) can change between runs and are stored per run, so a report can warn
when a run was measured under different conditions.
"""
from __future__ import annotations

import os
import platform
import re
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import boards, proc
from .errors import VirtbenchError

INTERESTING_FLAGS = ("aes", "avx", "avx2", "avx512f", "sha_ni", "vmx", "svm", "hypervisor",
                     "pmull", "sha1", "sha2", "asimd", "neon", "sse4_2", "rdrand", "pclmulqdq")


def _read(path: str | Path, default: str = "") -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


def cpuinfo(text: str | None = None) -> dict[str, Any]:
    """CPU model and feature flags from /proc/cpuinfo (x86 'flags', ARM 'Features').

    ARM kernels name no CPU ('ARMv7 Processor rev 3 (v7l)' at best): the model is the
    decoded core types ('4x Cortex-A72'), with the kernel's own line after it."""
    text = _read("/proc/cpuinfo") if text is None else text
    model, microcode = "", ""
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if key in ("model name", "hardware", "cpu model") and not model:
            model = value
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
        elif key == "microcode" and not microcode:
            microcode = value
    cores = boards.arm_cpu_name(text)
    if cores:
        model = f"{cores} ({model})" if model and not model.startswith("BCM") else cores
    if not model:
        model = _read("/sys/firmware/devicetree/base/model").rstrip("\x00") or platform.processor()
    crypto = boards.crypto_extensions(flags)
    return {"cpu_model": model, "cpu_flags": sorted(f for f in flags if f in INTERESTING_FLAGS),
            "aes": crypto["aes"], "crypto": crypto, "microcode": microcode}


def virtualization() -> dict[str, str]:
    """Is this host itself a VM, or inside a container? ('none' each on bare metal).

    Asked separately: a container inside a VM is both, and the VM part is what makes
    overheads measured here differ from bare metal.
    """
    vm = container = ""
    if proc.which("systemd-detect-virt"):
        vm = proc.run(["systemd-detect-virt", "--vm"], check=False, timeout=10).stdout.strip()
        container = proc.run(["systemd-detect-virt", "--container"], check=False, timeout=10).stdout.strip()
    accel = next((w.split("=", 1)[1] for w in _read("/proc/cmdline").split() if w.startswith("vb.accel=")), "")
    if vm in ("", "none", "qemu", "kvm") and accel:  # a guest virtbench booted knows its accelerator
        vm = {"tcg": "qemu", "kvm": "kvm"}.get(accel, vm)
    elif vm in ("", "none") and boards.board_model().startswith("linux,dummy-virt"):
        vm = "qemu (virt machine; KVM or TCG unknown)"
    if vm in ("", "none") and "hypervisor" in _read("/proc/cpuinfo").split():
        vendor = _read("/sys/class/dmi/id/sys_vendor") or _read("/sys/class/dmi/id/product_name")
        vm = f"yes ({vendor})" if vendor else "yes (hypervisor CPU flag)"
    return {"vm": vm or "none", "container": container or "none"}


def cgroup_version() -> str:
    if Path("/sys/fs/cgroup/cgroup.controllers").exists():
        return "v2"
    if Path("/sys/fs/cgroup/unified/cgroup.controllers").exists():
        return "v1 (hybrid)"
    return "v1"


READ_ONLY_CGROUP_FIX = ("run virtbench on the host itself, or give its container the host's cgroups read-write "
                        "(docker run --privileged --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw)")


def read_only_cgroups(mountinfo: str | None = None) -> list[str]:
    """Mount points of the cgroup hierarchies limits are written in that are mounted read-only,
    as a container gets them by default: cgroup2 at /sys/fs/cgroup, or v1's controllers (the
    named systemd hierarchy and a hybrid host's unified one are not written). mountinfo: that
    host's /proc/self/mountinfo (None: this host's)."""
    text = mountinfo if mountinfo is not None else _read("/proc/self/mountinfo")
    out = []
    for line in text.splitlines():
        mine, sep, theirs = line.partition(" - ")
        fields = mine.split()
        if not sep or len(fields) < 6 or not theirs.split():
            continue
        point, options = fields[4], fields[5].split(",")
        if theirs.split()[0] not in ("cgroup", "cgroup2") or not point.startswith("/sys/fs/cgroup"):
            continue
        if point.rsplit("/", 1)[-1] not in ("systemd", "unified") and "ro" in options:
            out.append(point)
    return out


MEMORY_CGROUP_FIX = ("add `cgroup_enable=memory cgroup_memory=1` to the kernel command line "
                     "(/boot/firmware/cmdline.txt on Raspberry Pi OS, one line) and reboot")


def cgroup_controllers(text: str | None = None) -> dict[str, bool]:
    """Controllers the kernel has, and whether each is enabled (/proc/cgroups; Raspberry Pi OS
    boots with `cgroup_disable=memory`, so its memory controller is listed as disabled)."""
    text = _read("/proc/cgroups") if text is None else text
    out: dict[str, bool] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 4 and not line.startswith("#"):
            out[parts[0]] = parts[3] == "1"
    return out


def memory_controller_problem(text: str | None = None) -> str:
    """Why memory limits cannot work on this host ('' when they can)."""
    controllers = cgroup_controllers(text)
    if not controllers:
        return ""  # no /proc/cgroups (not Linux, or hidden): the runtime's own error will say
    if "memory" not in controllers:
        return "the kernel has no cgroup memory controller"
    if not controllers["memory"]:
        return "the kernel's cgroup memory controller is disabled (Raspberry Pi OS disables it by default)"
    return ""


def meminfo(text: str | None = None) -> dict[str, int]:
    """/proc/meminfo in bytes (the kB lines multiplied out)."""
    out: dict[str, int] = {}
    text = _read("/proc/meminfo") if text is None else text
    for line in text.splitlines():
        key, _, value = line.partition(":")
        parts = value.split()
        if parts:
            out[key] = int(parts[0]) * (1024 if len(parts) > 1 else 1)
    return out


def free_bytes(path: Path) -> int:
    """What an unprivileged writer may still put on the filesystem under path (a campaign's
    scratch space, a migration's destination)."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def governor() -> str:
    gov = _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    return gov or "unknown (no cpufreq)"


def turbo() -> str:
    no_turbo = _read("/sys/devices/system/cpu/intel_pstate/no_turbo")
    if no_turbo:
        return "off" if no_turbo == "1" else "on"
    boost = _read("/sys/devices/system/cpu/cpufreq/boost")
    if boost:
        return "on" if boost == "1" else "off"
    return "unknown"


def mitigations() -> dict[str, str]:
    base = Path("/sys/devices/system/cpu/vulnerabilities")
    if not base.is_dir():
        return {}
    return {p.name: _read(p) for p in sorted(base.iterdir())}


def stable_facts() -> dict[str, Any]:
    """What identifies the host and its hardware."""
    uname = platform.uname()
    mem = meminfo()
    return {
        "hostname": socket.gethostname(),
        "machine_id": _read("/etc/machine-id"),
        "arch": uname.machine,
        **cpuinfo(),
        "cpus": os.cpu_count(),
        "memory_bytes": mem.get("MemTotal", 0),
        "swap_bytes": mem.get("SwapTotal", 0),
        "kernel": uname.release,
        "kernel_version": uname.version,
        "os": _os_release(),
        "virtualization": virtualization(),
        "cgroup": cgroup_version(),
        "board": boards.board_model(),
    }


def conditions(scratch: Path | None = None) -> dict[str, Any]:
    """What may differ from one run to the next on the same host. scratch: the directory
    benchmarks write to (its storage kind: an SD card against NVMe)."""
    load1, load5, load15 = os.getloadavg()
    return {
        "throttle": boards.throttle_state(),
        "storage": boards.storage_kind(scratch if scratch is not None and scratch.exists() else "/"),
        "governor": governor(),
        "turbo": turbo(),
        "mitigations": mitigations(),
        "loadavg": [round(load1, 2), round(load5, 2), round(load15, 2)],
        "memory_available_bytes": meminfo().get("MemAvailable", 0),
        "kernel_cmdline": _read("/proc/cmdline"),
    }


def facts(scratch: Path | None = None) -> dict[str, Any]:
    return {**stable_facts(), **conditions(scratch), "parallel_scaling": parallel_scaling()}


_SPIN = """
import hashlib, sys, time
me, start, seconds, phases = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4].split(",")
buf, out = bytes(65536), []
for k, who in enumerate(phases):
    begin, end = start + int(k * seconds * 1e9), start + int((k + 1) * seconds * 1e9)
    while time.time_ns() < begin:
        time.sleep(min(0.005, max(0.0, (begin - time.time_ns()) / 1e9)))
    if who == "1" and me > 0:
        out.append("-"); continue
    n, t0 = 0, time.perf_counter()
    while time.time_ns() < end:
        hashlib.sha256(buf).digest(); n += 1
    out.append(str(n * len(buf) / (time.perf_counter() - t0)))
print(" ".join(out))
"""
"""One CPU-bound process: SHA-256 (OpenSSL's, through hashlib) over 64 KiB in each phase it
takes part in ("1": process 0 alone, "n": all), from a shared start time; prints its bytes per
second per phase ("-" where it sat out)."""


def parallel_scaling(processes: int | None = None, seconds: float = 0.2, turns: int = 2) -> dict[str, Any]:
    """How much N CPU-bound processes at once get done against one: the host's parallel
    scaling, measured now (it changes: on 2-vCPU cloud VMs two processes gave 1.06x one at one
    moment and 2.0x twenty minutes later). A CPU limit's expected effect follows from it
    (expected_ratio). N defaults to the CPUs this process may use; N processes start once and
    spin in phases, one alone and all together in turns (1 N N 1 ...), so drift hits both alike:
    about 0.4 + 2 x turns x seconds of wall time."""
    from concurrent.futures import ThreadPoolExecutor

    n = processes or len(os.sched_getaffinity(0))
    phases = ",".join("1,n" if i % 2 == 0 else "n,1" for i in range(turns))
    try:
        # past the interpreters' start-up, n of them at once: 0.4 s on a usual host; under an
        # emulated CPU (a TCG guest) one start took seconds and every phase had ended before
        # the processes began (no scaling measured), so the lead follows a start timed here
        t0 = time.monotonic()
        proc.run([sys.executable, "-c", ""], timeout=60)
        start = str(time.time_ns() + int(max(0.4, 0.2 + 2 * n * (time.monotonic() - t0)) * 1e9))
        with ThreadPoolExecutor(max_workers=n) as pool:
            results = list(pool.map(lambda i: proc.run([sys.executable, "-c", _SPIN, str(i), start, str(seconds),
                                                        phases], timeout=60), range(n)))
        rates = [r.stdout.split() for r in results]
        kinds = phases.split(",")
        one = [float(rates[0][k]) for k, who in enumerate(kinds) if who == "1"]
        many = [sum(float(r[k]) for r in rates) for k, who in enumerate(kinds) if who == "n"]
    except (OSError, ValueError, IndexError, VirtbenchError) as exc:
        return {"processes": n, "error": f"{type(exc).__name__}: {exc}"}
    single, total = sum(one) / len(one), sum(many) / len(many)
    ratio = total / single if single > 0 else None
    return {"processes": n, "single_Bps": round(single), "parallel_Bps": round(total),
            "scaling": None if ratio is None else round(ratio, 3),
            "efficiency": None if ratio is None else round(ratio / n, 3), "seconds": seconds, "turns": turns,
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def scaling_words(s: dict[str, Any] | None) -> str:
    """One line: '2 processes give 1.97x one (0.98 per CPU)'; '' when not measured."""
    if not s or s.get("scaling") is None:
        return ""
    return f"{s['processes']} processes give {s['scaling']:.2f}x one ({s['efficiency']:.2f} per CPU)"


def _os_release() -> str:
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip('"')
    return ""


def irq_cpus(device: str, interrupts: str) -> set[int] | None:
    """The CPUs that took at least a tenth of a device's interrupts, from /proc/interrupts text:
    the rows named after it (virtio1-req.0, nvme0q1, ...). None: the device has no counted row."""
    lines = interrupts.splitlines()
    if not lines or not device:
        return None
    cpus = len(lines[0].split())
    counts = [0] * cpus
    named = re.compile(rf"{re.escape(device)}(-|q[0-9])")
    for line in lines[1:]:
        fields = line.split()
        if fields and named.match(fields[-1]):
            for i, f in enumerate(fields[1:1 + cpus]):
                counts[i] += int(f) if f.isdigit() else 0
    total = sum(counts)
    return {i for i, c in enumerate(counts) if c >= total / 10} if total else None


def disk_irq_cpus(path: str | Path) -> set[int] | None:
    """irq_cpus() of the disk holding path (None: its device or /sys not found)."""
    try:
        dev = os.stat(path).st_dev
        block = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}").resolve()
        disk = block.parent if (block / "partition").exists() else block
        name = (disk / "device").resolve().name
    except OSError:
        return None
    return irq_cpus(name, _read("/proc/interrupts"))


def cpus_off(irq: set[int] | None, online: list[int]) -> str | None:
    """fio's cpus_allowed keeping it off the one CPU that serves all of a disk's interrupts, where
    one does and others exist (None otherwise: interrupts spread over CPUs charge no one task)."""
    if irq is None or len(irq) != 1 or len(online) < 2:
        return None
    rest = [c for c in online if c not in irq]
    return ",".join(map(str, rest)) if rest else None


def scaling_at(scaling: Mapping[str, Any] | None, threads: int) -> float | None:
    """The host's throughput with `threads` CPU-bound processes against one: measured for N,
    linear between 1 (1.0) and N, flat beyond."""
    if not scaling or scaling.get("scaling") is None:
        return None
    n, s = int(scaling.get("processes") or 1), float(scaling["scaling"])
    if threads <= 1 or n <= 1:
        return 1.0 if threads <= 1 else s
    k = min(threads, n)
    return 1.0 + (s - 1.0) * (k - 1) / (n - 1)


def expected_ratio(quota: float, threads: int, scaling: Mapping[str, Any] | None) -> float | None:
    """What a quota of `quota` CPUs is expected to leave of a `threads`-thread CPU-bound load's
    unlimited throughput. Unlimited, the load gets scaling(threads) CPUs' worth of work done;
    under the quota, `quota` CPUs' worth: min(1, quota / scaling(threads)). On a host whose second
    CPU adds little (two processes 1.06x one) `cpus: 1` leaves a 2-thread load at 0.94 although
    the quota holds. None when the scaling is unknown."""
    s = scaling_at(scaling, threads)
    return None if s is None else min(1.0, quota / s)

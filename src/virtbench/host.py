"""Host facts recorded with every run: what the numbers were measured on.

Stable facts (CPU, memory, kernel) identify the host; conditions (load, governor, turbo,
busy processes) can change between runs and are stored per run, so a report can warn
when a run was measured under different conditions.
"""
from __future__ import annotations

import os
import platform
import socket
from pathlib import Path
from typing import Any

from . import proc

INTERESTING_FLAGS = ("aes", "avx", "avx2", "avx512f", "sha_ni", "vmx", "svm", "hypervisor",
                     "pmull", "sha2", "asimd", "sse4_2", "rdrand")


def _read(path: str | Path, default: str = "") -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


def cpuinfo(text: str | None = None) -> dict[str, Any]:
    """CPU model and feature flags from /proc/cpuinfo (x86 'flags', ARM 'Features')."""
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
    if not model:
        model = _read("/sys/firmware/devicetree/base/model").rstrip("\x00") or platform.processor()
    return {"cpu_model": model, "cpu_flags": sorted(f for f in flags if f in INTERESTING_FLAGS),
            "aes": "aes" in flags, "microcode": microcode}


def virtualization() -> dict[str, str]:
    """Is this host itself a VM, or inside a container? ('none' each on bare metal).

    Asked separately: a container inside a VM is both, and the VM part is what makes
    overheads measured here differ from bare metal.
    """
    vm = container = ""
    if proc.which("systemd-detect-virt"):
        vm = proc.run(["systemd-detect-virt", "--vm"], check=False, timeout=10).stdout.strip()
        container = proc.run(["systemd-detect-virt", "--container"], check=False, timeout=10).stdout.strip()
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
    }


def conditions() -> dict[str, Any]:
    """What may differ from one run to the next on the same host."""
    load1, load5, load15 = os.getloadavg()
    return {
        "governor": governor(),
        "turbo": turbo(),
        "mitigations": mitigations(),
        "loadavg": [round(load1, 2), round(load5, 2), round(load15, 2)],
        "memory_available_bytes": meminfo().get("MemAvailable", 0),
        "kernel_cmdline": _read("/proc/cmdline"),
    }


def facts() -> dict[str, Any]:
    return {**stable_facts(), **conditions()}


def _os_release() -> str:
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip('"')
    return ""

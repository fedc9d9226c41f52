"""Facts that matter on single-board computers (and say the same for every host).

ARM kernels print no CPU name: /proc/cpuinfo holds `CPU implementer` and `CPU part` codes,
decoded here from the table ARM and the vendors publish (the same one the kernel's
cputype.h and util-linux's lscpu use). Crypto extensions decide the studies' 22-41x AES
effect, so they are named alike on ARM (aes, pmull, sha1, sha2 in Features) and x86 (aes,
pclmulqdq, sha_ni). A board that throttles or is under-powered while a sample runs measures
its power supply and cooling, not the platform: `throttle_state` is read before and after
every execution. The storage kind under the scratch directory (an SD card against NVMe)
changes every disk number by an order of magnitude.
"""
from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from . import proc

IMPLEMENTERS = {0x00: "software", 0x41: "ARM", 0x42: "Broadcom", 0x43: "Cavium", 0x46: "Fujitsu", 0x48: "HiSilicon",
                0x4E: "NVIDIA", 0x50: "APM", 0x51: "Qualcomm", 0x56: "Marvell", 0x61: "Apple",
                0x69: "Intel", 0xC0: "Ampere"}
PARTS = {
    0x41: {0xB02: "ARM11 MPCore", 0xB36: "ARM1136", 0xB56: "ARM1156", 0xB76: "ARM1176",
           0xC05: "Cortex-A5", 0xC07: "Cortex-A7", 0xC08: "Cortex-A8", 0xC09: "Cortex-A9",
           0xC0D: "Cortex-A12", 0xC0E: "Cortex-A17", 0xC0F: "Cortex-A15",
           0xD01: "Cortex-A32", 0xD02: "Cortex-A34", 0xD03: "Cortex-A53", 0xD04: "Cortex-A35",
           0xD05: "Cortex-A55", 0xD06: "Cortex-A65", 0xD07: "Cortex-A57", 0xD08: "Cortex-A72",
           0xD09: "Cortex-A73", 0xD0A: "Cortex-A75", 0xD0B: "Cortex-A76", 0xD0C: "Neoverse-N1",
           0xD0D: "Cortex-A77", 0xD0E: "Cortex-A76AE", 0xD40: "Neoverse-V1", 0xD41: "Cortex-A78",
           0xD42: "Cortex-A78AE", 0xD43: "Cortex-A65AE", 0xD44: "Cortex-X1", 0xD46: "Cortex-A510",
           0xD47: "Cortex-A710", 0xD48: "Cortex-X2", 0xD49: "Neoverse-N2", 0xD4A: "Neoverse-E1",
           0xD4B: "Cortex-A78C", 0xD4C: "Cortex-X1C", 0xD4D: "Cortex-A715", 0xD4E: "Cortex-X3",
           0xD4F: "Neoverse-V2", 0xD80: "Cortex-A520", 0xD81: "Cortex-A720", 0xD82: "Cortex-X4",
           0xD84: "Neoverse-V3", 0xD85: "Cortex-X925", 0xD87: "Cortex-A725", 0xD8E: "Neoverse-N3"},
    0x42: {0x00F: "Brahma-B15", 0x100: "Brahma-B53", 0x516: "ThunderX2"},
    0x43: {0x0A0: "ThunderX", 0x0A1: "ThunderX-88XX", 0x0A2: "ThunderX-81XX", 0x0A3: "ThunderX-83XX",
           0x0AF: "ThunderX2-99xx"},
    0x46: {0x001: "A64FX"},
    0x48: {0xD01: "TaiShan-v110"},
    0x4E: {0x000: "Denver", 0x003: "Denver 2", 0x004: "Carmel"},
    0x51: {0x00F: "Scorpion", 0x02D: "Scorpion", 0x04D: "Krait", 0x06F: "Krait", 0x201: "Kryo",
           0x205: "Kryo", 0x211: "Kryo", 0x800: "Kryo 2XX Gold", 0x801: "Kryo 2XX Silver",
           0x802: "Kryo 3XX Gold", 0x803: "Kryo 3XX Silver", 0x804: "Kryo 4XX Gold",
           0x805: "Kryo 4XX Silver", 0xC00: "Falkor", 0xC01: "Saphira"},
    0x56: {0x131: "Feroceon 88FR131", 0x581: "PJ4/PJ4b", 0x584: "PJ4B-MP"},
    0x61: {0x022: "M1 Icestorm", 0x023: "M1 Firestorm", 0x024: "M1 Pro Icestorm",
           0x025: "M1 Pro Firestorm", 0x032: "M2 Blizzard", 0x033: "M2 Avalanche"},
    0xC0: {0xAC3: "Ampere-1", 0xAC4: "Ampere-1a"},
    0x00: {0x051: "QEMU max"},  # QEMU's `-cpu max` under TCG (implementer 0: reserved for software)
}
"""(implementer, part) -> core name, from the vendors' main ID register values."""

CRYPTO = ("aes", "pmull", "sha1", "sha2")
X86_CRYPTO = {"aes": "aes", "pclmulqdq": "pmull", "sha_ni": "sha2"}
"""x86 flags that give the same instructions: AES-NI, carry-less multiply (GHASH), SHA-NI."""

THROTTLE_BITS = {0: "under-voltage", 1: "arm frequency capped", 2: "throttled", 3: "soft temperature limit"}
"""`vcgencmd get_throttled`: bits 0-3 now, bits 16-19 the same since boot (Raspberry Pi docs)."""


def _int(text: str) -> int | None:
    try:
        return int(text.strip(), 0)
    except ValueError:
        return None


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text(errors="replace").strip()
    except OSError:
        return ""


def cpu_cores(text: str) -> list[str]:
    """The name of each processor block's core ('Cortex-A72'), in order; [] off ARM."""
    names: list[str] = []
    impl: int | None = None
    for line in text.splitlines() + [""]:
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "cpu implementer":
            impl = _int(value)
        elif key == "cpu part" and impl is not None:
            part = _int(value)
            table = PARTS.get(impl, {})
            vendor = IMPLEMENTERS.get(impl, f"implementer {impl:#x}")
            names.append(table.get(part or -1, f"{vendor} part {part:#05x}" if part is not None else vendor))
            impl = None
    return names


def arm_cpu_name(text: str) -> str:
    """'4x Cortex-A72', or '4x Cortex-A55 + 4x Cortex-A76' on a big.LITTLE board."""
    counts = Counter(cpu_cores(text))
    return " + ".join(f"{n}x {name}" for name, n in counts.items())


def crypto_extensions(flags: set[str]) -> dict[str, bool]:
    """aes/pmull/sha1/sha2 in hardware, from ARM Features or their x86 equivalents."""
    have = {name: name in flags for name in CRYPTO}
    for x86, same in X86_CRYPTO.items():
        if x86 in flags:
            have[same] = True
    if "sha_ni" in flags:
        have["sha1"] = True
    return have


def board_model(root: Path = Path("/")) -> str:
    """The device tree's model ('Raspberry Pi 4 Model B Rev 1.4') or compatible, else DMI's product name."""
    for rel in ("proc/device-tree/model", "sys/firmware/devicetree/base/model"):
        model = _read(root / rel).rstrip("\x00")
        if model:
            return model
    # no model (QEMU's `virt` booted with -kernel): the first compatible string, "linux,dummy-virt"
    compatible = _read(root / "proc/device-tree/compatible").split("\x00")[0]
    if compatible:
        return compatible
    vendor, product = _read(root / "sys/class/dmi/id/sys_vendor"), _read(root / "sys/class/dmi/id/product_name")
    return " ".join(p for p in (vendor, product) if p)


def parse_throttled(text: str) -> dict[str, Any] | None:
    """`throttled=0x50005` -> {'raw': 0x50005, 'now': [...], 'since_boot': [...]}."""
    value = _int(text.strip().partition("=")[2] or text)
    if value is None:
        return None
    return {"raw": value, "now": [n for b, n in THROTTLE_BITS.items() if value >> b & 1],
            "since_boot": [n for b, n in THROTTLE_BITS.items() if value >> (b + 16) & 1]}


def throttle_state(root: Path = Path("/")) -> dict[str, Any]:
    """What can slow a board down, read cheaply: firmware flags where the board has them
    (Raspberry Pi `vcgencmd get_throttled`, or the rpi_volt under-voltage alarm), the
    hottest thermal zone, and how far each cpufreq policy's clock is below its maximum."""
    state: dict[str, Any] = {}
    if root == Path("/") and proc.which("vcgencmd"):
        out = proc.run(["vcgencmd", "get_throttled"], check=False, timeout=5)
        if out.ok and (parsed := parse_throttled(out.stdout)):
            state["firmware"] = parsed
    for hw in sorted((root / "sys/class/hwmon").glob("hwmon*")):
        if _read(hw / "name") == "rpi_volt" and _read(hw / "in0_lcrit_alarm") == "1":
            state["under_voltage"] = True
    temps = [t / 1000 for z in (root / "sys/class/thermal").glob("thermal_zone*")
             if (t := _int(_read(z / "temp")) or 0)]
    if temps:
        state["temp_c"] = max(temps)
    capped = {}
    for policy in sorted((root / "sys/devices/system/cpu/cpufreq").glob("policy*")):
        cur, top = _int(_read(policy / "scaling_cur_freq")), _int(_read(policy / "cpuinfo_max_freq"))
        limit = _int(_read(policy / "scaling_max_freq"))
        if cur and top:
            capped[policy.name] = {"cur_khz": cur, "max_khz": top, "limit_khz": limit or top}
    if capped:
        state["cpufreq"] = capped
    return state


def throttled_during(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Why an execution between two throttle_state() reads was slowed by the board itself
    (empty when nothing shows it). Firmware 'since boot' bits that appear between the two
    reads catch a throttle that began and ended inside the execution."""
    why: list[str] = []
    fb, fa = before.get("firmware"), after.get("firmware")
    if fa:
        new = [n for n in fa["since_boot"] if n not in (fb or {}).get("since_boot", [])]
        for name in dict.fromkeys(new + fa["now"]):
            why.append(name)
    if after.get("under_voltage") and "under-voltage" not in why:
        why.append("under-voltage")
    for name, pol in (after.get("cpufreq") or {}).items():
        was = (before.get("cpufreq") or {}).get(name, {}).get("limit_khz", pol["max_khz"])
        if pol["limit_khz"] < was:  # a thermal or power cap lowered the clock ceiling meanwhile
            why.append(f"{name} clock limit lowered to {pol['limit_khz'] // 1000} MHz")
    return why


def throttle_attachment(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """The runner's 'throttle' attachment when the board slowed itself during an execution
    (the report flags its samples), else nothing: quiet executions store nothing extra."""
    why = throttled_during(before, after)
    if not why:
        return []
    return [{"name": "throttle", "kind": "throttle", "data": {"why": why, "before": before, "after": after}}]


STORAGE_KINDS = (("mmcblk", "SD card/eMMC"), ("nvme", "NVMe"), ("vd", "virtio"), ("xvd", "Xen virtual disk"),
                 ("zram", "compressed RAM"), ("loop", "loop file"), ("md", "software RAID"),
                 ("dm-", "device mapper"), ("sr", "optical"))


def storage_kind(path: str | Path, root: Path = Path("/")) -> dict[str, Any]:
    """What the filesystem holding `path` is stored on: SD card/eMMC, USB, NVMe, SATA/SCSI
    (rotational or not), virtio, or RAM/overlay; with the device and filesystem."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return {"kind": "unknown", "reason": str(exc)}
    fstype = _fstype(Path(path), root)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    sysdev = root / f"sys/dev/block/{major}:{minor}"
    if not sysdev.exists():
        kind = {"tmpfs": "RAM (tmpfs)", "overlay": "overlay", "9p": "9p share", "virtiofs": "virtiofs share",
                "nfs": "network (NFS)", "nfs4": "network (NFS)"}.get(fstype, f"no block device ({fstype or '?'})")
        return {"kind": kind, "device": "", "fs": fstype}
    real = sysdev.resolve()
    disk = real.parent if (real / "partition").exists() else real
    name = disk.name
    kind = next((k for prefix, k in STORAGE_KINDS if name.startswith(prefix)), "")
    if name.startswith("mmcblk"):
        card = _read(disk / "device/type")  # SD or MMC
        kind = {"SD": "SD card", "MMC": "eMMC"}.get(card, kind)
    if not kind:
        if "/usb" in str(real):
            kind = "USB"
        else:
            rotational = _read(disk / "queue/rotational")
            kind = "SATA/SCSI " + ("HDD" if rotational == "1" else "SSD" if rotational == "0" else "disk")
            if "virtio" in str(real):
                kind = "virtio-scsi"
    return {"kind": kind, "device": name, "fs": fstype}


def _fstype(path: Path, root: Path) -> str:
    best, fstype = "", ""
    try:
        target = str(path.resolve())
    except OSError:
        target = str(path)
    for line in _read(root / "proc/self/mounts").splitlines():
        parts = line.split()
        if len(parts) >= 3:
            mp = parts[1].replace("\\040", " ")
            if (target == mp or target.startswith(mp.rstrip("/") + "/")) and len(mp) >= len(best):
                best, fstype = mp, parts[2]
    return fstype


def emulated(vm: str) -> bool:
    """Whether a host's virtualization (host.virtualization()['vm']) is QEMU without KVM:
    systemd-detect-virt says 'qemu' for a TCG guest (every instruction translated), 'kvm' with
    KVM. Its numbers measure the emulator on another CPU, not the machine it imitates."""
    return vm.split(" ")[0] == "qemu"

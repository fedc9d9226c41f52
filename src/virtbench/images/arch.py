"""Architectures: which Debian ships, which this host runs natively, and how to run the others.

An image for another architecture (an arm64 or armhf board's, built on an x86 laptop) is
built by running that architecture's Debian maintainer scripts through qemu-user, which the
kernel starts by itself through a binfmt_misc registration. Without it mmdebstrap fails deep
inside dpkg, so the builder and `doctor` check the registration first and name the fix.
"""
from __future__ import annotations

import platform as pyplatform
from dataclasses import dataclass
from pathlib import Path

from .. import proc
from ..errors import InputError, UnavailableError

MACHINE_TO_DEB = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "armhf", "armv8l": "armhf",
                  "armv6l": "armel", "ppc64le": "ppc64el", "s390x": "s390x", "riscv64": "riscv64",
                  "i686": "i386", "mips64": "mips64el"}
"""`uname -m` to Debian architecture (armv8l: a 32-bit userland on a 64-bit ARM CPU)."""

RELEASE_ARCHES = {
    "bullseye": ("amd64", "arm64", "armel", "armhf", "i386", "mips64el", "mipsel", "ppc64el", "s390x"),
    "bookworm": ("amd64", "arm64", "armel", "armhf", "i386", "mips64el", "mipsel", "ppc64el", "s390x"),
    "trixie": ("amd64", "arm64", "armel", "armhf", "i386", "ppc64el", "riscv64", "s390x"),
}
"""Release architectures Debian ships per release (https://www.debian.org/releases/)."""

QEMU_USER = {"amd64": "x86_64", "i386": "i386", "arm64": "aarch64", "armhf": "arm", "armel": "arm",
             "ppc64el": "ppc64le", "s390x": "s390x", "riscv64": "riscv64", "mips64el": "mips64el",
             "mipsel": "mipsel"}
"""Debian architecture to qemu-user's name (binfmt entry `qemu-NAME`, binary `qemu-NAME-static`)."""

NATIVE_COMPAT = {"amd64": ("i386",), "arm64": ("armhf", "armel")}
"""Other architectures a CPU usually runs without emulation (32-bit ARM on most 64-bit ARM
cores with a kernel built with COMPAT, as Raspberry Pi OS's 64-bit kernel is)."""

BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")


def host_arch() -> str:
    """Debian architecture of this host: images are built for it unless asked otherwise."""
    if proc.which("dpkg"):
        return proc.run(["dpkg", "--print-architecture"], timeout=10).stdout.strip()
    machine = pyplatform.machine()
    if machine not in MACHINE_TO_DEB:
        raise UnavailableError(f"unsupported machine architecture {machine!r}")
    return MACHINE_TO_DEB[machine]


@dataclass(frozen=True)
class Emulation:
    """How this host runs another architecture's programs: natively, or qemu-user via binfmt."""

    arch: str
    native: bool
    ok: bool
    reason: str
    fix: str = ""


def check_release_arch(release: str, arch: str) -> None:
    """Refuse an architecture the release does not ship (before anything is downloaded)."""
    shipped = RELEASE_ARCHES.get(release)
    if shipped is not None and arch not in shipped:
        raise InputError(f"Debian {release} does not ship architecture {arch!r}",
                         f"use one of {', '.join(shipped)}")


def emulation(arch: str, binfmt_dir: Path = BINFMT_DIR, native: str | None = None) -> Emulation:
    """Can this host run `arch`'s programs (what a cross-build's maintainer scripts need)?"""
    native = native or host_arch()
    if arch == native:
        return Emulation(arch, True, True, "this host's own architecture")
    qname = QEMU_USER.get(arch, arch)
    entry = binfmt_dir / f"qemu-{qname}"
    install = "apt-get install qemu-user-static binfmt-support"
    enable = f"update-binfmts --enable qemu-{qname}"
    if not (binfmt_dir / "status").exists():
        enable = f"mount -t binfmt_misc binfmt_misc {binfmt_dir} && {enable}"
        if arch in NATIVE_COMPAT.get(native, ()):
            return Emulation(arch, True, True, f"{native} CPUs usually run {arch} programs natively")
        return Emulation(arch, False, False, f"binfmt_misc is not mounted at {binfmt_dir}, so the kernel "
                         f"cannot start {arch} programs through qemu-user", f"{install}; {enable}")
    try:
        text = entry.read_text()
    except OSError:
        text = ""
    if text.startswith("enabled"):
        interp = next((ln.split(None, 1)[1] for ln in text.splitlines() if ln.startswith("interpreter ")), "?")
        flags = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("flags:")), "")
        if not Path(interp).exists() and "F" not in flags:
            return Emulation(arch, False, False, f"binfmt entry qemu-{qname} points at missing {interp}",
                             install)
        if not proc.which("arch-test"):  # mmdebstrap's own check for foreign architectures
            return Emulation(arch, False, False, "arch-test (which mmdebstrap needs for foreign "
                             "architectures) is not installed", "apt-get install arch-test")
        return Emulation(arch, False, True, f"qemu-user via binfmt_misc ({interp}, flags {flags or '-'})")
    if arch in NATIVE_COMPAT.get(native, ()):
        return Emulation(arch, True, True, f"{native} CPUs usually run {arch} programs natively")
    if text:
        return Emulation(arch, False, False, f"binfmt entry qemu-{qname} is disabled", enable)
    why = ("qemu-user-static is not installed" if not proc.which(f"qemu-{qname}-static")
           else f"no binfmt_misc entry qemu-{qname} is registered")
    return Emulation(arch, False, False, f"{why}: this host cannot run {arch} programs", f"{install}; {enable}")


def require_buildable(release: str, arch: str) -> Emulation:
    """Everything a build for `arch` needs, checked before mmdebstrap starts (exit 2 if not)."""
    check_release_arch(release, arch)
    emu = emulation(arch)
    if not emu.ok:
        raise InputError(f"cannot build an image for {arch} here: {emu.reason}", emu.fix)
    return emu


BOARD_ARCHES = ("amd64", "arm64", "armhf")
"""What `doctor` reports on: the studies' boards (arm64 Pi 4/5, armhf Pi 2) and x86."""


def cross_build_report() -> list[dict[str, object]]:
    """For doctor: can this host build each board architecture's image, and if not, the fix."""
    native = host_arch()
    out: list[dict[str, object]] = []
    for arch in BOARD_ARCHES:
        if arch == native:
            continue
        emu = emulation(arch, native=native)
        out.append({"arch": arch, "ok": emu.ok, "native": emu.native, "reason": emu.reason, "fix": emu.fix})
    return out

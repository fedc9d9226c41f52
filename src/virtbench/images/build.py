"""Build the guest image: one Debian root filesystem, made by mmdebstrap from Debian packages.

The image is cached under a hash of its recipe (release, architecture, variant, packages),
so every platform of every campaign on this host runs byte-identical binaries until the
recipe changes. The exact installed package versions are recorded in the manifest.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator

from .. import proc
from ..errors import CommandError, InputError, UnavailableError
from ..filemodes import private_dirs
from .arch import check_release_arch, host_arch, require_buildable
from .image import Image

DEFAULT_CACHE = Path("/var/cache/virtbench/images")
RELEASES = ("bookworm", "trixie", "bullseye")
BUILD_TIMEOUT = 1800
EMULATED_BUILD_TIMEOUT = 4 * 3600
"""Every maintainer script of another architecture runs under qemu-user: a kernel's initramfs
alone took over 15 minutes on a loaded 2-core x86 host."""
BASE_PACKAGES = ("ca-certificates", "procps", "iproute2")
"""In every image: tools the harness itself uses inside instances (ps, ip/ss for addresses and ports)."""
INITRD_ONCE_HOOK = '[ ! -x "$1/usr/sbin/update-initramfs" ] || chroot "$1" update-initramfs -c -k all'
"""An image with a kernel gets its initrd made once, after every package is installed: Debian's
kernel postinst makes one and the update-initramfs trigger that udev and kmod pull makes it
again, each run of it under qemu-user for another architecture minutes long (two thirds of an
emulated arm64 board's build). INITRD=No (initramfs-tools' own switch) skips the first; the
trigger then finds no initrd to update; this customize hook makes the one initrd, with the same
initramfs-tools configuration, once everything it packs is there."""
INITRD_LIST_CONF = "etc/initramfs-tools/conf.d/virtbench-modules"
"""Where a recipe with initrd_modules sets initramfs-tools' MODULES=list (its conf.d overrides
initramfs.conf); the modules themselves go to etc/initramfs-tools/modules."""
_MODULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")

MIRROR_SCHEMES = ("http", "https", "file")
_URI = re.compile(r"[A-Za-z0-9._~:/?#@%+,=\[\]-]+")
"""A URI's characters, without the shell's: a mirror never needs ; $ ` | & < > ( ) quotes or blanks."""
_DEB_LINE = re.compile(r"(deb|deb-src)(?: \[([A-Za-z0-9._/:,=+ -]*)\])? (\S+) (\S+)((?: [A-Za-z0-9._/+-]+)*)")
MIRROR_FIX = "give an http(s):// or file:// URL, or a line `deb [OPTIONS] URI SUITE COMPONENT...`"


def check_mirror(value: str) -> str:
    """A mirror as mmdebstrap takes it and nothing else: a URI, or one `deb` line. Anything
    else on its command line would be an option (--setup-hook=CMD runs CMD as root), a file
    whose content it pastes into the image, or standard input ("-")."""
    if not isinstance(value, str) or not value or len(value) > 1000:
        raise ValueError(f"a mirror must be a non-empty line of at most 1000 characters; {MIRROR_FIX}")
    shown = repr(value[:60] + ("..." if len(value) > 60 else ""))
    if re.search(r"[\x00-\x1f\x7f]", value):
        raise ValueError(f"mirror {shown}: one line without control characters; {MIRROR_FIX}")
    line = _DEB_LINE.fullmatch(value)
    uri = line.group(3) if line else value
    parts = urlsplit(uri) if _URI.fullmatch(uri) else None
    if parts is None or parts.scheme not in MIRROR_SCHEMES or not (parts.netloc or parts.scheme == "file") \
            or not parts.path.startswith("/") and parts.scheme == "file":
        raise ValueError(f"mirror {shown} is not a mirror; {MIRROR_FIX}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"mirror {uri.split('://')[0]}://...@{parts.hostname}: a password in a mirror URL would be "
                         f"stored with the image and the run; give a mirror that needs none (or a local copy)")
    if line and (line.group(4).startswith("-") or not re.fullmatch(r"[A-Za-z0-9._/+-]+", line.group(4))):
        raise ValueError(f"mirror {shown}: the suite is not a Debian suite name; {MIRROR_FIX}")
    return value


Mirror = Annotated[str, AfterValidator(check_mirror)]
"""A campaign's `image.mirrors` entry: refused when the campaign is parsed, not when mmdebstrap starts."""


@dataclass(frozen=True)
class Recipe:
    release: str
    arch: str
    profile: str
    packages: tuple[str, ...]
    variant: str = "minbase"
    mirrors: tuple[str, ...] = ()
    """apt source lines instead of mmdebstrap's default (the release, -updates and -security from
    deb.debian.org): a local mirror, or the suites of a mirror that is mid-sync. Part of the hash."""
    initrd_modules: tuple[str, ...] = ()
    """For an image with a kernel: the only modules its initrd holds (with what they depend on),
    initramfs-tools' MODULES=list, instead of its default MODULES=most (every disk, network and
    bus driver of the kernel, hundreds: each copied by a shell function whose programs, under
    qemu-user, take about a second a module). Part of the hash when set."""

    def __post_init__(self) -> None:
        for module in self.initrd_modules:
            if not _MODULE.fullmatch(module):
                raise InputError(f"{module!r} is not a kernel module name", "give names such as virtio_blk")
        for mirror in self.mirrors:  # `image build --mirror`, a campaign, a cached image's manifest
            try:
                check_mirror(mirror)
            except ValueError as exc:
                raise InputError(str(exc).split("; ")[0], MIRROR_FIX) from None

    def hash(self) -> str:
        fields: dict[str, object] = {"release": self.release, "arch": self.arch, "variant": self.variant,
                                     "packages": sorted(set(self.packages)), "format": 1}
        if self.mirrors:  # only then: every existing image keeps its hash
            fields["mirrors"] = list(self.mirrors)
        if self.initrd_modules:  # likewise
            fields["initrd_modules"] = sorted(set(self.initrd_modules))
        doc = json.dumps(fields, sort_keys=True)
        return hashlib.sha256(doc.encode()).hexdigest()


def has_kernel_package(recipe: Recipe) -> bool:
    """Whether the image gets a kernel (a VM's or a board's image): `linux-image-*` asked for."""
    return any(p.startswith("linux-image-") for p in recipe.packages)


def initrd_hook(recipe: Recipe) -> str:
    """The customize hook that makes the initrd of an image with a kernel (INITRD_ONCE_HOOK),
    with MODULES=list and the recipe's initrd_modules configured first when it names them."""
    if not recipe.initrd_modules:
        return INITRD_ONCE_HOOK
    configure = (f'printf "MODULES=list\\n" > "$1/{INITRD_LIST_CONF}" && '
                 f'printf "%s\\n" {" ".join(recipe.initrd_modules)} >> "$1/etc/initramfs-tools/modules"')
    return f'[ ! -x "$1/usr/sbin/update-initramfs" ] || {{ {configure} && chroot "$1" update-initramfs -c -k all; }}'


def recipe_for(profile: str, release: str = "bookworm", arch: str | None = None,
               extra_packages: Iterable[str] = (), mirrors: Iterable[str] = ()) -> Recipe:
    """The recipe of a profile: the packages of its benchmarks plus the harness's own."""
    from .profiles import profile_packages

    if release not in RELEASES:
        raise InputError(f"unknown Debian release {release!r}", f"use one of {', '.join(RELEASES)}")
    packages = sorted(set(BASE_PACKAGES) | set(profile_packages(profile)) | set(extra_packages))
    arch = arch or host_arch()
    check_release_arch(release, arch)
    return Recipe(release=release, arch=arch, profile=profile, packages=tuple(packages), mirrors=tuple(mirrors))


def close_cache(cache: Path = DEFAULT_CACHE, *, create: bool = False) -> None:
    """The image cache 0700 (and virtbench's cache directory above the default one): its root
    filesystems hold setuid-root binaries no other user may reach. At start it closes what an
    older version left open; a build creates it so."""
    private_dirs(*((cache.parent,) if cache == DEFAULT_CACHE else ()), cache, create=create)


def cached(recipe: Recipe, cache: Path = DEFAULT_CACHE) -> Image | None:
    root = cache / recipe.hash()[:16]
    if (root / "manifest.json").is_file() and (root / "rootfs").is_dir():
        return Image.load(root)
    return None


def build(recipe: Recipe, cache: Path = DEFAULT_CACHE, *, force: bool = False,
          log=print) -> Image:
    """Return the cached image of this recipe, building it first if needed."""
    if not force and (image := cached(recipe, cache)) is not None:
        return image
    _refuse_if_mounted(cache / recipe.hash()[:16], recipe.hash()[:12], "rebuilding")
    if not proc.which("mmdebstrap"):
        raise UnavailableError("mmdebstrap is not installed", "apt-get install mmdebstrap")
    emulated = require_buildable(recipe.release, recipe.arch)
    close_cache(cache, create=True)
    digest = recipe.hash()
    root = cache / digest[:16]
    with open(cache / f".{digest[:16]}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another virtbench may be building the same image
        if not force and (image := cached(recipe, cache)) is not None:
            return image
        tmp = cache / f".{digest[:16]}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        (tmp / "rootfs").mkdir(parents=True)
        started = time.monotonic()
        how = "" if emulated.native else f" on {host_arch()}, through {emulated.reason}"
        log(f"building image {digest[:12]} ({recipe.release}/{recipe.arch}, profile {recipe.profile}){how}: "
            f"{' '.join(recipe.packages)}")
        options = ["mmdebstrap", f"--variant={recipe.variant}", f"--architectures={recipe.arch}",
                   f"--include={','.join(recipe.packages)}"]
        work = tmp / "work"  # mmdebstrap's chroot goes here (TMPDIR), so a killed build's mounts are found
        work.mkdir()
        env = {**os.environ, "TMPDIR": str(work)}
        if has_kernel_package(recipe):
            options.append(f"--customize-hook={initrd_hook(recipe)}")
            env["INITRD"] = "No"
        # "--": SUITE, TARGET and the MIRRORs are never options, whatever they say
        positional = ["--", recipe.release, str(tmp / "rootfs.tar"), *recipe.mirrors]
        try:
            proc.run([*options, "--quiet", *positional],
                     timeout=BUILD_TIMEOUT if emulated.native else EMULATED_BUILD_TIMEOUT, env=env)
        except CommandError as exc:
            if "apt-get update" in exc.stderr:  # --quiet hid apt's reason: ask again, verbosely and quickly
                again = proc.run([*options, "--simulate", *positional], timeout=600, check=False, env=env)
                _mirror_mid_sync(f"{again.stderr}\n{again.stdout}", recipe)
            raise
        finally:
            _unmount_under(work)
        proc.run(["tar", "--numeric-owner", "-xpf", str(tmp / "rootfs.tar"), "-C", str(tmp / "rootfs")],
                 timeout=600)
        (tmp / "rootfs/var/tmp/virtbench").mkdir(parents=True, exist_ok=True)  # scratch mount point
        installed = _installed_packages(tmp / "rootfs")
        manifest = {
            "recipe_hash": digest,
            "release": recipe.release,
            "arch": recipe.arch,
            "variant": recipe.variant,
            "profile": recipe.profile,
            "packages": list(recipe.packages),
            "tar_sha256": sha256_file(tmp / "rootfs.tar"),
            "installed": installed,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "build_seconds": round(time.monotonic() - started, 1),
            "builder": proc.run(["mmdebstrap", "--version"], timeout=30).stdout.strip(),
            "built_on": host_arch(),
            "mirrors": list(recipe.mirrors) or "mmdebstrap default",
            "emulated_build": not emulated.native,
        }
        if recipe.initrd_modules:
            manifest["initrd_modules"] = list(recipe.initrd_modules)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
        if root.exists():
            shutil.rmtree(root)
        tmp.rename(root)
        log(f"image {digest[:12]} built in {manifest['build_seconds']} s")
        return Image.load(root)


def _mirror_mid_sync(output: str, recipe: Recipe) -> None:
    """A mirror serving an index of another size than its Release file says (apt: "Mirror sync
    in progress?") is not the user's fault and not virtbench's: say so, with the way around it."""
    line = next((ln.strip() for ln in output.splitlines() if "Mirror sync in progress" in ln), "")
    if line:
        r = recipe.release
        raise InputError(f"the Debian mirror is mid-sync for {recipe.arch}: {line[:160]}",
                         f"retry later, or build without the failing suite: --mirror 'deb http://deb.debian.org/"
                         f"debian {r} main' --mirror 'deb http://deb.debian.org/debian {r}-updates main'") from None


def _unmount_under(path: Path) -> None:
    """Unmount what a killed mmdebstrap left mounted in its chroot (/proc, /sys, /dev/pts...),
    deepest first, then remove the chroot: nothing stays mounted after a failed build."""
    text = Path("/proc/self/mountinfo").read_text()
    points = [line.split()[4] for line in text.splitlines() if line.split()[4].startswith(f"{path}/")]
    for mp in sorted(points, key=len, reverse=True):
        proc.run(["umount", "-l", mp], timeout=60, check=False)
    shutil.rmtree(path, ignore_errors=True)


def mounts_using(root: Path) -> list[str]:
    """Mount points whose source or options name this image directory (bind mounts of the
    rootfs show it as their root; overlays as lowerdir)."""
    text = Path("/proc/self/mountinfo").read_text()
    return [line.split()[4] for line in text.splitlines() if str(root) in line]


def _refuse_if_mounted(root: Path, short: str, doing: str) -> None:
    in_use = mounts_using(root)
    if in_use:
        raise InputError(f"image {short} is in use by {len(in_use)} mounts (e.g. {in_use[0]}); "
                         f"{doing} it would delete files under running instances",
                         "stop the runs using it, or remove leftovers with `virtbench cleanup`")


def remove(image: Image) -> None:
    """Delete a cached image; refused while any instance mounts it (its files would vanish)."""
    _refuse_if_mounted(image.root, image.short, "removing")
    shutil.rmtree(image.root)


def list_images(cache: Path = DEFAULT_CACHE) -> list[Image]:
    if not cache.is_dir():
        return []
    return [Image.load(p) for p in sorted(cache.iterdir()) if (p / "manifest.json").is_file()]


def _installed_packages(rootfs: Path) -> dict[str, str]:
    out = proc.run(["dpkg-query", f"--admindir={rootfs / 'var/lib/dpkg'}", "-W",
                    "-f", "${Package}\t${Version}\n"], timeout=60).stdout
    return dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

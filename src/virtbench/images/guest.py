"""Per-platform guest images: a Debian release, a tiny busybox image, or a brought rootfs.

Study 000 compares Debian 12, Debian 10, Fedora, Alpine and Ubuntu containers in one
experiment, and Debian 10's OpenSSL ignores the CPU's AES instructions: the guest's OS is a
variable. A platform entry may therefore carry its own `image:`

- `{release: bullseye}`: that Debian release built by mmdebstrap (like the campaign image);
- `{release: busybox}`: a tiny image: busybox-static plus only the workload's tools and the
  shared libraries they load, copied from the Debian image (a few MiB, like Alpine);
- `{rootfs: FILE}`: a root filesystem archive the user brings: an LXC/Proxmox template
  (`.tar`, `.tar.gz`, `.tar.xz`, `.tar.zst`) or a `docker save` archive (layers applied in
  order, whiteouts honoured). It is unpacked once into the cache, keyed by its hash.

Every image is checked for the workload's tool before anything starts (`tool_version`:
the tool's version command run in a chroot of the image), so a brought image without
`openssl` is refused with one line naming the tool and the image, and the report names each
platform's image and its tool version.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .. import proc
from ..errors import CommandError, InputError, UnavailableError
from . import build as debian
from .image import Image

BUSYBOX = "busybox"
BUSYBOX_BINARY = Path("/bin/busybox")
"""busybox-static's binary on the host (Debian package busybox-static)."""
EXEC_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class PlatformImage(BaseModel):
    """A platform's own `image:`: exactly one of release or rootfs."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    release: str | None = Field(None, description=f"a Debian release ({', '.join(debian.RELEASES)}) or busybox")
    rootfs: str | None = Field(None, description="a root filesystem archive: LXC template .tar.xz/.tar.zst or docker save")

    @model_validator(mode="after")
    def _one(self) -> PlatformImage:
        if (self.release is None) == (self.rootfs is None):
            raise ValueError("image: give exactly one of release (e.g. bullseye, busybox) or rootfs (an archive)")
        if self.release is not None and self.release not in (*debian.RELEASES, BUSYBOX):
            raise ValueError(f"image.release: unknown release {self.release!r}; use one of "
                             f"{', '.join((*debian.RELEASES, BUSYBOX))}")
        if self.rootfs is not None and not Path(self.rootfs).is_file():
            raise ValueError(f"image.rootfs: {self.rootfs!r} is not a file; give the path of a rootfs archive")
        return self

    def describe(self) -> str:
        return self.release if self.release else f"rootfs {Path(self.rootfs or '').name}"


def resolve(spec: PlatformImage, packages: tuple[str, ...], tools: tuple[str, ...],
            cache: Path = debian.DEFAULT_CACHE, log: Callable[[str], None] = print) -> Image:
    """The image of a platform entry (built or unpacked once, then cached)."""
    if spec.rootfs is not None:
        return brought(Path(spec.rootfs), cache, log)
    release = spec.release or "bookworm"
    recipe = debian.Recipe(release="bookworm" if release == BUSYBOX else release, arch=debian.host_arch(),
                           profile="density", packages=tuple(sorted(set(debian.BASE_PACKAGES) | set(packages))))
    image = debian.build(recipe, cache, log=log)
    return tiny(image, tools, cache, log) if release == BUSYBOX else image


def tool_version(image: Image, argv: list[str]) -> str:
    """Run a tool's version command in a chroot of the image; InputError when it cannot run."""
    r: proc.Result | None
    try:
        r = proc.run(["chroot", str(image.rootfs), "/usr/bin/env", "-i", f"PATH={EXEC_PATH}", *argv], timeout=60,
                     check=False)
    except CommandError as exc:
        r = None
        why = str(exc)
    else:
        why = "".join((r.stderr or r.stdout).strip().splitlines()[-1:]) if not r.ok else ""
    if r is None or not r.ok:
        raise InputError(f"image {describe(image)} lacks the workload's tool {argv[0]!r} ({why})",
                         "use an image with the tool installed, or another workload")
    return r.stdout.strip().splitlines()[0] if r.stdout.strip() else "?"


def describe(image: Image) -> str:
    name = image.manifest.get("os_release") or image.release
    return f"{name} ({image.short})"


# -- the tiny busybox image ---------------------------------------------------------------------
def tiny(base: Image, tools: tuple[str, ...], cache: Path, log: Callable[[str], None]) -> Image:
    """busybox-static plus the tools (and their libraries) copied from a Debian image."""
    if not BUSYBOX_BINARY.is_file():
        raise UnavailableError("busybox-static is not installed (the tiny image's base)",
                               "apt-get install busybox-static")
    tools = tuple(sorted(set(tools) | {"env"}))  # coreutils env: the harness runs `env -i -C /` inside
    digest = hashlib.sha256(json.dumps({"base": base.recipe_hash, "tools": tools, "busybox": debian.sha256_file(BUSYBOX_BINARY),
                                        "format": 2}).encode()).hexdigest()
    root = cache / f"busybox-{digest[:16]}"
    if (root / "manifest.json").is_file():
        return Image.load(root)
    started = time.monotonic()
    tmp = cache / f".busybox-{digest[:16]}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    fs = tmp / "rootfs"
    for d in ("bin", "sbin", "usr/bin", "usr/sbin", "etc", "proc", "sys", "dev", "tmp", "root", "var/tmp/virtbench",
              "run"):
        (fs / d).mkdir(parents=True, exist_ok=True)
    shutil.copy2(BUSYBOX_BINARY, fs / "bin/busybox")
    for tool in tools:  # first: the tools win over busybox applets of the same name (env)
        _copy_tool(base.rootfs, fs, tool)
    applets = proc.run([str(BUSYBOX_BINARY), "--list-full"], timeout=30).stdout.split()
    for applet in applets:
        link = fs / applet
        if not link.exists() and not link.is_symlink():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to("/bin/busybox")
    for extra in ("usr/lib/ssl", "etc/ssl"):  # openssl's configuration (and its certificate dir)
        if (base.rootfs / extra).is_dir():
            shutil.copytree(base.rootfs / extra, fs / extra, symlinks=True, dirs_exist_ok=True)
    (fs / "etc/inittab").write_text("::sysinit:/bin/true\n")  # busybox init: nothing to spawn
    (fs / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (fs / "etc/group").write_text("root:x:0:\n")
    (fs / "etc/os-release").write_text('NAME="virtbench busybox"\nPRETTY_NAME="busybox (virtbench tiny image)"\n')
    proc.run(["tar", "--numeric-owner", "-C", str(fs), "-cf", str(tmp / "rootfs.tar"), "."], timeout=600)
    version = proc.run([str(BUSYBOX_BINARY)], timeout=30, check=False).stdout.splitlines()[:1]
    _write_manifest(tmp, digest, release=BUSYBOX, profile="tiny", packages=("busybox-static", *tools),
                    extra={"os_release": "busybox (virtbench tiny image)", "base": base.recipe_hash,
                           "installed": {"busybox": version[0] if version else "?"},
                           "build_seconds": round(time.monotonic() - started, 1)})
    tmp.rename(root)
    log(f"tiny busybox image {digest[:12]} made from {base.short} with {', '.join(tools)}")
    return Image.load(root)


def _copy_tool(src_root: Path, dst_root: Path, tool: str) -> None:
    """Copy a tool and the shared libraries its loader resolves (ld.so --list, in a chroot)."""
    path = next((d / tool for d in (Path("usr/bin"), Path("bin"), Path("usr/sbin"), Path("sbin"))
                 if (src_root / d / tool).exists()), None)
    if path is None:
        raise InputError(f"the Debian image has no {tool!r} to copy into the busybox image")
    _copy(src_root, dst_root, path)
    loader = next((p for p in ("lib64/ld-linux-x86-64.so.2", "lib/ld-linux-aarch64.so.1", "lib/ld-linux-armhf.so.3")
                   if (src_root / p).exists()), None)
    if loader is None:
        return
    _copy(src_root, dst_root, Path(loader))
    out = proc.run(["chroot", str(src_root), f"/{loader}", "--list", f"/{path}"], timeout=60).stdout
    for line in out.splitlines():
        parts = line.split("=>")
        lib = (parts[1] if len(parts) > 1 else parts[0]).strip().split(" ")[0]
        if lib.startswith("/"):
            _copy(src_root, dst_root, Path(lib.lstrip("/")))
    modules = next(iter(src_root.glob("usr/lib/*/ossl-modules")), None)
    if tool == "openssl" and modules is not None:  # OpenSSL 3 loads its legacy provider from here
        shutil.copytree(modules, dst_root / modules.relative_to(src_root), symlinks=True, dirs_exist_ok=True)


def _copy(src_root: Path, dst_root: Path, rel: Path) -> None:
    """Copy one file, following symlinks to their target but keeping the link too."""
    src, dst = src_root / rel, dst_root / rel
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_symlink():
        target = Path(os.readlink(src))
        if not dst.exists() and not dst.is_symlink():
            dst.symlink_to(target)
        resolved = (src.parent / target) if not target.is_absolute() else src_root / target.relative_to("/")
        _copy(src_root, dst_root, Path(os.path.normpath(resolved)).relative_to(src_root))
    elif not dst.exists():
        shutil.copy2(src, dst)


# -- a brought root filesystem archive -----------------------------------------------------------
def brought(archive: Path, cache: Path = debian.DEFAULT_CACHE, log: Callable[[str], None] = print) -> Image:
    """Unpack a user's rootfs archive (LXC template or `docker save`) once into the cache."""
    digest = debian.sha256_file(archive)
    root = cache / f"rootfs-{digest[:16]}"
    if (root / "manifest.json").is_file():
        return Image.load(root)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / f".rootfs-{digest[:16]}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    fs = tmp / "rootfs"
    fs.mkdir(parents=True)
    started = time.monotonic()
    try:
        names = _members(archive)
        if "manifest.json" in names and any(n.endswith(".tar") or n.startswith("blobs/") for n in names):
            kind = "docker save"
            _unpack_docker_save(archive, tmp, fs)
        else:
            kind = "rootfs tarball"
            _untar(archive, fs)
        if not (fs / "etc").is_dir() or not any((fs / p).exists() or (fs / p).is_symlink()
                                                for p in ("bin/sh", "usr/bin/sh")):
            raise InputError(f"{archive} is not a root filesystem archive (no /etc and /bin/sh in it)",
                             "give an LXC template (.tar.xz, .tar.zst) or a `docker save` archive")
        (fs / "var/tmp/virtbench").mkdir(parents=True, exist_ok=True)
        proc.run(["tar", "--numeric-owner", "-C", str(fs), "-cf", str(tmp / "rootfs.tar"), "."], timeout=1800)
        _write_manifest(tmp, digest, release=f"rootfs:{archive.name}", profile="brought", packages=(),
                        extra={"os_release": _os_release(fs) or archive.name, "archive": str(archive),
                               "archive_kind": kind, "archive_sha256": digest,
                               "build_seconds": round(time.monotonic() - started, 1)})
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    tmp.rename(root)
    log(f"unpacked {kind} {archive.name} as image {digest[:12]}")
    return Image.load(root)


def _members(archive: Path) -> list[str]:
    try:
        out = proc.run(["tar", "--force-local", "-tf", str(archive)], timeout=600).stdout
    except CommandError as exc:
        raise InputError(f"{archive} is not a tar archive tar can read ({exc.stderr.strip()[:200]})",
                         "give an LXC template (.tar.xz, .tar.zst, .tar.gz) or a `docker save` archive") from None
    return [n.removeprefix("./") for n in out.splitlines()]


def _untar(archive: Path, into: Path) -> None:
    """GNU tar as root keeps owners and modes; it refuses members reaching outside `into`.
    --force-local: an archive named host:file is a file here, never a remote tape over rsh."""
    proc.run(["tar", "--force-local", "--numeric-owner", "-xpf", str(archive), "-C", str(into)], timeout=1800)


def _unpack_docker_save(archive: Path, tmp: Path, fs: Path) -> None:
    """Apply the image's layers in order: whiteouts (.wh.NAME) delete, opaque markers clear."""
    saved = tmp / "saved"
    saved.mkdir()
    _untar(archive, saved)
    manifest = json.loads((saved / "manifest.json").read_text())
    if not isinstance(manifest, list) or not manifest or "Layers" not in manifest[0]:
        raise InputError(f"{archive}: manifest.json is not a docker save manifest")
    for layer in manifest[0]["Layers"]:
        if not isinstance(layer, str) or not (saved / layer).resolve().is_relative_to(saved.resolve()):
            raise InputError(f"{archive}: manifest.json names a layer outside the archive",
                             "give a `docker save` archive as docker writes it")
        members = _members(saved / layer)
        for name in members:
            base = os.path.basename(name.rstrip("/"))
            parent = fs / os.path.dirname(name.rstrip("/"))
            if base == ".wh..wh..opq" and parent.is_dir():
                for child in parent.iterdir():
                    shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
            elif base.startswith(".wh."):
                victim = parent / base.removeprefix(".wh.")
                if victim.is_dir() and not victim.is_symlink():
                    shutil.rmtree(victim)
                elif victim.exists() or victim.is_symlink():
                    victim.unlink()
        _untar(saved / layer, fs)
        for name in members:
            if os.path.basename(name.rstrip("/")).startswith(".wh."):
                (fs / name).unlink(missing_ok=True)
    shutil.rmtree(saved)


def _os_release(fs: Path) -> str | None:
    for rel in ("etc/os-release", "usr/lib/os-release"):
        p = fs / rel
        if p.is_file() and not p.is_symlink():
            for line in p.read_text(errors="replace").splitlines():
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    return None


def _write_manifest(tmp: Path, digest: str, *, release: str, profile: str, packages: tuple[str, ...],
                    extra: dict) -> None:
    manifest = {"recipe_hash": digest, "release": release, "arch": debian.host_arch(), "variant": profile,
                "profile": profile, "packages": list(packages), "tar_sha256": debian.sha256_file(tmp / "rootfs.tar"),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **extra}
    manifest.setdefault("installed", {})
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))

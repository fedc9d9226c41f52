"""Wheels for a host's platform that the package index does not have, built from their sdists.

Some of virtbench's dependencies publish no wheel for a board's platform (hdrhistogram has
none for aarch64 or armv7l, PyYAML none for armv7l): shipping then builds one from the
pinned version's sdist, on this controller, inside a throw-away Debian chroot of the host's
architecture and Python version (mmdebstrap, whose programs run under qemu-user through
binfmt_misc like the image builder's). Built wheels are cached by content: the sdist's
sha256, the architecture and the Python version; the next host of that platform gets them
without a build. mmdebstrap sets up and removes the chroot's mounts itself.

Two dependencies are not built this way: numpy and scipy need a Fortran and BLAS toolchain
and take hours under emulation. Where the index has no wheel for them (armv7l), the host's
own Debian packages (python3-numpy, python3-scipy) are used through a virtual environment
with system site packages, if their versions are ones the remote side runs with.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import proc
from ..errors import InputError
from ..images.arch import require_buildable

BUILD_PACKAGES = ("ca-certificates", "python3-dev", "python3-venv", "python3-pip", "gcc", "libc6-dev")
"""The chroot: a C compiler and Python's headers, which every sdist of a C extension needs."""

PYTHON_RELEASE = {"3.11": "bookworm", "3.13": "trixie", "3.9": "bullseye"}
"""The Debian release whose python3 is this version: the chroot must build for the host's
Python ABI, and a release's glibc is no newer than a host running that Python's release."""

SYSTEM_ONLY = {"numpy": "1.24", "scipy": "1.10"}
"""Dependencies never built from source here (Fortran, BLAS, meson: hours under qemu-user), and
the oldest version of the host's Debian package the remote side runs with: it runs the
benchmarks and adaptive repetition's stopping rule (numpy arrays; the t quantile is
analysis/special.py's own), which Debian bookworm's numpy 1.24 and scipy 1.10 satisfy
(tests/unit/test_adaptive.py and test_verdict.py pass with numpy 1.24.2 and scipy 1.10.1);
the report's statistics run on the controller with its own versions."""

BUILD_TIMEOUT = 3 * 3600

SCRIPT = """set -u
mkdir -p /tmp/vb-build/wheels
exec >/tmp/vb-build/wheels/build.log 2>&1
# the controller's trusted certificates (a private index's or a proxy's CA); its find-links are its own paths
# (as the chroot's own bundle too: setuptools' setup_requires fetches run a pip of their own)
if [ -f /tmp/vb-build/ca.crt ]; then
  cp /tmp/vb-build/ca.crt /etc/ssl/certs/ca-certificates.crt
  export PIP_CERT=/etc/ssl/certs/ca-certificates.crt SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
else
  unset PIP_CERT
fi
unset PIP_FIND_LINKS
python3 -m venv /tmp/vb-build/venv || exit 0
for s in /tmp/vb-build/sdists/*; do
  echo "building $s"
  /tmp/vb-build/venv/bin/pip wheel --disable-pip-version-check --no-deps --use-pep517 -w /tmp/vb-build/wheels "$s" \\
    || echo "FAILED: $s"
done
"""
"""Runs inside the chroot; it interpolates nothing (the sdists are whatever was copied in). A
failure still lets the hooks copy the log out, so the error names its cause."""

CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")

SDIST_NAME = re.compile(r"^[A-Za-z0-9_.-]+\.(tar\.gz|zip)$")


@dataclass(frozen=True)
class Built:
    """A wheel built from an sdist, and how (reported with the shipment)."""

    requirement: str
    wheel: Path
    sdist_sha256: str
    how: str


def sdist(requirement: str, cache: Path) -> Path:
    """The pinned version's source distribution, from the package index (cached here)."""
    cache.mkdir(parents=True, exist_ok=True)
    name = requirement.split("==")[0]
    have = [p for p in cache.iterdir() if _matches(p.name, requirement)]
    if have:
        return have[0]
    res = proc.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                    "--no-binary", ":all:", "--no-build-isolation", "-d", str(cache), requirement],
                   timeout=900, check=False)
    have = [p for p in cache.iterdir() if _matches(p.name, requirement)]
    if not res.ok or not have:
        raise InputError(f"{name} has no wheel for the host's platform and its sdist could not be fetched: "
                         f"{' '.join(res.stderr.split())[-200:]}",
                         "give the controller access to the package index, or install virtbench on the host")
    return have[0]


def _matches(filename: str, requirement: str) -> bool:
    name, version = requirement.split("==")
    norm = re.sub(r"[-_.]+", "_", name).lower()
    stem = re.sub(r"[-_.]+", "_", filename).lower()
    return bool(SDIST_NAME.match(filename)) and stem.startswith(f"{norm}_{version.replace('.', '_')}_")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cache_dir(root: Path, digest: str, deb_arch: str, python: str) -> Path:
    """Where the wheel of one sdist for one platform is kept: named by what determines it."""
    return root / f"{digest[:16]}-cp{python.replace('.', '')}-{deb_arch}"


def build_wheels(requirements: Sequence[str], deb_arch: str, python: str, cache: Path,
                 log: Callable[[str], None] = print) -> list[Built]:
    """Wheels of these pinned requirements for deb_arch and this Python, from their sdists:
    from the cache when built before, else all missing ones in one emulated chroot."""
    release = PYTHON_RELEASE.get(python)
    if release is None:
        raise InputError(f"no Debian release has Python {python}, so no wheel can be built for it here",
                         f"use a host with Python {' or '.join(sorted(PYTHON_RELEASE))}, or install virtbench there")
    sources = {r: sdist(r, cache / "sdists") for r in requirements}
    digests = {r: sha256(p) for r, p in sources.items()}
    todo = [r for r in requirements if not list(cache_dir(cache / "built", digests[r], deb_arch, python).glob("*.whl"))]
    how: dict[str, str] = {r: "cached" for r in requirements}
    if todo:
        emulation = require_buildable(release, deb_arch)
        where = "natively" if emulation.native else f"through {emulation.reason}"
        log(f"building {', '.join(todo)} from their sdists for {deb_arch}/Python {python} on this controller, "
            f"in a Debian {release}/{deb_arch} chroot {where}")
        started = time.monotonic()
        out, failure = _build_in_chroot([sources[r] for r in todo], release, deb_arch)
        try:
            seconds = time.monotonic() - started
            for r in todo:  # the ones that built are kept even when another failed
                wheel = _wheel_for(out, r, failure)
                dest = cache_dir(cache / "built", digests[r], deb_arch, python)
                dest.mkdir(parents=True, exist_ok=True)
                shutil.copy2(wheel, dest / wheel.name)
                how[r] = (f"built from its sdist on the controller in an emulated {release}/{deb_arch} chroot "
                          f"(qemu-user) in {seconds:.0f} s" if not emulation.native else
                          f"built from its sdist on the controller ({release}/{deb_arch} chroot) in {seconds:.0f} s")
        finally:
            shutil.rmtree(out, ignore_errors=True)
        log(f"built {len(todo)} wheels in {time.monotonic() - started:.0f} s")
    done = []
    for r in requirements:
        wheel = next(cache_dir(cache / "built", digests[r], deb_arch, python).glob("*.whl"))
        done.append(Built(requirement=r, wheel=wheel, sdist_sha256=digests[r],
                          how=how[r] if how[r] != "cached" else "built from its sdist earlier (cached by its sha256)"))
    return done


def _wheel_for(out: Path, requirement: str, failure: str | None) -> Path:
    name, version = requirement.split("==")
    norm = re.sub(r"[-_.]+", "_", name).lower()
    for wheel in out.glob("*.whl"):
        if wheel.name.lower().startswith(f"{norm}-{version}-"):
            return wheel
    raise InputError(f"building {requirement} from its sdist produced no wheel: {failure or 'no error reported'}",
                     "check the controller's access to the package index, or install virtbench on the host")


def _build_in_chroot(sdists: Sequence[Path], release: str, deb_arch: str) -> tuple[Path, str | None]:
    """One mmdebstrap run: a minimal chroot with a compiler, the sdists copied in, the script
    above run in it, the wheels copied out; mmdebstrap removes the chroot and its mounts.
    Returns the directory of the wheels that built, and why others did not."""
    if not proc.which("mmdebstrap"):
        raise InputError("building a wheel for another platform needs mmdebstrap", "apt-get install mmdebstrap")
    work = Path(tempfile.mkdtemp(prefix="vb-wheelbuild-"))
    stage = work / "vb-build"
    (stage / "sdists").mkdir(parents=True)
    for s in sdists:
        shutil.copy2(s, stage / "sdists" / s.name)
    (stage / "build.sh").write_text(SCRIPT)
    # the chroot reaches the package index as the controller does: its name resolution (mmdebstrap
    # copies resolv.conf; /etc/hosts too here) and its trusted certificates
    if (bundle := _ca_bundle()) is not None:
        shutil.copy2(bundle, stage / "ca.crt")
    out = work / "out"
    out.mkdir()
    tmp = work / "tmp"  # mmdebstrap's chroot (TMPDIR): removed with the rest
    tmp.mkdir()
    argv = ["mmdebstrap", "--variant=minbase", f"--architectures={deb_arch}", f"--include={','.join(BUILD_PACKAGES)}",
            "--quiet", "--format=null",
            f"--customize-hook=copy-in {stage} /tmp",
            "--customize-hook=copy-in /etc/hosts /etc",
            "--customize-hook=chroot \"$1\" sh /tmp/vb-build/build.sh",
            f"--customize-hook=copy-out /tmp/vb-build/wheels {out}",
            release, "/dev/null",
            # the release and -updates: the chroot only compiles, and the security suite's armhf
            # index has been caught mid-sync (images/build.py names that case)
            f"deb http://deb.debian.org/debian {release} main",
            f"deb http://deb.debian.org/debian {release}-updates main"]
    try:
        res = proc.run(argv, timeout=BUILD_TIMEOUT, check=False, env={**os.environ, "TMPDIR": str(tmp)})
        if not res.ok:
            tail = " ".join((res.stderr or res.stdout).split())[-300:]
            raise InputError(f"building wheels for {deb_arch} in an emulated chroot failed: {tail}",
                             "check the controller's access to deb.debian.org and the package index, "
                             "or install virtbench on the host")
        result = Path(tempfile.mkdtemp(prefix="vb-wheels-"))
        for wheel in (out / "wheels").glob("*.whl"):
            shutil.move(str(wheel), result / wheel.name)
        log = out / "wheels" / "build.log"
        text = log.read_text(errors="replace") if log.is_file() else ""
        if "FAILED: " not in text:
            return result, None
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        why = [ln for ln in lines if "rror" in ln or ln.startswith("FAILED")][-4:]
        kept = Path(tempfile.mkdtemp(prefix=f"vb-wheelbuild-{deb_arch}-log-")) / "build.log"  # outlives the build
        kept.write_text(text)
        return result, f"{' | '.join(why)[-300:]} (whole log: {kept})"
    finally:
        _cleanup(work)


def _ca_bundle() -> Path | None:
    """The certificates pip trusts here (PIP_CERT, else the system's bundle); None: the chroot's own."""
    for candidate in (os.environ.get("PIP_CERT", ""), *CA_BUNDLES):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def _cleanup(work: Path) -> None:
    from ..images.build import _unmount_under

    _unmount_under(work / "tmp")
    shutil.rmtree(work, ignore_errors=True)

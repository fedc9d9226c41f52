"""What a host needs before it can take part, sent once: virtbench itself and the guest image.

Everything is content-addressed, so a host that has it is not sent it again:
- virtbench: a wheel of this installation's source (named by the hash of its files) and the
  wheels of exactly the pinned versions of its runtime dependencies (from the package index,
  for the host's architecture and Python), installed into a virtual environment under the
  host's work_dir named by the hash of all of them;
- the guest image: the cached image's root filesystem archive and manifest (named by the
  recipe hash, checked against the manifest's sha256 there), for that host's architecture.
Transfers use scp over the host's shared SSH connection; nothing is installed system-wide.
"""
from __future__ import annotations

import hashlib
import importlib.metadata as md
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import proc
from ..errors import InputError
from ..images.arch import MACHINE_TO_DEB
from . import wheelbuild
from .ssh import SSHExecutor

SHIP_CACHE = Path("/var/cache/virtbench/ship")


@dataclass
class Shipment:
    """What went to one host (reported with the run)."""

    sent: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    built: list[dict[str, str]] = field(default_factory=list)
    """Dependency wheels built from sdists for this host's platform, and how."""
    system: dict[str, str] = field(default_factory=dict)
    """Dependencies taken from the host's Debian packages (name: version)."""

    @property
    def bytes(self) -> int:
        return sum(int(s["bytes"]) for s in self.sent)

    def public(self) -> dict[str, Any]:
        return {"bytes": self.bytes, "sent": self.sent, "skipped": self.skipped, "built": self.built,
                "system": self.system}


# -- virtbench and its dependencies ------------------------------------------------------------
def source_dir() -> Path:
    """The checkout virtbench runs from (an editable install); shipping builds its wheel."""
    here = Path(__file__).resolve().parents[3]
    if not (here / "pyproject.toml").is_file():
        raise InputError("running on other hosts needs virtbench installed from its source checkout "
                         "(pip install -e .)", "install virtbench from a checkout on the controller")
    return here


def source_hash(src: Path) -> str:
    """Hash of the files a wheel is built from (wheels themselves are not byte-reproducible)."""
    h = hashlib.sha256()
    files = [src / "pyproject.toml", *sorted((src / "src" / "virtbench").rglob("*"))]
    for f in files:
        if f.is_file() and "__pycache__" not in f.parts:
            h.update(str(f.relative_to(src)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def runtime_requirements(extras: tuple[str, ...] = ()) -> list[str]:
    """name==version of every installed distribution virtbench needs at run time (its core
    dependencies and theirs, plus those of `extras`, e.g. the kubernetes platform's client):
    exactly what runs here, pinned."""
    seen: dict[str, str] = {}
    todo = [r if "extra ==" not in r else r.split(";", 1)[0] for r in (md.requires("virtbench") or [])
            if "extra ==" not in r or any(re.search(rf"extra == ['\"]{re.escape(x)}['\"]", r) for x in extras)]
    while todo:
        req = todo.pop()
        name = re.split(r"[\s<>=!~;\[(]", req, maxsplit=1)[0]
        marker = req.split(";", 1)[1] if ";" in req else ""
        if "extra ==" in marker or _marker_false(marker):
            continue
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        try:
            seen[key] = f"{md.metadata(name)['Name']}=={md.version(name)}"
        except md.PackageNotFoundError:
            continue
        todo += md.requires(name) or []
    return sorted(seen.values())


def _marker_false(marker: str) -> bool:
    if not marker.strip():
        return False
    try:
        from packaging.markers import Marker

        return not Marker(marker).evaluate()
    except Exception:  # noqa: BLE001 - packaging absent or an odd marker: keep the requirement
        return False


@dataclass
class Dependencies:
    """How a host gets each runtime dependency: a wheel (from the index or built here), or the
    host's own Debian package (numpy and scipy where the index has no wheel for the platform)."""

    own: Path
    wheels: list[Path]
    built: list[wheelbuild.Built] = field(default_factory=list)
    system: dict[str, str] = field(default_factory=dict)


def wheels(arch: str, python: str, log: Any = print, system: dict[str, str] | None = None,
           extras: tuple[str, ...] = ()) -> Dependencies:
    """The virtbench wheel and the dependency wheels for a host of machine `arch` (uname -m) and
    this Python, cached here by content. system: the versions of SYSTEM_ONLY packages the
    host's own python3 has (its Debian packages)."""
    src = source_dir()
    digest = source_hash(src)
    own = SHIP_CACHE / f"virtbench-{digest}"
    if not list(own.glob("*.whl")):
        log(f"building the virtbench wheel ({digest})")
        own.mkdir(parents=True, exist_ok=True)
        proc.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                  "-w", str(own), str(src)], timeout=600)
    house = SHIP_CACHE / f"wheels-cp{python.replace('.', '')}-{arch}"
    house.mkdir(parents=True, exist_ok=True)
    wanted = {_norm(r.split("==")[0]): r for r in runtime_requirements(extras)}
    missing = [r for k, r in wanted.items() if not _cached_wheel(house, r)]
    if missing:
        log(f"fetching {len(missing)} dependency wheels for {arch}, Python {python}")
        for req in missing:  # one by one: a requirement without a wheel for this platform is not fatal here
            proc.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                      "--no-deps", "--only-binary=:all:", *_platform_args(arch), "--platform", "any",
                      "--python-version", python, "-d", str(house), req], timeout=1200, check=False)
    deps = Dependencies(own=next(own.glob("*.whl")), wheels=[])
    unbuilt = []
    for key, req in sorted(wanted.items()):
        if (wheel := _cached_wheel(house, req)) is not None:
            deps.wheels.append(wheel)
        elif key in wheelbuild.SYSTEM_ONLY:
            deps.system[req.split("==")[0]] = _system_package(key, req, arch, (system or {}).get(key))
        else:
            unbuilt.append(req)
    if unbuilt:
        deb = MACHINE_TO_DEB.get(arch, arch)
        deps.built = wheelbuild.build_wheels(unbuilt, deb, python, SHIP_CACHE, log)
        deps.wheels += [b.wheel for b in deps.built]
    return deps


def _platform_args(arch: str) -> list[str]:
    tags = ["manylinux2014", "manylinux_2_17", "manylinux_2_28", "manylinux_2_31"]
    return [a for tag in tags for a in ("--platform", f"{tag}_{arch}")]


def _cached_wheel(house: Path, requirement: str) -> Path | None:
    """The wheel of exactly this name and version in the cache (a lock change fetches anew)."""
    name, version = requirement.split("==")
    for wheel in house.glob("*.whl"):
        parts = wheel.name.split("-")
        if _norm(parts[0]) == _norm(name) and parts[1] == version:
            return wheel
    return None


def _system_package(key: str, req: str, arch: str, have: str | None) -> str:
    """The host's Debian package stands in for a SYSTEM_ONLY dependency without a wheel."""
    floor = wheelbuild.SYSTEM_ONLY[key]
    debian = f"python3-{key}"
    if have is None:
        raise InputError(f"{req.split('==')[0]} has no wheel for {arch} on the package index and building it "
                         f"from source under emulation takes hours; the host has no {debian}",
                         f"install Debian's {' '.join(f'python3-{k}' for k in wheelbuild.SYSTEM_ONLY)} "
                         f"on the host (apt-get install)")
    if _version_tuple(have) < _version_tuple(floor):
        raise InputError(f"the host's {debian} is {have}, older than {floor}, the oldest the remote side runs with",
                         f"upgrade {debian} on the host (Debian bookworm or later)")
    return have


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def send(ex: SSHExecutor, files: list[Path], remote_dir: str, shipment: Shipment, what: str) -> None:
    """Copy the files the host does not have yet (by name, which carries their hash) into remote_dir."""
    ex.run(["mkdir", "-p", "--", remote_dir], timeout=60)
    present = set(ex.run(["ls", "-1", "--", remote_dir], timeout=60).stdout.split())
    todo = [f for f in files if f.name not in present]
    shipment.skipped += [f"{what}: {f.name}" for f in files if f.name in present]
    if not todo:
        return
    s = ex.spec
    proc.run(["scp", "-q", *ex.options(), "--", *map(str, todo), f"{s.user}@{_scp_host(s.address)}:{remote_dir}/"],
             timeout=3600)
    shipment.sent += [{"what": what, "file": f.name, "bytes": f.stat().st_size} for f in todo]


def _scp_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


SYSTEM_PROBE = ("import importlib.metadata as m, json, sys\n"
                "out = {}\n"
                "for name in sys.argv[1:]:\n"
                "    try: out[name] = m.version(name)\n"
                "    except m.PackageNotFoundError: pass\n"
                "print(json.dumps(out))")
"""Run by the host's python3: the versions of the SYSTEM_ONLY packages its Debian installed."""


def host_system_packages(ex: SSHExecutor) -> dict[str, str]:
    import json

    res = ex.run(["python3", "-c", SYSTEM_PROBE, *wheelbuild.SYSTEM_ONLY], timeout=120, check=False)
    try:
        return {k: str(v) for k, v in json.loads(res.stdout.strip().splitlines()[-1]).items()} if res.ok else {}
    except (ValueError, IndexError):
        return {}


def ensure_virtbench(ex: SSHExecutor, arch: str, python: str, shipment: Shipment, log: Any = print,
                     extras: tuple[str, ...] = ()) -> str:
    """A virtual environment with this virtbench (and `extras`' dependencies) on the host;
    returns its virtbench command."""
    deps = wheels(arch, python, log, system=host_system_packages(ex), extras=extras)
    for b in deps.built:
        shipment.built.append({"requirement": b.requirement, "wheel": b.wheel.name,
                               "sdist_sha256": b.sdist_sha256, "how": b.how})
        log(f"{ex.spec.name}: {b.requirement} has no {arch} wheel on the package index: {b.how}")
    for name, version in deps.system.items():
        shipment.system[name] = version
        log(f"{ex.spec.name}: {name} has no {arch} wheel on the package index: using the host's Debian "
            f"package python3-{name} {version} (a virtual environment with system site packages)")
    own = deps.own
    # the wheel's directory carries the source hash (its file name is the same for every build)
    names = [own.parent.name, *(p.name for p in deps.wheels), *(f"system:{k}={v}" for k, v in deps.system.items())]
    ident = hashlib.sha256("\n".join(names).encode()).hexdigest()[:16]
    work = ex.spec.work_dir
    venv = f"{work}/venv-{ident}"
    exe = f"{venv}/bin/virtbench"
    if ex.run(["test", "-f", f"{venv}/.installed"], timeout=60, check=False).ok:
        shipment.skipped.append(f"virtbench environment venv-{ident}")
        return exe
    send(ex, deps.wheels, f"{work}/ship/wheels", shipment, "dependency wheel")
    send(ex, [own], f"{work}/ship/{own.parent.name}", shipment, "virtbench wheel")
    pip = pip_wheel()
    if pip is not None:
        send(ex, [pip], f"{work}/ship/pip", shipment, "pip wheel")
    log(f"{ex.spec.name}: installing virtbench into {venv}")
    ex.run(["rm", "-rf", "--", venv], timeout=120)
    system = ["--system-site-packages"] if deps.system else []
    # With this pip's wheel at hand the environment gets no pip of its own: the host's ensurepip
    # installs and byte-compiles pip and setuptools, a minute on an emulated (TCG) host, for a
    # pip used once, here. pip runs from its wheel (a zip on sys.path), as ensurepip runs it.
    if pip is not None:
        ex.run(["python3", "-m", "venv", "--without-pip", *system, venv], timeout=300)
        installer = [f"{venv}/bin/python", f"{work}/ship/pip/{pip.name}/pip"]
    else:
        ex.run(["python3", "-m", "venv", *system, venv], timeout=300)
        installer = [f"{venv}/bin/pip"]
    # exactly these files, no resolution: every version is pinned already, and a Debian package
    # standing in for one (deps.system) is older than virtbench's own floor for the controller.
    # --no-compile: byte-compiling every module of every dependency took over 5 minutes on an
    # emulated (TCG) host; Python compiles the few modules the agent imports when it first does
    ex.run([*installer, "install", "-q", "--disable-pip-version-check", "--no-index", "--no-deps",
            "--no-compile",
            *(f"{work}/ship/wheels/{p.name}" for p in deps.wheels), f"{work}/ship/{own.parent.name}/{own.name}"],
           timeout=1800)
    ex.run(["touch", "--", f"{venv}/.installed"], timeout=60)
    return exe


def pip_wheel() -> Path | None:
    """The pip wheel this Python's ensurepip carries (pure Python, any host's Python 3 runs it);
    None where a distribution removed it (Debian keeps it in python3-venv's wheel directory,
    looked at too)."""
    import ensurepip

    version = ensurepip.version()
    for d in (Path(ensurepip.__file__).parent / "_bundled", Path("/usr/share/python-wheels")):
        found = sorted(d.glob(f"pip-{version}-py3-none-any.whl")) or sorted(d.glob("pip-*-py3-none-any.whl"))
        if found:
            return found[-1]
    return None


# -- the guest image ---------------------------------------------------------------------------
def ensure_image(ex: SSHExecutor, image_root: Path, remote_cache: str, shipment: Shipment,
                 log: Any = print) -> None:
    """The cached image at image_root, present in the host's image cache under the same name."""
    name = image_root.name
    target = f"{remote_cache}/{name}"
    if ex.run(["test", "-f", f"{target}/manifest.json"], timeout=60, check=False).ok:
        shipment.skipped.append(f"image {name}")
        return
    tar, manifest = image_root / "rootfs.tar", image_root / "manifest.json"
    if not tar.is_file():
        raise InputError(f"image {name} has no rootfs.tar to send", "rebuild it: virtbench image build --force")
    incoming = f"{remote_cache}/.{name}.incoming"
    ex.run(["rm", "-rf", "--", incoming], timeout=300)
    log(f"{ex.spec.name}: sending image {name} ({tar.stat().st_size / 2**20:.0f} MiB)")
    send(ex, [tar, manifest], incoming, shipment, f"image {name}")
    import json

    want = json.loads(manifest.read_text())["tar_sha256"]
    got = ex.run(["sha256sum", "--", f"{incoming}/rootfs.tar"], timeout=600).stdout.split()[0]
    if got != want:
        raise InputError(f"host {ex.spec.name}: image {name} arrived damaged (sha256 {got[:12]} != {want[:12]})",
                         "run the campaign again")
    ex.run(["mkdir", "-p", "--", f"{incoming}/rootfs"], timeout=60)
    ex.run(["tar", "--numeric-owner", "-xpf", f"{incoming}/rootfs.tar", "-C", f"{incoming}/rootfs"], timeout=1800)
    ex.run(["mkdir", "-p", "--", f"{incoming}/rootfs/var/tmp/virtbench"], timeout=60)
    ex.run(["mv", "-T", "--", incoming, target], timeout=60)

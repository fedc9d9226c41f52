"""The bare-metal baseline: the image's own binaries in a chroot, without namespaces or cgroups.

Running the same binaries as the containers isolates the cost of the isolation itself from
differences between the host's and the image's builds (openssl, fio, ...). The chroot is a
read-write bind of the image rootfs, so benchmark scratch files go straight to the host
filesystem as on bare metal, not through overlayfs.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from .. import proc
from ..errors import InputError, VirtbenchError
from ..images.image import Image
from . import mounts
from .base import EXEC_ENV, Availability, Executor, Instance, Paths, Platform, PlatformOptions, trial_dir

SCRATCH = Path("var/tmp/virtbench")
"""Inside the rootfs: where the runner puts scratch files. For native it is a bind mount of a
per-instance host directory, so scratch writes hit the host filesystem directly (as on bare
metal) and never modify the shared image, which is the overlay lower layer of other platforms."""


class NativeOptions(PlatformOptions):
    """Bare metal has no limits; asking for them is a campaign mistake, not something to ignore."""

    network: Literal["host"] = Field("host", description="native always uses the host's network")

    @model_validator(mode="after")
    def _no_limits(self) -> NativeOptions:
        given = [k for k in ("cpus", "cpuset", "memory") if getattr(self, k) is not None]
        if given:
            raise ValueError(f"native is the bare-metal baseline and takes no resource limits "
                             f"(got {', '.join(given)}); remove them or use a container platform")
        return self


def _remove_scratch(rootfs: Path, name: str) -> list[str]:
    """Delete <rootfs>/var/tmp/virtbench/<name> without ever following a symlink out of it."""
    path = rootfs
    for part in (*SCRATCH.parts, name):
        path = path / part
        if path.is_symlink():
            return []
    if not path.exists():
        return []
    mounts.safe_rmtree(path)
    try:
        path.parent.rmdir()  # var/tmp/virtbench, when this was the last instance
    except OSError:
        pass
    return [str(path)]


class Native(Platform):
    type = "native"
    needs_root = True
    kind = "baseline"
    quick_rank = 0
    image_per_instance = False  # the chroot runs the image itself
    Options = NativeOptions
    binaries = ("chroot", "mount", "umount")
    packages = ("coreutils", "mount")
    description = "bare metal: the image's binaries in a chroot, no namespaces, no cgroups"
    exec_outlives_client = False  # chroot runs in the client's own process group, which stop() signals

    def __init__(self, name: str, options: PlatformOptions, paths: Paths,
                 executor: Executor | None = None) -> None:
        super().__init__(name, options, paths, executor)
        given = [k for k in ("cpus", "cpuset", "memory") if getattr(options, k, None) is not None]
        if given or getattr(options, "network", "host") != "host":
            raise InputError(f"{name}: native takes no resource limits and always uses the host "
                             f"network (got {', '.join(given) or 'network=' + options.network})",
                             "remove them or use a container platform")

    @classmethod
    def try_instance(cls, paths: Paths) -> Availability:
        with trial_dir(paths, "native") as d:
            root = d / "root"
            for b in mounts.skeleton_rootfs(root):
                mounts.bind(b, root / b.lstrip("/"), readonly=True)
                mounts.make_private(root / b.lstrip("/"))
            proc.run(cls.chroot_argv(str(root), ["true"]), timeout=30)  # as every command of an instance
            return Availability(True, "chroot with bind mounts works")

    @classmethod
    def unavailable(cls, exc: Exception, fix: str) -> Availability:
        return Availability(False, f"chroot test failed: {exc}", "run as root on a host that allows bind mounts")

    def versions(self) -> dict[str, str]:
        r = self.host.run(["chroot", "--version"], timeout=10, check=False)
        return {"chroot": r.stdout.splitlines()[0] if r.ok and r.stdout else "unknown",
                "kernel": os.uname().release}

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "isolation": "chroot", "namespaces": [], "cgroup": None,
                "filesystem": "bind mount of the image rootfs; scratch on a host directory (no overlay)"}

    def create(self, image: Image, name: str, run_id: str) -> Instance:
        name = mounts.instance_name(name)
        d = self.paths.instances / name
        if d.exists():
            raise VirtbenchError(f"instance directory {d} already exists", "run virtbench cleanup")
        mounts.write_meta(d, {"platform": self.type, "run_id": run_id, "name": name,
                              "image_rootfs": str(image.rootfs)})
        root = d / "root"
        root.mkdir()
        try:
            mounts.bind(image.rootfs, root)
            mounts.make_private(root)
            mounts.mount_fs("proc", root / "proc")
            for fs in ("sys", "dev"):
                mounts.bind(f"/{fs}", root / fs, recursive=True)
                mounts.make_rslave(root / fs)
            scratch = d / "scratch"
            scratch.mkdir()
            (root / SCRATCH).mkdir(parents=True, exist_ok=True)  # normally made by the image build
            mounts.bind(scratch, root / SCRATCH)
            mounts.make_private(root / SCRATCH)
        except BaseException:
            _teardown(d, image.rootfs, name)
            raise
        return Instance(name, self.name, run_id,
                        {"dir": str(d), "root": str(root), "image_rootfs": str(image.rootfs)})

    def start(self, instance: Instance) -> None:
        self.wait_ready(instance)

    def exec_argv(self, instance: Instance, argv: list[str]) -> list[str]:
        return self.chroot_argv(instance.data["root"], argv)

    @staticmethod
    def chroot_argv(root: str, argv: list[str]) -> list[str]:
        """argv run in the chroot with the instances' own environment (not this process's PATH)."""
        return ["chroot", root, "/usr/bin/env", "-i", *[f"{k}={v}" for k, v in EXEC_ENV.items()], *argv]

    def stop(self, instance: Instance) -> None:
        """Kill anything a benchmark left running in the chroot (a daemon, a timed-out job)."""
        _kill_chrooted(Path(instance.data["root"]))

    def storage(self, instance: Instance) -> dict[str, Path]:
        """Bare metal's own data is its scratch directory; the image is the host's system."""
        return {"scratch": Path(instance.data.get("scratch") or Path(instance.data["dir"]) / "scratch")}

    def relocate(self, instance: Instance, moved: dict[str, Path]) -> None:
        if "lower" in moved:
            raise InputError("native runs the host's image in place; it cannot move a copy of it",
                             "set with_image: false")
        target = Path(instance.data["root"]) / SCRATCH
        mounts.unmount_all(target)
        mounts.bind(moved["scratch"], target)
        mounts.make_private(target)
        instance.data["scratch"] = str(moved["scratch"])

    def remove(self, instance: Instance) -> None:
        _teardown(Path(instance.data["dir"]), Path(instance.data["image_rootfs"]), instance.name)

    @classmethod
    def cleanup(cls, paths: Paths, run_id: str | None = None) -> list[str]:
        removed, failed = [], []
        for d, meta in mounts.leftovers(paths.instances, cls.type, run_id):
            try:
                removed += _teardown(d, Path(meta["image_rootfs"]), meta["name"])
            except Exception as exc:  # noqa: BLE001 - try every leftover, then report
                failed.append(f"{d}: {exc}")
        if run_id is None:
            probes = paths.runtime / "probe"
            for d in sorted(probes.glob("native-*")) if probes.is_dir() else []:
                try:
                    mounts.teardown_dir(d)
                    removed.append(f"probe dir {d}")
                except Exception as exc:  # noqa: BLE001
                    failed.append(f"{d}: {exc}")
        if failed:
            raise VirtbenchError("native cleanup left: " + "; ".join(failed))
        return removed


def _kill_chrooted(root: Path, timeout: float = 10.0) -> list[str]:
    """SIGKILL every process whose root directory is this chroot; wait until they are gone.

    Without namespaces there is no init to kill; /proc/<pid>/root is the only handle."""
    target = os.path.realpath(root)
    killed: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        pids = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    if os.readlink(f"/proc/{entry.name}/root") == target:
                        pids.append(int(entry.name))
                except OSError:
                    pass
        if not pids:
            return killed
        if time.monotonic() > deadline:
            raise VirtbenchError(f"processes {pids} in {root} survive SIGKILL")
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(f"process {pid}")
            except ProcessLookupError:
                pass
        time.sleep(0.01)


def _teardown(d: Path, image_rootfs: Path, name: str) -> list[str]:
    """Unmount first, prove nothing is mounted, then delete: rm must never reach the image."""
    root = d / "root"
    done = _kill_chrooted(root) if root.is_dir() else []
    done += [f"unmounted {m}" for m in mounts.unmount_all(d)] if d.exists() else []
    if root.is_dir() and not root.is_symlink():
        if mounts.mounts_under(root) or any(root.iterdir()):
            raise VirtbenchError(f"{root} is still mounted or not empty; not deleting it")
    done += [f"scratch {p}" for p in _remove_scratch(image_rootfs, name)]
    if d.exists():
        mounts.safe_rmtree(d)
        done.append(f"instance dir {d}")
    return done

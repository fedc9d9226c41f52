"""Bare OCI runtimes (runc, crun) driven directly, without an engine in between.

This is the floor of container overhead: the same namespaces and cgroups docker/podman set
up, minus their daemons and image stores. Each instance is a bundle under
paths.instances/<name>/ whose root is an overlay of the image (so the image is never written),
and every runtime call uses a private state root so cleanup sees only virtbench's containers.
"""
from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, model_validator

from .. import proc
from ..errors import CommandError, InputError, UnavailableError, VirtbenchError
from ..images.image import Image
from . import bridge, cgroups, iptables, mounts, slices, throttle
from .base import EXEC_ENV, LABEL, Availability, Executor, Instance, Paths, Platform, PlatformOptions, Size, trial_dir

CFS_PERIOD = 100_000
CAPABILITIES = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
                "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
                "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"]
"""Docker's default set, so runc and docker differ only in what the engine adds."""
HYBRID = "cgroups in hybrid mode not supported"


class OCIOptions(PlatformOptions):
    """runc and crun: the common options plus an I/O throttle the OCI spec carries."""

    device_read_iops: int | None = Field(None, ge=1, le=10**9, description=(
        "read operations per second allowed on the block device holding the instance's storage "
        "(cgroup v1 blkio.throttle.read_iops_device, v2 io.max riops)"))
    swap: Size | None = Field(None, description=(
        "swap allowed on top of memory (the memory+swap limit); 0 forbids swapping; needs memory"))

    @model_validator(mode="after")
    def _swap_needs_memory(self) -> OCIOptions:
        if self.swap is not None and self.memory is None:
            raise ValueError("swap needs memory (the limit is memory+swap); set memory too")
        return self


def oci_resources(options: PlatformOptions, device: tuple[int, int] | None = None) -> dict[str, Any]:
    """linux.resources; the runtime maps these onto cgroup v1 or v2 files itself. `device`:
    (major, minor) of the whole disk under the instance's storage, for an I/O throttle."""
    res: dict[str, Any] = {"devices": [{"allow": False, "access": "rwm"}]}
    cpu: dict[str, Any] = {}
    if options.cpus is not None:
        cpu |= {"quota": int(round(options.cpus * CFS_PERIOD)), "period": CFS_PERIOD}
    if options.cpuset is not None:
        cpu["cpus"] = options.cpuset
    if cpu:
        res["cpu"] = cpu
    if options.memory is not None:
        res["memory"] = {"limit": int(options.memory)}
        if (swap := getattr(options, "swap", None)) is not None:
            res["memory"]["swap"] = int(options.memory) + int(swap)
    if (iops := getattr(options, "device_read_iops", None)) is not None:
        if device is None:
            raise VirtbenchError("device_read_iops needs the block device under the instance's storage")
        res["blockIO"] = {"throttleReadIOPSDevice": [{"major": device[0], "minor": device[1], "rate": iops}]}
    return res


def build_oci_config(*, name: str, run_id: str, rootfs: str, options: PlatformOptions,
                     args: list[str] | None = None, env: dict[str, str] | None = None,
                     binds: Sequence[str] = (), cgroup: str | None = None,
                     device: tuple[int, int] | None = None, cgroups_path: str | None = None) -> dict[str, Any]:
    """config.json from `runc spec` defaults plus virtbench's process, limits and network.

    cgroup: the container's cgroup path relative to the hierarchy root (default virtbench/NAME);
    cgroups_path: linux.cgroupsPath as given instead (systemd's `SLICE:PREFIX:NAME` form)."""
    namespaces = ["pid", "ipc", "uts", "mount"] + ([] if options.network == "host" else ["network"])
    ro = ["nosuid", "noexec", "nodev", "ro"]
    mounts_ = [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
         "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
        {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
         "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
        {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
         "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ro},
        {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
         "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]},
    ] + [{"destination": b, "type": "bind", "source": b, "options": ["rbind", "ro"]} for b in binds]
    caps = list(CAPABILITIES)
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False, "user": {"uid": 0, "gid": 0},
            "args": list(args or ["sleep", "infinity"]),
            "env": [f"{k}={v}" for k, v in (EXEC_ENV if env is None else env).items()],
            "cwd": "/", "noNewPrivileges": True,
            "capabilities": {"bounding": caps, "effective": caps, "permitted": caps},
        },
        "root": {"path": rootfs, "readonly": False},
        "hostname": name,
        "mounts": mounts_,
        "annotations": {LABEL: run_id},
        "linux": {
            "cgroupsPath": cgroups_path or "/" + (cgroup or f"virtbench/{name}").strip("/"),
            "resources": oci_resources(options, device),
            "namespaces": [{"type": t} for t in namespaces],
            "maskedPaths": ["/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
                            "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
                            "/proc/sched_debug", "/sys/firmware", "/proc/scsi"],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"],
        },
    }


class _OCIRuntime(Platform):
    needs_root = True
    runtime: ClassVar[str]
    confinable = True

    def __init__(self, name: str, options: PlatformOptions, paths: Paths,
                 executor: Executor | None = None) -> None:
        super().__init__(name, options, paths, executor)
        cgroups.check_limits(options, name)
        if getattr(options, "swap", None) is not None and not cgroups.swap_accounting():
            raise InputError(f"{name}: swap needs the kernel's swap accounting (cgroup v1 memory.memsw.*)",
                             "boot with swapaccount=1, or drop swap")

    def _rt(self) -> list[str]:
        return [*_rt(self.runtime, self.paths), *self.runtime_flags()]

    def runtime_flags(self) -> list[str]:
        """Global flags of this runtime besides its state root (gVisor: platform, network)."""
        return []

    @classmethod
    def try_instance(cls, paths: Paths) -> Availability:
        name = f"vb-probe-{uuid.uuid4().hex[:8]}"
        rt = _rt(cls.runtime, paths)
        with trial_dir(paths, cls.runtime) as bundle:
            try:
                binds = mounts.skeleton_rootfs(bundle / "rootfs")
                # its own top-level cgroup, which `delete` removes: under virtbench/ the
                # runtime would leave the empty parent it made behind in every hierarchy
                spec_path = (cgroup_paths(cls.runtime, None, name)[0] if systemd_cgroups(cls.runtime)
                             else f"/{name}")
                config = build_oci_config(name=name, run_id="probe", rootfs=str(bundle / "rootfs"),
                                          options=PlatformOptions(), args=["true"], binds=binds,
                                          cgroups_path=spec_path)
                (bundle / "config.json").write_text(json.dumps(config))
                proc.run([*rt, "run", "--bundle", str(bundle), name], timeout=60, detached_children=True)
                return Availability(True, f"{cls.runtime} ran a container")
            finally:
                with suppress(Exception):  # best effort: `cleanup` removes what is left
                    proc.run([*rt, "delete", "--force", name], timeout=30, check=False)
                forget_probe(name)

    @classmethod
    def unavailable(cls, exc: Exception, fix: str) -> Availability:
        said = (getattr(exc, "stderr", "") or str(exc)).strip().splitlines() or [str(exc)]
        if HYBRID in said[-1]:
            return Availability(False, f"{cls.runtime}: {said[-1].strip()} (hybrid host: cgroup v1 "
                                f"controllers, and cgroup2 holds: {_v2_controllers() or 'none'})",
                                "boot with systemd.unified_cgroup_hierarchy=1 (pure cgroup v2), "
                                "or use the runc platform")
        return Availability(False, f"{cls.runtime} could not run a container: {exc}", f"check `{cls.runtime} run` as root")

    def versions(self) -> dict[str, str]:
        r = self.host.run([self.runtime, "--version"], timeout=10, check=False)
        out = {self.runtime: "unknown"}
        for line in r.stdout.splitlines():
            if line.startswith(f"{self.runtime} version"):
                out[self.runtime] = line.split("version", 1)[1].strip()
            elif line.startswith("spec:"):
                out["oci_spec"] = line.split(":", 1)[1].strip()
        return out

    def describe(self) -> dict[str, Any]:
        device = (throttle.whole_disk(self.paths.instances) if getattr(self.options, "device_read_iops", None)
                  is not None else None)
        return {**super().describe(), "runtime": self.runtime, "rootfs": "overlayfs",
                "cgroup": cgroups.cgroup_mode(), "resources": oci_resources(self.options, device),
                "capabilities": "docker default set", "seccomp": None}

    def create(self, image: Image, name: str, run_id: str) -> Instance:
        name = mounts.instance_name(name)
        d = self.paths.instances / name
        if d.exists():
            raise VirtbenchError(f"instance directory {d} already exists", "run virtbench cleanup")
        spec_path, cgroup = cgroup_paths(self.runtime, self.cgroup_parent, name)
        meta = {"platform": self.type, "run_id": run_id, "name": name, "lower": str(image.rootfs), "cgroup": cgroup}
        mounts.write_meta(d, meta)
        try:
            rootfs = mounts.mount_overlay(image.rootfs, d)
            device = (throttle.whole_disk(d) if getattr(self.options, "device_read_iops", None) is not None
                      else None)
            config = build_oci_config(name=name, run_id=run_id, rootfs=str(rootfs), options=self.options,
                                      cgroup=cgroup, device=device, cgroups_path=spec_path)
            (d / "config.json").write_text(json.dumps(config, indent=1))
            self.host.run([*self._rt(), "create", "--bundle", str(d), name], timeout=120,
                          detached_children=True)
            if self.options.network == "bridge":
                meta |= _attach_bridge(self.paths, name, self.init_pid(name))
                mounts.write_meta(d, meta)
        except BaseException:
            _teardown(self.runtime, self.paths, d, name)
            raise
        return Instance(name, self.name, run_id, {"dir": str(d), **meta})

    def init_pid(self, instance: Instance | str) -> int:
        """Host pid of the container's init (for network setup and reading its cgroups)."""
        name = instance if isinstance(instance, str) else instance.name
        return int(json.loads(self.host.run([*self._rt(), "state", name], timeout=30).stdout)["pid"])

    def host_pid(self, instance: Instance) -> int | None:
        try:
            return self.init_pid(instance)
        except CommandError:
            return None

    def memory_cgroup(self, instance: Instance) -> str | None:
        """The cgroup the bundle names (the same path in every v1 hierarchy): no runtime call."""
        return instance.data.get("cgroup") or f"virtbench/{instance.name}"

    def start(self, instance: Instance) -> None:
        self.host.run([*self._rt(), "start", instance.name], timeout=60)
        self.wait_ready(instance)

    def exec_argv(self, instance: Instance, argv: list[str]) -> list[str]:
        env = [a for k, v in EXEC_ENV.items() for a in ("--env", f"{k}={v}")]
        return [*self._rt(), "exec", *env, instance.name, *argv]

    def stop(self, instance: Instance) -> None:
        _stop(self._rt(), instance.name)

    def remove(self, instance: Instance) -> None:
        _teardown(self.runtime, self.paths, Path(instance.data["dir"]), instance.name)

    def close(self) -> None:
        """The runtime leaves the parent of its containers' cgroups (/virtbench, every hierarchy)
        when the last one goes: ten empty cgroups after each run, for the next cleanup. The host
        bridge goes too once nothing uses it (no port, no lease of any run)."""
        cgroups.remove_cgroups("virtbench")
        bridge.remove_bridge_if_unused()

    def storage(self, instance: Instance) -> dict[str, Path]:
        return {"upper": Path(instance.data.get("upper") or Path(instance.data["dir"]) / "upper")}

    def relocate(self, instance: Instance, moved: dict[str, Path]) -> None:
        """A stopped runc container cannot start again: delete it, mount the root over the moved
        layer (and image copy), and create it anew from the same bundle; start() then starts it."""
        if self.options.network == "bridge":
            raise UnavailableError(f"{self.name}: offline migration of bridged {self.runtime} containers is not "
                                   "supported yet", "use network: none or host, or the lxc platform")
        d = Path(instance.data["dir"])
        self.host.run([*self._rt(), "delete", "--force", instance.name], timeout=60)
        mounts.unmount_all(d / "rootfs")
        lower = moved.get("lower", Path(instance.data["lower"]))
        mounts.mount_overlay(lower, d, upper=moved["upper"])
        self.host.run([*self._rt(), "create", "--bundle", str(d), instance.name], timeout=120, detached_children=True)
        instance.data["upper"] = str(moved["upper"])

    @classmethod
    def cleanup(cls, paths: Paths, run_id: str | None = None) -> list[str]:
        removed, failed = [], []
        rt = _rt(cls.runtime, paths)
        names = {meta["name"]: d for d, meta in mounts.leftovers(paths.instances, cls.type, run_id)}
        if proc.which(cls.runtime) and (paths.runtime / cls.runtime).is_dir():
            ids = proc.run([*rt, "list", "--quiet"], timeout=30, check=False).stdout.split()
            for cid in ids:
                label = (_state(rt, cid) or {}).get("annotations", {}).get(LABEL)
                if run_id is None or label == run_id:
                    names.setdefault(cid, paths.instances / cid)
        for name, d in sorted(names.items()):
            try:
                removed += _teardown(cls.runtime, paths, d, name)
            except Exception as exc:  # noqa: BLE001 - try every leftover, then report
                failed.append(f"{name}: {exc}")
        if run_id is None:
            probes = paths.runtime / "probe"
            for d in sorted(probes.glob(f"{cls.runtime}-*")) if probes.is_dir() else []:
                probe = d.name.split("-", 1)[1]
                proc.run([*rt, "delete", "--force", probe], timeout=30, check=False)
                forget_probe(probe)
                mounts.safe_rmtree(d)
                removed.append(f"probe bundle {d}")
            removed += bridge.remove_bridge_if_unused()
            removed += cgroups.remove_cgroups("virtbench")
        if failed:
            raise VirtbenchError(f"{cls.runtime} cleanup left: " + "; ".join(failed))
        return removed


def _v2_controllers() -> str:
    """crun accepts a hybrid host only when its cgroup2 mount has no controllers left."""
    for f in ("/sys/fs/cgroup/unified/cgroup.controllers", "/sys/fs/cgroup/cgroup.controllers"):
        try:
            return Path(f).read_text().strip()
        except OSError:
            continue
    return ""


def forget_probe(name: str) -> None:
    """Remove the empty cgroups a probe container may leave: a runtime whose container never
    finished (runsc on a KVM that does not run guests) deletes it without its cgroups, one
    empty `virtbench/vb-probe-...` per hierarchy each time the host is probed."""
    with suppress(Exception):
        cgroups.remove_cgroups(f"virtbench/{name}")


SYSTEMD_RUNTIMES = ("runc", "crun")
"""Runtimes that make their containers' cgroups as systemd scopes (`--systemd-cgroup`) where
systemd manages the unified hierarchy (platforms/slices.py)."""


def systemd_cgroups(runtime: str) -> bool:
    return runtime in SYSTEMD_RUNTIMES and slices.systemd_managed()


def cgroup_paths(runtime: str, parent: str | None, name: str) -> tuple[str, str]:
    """(linux.cgroupsPath, the cgroup it makes relative to the root) of container `name`: a scope
    in virtbench.slice (or in the confining parent's slice) through systemd where systemd
    manages cgroups, else the directory virtbench/NAME (or PARENT/NAME)."""
    if systemd_cgroups(runtime):
        return slices.scope_path(parent, name)
    cgroup = f"{parent.strip('/')}/{name}" if parent else f"virtbench/{name}"
    return "/" + cgroup, cgroup


def _rt(runtime: str, paths: Paths) -> list[str]:
    return [runtime, "--root", str(paths.runtime / runtime),
            *(["--systemd-cgroup"] if systemd_cgroups(runtime) else [])]


def _state(rt: list[str], name: str) -> dict[str, Any] | None:
    """The runtime's state document, or None once the container is gone."""
    r = proc.run([*rt, "state", name], timeout=30, check=False)
    try:
        return json.loads(r.stdout) if r.ok else None
    except ValueError:
        return None


def _stop(rt: list[str], name: str, timeout: float = 30.0) -> None:
    """SIGKILL init, then wait: the runtime reports 'stopped' only once every process is gone."""
    proc.run([*rt, "kill", name, "KILL"], timeout=30, check=False)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = _state(rt, name)
        if state is None or state.get("status") == "stopped":
            return
        time.sleep(0.01)
    raise VirtbenchError(f"container {name} still running {timeout:g} s after SIGKILL")


def _teardown(runtime: str, paths: Paths, d: Path, name: str) -> list[str]:
    done = []
    if proc.which(runtime):
        r = proc.run([*_rt(runtime, paths), "delete", "--force", name], timeout=60, check=False)
        if r.ok:
            done.append(f"{runtime} container {name}")
        elif "not exist" not in r.stderr and "not found" not in r.stderr:
            raise CommandError(r.argv, r.returncode, r.stdout, r.stderr)
    if bridge.delete_link(bridge.veth_name(name)):
        done.append(f"veth {bridge.veth_name(name)}")
    done += [f"lease {a}" for a in bridge.release_addresses(paths.runtime, name)]
    done += cgroups.remove_cgroups((mounts.read_meta(d) or {}).get("cgroup") or f"virtbench/{name}")
    if d.exists():
        done += [f"unmounted {m}" for m in mounts.teardown_dir(d)]
        done.append(f"bundle {d}")
    return done


def _attach_bridge(paths: Paths, name: str, pid: int) -> dict[str, str]:
    """veth pair: host end on vbbr0, the other end moved into the container's netns as eth0."""
    bridge.ensure_bridge()
    iptables.allow_forwarding()  # dockerd may have started since the bridge was made
    address = bridge.allocate_address(paths.runtime, name)
    host_if = bridge.veth_name(name)
    peer = host_if + "c"
    proc.run(["ip", "link", "add", host_if, "type", "veth", "peer", "name", peer], timeout=30)
    proc.run(["ip", "link", "set", host_if, "master", bridge.BRIDGE, "up"], timeout=30)
    proc.run(["ip", "link", "set", peer, "netns", str(pid)], timeout=30)
    ns = ["nsenter", "-t", str(pid), "-n", "ip"]
    proc.run([*ns, "link", "set", peer, "name", "eth0", "address", bridge.mac_for(address)], timeout=30)
    proc.run([*ns, "addr", "add", f"{address}/24", "dev", "eth0"], timeout=30)
    proc.run([*ns, "link", "set", "eth0", "up"], timeout=30)
    proc.run([*ns, "route", "add", "default", "via", bridge.GATEWAY], timeout=30)
    return {"address": address, "veth": host_if}


class Runc(_OCIRuntime):
    type = "runc"
    quick_rank = 5
    runtime = "runc"
    Options = OCIOptions
    binaries = ("runc", "ip", "nsenter")
    packages = ("runc", "iproute2", "util-linux")
    description = "runc driven directly: OCI bundle on an overlay of the image, no engine"


class Crun(_OCIRuntime):
    type = "crun"
    quick_rank = 6
    runtime = "crun"
    Options = OCIOptions
    binaries = ("crun", "ip", "nsenter")
    packages = ("crun", "iproute2", "util-linux")
    description = "crun (the C OCI runtime) driven directly, same bundle as runc"

"""containerd driven by `ctr`, in its own namespace so nothing of docker's (moby) is touched.

ctr 1.6 (Debian 12) shapes this module:
- `ctr containers create` has no --cpus (only `ctr run` does), so cpus map to
  --cpu-quota/--cpu-period, which create does have.
- There is no cpuset flag and no `ctr tasks update`, so a cpuset is applied right after the
  task starts with `runc update --cpuset-cpus` on the shim's runc state directory, the same
  call containerd's own Update API makes.
- `ctr tasks exec` has no --env: an exec inherits the container's process environment, so
  that is set to exactly EXEC_ENV at create time.
- The default spec mounts no /sys/fs/cgroup; one is added read-only so a command inside sees
  its limits as it does under docker and podman.
- CNI is only wired up by `ctr run --cni`, not by create + task start, so a bridge network
  is refused up front (InputError) rather than half-supported.
- `ctr containers create` cannot set a cgroup path nor runc's systemd cgroup option (only
  `ctr run` has --cgroup and --runc-systemd-cgroup). Where systemd manages the unified
  hierarchy (platforms/slices.py) the container is therefore made and started in one
  `ctr run --detach` at start, as the scope `vb-NAME.scope` in virtbench.slice made through
  systemd (cgroupsPath `virtbench.slice:vb:NAME`); create only records it. Elsewhere the
  cgroup stays containerd's cgroupfs default, /virtbench/NAME.
"""
from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from .. import proc, services
from ..errors import CommandError, InputError
from ..images.image import Image
from ..images.oci import oci_archive
from ..services import CONTAINERD_SOCKET
from . import cgroups, sandboxes, slices, units
from .base import EXEC_ENV, LABEL, Availability, Executor, Instance, Paths, Platform, PlatformOptions
from .docker import STATE_LABEL, TAR_LABEL
from .naming import INSTANCE_PREFIX

NAMESPACE = "virtbench"
CTR = ["ctr", "--address", CONTAINERD_SOCKET, "-n", NAMESPACE]
"""Always the host's containerd, named: ctr would follow $CONTAINERD_ADDRESS, which may name
another containerd (a k0s node's, for the kubernetes platform's image import)."""
RUNC_ROOT = f"/run/containerd/runc/{NAMESPACE}"
"""Where the io.containerd.runc.v2 shim keeps runc state for this namespace."""
CFS_PERIOD_US = 100_000
CGROUP_MOUNT = "type=cgroup,src=cgroup,dst=/sys/fs/cgroup,options=ro:nosuid:noexec:nodev"


def owner_selector(paths: Paths, run_id: str | None) -> str:
    """containerd filter for the containers cleanup(paths, run_id) owns (see docker.STATE_LABEL)."""
    run = f'labels."{LABEL}"=="{run_id}"' if run_id else f'labels."{LABEL}"'
    return f'{run},labels."{STATE_LABEL}"=="{paths.state}"'


def _not_found(res: proc.Result) -> bool:
    text = (res.stderr + res.stdout).lower()
    return "not found" in text or "no such" in text


class ContainerdOptions(PlatformOptions):
    runtime: Literal["runc", "runsc", "kata"] | None = Field(
        None, description="runtime shim: runc (default), or a sandbox whose containerd shim is installed "
        "(runsc: containerd-shim-runsc-v1, not in Debian's runsc package)")


SHIM_NAMES = {"runc": "io.containerd.runc.v2", "runsc": "io.containerd.runsc.v1", "kata": "io.containerd.kata.v2"}


class Containerd(Platform):
    """containerd + runc through ctr, without docker."""

    type = "containerd"
    host_processes = ("containerd", "containerd-shim", "containerd-shim-runc-v2")
    kind = "container"
    quick_rank = 4
    reachable_network = "host"
    Options = ContainerdOptions
    options: ContainerdOptions
    binaries = ("ctr", "containerd", "runc")
    packages = ("containerd", "runc")
    description = "containerd (ctr, namespace virtbench) + runc, image imported as an OCI archive"

    def __init__(self, name: str, options: PlatformOptions, paths: Paths,
                 executor: Executor | None = None) -> None:
        super().__init__(name, options, paths, executor)
        if self.options.runtime not in (None, "runc"):
            sandboxes.check_containerd_runtime(name, self.options.runtime)
            self.kind = "sandbox"  # type: ignore[misc, assignment]  # a sandbox runtime behind the engine
        if options.network == "bridge":
            raise InputError(
                f"platform {name}: network 'bridge' is not supported for containerd yet "
                "(ctr sets up CNI only in `ctr run`, which cannot create without starting)",
                "use network: none (loopback only) or host for containerd, "
                "or the docker/podman platform for a bridge")

    # -- argv builders (pure) ------------------------------------------------------------
    def create_argv(self, image: Image, name: str, run_id: str) -> list[str]:
        """The container, created without starting (cgroupfs hosts)."""
        return [*CTR, "containers", "create", *self._spec_args(name, run_id), image.tag, name, "sleep", "infinity"]

    def run_argv(self, tag: str, name: str, run_id: str) -> list[str]:
        """The container created and started at once in a systemd scope of virtbench.slice
        (systemd hosts: see the module's docstring)."""
        cgroups_path, _ = slices.scope_path(None, name)
        return [*CTR, "run", "--detach", "--null-io", "--cgroup", cgroups_path, "--runc-systemd-cgroup",
                *self._spec_args(name, run_id), tag, name, "sleep", "infinity"]

    def _spec_args(self, name: str, run_id: str) -> list[str]:
        o = self.options
        argv: list[str] = []
        for label in (f"{LABEL}={run_id}", f"{STATE_LABEL}={self.paths.state}"):
            argv += ["--label", label, "--snapshotter-label", label]
        argv += ["--mount", CGROUP_MOUNT]
        if self.options.runtime is not None:
            argv += ["--runtime", SHIM_NAMES[self.options.runtime]]
        for key, value in EXEC_ENV.items():
            argv += ["--env", f"{key}={value}"]
        if o.network == "host":
            argv.append("--net-host")
        if o.cpus is not None:
            argv += ["--cpu-quota", str(round(o.cpus * CFS_PERIOD_US)), "--cpu-period", str(CFS_PERIOD_US)]
        if o.memory is not None:
            argv += ["--memory-limit", str(int(o.memory))]
        return argv

    def exec_argv(self, instance: Instance, argv: list[str]) -> list[str]:
        # exec ids must be unique among the task's live processes; parallel execs are allowed.
        exec_id = f"{INSTANCE_PREFIX}{uuid.uuid4().hex[:12]}"
        return [*CTR, "tasks", "exec", "--exec-id", exec_id, instance.name, *argv]

    @staticmethod
    def image_query_argv(image: Image) -> list[str]:
        return [*CTR, "images", "ls", "-q", f'name=={image.tag},labels."{TAR_LABEL}"=={image.tar_sha256}']

    # -- engine ------------------------------------------------------------------------
    @classmethod
    def ensure_engine(cls, paths: Paths) -> None:
        services.ensure_containerd()

    @classmethod
    def try_instance(cls, paths: Paths) -> Availability:
        """Start containerd and run `true` in an imported virtbench image if there is one."""
        cls.ensure_engine(paths)
        images = proc.run([*CTR, "images", "ls", "-q", 'name~="^localhost/virtbench:"'], timeout=30).stdout.split()
        if not images:
            return Availability(True, "containerd answers (no virtbench image imported yet to run a test container)")
        name = f"{INSTANCE_PREFIX}probe-{uuid.uuid4().hex[:8]}"
        scope = ["--cgroup", slices.scope_path(None, name)[0], "--runc-systemd-cgroup"] \
            if slices.systemd_managed() else []  # where the platform's own containers go
        proc.run([*CTR, "run", "--rm", "--null-io", *scope, "--label", f"{LABEL}=probe", "--label",
                  f"{STATE_LABEL}={paths.state}", images[0], name, "true"], timeout=120)
        return Availability(True, f"ctr ran a container of {images[0]}")

    # -- lifecycle -----------------------------------------------------------------------
    def close(self) -> None:
        """On cgroupfs hosts ctr puts each container under its namespace's cgroup (/virtbench) and
        leaves that parent, empty, when the last one goes (the kernel keeps it while one runs)."""
        cgroups.remove_cgroups(NAMESPACE)

    def prepare(self, image: Image) -> None:
        if self.host.run(self.image_query_argv(image), timeout=60).stdout.strip():
            return
        archive = oci_archive(image)
        self.host.run([*CTR, "images", "import", str(archive)], timeout=1800)
        self.host.run([*CTR, "images", "label", image.tag, f"{TAR_LABEL}={image.tar_sha256}"], timeout=60)

    def create(self, image: Image, name: str, run_id: str) -> Instance:
        if slices.systemd_managed():  # made at start, in its scope (see the module's docstring)
            _, cgroup = slices.scope_path(None, name)
            return Instance(name=name, platform=self.name, run_id=run_id,
                            data={"image": image.tag, "systemd_scope": True, "cgroup": cgroup})
        self.host.run(self.create_argv(image, name, run_id), timeout=120)
        return Instance(name=name, platform=self.name, run_id=run_id, data={"image": image.tag})

    def start(self, instance: Instance) -> None:
        if instance.data.get("systemd_scope"):
            self.host.run(self.run_argv(instance.data["image"], instance.name, instance.run_id), timeout=240)
        else:
            self.host.run([*CTR, "tasks", "start", "--detach", "--null-io", instance.name], timeout=120)
        if self.options.cpuset is not None:
            self.host.run(self.cpuset_argv(instance, self.options.cpuset), timeout=60)
        self.wait_ready(instance)

    @staticmethod
    def cpuset_argv(instance: Instance, cpuset: str) -> list[str]:
        """runc update on the shim's state, through systemd when systemd made the container's scope."""
        systemd = ["--systemd-cgroup"] if instance.data.get("systemd_scope") else []
        return ["runc", "--root", RUNC_ROOT, *systemd, "update", "--cpuset-cpus", cpuset, instance.name]

    def memory_cgroup(self, instance: Instance) -> str | None:
        """The scope systemd made (systemd hosts), else the cgroup of the container's init."""
        return instance.data.get("cgroup") or super().memory_cgroup(instance)

    def host_pid(self, instance: Instance) -> int | None:
        """The task's init as containerd lists it (probes and the self-test read its cgroups;
        without it a cgroupfs host's containerd instances had no cgroup to read)."""
        res = self.host.run([*CTR, "tasks", "ls"], timeout=60, check=False)
        for line in res.stdout.splitlines()[1:]:
            fields = line.split()
            if len(fields) >= 2 and fields[0] == instance.name and fields[1].isdigit() and int(fields[1]) > 0:
                return int(fields[1])
        return None

    def stop(self, instance: Instance) -> None:
        # Force-deleting the task SIGKILLs it and waits: `sleep` as PID 1 ignores SIGTERM.
        res = self.host.run([*CTR, "tasks", "delete", "--force", instance.name], timeout=60, check=False)
        if not res.ok and not _not_found(res):
            raise CommandError(res.argv, res.returncode, res.stdout, res.stderr)

    def remove(self, instance: Instance) -> None:
        self.stop(instance)
        # Deleting the container also removes its active snapshot (the writable layer).
        res = self.host.run([*CTR, "containers", "delete", instance.name], timeout=60, check=False)
        if not res.ok and not _not_found(res):
            raise CommandError(res.argv, res.returncode, res.stdout, res.stderr)

    @classmethod
    def forget_image(cls, tag: str) -> list[str]:
        if proc.which("ctr") is None or not services.answers(services.CONTAINERD):
            return []
        if tag not in proc.run([*CTR, "images", "ls", "-q"], timeout=60, check=False).stdout.split():
            return []
        r = proc.run([*CTR, "images", "rm", tag], timeout=300, check=False)
        return [f"containerd image {tag}"] if r.ok else [f"containerd image {tag}: not removed: {r.stderr.strip()}"]

    @classmethod
    def cleanup(cls, paths: Paths, run_id: str | None = None) -> list[str]:
        if proc.which("ctr") is None or not services.answers(services.CONTAINERD):
            return []
        removed: list[str] = []
        try:
            names = proc.run([*CTR, "containers", "ls", "-q", owner_selector(paths, run_id)],
                             timeout=60).stdout.split()
            for name in names:
                proc.run([*CTR, "tasks", "delete", "--force", name], timeout=60, check=False)
                res = proc.run([*CTR, "containers", "delete", name], timeout=60, check=False)
                what = f"containerd container {name} (namespace {NAMESPACE})"
                removed.append(what if res.ok else f"could not remove {what}: {res.stderr.strip()}")
            removed += cls._orphan_snapshots(paths, run_id)
        except CommandError as exc:
            removed.append(f"containerd cleanup stopped: {exc}")
        return removed

    @staticmethod
    def _orphan_snapshots(paths: Paths, run_id: str | None) -> list[str]:
        """Writable layers whose container is gone (a crash between the two deletes)."""
        containers = set(proc.run([*CTR, "containers", "ls", "-q"], timeout=60).stdout.split())
        removed = []
        for line in proc.run([*CTR, "snapshots", "ls"], timeout=60).stdout.splitlines()[1:]:
            key = line.split()[0] if line.split() else ""
            if not key.startswith(INSTANCE_PREFIX) or key in containers:
                continue
            info = json.loads(proc.run([*CTR, "snapshots", "info", key], timeout=60).stdout or "{}")
            labels = info.get("Labels") or {}
            owner = labels.get(LABEL)
            if owner is None or labels.get(STATE_LABEL) != str(paths.state) or run_id not in (None, owner):
                continue
            res = proc.run([*CTR, "snapshots", "delete", key], timeout=60, check=False)
            removed.append(f"containerd snapshot {key} (run {owner})" if res.ok
                           else f"could not remove containerd snapshot {key}: {res.stderr.strip()}")
        return removed

    # -- provenance ----------------------------------------------------------------------
    def versions(self) -> dict[str, str]:
        out = self.host.run(["ctr", "--address", CONTAINERD_SOCKET, "version"], timeout=30).stdout
        versions: dict[str, str] = {}
        section = ""
        for line in out.splitlines():
            if line.strip().endswith(":") and not line.startswith(" "):
                section = line.strip().rstrip(":").lower()
            elif line.strip().startswith("Version:"):
                versions["ctr" if section == "client" else "containerd"] = line.split(":", 1)[1].strip()
        try:
            first = self.host.run(["runc", "--version"], timeout=30).stdout.splitlines()
            versions["runc"] = first[0].split()[-1] if first else "?"
        except CommandError:
            versions["runc"] = "not installed"
        return versions

    def describe(self) -> dict[str, Any]:
        doc = super().describe()
        doc["engine"] = {"namespace": NAMESPACE, "runtime": SHIM_NAMES[self.options.runtime or "runc"],
                         "snapshotter": "overlayfs", "cgroup_version": cgroup_mode(),
                         "rlimit_nofile": "1024 (ctr default spec)", "exec_env": "container env = EXEC_ENV",
                         "cpuset_via": "runc update after task start" if self.options.cpuset else None}
        if slices.systemd_managed():
            doc["engine"] |= {"cgroup": f"systemd scope in {units.SLICE} (runc SystemdCgroup)",
                              "lifecycle": "created and started by one `ctr run --detach` at start "
                                           "(ctr's containers create cannot set a cgroup): create measures nothing"}
        else:
            doc["engine"]["cgroup"] = f"cgroupfs /{NAMESPACE}/NAME"
        return doc


def cgroup_mode() -> str:
    """'v2' (unified), 'hybrid' (v1 controllers plus an empty v2 mount) or 'v1'."""
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").exists():
        return "v2"
    return "hybrid" if (root / "unified").is_dir() else "v1"

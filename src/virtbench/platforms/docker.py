"""Docker Engine: the image imported with `docker import`, one container per instance.

Podman speaks the same CLI dialect and subclasses this module's engine class; only what
differs (global flags, rlimits, version and info formats) is overridden there.

Inside a VM (a stack), every command goes through the VM's executor, and ensure_engine_in
starts dockerd in the guest (detached, so the guest agent stays free) before the import.
"""
from __future__ import annotations

import json
import time
import uuid
from typing import Any, ClassVar

from pydantic import Field

from .. import proc, services
from ..errors import CommandError, UnavailableError, VirtbenchError
from ..images.image import Image
from . import runsc, sandboxes, slices
from .base import EXEC_ENV, LABEL, Availability, Executor, Instance, InstanceExecutor, Paths, Platform, PlatformOptions

TAR_LABEL = "org.virtbench.tar_sha256"
"""Image label holding the rootfs.tar hash, so a rebuilt image with the same tag is re-imported."""
IMAGE_REPO = "localhost/virtbench"
STATE_LABEL = "org.virtbench.state"
"""Second label: the state directory (Paths.state) the container belongs to. Cleanup only
touches containers of its own state directory, as the native, runc and lxc platforms do by
keeping everything under it; two virtbench setups (or test sessions) on one host then never
remove each other's containers."""


GUEST_DOCKERD_LOG = "/var/log/vb-dockerd.log"
GUEST_STORAGE_DRIVER = "overlay2"
"""dockerd inside a VM: overlay2 on the guest's ext4 root, named so it fails rather than
falling back to vfs unnoticed."""
GUEST_ENGINE_TIMEOUT = 180.0
"""Seconds dockerd inside a VM may take to answer (generous: TCG emulation is slow)."""
_GUEST_START = (
    # A fixed script (nothing interpolated): start dockerd detached, unless it runs. setsid
    # and the redirections free the guest agent at once (it runs one command at a time);
    # dockerd starts its own containerd, as the guest has no service manager.
    "pgrep -x dockerd >/dev/null && exit 0; "
    f"echo \"--- virtbench starting dockerd at $(date -u +%FT%TZ) ---\" >>{GUEST_DOCKERD_LOG}; "
    f"setsid dockerd --storage-driver={GUEST_STORAGE_DRIVER} </dev/null >>{GUEST_DOCKERD_LOG} 2>&1 &"
)
_GUEST_ANSWERS = (  # 0: dockerd answers; 3: no dockerd process (it died); 1: not yet
    "docker info --format '{{.ServerVersion}}' >/dev/null 2>&1 && exit 0; "
    "pgrep -x dockerd >/dev/null || exit 3; exit 1"
)


def owner_labels(paths: Paths, run_id: str | None) -> list[str]:
    """`key=value` / `key` label selectors of the containers cleanup(paths, run_id) owns."""
    return [f"{LABEL}={run_id}" if run_id else LABEL, f"{STATE_LABEL}={paths.state}"]


def env_argv() -> list[str]:
    """`env -i K=V...`: the engines add their own variables (HOSTNAME, container=podman,
    TERM) to every exec and `-e` cannot remove them, so the command starts from an empty
    environment holding exactly EXEC_ENV, the same as on every other platform."""
    return ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in EXEC_ENV.items())]


class EngineCLI(Platform):
    """A docker-compatible engine driven through its CLI."""
    confinable = True

    kind = "container"
    cli: ClassVar[str] = "docker"
    engine_package: ClassVar[str] = "docker.io"
    ps_label_format: ClassVar[str] = '{{.Label "' + LABEL + '"}}'
    rm_argv: ClassVar[tuple[str, ...]] = ("rm", "-f", "-v")
    _info: dict[str, Any] | None = None

    # -- argv builders (pure) ------------------------------------------------------------
    @classmethod
    def base_argv(cls) -> list[str]:
        return [cls.cli]

    @classmethod
    def run_flags(cls) -> list[str]:
        """Flags every container of this engine needs to start on this host."""
        return []

    def create_argv(self, image: Image, name: str, run_id: str) -> list[str]:
        o = self.options
        argv = [*self.cli_argv(), "create", "--name", name]
        for label in owner_labels(self.paths, run_id):
            argv += ["--label", label]
        argv += ["--network", o.network, *self.run_flags()]
        if o.cpus is not None:
            argv += ["--cpus", f"{o.cpus:g}"]
        if o.cpuset is not None:
            argv += ["--cpuset-cpus", o.cpuset]
        if o.memory is not None:
            argv += ["--memory", str(int(o.memory))]  # bytes: no unit rounding by the CLI
        if self.cgroup_parent:  # a slice for the systemd driver, a path from the root for cgroupfs
            argv += ["--cgroup-parent", slices.engine_parent(self.cgroup_parent, self.cgroup_driver(), self.cli)]
        return [*argv, *self.create_runtime_flags(), image.tag, "sleep", "infinity"]

    def create_runtime_flags(self) -> list[str]:
        """`create` flags choosing the OCI runtime (docker: `--runtime`; podman takes it globally)."""
        runtime = getattr(self.options, "runtime", None)
        return ["--runtime", runtime] if runtime is not None else []

    def cli_argv(self) -> list[str]:
        """The engine CLI with the global flags of this platform's own containers (podman's
        runtime); class-level commands (images, cleanup) use base_argv()."""
        return self.base_argv()

    def host_pid(self, instance: Instance) -> int | None:
        r = self.host.run([self.cli, "inspect", "-f", "{{.State.Pid}}", instance.name], timeout=30, check=False)
        pid = r.stdout.strip()
        return int(pid) if r.ok and pid.isdigit() and pid != "0" else None

    def exec_argv(self, instance: Instance, argv: list[str]) -> list[str]:
        return [*self.cli_argv(), "exec", instance.name, *env_argv(), *argv]

    @classmethod
    def import_argv(cls, image: Image) -> list[str]:
        return [*cls.base_argv(), "import", "--change", f"LABEL {TAR_LABEL}={image.tar_sha256}",
                str(image.tarball), image.tag]

    @classmethod
    def image_query_argv(cls, image: Image) -> list[str]:
        return [*cls.base_argv(), "images", "-q", "--filter", f"reference={image.tag}",
                "--filter", f"label={TAR_LABEL}={image.tar_sha256}"]

    # -- engine ------------------------------------------------------------------------
    @classmethod
    def ensure_engine(cls, paths: Paths) -> None:
        services.ensure_dockerd()

    @classmethod
    def engine_up(cls) -> bool:
        """Whether the engine answers now, without starting anything (for cleanup)."""
        return services.answers(services.DOCKERD)

    @classmethod
    def try_instance(cls, paths: Paths) -> Availability:
        """Start the engine, ask it for its info, and run `true` in an already imported
        virtbench image when there is one (probing has no image of its own to import)."""
        cls.ensure_engine(paths)
        proc.run([*cls.base_argv(), "info"], timeout=30)
        listed = proc.run([*cls.base_argv(), "images", "--format", "{{.Repository}}:{{.Tag}}",
                           "--filter", f"reference={IMAGE_REPO}"], timeout=30).stdout.split()
        if not listed:
            return Availability(True, f"{cls.cli} engine answers (no virtbench image imported yet "
                                      "to run a test container)")
        name = f"vb-probe-{uuid.uuid4().hex[:8]}"
        labels = [a for label in owner_labels(paths, "probe") for a in ("--label", label)]
        proc.run([*cls.base_argv(), "run", "--rm", "--name", name, *labels,
                  "--network", "none", *cls.run_flags(), listed[0], "true"], timeout=120)
        return Availability(True, f"{cls.cli} ran a container of {listed[0]}")

    # -- lifecycle -----------------------------------------------------------------------
    def prepare(self, image: Image) -> None:
        if self.host.run(self.image_query_argv(image), timeout=60).stdout.strip():
            return
        self.host.run(self.import_argv(image), timeout=1800)

    def create(self, image: Image, name: str, run_id: str) -> Instance:
        out = self.host.run(self.create_argv(image, name, run_id), timeout=120).stdout
        return Instance(name=name, platform=self.name, run_id=run_id,
                        data={"id": out.strip().splitlines()[-1] if out.strip() else name,
                              "image": image.tag})

    def start(self, instance: Instance) -> None:
        self.host.run([*self.cli_argv(), "start", instance.name], timeout=120)
        self.wait_ready(instance)


    def stop(self, instance: Instance) -> None:
        # -t 0: `sleep` as PID 1 ignores SIGTERM, so any grace period is pure waiting.
        self.host.run([*self.cli_argv(), "stop", "-t", "0", instance.name], timeout=60)

    def remove(self, instance: Instance) -> None:
        res = self.host.run([*self.cli_argv(), *self.rm_argv, instance.name], timeout=60, check=False)
        if not res.ok and "no such container" not in (res.stderr + res.stdout).lower():
            if isinstance(self.host, InstanceExecutor) and \
                    not self.host.run(["true"], timeout=60, check=False).ok:
                return  # its outer instance (a VM, stopped before its inner ones are removed) took it along
            raise CommandError(res.argv, res.returncode, res.stdout, res.stderr)

    @classmethod
    def forget_image(cls, tag: str) -> list[str]:
        if proc.which(cls.cli) is None or not cls.engine_up():
            return []
        if not proc.run([*cls.base_argv(), "images", "-q", "--filter", f"reference={tag}"], timeout=60,
                        check=False).stdout.strip():
            return []
        r = proc.run([*cls.base_argv(), "rmi", "-f", tag], timeout=300, check=False)
        return [f"{cls.cli} image {tag}"] if r.ok else [f"{cls.cli} image {tag}: not removed: {r.stderr.strip()}"]

    @classmethod
    def cleanup(cls, paths: Paths, run_id: str | None = None) -> list[str]:
        if proc.which(cls.cli) is None or not cls.engine_up():
            return []
        filters = [a for label in owner_labels(paths, run_id) for a in ("--filter", f"label={label}")]
        try:
            listed = proc.run([*cls.base_argv(), "ps", "-a", *filters, "--format",
                               "{{.ID}}\t{{.Names}}\t" + cls.ps_label_format], timeout=60).stdout
        except CommandError:
            return []
        removed: list[str] = []
        for line in listed.splitlines():
            if not line.strip():
                continue
            cid, name, rid = (line.split("\t") + ["", ""])[:3]
            res = proc.run([*cls.base_argv(), *cls.rm_argv, cid], timeout=60, check=False)
            what = f"{cls.cli} container {name} (run {rid or '?'})"
            removed.append(what if res.ok else f"could not remove {what}: {res.stderr.strip()}")
        return removed

    # -- provenance ----------------------------------------------------------------------
    def engine_info(self) -> dict[str, Any]:
        """`info` of the engine, fetched once per platform object."""
        if self._info is None:
            out = self.host.run([*self.base_argv(), "info", "--format", "{{json .}}"], timeout=60).stdout
            self._info = json.loads(out)
        return self._info

    def cgroup_driver(self) -> str | None:
        """The engine's active cgroup driver (systemd or cgroupfs), from its info."""
        return self.engine_info().get("CgroupDriver")

    def engine_settings(self) -> dict[str, Any]:
        info = self.engine_info()
        return {"storage_driver": info.get("Driver"), "cgroup_driver": info.get("CgroupDriver"),
                "cgroup_version": info.get("CgroupVersion"), "runtime": info.get("DefaultRuntime"),
                "security_options": info.get("SecurityOptions"), "engine_version": info.get("ServerVersion")}

    def describe(self) -> dict[str, Any]:
        doc = super().describe()
        try:
            doc["engine"] = self.engine_settings()
        except (VirtbenchError, ValueError) as exc:
            doc["engine"] = {"error": str(exc)}
        doc["engine"]["run_flags"] = self.run_flags()
        doc["engine"]["exec_env"] = "env -i (exactly EXEC_ENV)"
        return doc


class DockerOptions(PlatformOptions):
    runtime: str | None = Field(
        None, description="OCI runtime dockerd runs the containers with, e.g. runsc (gVisor); "
        "default: dockerd's default (runc). dockerd must know it (see doctor)")


class Docker(EngineCLI):
    """Docker Engine (dockerd on the system containerd, runc, or a sandbox runtime)."""

    type = "docker"
    host_processes = ("dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2")
    quick_rank = 1
    runs_inside = True
    Options = DockerOptions
    options: DockerOptions

    def __init__(self, name: str, options: PlatformOptions, paths: Paths,
                 executor: Executor | None = None) -> None:
        super().__init__(name, options, paths, executor)
        if self.options.runtime is not None:
            sandboxes.check_docker_runtime(name, self.options.runtime, self.options.network)
            self.kind = sandboxes.DOCKER_RUNTIMES[self.options.runtime]  # type: ignore[misc, assignment]  # docker+runsc is a sandbox

    def describe(self) -> dict[str, Any]:
        doc = super().describe()
        if self.options.runtime is not None:
            doc["engine"]["runtime"] = self.options.runtime
            doc["engine"]["runtime_mode"] = sandboxes.docker_runtime_mode(self.options.runtime)
        return doc
    binaries = ("docker", "dockerd", "containerd", "runc")
    packages = ("docker.io",)
    description = "Docker Engine: dockerd + containerd + runc, image imported from the rootfs tarball"

    def ensure_engine_in(self, executor: Executor) -> None:
        """Start dockerd inside an outer instance (a VM) and wait until it answers."""
        executor.run(["sh", "-c", _GUEST_START], timeout=60)
        deadline = time.monotonic() + GUEST_ENGINE_TIMEOUT
        status, detail = 1, ""
        while time.monotonic() < deadline:
            try:
                r = executor.run(["sh", "-c", _GUEST_ANSWERS], timeout=60, check=False)
                status, detail = r.returncode, r.stderr.strip()
            except CommandError as exc:
                if not exc.timed_out:
                    raise
                status = 1  # the check itself timed out: the guest is busy starting dockerd
            if status != 1:
                break
            time.sleep(1.0)
        if status == 0:
            return
        if status not in (1, 3):  # not dockerd's answer: the check could not run
            raise UnavailableError(f"{self.name}: cannot check dockerd inside the VM "
                                   f"(status {status}): {detail}")
        tail = executor.run(["tail", "-n", "15", GUEST_DOCKERD_LOG], timeout=60, check=False)
        what = "exited" if status == 3 else f"did not answer within {GUEST_ENGINE_TIMEOUT:g} s"
        raise UnavailableError(f"{self.name}: dockerd inside the VM {what}; {GUEST_DOCKERD_LOG}: "
                               + " | ".join((tail.stdout or tail.stderr).strip().splitlines()),
                               f"see {GUEST_DOCKERD_LOG} in the guest; the VM image needs docker.io")

    def versions(self) -> dict[str, str]:
        out = self.host.run([self.cli, "version", "--format", "{{json .}}"], timeout=60).stdout
        doc = json.loads(out)
        versions = {"docker_cli": doc.get("Client", {}).get("Version", "?")}
        server = doc.get("Server") or {}
        versions["docker"] = server.get("Version", "?")
        for comp in server.get("Components") or []:
            name = comp.get("Name", "").lower()
            if name in ("containerd", "runc", "docker-init"):
                versions[name] = comp.get("Version", "?")
        if self.options.runtime == "runsc":
            versions["runsc"] = runsc.version() or "unknown"
        return versions

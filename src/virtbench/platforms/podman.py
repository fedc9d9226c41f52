"""Podman: daemonless, same CLI dialect as docker (see docker.EngineCLI).

What this host taught (Debian 12, cgroup v1 hybrid, no systemd, root without
CAP_SYS_RESOURCE):
- podman's default rlimits (nofile 1048576) exceed the hard limits, and runc then fails with
  "error setting rlimits for ready process: error setting rlimit type 7: operation not
  permitted", so nofile is pinned to our hard limit.
- containers/common lowers podman's own RLIMIT_NPROC to kernel.pid_max at start, so even
  our hard nproc limit is too high for it ("rlimit type 6"); nproc is min(hard, pid_max).
- crun refuses hybrid cgroup hierarchies ("cgroups in hybrid mode not supported"), and
  docker uses runc too, so podman runs runc unless `runtime:` says otherwise: the comparison
  is engine vs engine. `runtime: crun|runsc` is podman's global `--runtime` (podman records it
  with each container); runsc gets `--runtime-flag network=none`, as dockerd's runsc entry
  (services.SANDBOX_RUNTIMES), and makes the platform a sandbox.
Inside a VM (a stack) the flags above are still computed on the host; ensure_engine_in
therefore also writes the guest's containers.conf (cgroupfs, file events, runc), as the guest
has no systemd whatever the host has.
"""
from __future__ import annotations

import json
import resource
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from .. import proc, services
from ..errors import CommandError, InputError, UnavailableError
from ..executor import HostExecutor
from .base import LABEL, Executor, Paths, PlatformOptions
from .docker import EngineCLI

RUNTIME = "runc"
RUNTIME_KINDS = {"runc": "container", "crun": "container", "runsc": "sandbox"}
GUEST_CONF = "/etc/containers/containers.conf"
_GUEST_SETUP = (
    # A fixed script: inside a VM (no systemd) podman must use cgroupfs and a file for its
    # events whatever the host's flags say, and runc, as on the host. An existing file stays.
    f"[ -e {GUEST_CONF} ] || {{ mkdir -p /etc/containers && printf '%s\\n' '[engine]' "
    "'cgroup_manager = \"cgroupfs\"' 'events_logger = \"file\"' 'runtime = \"runc\"' "
    f">{GUEST_CONF}; }}"
)


def _pid_max() -> int | None:
    try:
        return int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        return None


def rlimit_flags() -> list[str]:
    """--ulimit flags that this host's hard limits (and podman's own) allow."""
    flags = []
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if nofile != resource.RLIM_INFINITY:
        flags += ["--ulimit", f"nofile={nofile}:{nofile}"]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    pid_max = _pid_max()
    limits = [v for v in (nproc if nproc != resource.RLIM_INFINITY else None, pid_max) if v]
    if limits:
        flags += ["--ulimit", f"nproc={min(limits)}:{min(limits)}"]
    return flags


class PodmanOptions(PlatformOptions):
    runtime: Literal["runc", "crun", "runsc"] = Field(
        "runc", description="OCI runtime podman runs the containers with: runc (default, as docker), crun, "
        "or runsc (gVisor: a sandbox, network none only)")


def runtime_flags(runtime: str) -> list[str]:
    """podman's global flags choosing the runtime, with the arguments dockerd gives it too."""
    args = services.SANDBOX_RUNTIMES.get(runtime, ())
    return ["--runtime", runtime, *[f for a in args for f in ("--runtime-flag", a.removeprefix("--"))]]


def check_runtime(platform: str, runtime: str, network: str) -> None:
    """Raise InputError (nothing started) when this host cannot run podman with `runtime`."""
    if proc.which(runtime) is None:
        raise InputError(f"platform {platform!r}: runtime {runtime}: {runtime} is not installed",
                         f"apt-get install {runtime}")
    if runtime == "runsc" and network != "none":
        raise InputError(f"platform {platform!r}: podman runs runsc with --network=none (its netstack refuses "
                         f"this kernel's namespaces), so network {network!r} cannot work", "use network: none")
    if runtime == "crun" and Path("/sys/fs/cgroup/unified").is_dir():
        from .oci import _v2_controllers

        if _v2_controllers():
            raise InputError(f"platform {platform!r}: runtime crun refuses this hybrid cgroup host (cgroup v1 "
                             f"controllers, and cgroup2 holds: {_v2_controllers()})",
                             "boot with systemd.unified_cgroup_hierarchy=1 (pure cgroup v2), or use runtime: runc")


class Podman(EngineCLI):
    """Podman with runc (or crun, runsc); no daemon to start."""

    type = "podman"
    host_processes = ("conmon",)
    quick_rank = 2
    runs_inside = True
    Options = PodmanOptions
    options: PodmanOptions
    cli = "podman"
    engine_package = "podman"
    binaries = ("podman", "runc")
    packages = ("podman", "runc")
    description = "Podman (daemonless, conmon + runc), image imported from the rootfs tarball"
    ps_label_format = '{{index .Labels "' + LABEL + '"}}'
    # podman rm -f stops with the 10 s default grace period first; sleep ignores SIGTERM.
    rm_argv = ("rm", "-f", "-v", "-t", "0")

    def __init__(self, name: str, options: PlatformOptions, paths: Paths,
                 executor: Executor | None = None) -> None:
        super().__init__(name, options, paths, executor)
        if executor is None or isinstance(executor, HostExecutor):  # inside a VM: the guest's own podman
            check_runtime(name, self.options.runtime, self.options.network)
        self.kind = RUNTIME_KINDS[self.options.runtime]  # type: ignore[misc, assignment]  # podman+runsc is a sandbox

    @classmethod
    def global_flags(cls, runtime: str = RUNTIME) -> list[str]:
        flags = runtime_flags(runtime)
        if not services.systemd_running():
            # Without systemd there is neither a systemd cgroup manager nor a journal.
            flags += ["--cgroup-manager", "cgroupfs", "--events-backend", "file"]
        return flags

    @classmethod
    def base_argv(cls) -> list[str]:
        return [cls.cli, *cls.global_flags()]

    def cli_argv(self) -> list[str]:
        return [self.cli, *self.global_flags(self.options.runtime)]

    def create_runtime_flags(self) -> list[str]:
        return []  # a global flag for podman (cli_argv)

    @classmethod
    def run_flags(cls) -> list[str]:
        return rlimit_flags()

    @classmethod
    def ensure_engine(cls, paths: Paths) -> None:
        """Podman has no daemon; each command is the engine."""

    @classmethod
    def engine_up(cls) -> bool:
        return True

    def ensure_engine_in(self, executor: Executor) -> None:
        """No daemon: configure podman inside the outer instance (a VM) and check it answers."""
        executor.run(["sh", "-c", _GUEST_SETUP], timeout=60)
        r = executor.run([*self.base_argv(), "info", "--format", "{{.Host.CgroupsVersion}}"],
                         timeout=180, check=False)
        if not r.ok:
            raise UnavailableError(f"{self.name}: podman does not work inside the VM: "
                                   + " | ".join((r.stderr or r.stdout).strip().splitlines()[-5:]),
                                   "the VM image needs podman and runc")

    def engine_info(self) -> dict[str, Any]:
        if self._info is None:
            out = self.host.run([*self.cli_argv(), "info", "--format", "json"], timeout=60).stdout
            self._info = json.loads(out)
        return self._info

    def cgroup_driver(self) -> str | None:
        return self.engine_info().get("host", {}).get("cgroupManager")

    def engine_settings(self) -> dict[str, Any]:
        info = self.engine_info()
        host, store = info.get("host", {}), info.get("store", {})
        return {"storage_driver": store.get("graphDriverName"),
                "cgroup_manager": host.get("cgroupManager"),
                "cgroup_version": host.get("cgroupVersion"),
                "runtime": host.get("ociRuntime", {}).get("name"),
                "network_backend": host.get("networkBackend"),
                "events_backend": host.get("eventLogger"),
                "engine_version": info.get("version", {}).get("Version")}

    def versions(self) -> dict[str, str]:
        out = self.host.run([self.cli, "version", "--format", "json"], timeout=60).stdout
        versions = {"podman": json.loads(out).get("Client", {}).get("Version", "?")}
        for tool in (self.options.runtime, "conmon"):
            try:
                first = self.host.run([tool, "--version"], timeout=30).stdout.splitlines()
                versions[tool] = first[0].split()[-1] if first else "?"
            except CommandError:
                versions[tool] = "not installed"
        return versions


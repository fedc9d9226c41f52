"""The platform plugin interface.

A platform turns the guest image into running instances and builds the argv that runs a
command inside one. All process starts go through an Executor, which on the host is
virtbench.proc.run; a platform stacked inside another (a container in a VM) gets an
executor that runs inside the outer instance instead, so platforms never care where they are.

Every object a platform creates is named with INSTANCE_PREFIX and labelled with the run id,
so `virtbench cleanup` can find and remove what a crash left behind."""
from __future__ import annotations

import builtins
import copy
import os
import re
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .. import notation, proc
from ..errors import InputError, UnavailableError, VirtbenchError
from ..executor import Executor, HostExecutor
from ..images.image import Image
from .sizes import Size

if TYPE_CHECKING:
    from .background import InstanceProcess

LABEL = "org.virtbench"
"""Label key on every container virtbench makes; the value is the run id."""


class InstanceExecutor:
    """Runs commands inside an outer platform's instance: how a stacked platform (docker in a
    VM) reaches its runtime. Every command still ends up in one proc.run on the host."""

    def __init__(self, outer: Platform, instance: Instance) -> None:
        self.outer = outer
        self.instance = instance

    def run(self, argv: list[str], *, timeout: float | None = proc.DEFAULT_TIMEOUT,
            check: bool = True, input: str | None = None,
            detached_children: bool = False) -> proc.Result:
        return self.outer.exec(self.instance, argv, timeout=timeout, check=check)

    def spawn(self, argv: list[str]) -> proc.Background:
        return self.outer.host.spawn(self.outer.exec_argv(self.instance, argv))


@dataclass(frozen=True)
class Availability:
    available: bool
    reason: str
    fix: str = ""


@dataclass(frozen=True)
class Paths:
    """Where virtbench keeps state; passed explicitly, never read from globals."""

    state: Path = Path("/var/lib/virtbench")
    runtime: Path = Path("/run/virtbench")

    @property
    def instances(self) -> Path:
        return self.state / "instances"

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Paths:
        """For the CLI only: VIRTBENCH_STATE_DIR / VIRTBENCH_RUNTIME_DIR move the state (tests use it)."""
        env = os.environ if environ is None else environ
        return cls(state=Path(env.get("VIRTBENCH_STATE_DIR", "/var/lib/virtbench")),
                   runtime=Path(env.get("VIRTBENCH_RUNTIME_DIR", "/run/virtbench")))

    def make_private(self) -> Paths:
        """The state and runtime directories readable by this user only (0700), created so or
        closed if an older virtbench left them open: instance directories hold guest root
        filesystems with setuid-root binaries, the runtime one the lock and sockets."""
        from ..filemodes import private_dirs

        private_dirs(self.state, self.runtime)
        return self


MAX_CPU = 8191
"""The highest CPU number Linux numbers (NR_CPUS is at most 8192)."""
EXEC_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LC_ALL": "C",
}
"""The environment of every command run inside an instance, identical on every platform."""


class PlatformOptions(BaseModel):
    """Options every platform understands. Platforms extend this with their own fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpus: float | None = Field(None, gt=0, le=4096, description="CPU quota in cores (CFS quota)")
    cpuset: str | None = Field(None, description="CPUs the instance may use, e.g. '0' or '0-1'")
    memory: Size | None = Field(None, description="memory limit, e.g. 512M (binary: 512 MiB)")
    network: Literal["none", "bridge", "host"] = Field(
        "none", description="none: loopback only; bridge: own namespace on a host bridge; host: host's stack")

    @field_validator("cpuset")
    @classmethod
    def _cpuset(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"\d+(-\d+)?(,\d+(-\d+)?)*", v):
            raise ValueError("cpuset must look like '0', '0-3' or '0,2'")
        for part in (v or "").split(","):
            lo, _, hi = part.partition("-")
            if int(hi or lo) < int(lo) or int(hi or lo) > MAX_CPU:  # before any range of them is built
                raise ValueError(f"cpuset range {part!r} must go upwards and stay within CPU 0-{MAX_CPU}")
        return v

    @field_validator("memory")
    @classmethod
    def _memory(cls, v: int | None) -> int | None:
        if v is not None and v < 6 * 1024 * 1024:
            raise ValueError("memory limit below 6 MiB cannot start a container")
        return v


@dataclass
class Instance:
    """A created instance; `data` holds what the platform needs to find it again."""

    name: str
    platform: str
    run_id: str
    data: dict[str, Any] = field(default_factory=dict)


@contextmanager
def trial_dir(paths: Paths, name: str) -> Iterator[Path]:
    """A scratch directory for a probe's tiny instance, torn down after it (mounts included)
    whatever happened; a failure to clean up never changes the probe's answer."""
    from . import mounts

    d = paths.runtime / "probe" / f"{name}-{uuid.uuid4().hex[:8]}"
    try:
        yield d
    finally:
        with suppress(Exception):  # best effort: `cleanup` removes what is left
            mounts.teardown_dir(d)


class Platform(ABC):
    """One way of running the guest image (native chroot, a container runtime, a VM)."""

    type: ClassVar[str]
    kind: ClassVar[Literal["baseline", "container", "sandbox", "vm"]] = "container"
    """What isolates the workload: nothing (baseline), namespaces (container), a user-space kernel
    (sandbox) or a guest kernel (vm); reports group platforms by it (a stack is `stack`)."""
    Options: ClassVar[builtins.type[PlatformOptions]] = PlatformOptions
    binaries: ClassVar[tuple[str, ...]] = ()
    """Host programs the platform needs."""
    packages: ClassVar[tuple[str, ...]] = ()
    """Debian packages that provide them (the fix doctor suggests, what make run installs)."""
    description: ClassVar[str] = ""
    confinable: ClassVar[bool] = False
    """Whether instances honour `cgroup_parent` (placed under a confining parent cgroup)."""
    host_processes: ClassVar[tuple[str, ...]] = ()
    """Names of the host processes that serve its instances from outside their cgroups (shims,
    monitors, conmon, the runtime's daemons): density counts their memory (PSS) and CPU as
    each instance's host-side cost."""
    pod: ClassVar[bool] = False
    """Its instances are Kubernetes pods: density's sizing advice adds the RuntimeClass
    `overhead.podFixed` that covers what one instance was measured to cost."""
    exec_outlives_client: ClassVar[bool] = True
    """Whether a process started by exec_argv keeps running when its host-side client is
    killed (docker exec and the like); spawn() then stops it inside the instance."""

    # -- capabilities: what the rest of virtbench asks of a platform instead of its type name,
    # so that a new platform is its module and its entry point
    quick_rank: ClassVar[int | None] = None
    """Its place among the platforms the quick comparison (`run --quick`, the web form's quick
    button) tries, lowest first; None: not part of it (a VM joins as the KVM guest entry)."""
    holds_inner: ClassVar[bool] = False
    """Whether other platforms run inside its instances (`inside: NAME`: a VM hosting containers)."""
    runs_inside: ClassVar[bool] = False
    """Whether it runs inside a platform holding inner ones (its packages in the VM image, its engine started there)."""
    live_migration: ClassVar[Literal["qmp", "criu"] | None] = None
    """How a running instance migrates live: QEMU's QMP (a VM), CRIU by lxc-checkpoint (LXC), or not at all."""
    migrates_to_host: ClassVar[bool] = False
    """Whether offline migration moves its instances to another host (nothing of them is this host's engine's)."""
    image_per_instance: ClassVar[bool] = True
    """Whether each instance holds its own copy of the image (an overlay): what `with_image` migrates."""
    reachable_network: ClassVar[str] = "bridge"
    """The `network:` setting by which an instance and the host reach each other (named in fixes)."""
    python_extra: ClassVar[str | None] = None  # the package extra its module imports (shipped to hosts)
    fleet_gap: ClassVar[str | None] = None  # why a fleet of its instances cannot run density, or None

    @classmethod
    def entry_gap(cls, options: Mapping[str, Any]) -> Availability | None:
        """Why an entry with these (campaign) options cannot run here although its type can (a
        pod platform's kubeconfig that does not exist), or None. Reads at most a file's presence,
        runs nothing: a study leaves such an entry out instead of failing its whole part."""
        return None

    @classmethod
    def uses_kvm(cls, options: Mapping[str, Any]) -> bool:
        """Whether an instance with these (campaign) options needs KVM: a study leaves it out
        where KVM does not work, rather than measure an emulator."""
        return False

    def __init__(self, name: str, options: PlatformOptions, paths: Paths,
                 executor: Executor | None = None) -> None:
        self.name = name
        self.options = options
        self.paths = paths
        self._executor: Executor = executor or HostExecutor()
        self.cgroup_parent: str | None = None
        """Set by an experiment that confines instances (density's host_memory): a cgroup path
        relative to the hierarchy root that every instance created afterwards is placed under."""

    @property
    def host(self) -> Executor:
        """Where this platform's commands run: given at construction (or by bind), never patched."""
        return self._executor

    def bind(self, executor: Executor) -> Self:
        """This platform with its commands run through another executor (a stacked platform
        inside one outer instance, a remote host); the original is left unchanged."""
        clone = copy.copy(self)
        clone._executor = executor
        return clone

    # -- discovery -------------------------------------------------------------------
    needs_root: ClassVar[bool] = False
    """Whether the platform's availability check (and runs) need root here."""

    @classmethod
    def availability(cls, paths: Paths) -> Availability:
        """Decide by trying (run a tiny instance), not by the presence of a binary.

        The checks every platform shares come first (root where needed, its binaries), then
        its own try_instance; what that raises is the reason with its fix: the check reports,
        never raises."""
        fix = "apt-get install " + " ".join(cls.packages or cls.binaries)
        if cls.needs_root and os.geteuid() != 0:
            return Availability(False, f"{cls.type} needs root here", "run as root")
        for b in cls.binaries:
            if proc.which(b) is None:
                return Availability(False, f"{b} is not installed", fix)
        try:
            return cls.try_instance(paths)
        except Exception as exc:  # noqa: BLE001 - the check reports, never raises
            return cls.unavailable(exc, fix)

    @classmethod
    def try_instance(cls, paths: Paths) -> Availability:
        """The platform's own test: start a tiny instance (or say why there is none to start).
        Every platform overrides this (or, like a platform written before it, probe itself)."""
        raise NotImplementedError(f"{cls.__name__} says neither how to try an instance nor how to probe")

    @classmethod
    def unavailable(cls, exc: Exception, fix: str) -> Availability:
        """The reason try_instance raised: an error of ours says it with its fix."""
        if isinstance(exc, VirtbenchError):
            return Availability(False, exc.message, exc.fix or fix)
        return Availability(False, f"{cls.type} test failed: {type(exc).__name__}: {exc}", fix)

    @abstractmethod
    def versions(self) -> dict[str, str]:
        """Runtime versions for provenance."""

    def describe(self) -> dict[str, Any]:
        """The platform's full configuration as stored with every result."""
        return {"name": self.name, "type": self.type, "kind": self.kind,
                **self.options.model_dump(mode="json")}

    def label(self) -> str:
        """Human-readable identity used in reports (e.g. 'docker(cpus=1)')."""
        opts = {k: v for k, v in self.options.model_dump(mode="json").items()
                if v is not None and k != "network"}
        inner = notation.options(opts)
        return f"{self.type}({inner})" if inner else self.type

    def image_packages(self) -> tuple[str, ...]:
        """Debian packages its options need in the image (systemd for an LXC system container)."""
        return ()

    def memory_cgroup(self, instance: Instance) -> str | None:
        """Its memory cgroup (relative), where usage and OOM kills count: its main process's."""
        from . import cgroups

        pid = self.host_pid(instance)
        return cgroups.memory_cgroup_of(pid) if pid else None

    def guest_oom_kills(self, instance: Instance) -> int | None:
        """OOM kills its own kernel counted (a VM's guest: its limit is its RAM, out of the host
        cgroup's sight); None where its processes are the host kernel's (memory_cgroup)."""
        return None

    @classmethod  # noqa: B027 - optional hook: most platforms need nothing
    def ensure_engine(cls, paths: Paths) -> None:
        """Start the runtime's daemon (dockerd, containerd) if the platform needs one."""

    # -- stacking (a platform inside another's instances) ------------------------------
    def accept_inner(self, inner: Platform) -> None:
        """Called before prepare() for each platform declared `inside` this one: make its
        runtime available in this platform's instances (e.g. packages in the VM image)."""
        raise InputError(f"{self.name} ({self.type}) cannot host other platforms",
                         "use a vm platform (qemu) as `inside`")

    def inner_image(self, image: Image) -> Image:
        """The image as seen from inside this platform's instances (for an inner prepare)."""
        raise InputError(f"{self.name} ({self.type}) cannot host other platforms")

    def ensure_engine_in(self, executor: Executor) -> None:  # noqa: B027 - optional hook: most platforms need nothing
        """Start this runtime's daemon through `executor` (inside an outer instance)."""

    # -- lifecycle (each step is timed by the runner) --------------------------------
    def prepare(self, image: Image) -> None:  # noqa: B027 - optional hook: most platforms need nothing
        """Once per campaign: make the image known to the runtime (import). Idempotent."""

    def preflight(self) -> None:  # noqa: B027 - optional hook: most platforms need nothing
        """Check the options against what they name (a cluster) before the image is built; raises."""

    def close(self) -> None:  # noqa: B027 - optional hook: most platforms need nothing
        """After the run, however it ended: remove what prepare() made for it (a namespace)."""

    def event_times(self, instance: Instance) -> tuple[dict[str, float], str]:
        """Steps timed by its own events (a pod's watch): metric -> seconds, and their raw record."""
        return {}, ""

    @abstractmethod
    def create(self, image: Image, name: str, run_id: str) -> Instance:
        """Create the instance from the image without starting it."""

    @abstractmethod
    def start(self, instance: Instance) -> None:
        """Start the instance and return once a command can run inside it."""

    @abstractmethod
    def exec_argv(self, instance: Instance, argv: list[str]) -> list[str]:
        """argv that runs `argv` inside the instance (pure: builds, never runs)."""

    @abstractmethod
    def stop(self, instance: Instance) -> None: ...

    @abstractmethod
    def remove(self, instance: Instance) -> None:
        """Remove the instance and everything it mounted or created. Safe to call twice."""

    def discard(self, instance: Instance) -> list[str]:
        """Stop and remove, best effort (`cleanup` is the backstop): each step tried; what failed."""
        errors = []
        for step in (self.stop, self.remove):
            try:
                step(instance)
            except Exception as exc:  # noqa: BLE001 - collected for the caller; the next step still runs
                errors.append(f"{instance.name}: {step.__name__}: {exc}")
        return errors

    @classmethod
    def forget_image(cls, tag: str) -> list[str]:
        """Drop its own copy of an image leaving the cache (an engine's import: gigabytes)."""
        return []

    @classmethod
    @abstractmethod
    def cleanup(cls, paths: Paths, run_id: str | None = None) -> list[str]:
        """Remove every leftover virtbench object of this platform (of one run, or all).

        Returns what was removed, for the user, and (as closing.NotRemoved) what could not be. Must
        not fail when there is nothing to do or the runtime is not installed."""

    # -- offline migration (stop, move the storage, start) ------------------------------
    def storage(self, instance: Instance) -> dict[str, Path]:
        """The instance's own data by role (e.g. {"upper": <dir>}): what an offline migration
        moves. Empty: the storage belongs to an engine and cannot be moved from outside it."""
        return {}

    def relocate(self, instance: Instance, moved: dict[str, Path]) -> None:
        """Point the stopped instance at its storage's new place, so start() runs it from there.

        `moved` maps each storage() role to its copy, plus "lower" when the image moved too."""
        raise UnavailableError(f"{self.name} ({self.type}) cannot be migrated offline: its storage "
                               "belongs to the engine", "use lxc, runc, native or qemu for offline migration")

    # -- networking (two-endpoint benchmarks) -----------------------------------------
    @classmethod
    def network_gap(cls, options: PlatformOptions, need: Literal["inbound", "to_host"]) -> str | None:
        """Why an instance with these options cannot be reached from outside (`inbound`: a
        peer or the host connects to it) or cannot reach the host (`to_host`); None if it can.

        Read by campaign validation, so a network benchmark that cannot work is refused
        before anything starts instead of failing when its round comes."""
        if getattr(options, "network", "host") != "none":
            return None
        return "network 'none' (loopback only): " + (
            "nothing can reach it" if need == "inbound" else "it cannot reach the host")

    def address(self, instance: Instance) -> str:
        """IPv4 address other instances and the host reach this instance at.

        Read from inside the instance (`ip addr`), so every platform gets it the same way."""
        if self.options.network == "host":
            return "127.0.0.1"
        if self.options.network == "none":
            raise UnavailableError(f"platform {self.name!r} has network 'none': nothing can reach it",
                                   "set network: bridge (or host) on this platform for network benchmarks")
        out = self.exec(instance, ["ip", "-4", "-o", "addr", "show", "scope", "global"], timeout=30).stdout
        match = re.search(r"inet (\d+\.\d+\.\d+\.\d+)/", out)
        if not match:
            raise UnavailableError(f"{self.name}: instance {instance.name} has no IPv4 address: {out.strip()!r}")
        return match.group(1)

    def host_address(self, instance: Instance) -> str:
        """The host's address as seen from inside the instance (its default gateway)."""
        if self.options.network == "host":
            return "127.0.0.1"
        if self.options.network == "none":
            raise UnavailableError(f"platform {self.name!r} has network 'none': it cannot reach the host",
                                   "set network: bridge (or host) on this platform for network benchmarks")
        out = self.exec(instance, ["ip", "-4", "route", "show", "default"], timeout=30).stdout
        match = re.search(r"default via (\d+\.\d+\.\d+\.\d+)", out)
        if not match:
            raise UnavailableError(f"{self.name}: instance {instance.name} has no default route to the host")
        return match.group(1)

    # -- helpers ---------------------------------------------------------------------
    def host_pid(self, instance: Instance) -> int | None:
        """Host pid of the instance's main process, whose cgroups probes read (None: the
        platform has none to give, e.g. the native chroot, or a VM's guest processes)."""
        return None

    def exec(self, instance: Instance, argv: list[str], *, timeout: float | None = None,
             check: bool = True) -> proc.Result:
        return self.host.run(self.exec_argv(instance, argv), timeout=timeout, check=check)

    def spawn(self, instance: Instance, argv: list[str]) -> InstanceProcess:
        """Start argv in the background inside the instance (a server); stop() really ends it."""
        from .background import InstanceProcess

        return InstanceProcess(self, instance, argv)

    def wait_ready(self, instance: Instance, timeout: float = 60.0) -> None:
        """Poll `true` inside the instance until it succeeds (start-to-ready)."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                self.exec(instance, ["true"], timeout=max(1.0, deadline - time.monotonic()))
                return
            except Exception as exc:  # noqa: BLE001 - retried until the deadline
                last = exc
                time.sleep(0.02)
        raise TimeoutError(f"{self.name}: instance {instance.name} not ready after {timeout:g} s: {last}")

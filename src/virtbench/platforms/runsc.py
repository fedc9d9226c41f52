"""gVisor (`runsc`) driven directly on the same OCI bundle as runc and crun.

gVisor puts a user-space kernel (the Sentry) between the workload and the host: every system
call, page fault and file access is served by it, reached through the chosen *platform*:
`ptrace` (every trap goes through the host's ptrace: portable, slowest), `systrap` (seccomp
traps, newer releases only) or `kvm` (hardware virtualization; needs working KVM). CPU-bound
work runs natively; what talks to the kernel pays. Which platforms the installed runsc has is
read from `runsc help platforms`; whether one works is decided by starting a sandbox with a
bounded timeout (`kvm` hangs on a host whose nested KVM cannot run guests).

Everything else (bundle on an overlay of the image, private state root, cgroups, cleanup of
leftovers by the annotation) is the runc platform's; only the runtime's global flags differ.
`network: bridge` is not offered: runsc reads the network namespace's interfaces when the
sandbox boots, before the runc platform's veth could be moved in.
"""
from __future__ import annotations

import json
import re
import uuid
from functools import cache
from typing import Any, Literal

from pydantic import Field

from .. import proc
from ..errors import CommandError, InputError
from . import mounts
from .base import Availability, Executor, Paths, PlatformOptions
from .oci import _OCIRuntime, _rt, build_oci_config, forget_probe

Mode = Literal["ptrace", "systrap", "kvm"]
PROBE_TIMEOUT = 30.0
"""Seconds a test sandbox may take to run `true`: ptrace needs about 1 s here; kvm on a host
whose nested KVM cannot run guests never finishes."""


class RunscOptions(PlatformOptions):
    platform: Mode | None = Field(
        None, description="gVisor platform: ptrace, systrap or kvm (which the installed runsc has); "
        "default: runsc's own default")
    network: Literal["none", "host"] = Field(
        "none", description="none: the sandbox's own loopback only; host: the host's stack (runsc --network=host)")


@cache
def installed_modes() -> tuple[tuple[str, ...], str]:
    """(platforms the installed runsc knows, its default platform): from its own help texts."""
    if proc.which("runsc") is None:
        return (), ""
    listed = proc.run(["runsc", "help", "platforms"], timeout=30, check=False).stdout.split()
    flags = proc.run(["runsc", "flags"], timeout=30, check=False)
    default = re.search(r"-platform string\s+.*?\(default \"(\w+)\"\)", flags.stdout + flags.stderr, re.S)
    return tuple(sorted(listed)), default.group(1) if default else (listed[0] if listed else "")


def version() -> str:
    """`runsc --version` first line's version ("0.0~20221219.0" on Debian 12), or ''."""
    if proc.which("runsc") is None:
        return ""
    out = proc.run(["runsc", "--version"], timeout=30, check=False).stdout
    match = re.search(r"runsc version (\S+)", out)
    return match.group(1) if match else out.strip()


def try_mode(paths: Paths, mode: str, timeout: float = PROBE_TIMEOUT) -> Availability:
    """Start a sandbox on `mode` that runs `true`, within `timeout`; always remove it."""
    name = f"vb-probe-{uuid.uuid4().hex[:8]}"
    bundle = paths.runtime / "probe" / f"runsc-{name}"
    rt = [*_rt("runsc", paths), f"--platform={mode}", "--network=none"]
    try:
        binds = mounts.skeleton_rootfs(bundle / "rootfs")
        config = build_oci_config(name=name, run_id="probe", rootfs=str(bundle / "rootfs"),
                                  options=PlatformOptions(), args=["true"], binds=binds)
        (bundle / "config.json").write_text(json.dumps(config))
        proc.run([*rt, "run", "--bundle", str(bundle), name], timeout=timeout, detached_children=True)
        return Availability(True, f"runsc --platform={mode} ran a sandbox")
    except CommandError as exc:
        if exc.timed_out:
            why = "the kvm platform needs KVM that runs guests; a hang means it does not here" if mode == "kvm" \
                else "the sandbox never finished"
            return Availability(False, f"runsc --platform={mode}: `true` did not finish within {timeout:g} s ({why})",
                                "use platform: ptrace" + ("" if mode == "kvm" else " or look at `runsc --debug`"))
        said = (exc.stderr or str(exc)).strip().splitlines() or [str(exc)]
        return Availability(False, f"runsc --platform={mode} could not run a sandbox: {said[-1]}",
                            f"check `runsc --platform={mode} do true` as root")
    except Exception as exc:  # noqa: BLE001 - probe reports, never raises
        return Availability(False, f"runsc --platform={mode}: {exc}", "check runsc as root")
    finally:
        try:
            proc.run([*_rt("runsc", paths), "delete", "--force", name], timeout=30, check=False)
            mounts.safe_rmtree(bundle)
            for lock in (paths.runtime / "runsc").glob(f"{name}_sandbox:*.lock"):  # a hung sandbox's
                lock.unlink(missing_ok=True)
        except Exception:  # noqa: BLE001
            pass
        forget_probe(name)


class Runsc(_OCIRuntime):
    """gVisor's runsc on the OCI bundle: a user-space kernel between workload and host."""

    type = "runsc"
    host_processes = ("runsc", "runsc-gofer", "runsc-sandbox")
    """The gofer (file access for the sandbox) and the runsc processes outside the sandbox's cgroup."""
    needs_root = True
    runtime = "runsc"
    kind = "sandbox"
    Options = RunscOptions
    binaries = ("runsc",)
    packages = ("runsc",)
    description = "gVisor (runsc) on the runc platform's OCI bundle: user-space kernel, ptrace/systrap/kvm"

    options: RunscOptions

    def __init__(self, name: str, options: PlatformOptions, paths: Paths,
                 executor: Executor | None = None) -> None:
        super().__init__(name, options, paths, executor)
        if proc.which("runsc") is None:
            raise InputError(f"platform {name!r}: runsc (gVisor) is not installed", "apt-get install runsc")
        modes, default = installed_modes()
        self.mode = self.options.platform or default
        if self.mode not in modes:
            raise InputError(f"platform {name!r}: runsc {version()} has no platform {self.mode!r} "
                             f"(it has: {', '.join(modes) or 'none'})",
                             f"set platform: to one of {', '.join(modes)}")

    def runtime_flags(self) -> list[str]:
        """Global flags: the gVisor platform and network mode the sandbox boots with."""
        return [f"--platform={self.mode}", f"--network={self.options.network}"]

    @classmethod
    def try_instance(cls, paths: Paths) -> Availability:
        return try_mode(paths, installed_modes()[1])

    def versions(self) -> dict[str, str]:
        return {"runsc": version() or "unknown", "runsc_platform": self.mode}

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "platform": self.mode, "gvisor_network": self.options.network,
                "seccomp": None, "kernel": "gVisor Sentry (user space)"}

    def label(self) -> str:
        return super().label() if self.options.platform else f"{super().label()}[{self.mode}]"

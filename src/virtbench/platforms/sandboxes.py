"""Sandboxed runtimes behind an engine (`{type: docker, runtime: runsc}`) and their detection.

An engine learns a runtime only from its own configuration: Debian's Docker 20.10 from
`--add-runtime` or the `runtimes` key of daemon.json. virtbench configures the dockerd it
starts itself (services.dockerd_start_flags) and never rewrites a user's daemon.json: where
a running engine lacks the runtime, the check below stops the campaign before anything starts
and says what to add and why; `doctor` says the same. containerd needs a shim binary per
runtime (`containerd-shim-runsc-v1`), which Debian's runsc package does not ship.

Kata Containers runs each container in a lightweight VM, so it needs working KVM: where its
runtime is installed, KVM is checked by booting a test guest (the qemu platform's verdict).
"""
from __future__ import annotations

import json
import os
from typing import Any

from .. import proc, services
from ..errors import InputError
from . import runsc
from .base import Availability, Paths

KATA = ("kata-runtime", "containerd-shim-kata-v2")
"""Kata Containers' binaries: the OCI runtime (docker's `runtime`) and containerd's shim."""
DOCKER_RUNTIMES = {"runsc": "sandbox", "kata-runtime": "sandbox", "kata": "sandbox",
                   "runc": "container", "crun": "container", "io.containerd.runc.v2": "container"}
"""Runtimes an engine may be told to use, and the kind of platform each makes."""
CONTAINERD_SHIMS = {"runsc": "containerd-shim-runsc-v1", "kata": "containerd-shim-kata-v2",
                    "runc": "containerd-shim-runc-v2"}


def daemon_json_fix(runtime: str) -> str:
    """What to add to the user's daemon.json so dockerd knows `runtime`, and why."""
    path = proc.which("kata-runtime" if runtime.startswith("kata") else runtime) or f"/usr/bin/{runtime}"
    entry: dict[str, Any] = {"path": path}
    if runtime in services.SANDBOX_RUNTIMES:
        entry["runtimeArgs"] = list(services.SANDBOX_RUNTIMES[runtime])
    snippet = json.dumps({"runtimes": {runtime: entry}})
    return (f"add {snippet} to {services.DAEMON_JSON} and reload dockerd (`systemctl reload docker`, or "
            "`kill -HUP $(pidof dockerd)`): dockerd learns runtimes only from its configuration, "
            "and virtbench does not rewrite yours")


def docker_runtimes() -> dict[str, Any] | None:
    """The runtimes the running dockerd knows (`docker info`), or None when none answers."""
    if proc.which("docker") is None or not services.answers(services.DOCKERD):
        return None
    out = proc.run(["docker", "info", "--format", "{{json .Runtimes}}"], timeout=30, check=False).stdout
    try:
        return json.loads(out) or {}
    except ValueError:
        return None


def check_docker_runtime(platform: str, runtime: str, network: str = "none") -> None:
    """Raise InputError unless dockerd runs, or will run, with `runtime` (nothing is started)."""
    if runtime not in DOCKER_RUNTIMES:
        raise InputError(f"platform {platform!r}: unknown runtime {runtime!r}",
                         f"use one of {', '.join(sorted(DOCKER_RUNTIMES))}")
    if runtime.startswith("kata"):
        kata = kata_status(None)
        raise InputError(f"platform {platform!r}: runtime {runtime}: {kata.reason}", kata.fix)
    if runtime == "runsc" and proc.which("runsc") is None:
        raise InputError(f"platform {platform!r}: runtime runsc: gVisor is not installed", "apt-get install runsc")
    known = docker_runtimes()
    if known is not None:
        if runtime not in known:
            raise InputError(f"platform {platform!r}: the running dockerd does not know runtime {runtime!r} "
                             f"(it knows: {', '.join(sorted(known))})", daemon_json_fix(runtime))
        args = (known[runtime] or {}).get("runtimeArgs") or []
        if network != "none" and "--network=none" in args:
            raise InputError(f"platform {platform!r}: dockerd runs {runtime} with --network=none, so network "
                             f"{network!r} cannot work", "use network: none, or another runtime entry without it")
        return
    if services.systemd_running() or runtime not in services.dockerd_runtime_names():
        raise InputError(f"platform {platform!r}: dockerd is not running and would start without runtime "
                         f"{runtime!r} ({services.DAEMON_JSON} declares other runtimes)", daemon_json_fix(runtime))


def docker_runtime_mode(runtime: str) -> str:
    """The gVisor platform dockerd's runsc entry boots with (its runtimeArgs, else runsc's default)."""
    entry = (docker_runtimes() or {}).get(runtime) or {}
    if not entry:
        entry = {"runtimeArgs": services.SANDBOX_RUNTIMES.get(runtime, ())}
    for arg in entry.get("runtimeArgs") or []:
        if str(arg).startswith("--platform="):
            return str(arg).split("=", 1)[1]
    return runsc.installed_modes()[1] if runtime == "runsc" else ""


def check_containerd_runtime(platform: str, runtime: str) -> None:
    """containerd runs a runtime through its shim binary; raise InputError when it is missing."""
    shim = CONTAINERD_SHIMS.get(runtime)
    if shim is None:
        raise InputError(f"platform {platform!r}: unknown runtime {runtime!r}",
                         f"use one of {', '.join(sorted(CONTAINERD_SHIMS))}")
    if runtime == "kata":
        kata = kata_status(None)
        raise InputError(f"platform {platform!r}: runtime kata: {kata.reason}", kata.fix)
    if proc.which(shim) is None:
        why = " (Debian's runsc package ships no containerd shim)" if runtime == "runsc" else ""
        raise InputError(f"platform {platform!r}: containerd cannot use runtime {runtime}: {shim} is not "
                         f"installed{why}", "use {type: docker, runtime: runsc} or the runsc platform")


def kata_status(paths: Paths | None) -> Availability:
    """Kata Containers: installed? and, since each container is a VM, does KVM run guests here?"""
    found = [b for b in KATA if proc.which(b)]
    if not found:
        return Availability(False, "Kata Containers is not installed (no kata-runtime or containerd-shim-kata-v2; "
                            "Debian 12 has no package)", "install Kata Containers from its release archive; it needs KVM")
    from .qemu.accel import accel_verdict, probe_kernel

    verdict = accel_verdict(paths or Paths.from_env(), probe_kernel())
    if not verdict.kvm:
        return Availability(False, f"Kata Containers ({', '.join(found)}) needs working KVM: {verdict.reason}",
                            "use a host with working KVM (nested virtualization enabled), or gVisor (runsc)")
    return Availability(True, f"Kata Containers ({', '.join(found)}) installed and KVM works")


def report(paths: Paths) -> list[dict[str, Any]]:
    """Each sandbox with its version, platform modes (each tried) and engine integration: for doctor."""
    out: list[dict[str, Any]] = []
    modes, default = runsc.installed_modes()
    entry: dict[str, Any] = {"name": "runsc", "what": "gVisor", "installed": bool(modes),
                             "version": runsc.version(), "default_mode": default, "modes": []}
    if not modes:
        entry["fix"] = "apt-get install runsc"
    elif os.geteuid() != 0:
        entry["fix"] = "run doctor as root to try each platform mode"
    else:
        for mode in modes:
            v = runsc.try_mode(paths, mode)
            entry["modes"].append({"mode": mode, "available": v.available, "reason": v.reason, "fix": v.fix})
        known = docker_runtimes()
        if known is None:
            entry["docker"] = {"available": runsc.version() != "" and "runsc" in services.dockerd_runtime_names(),
                               "reason": "dockerd not running: virtbench starts it with runtime runsc added"}
        elif "runsc" in known:
            entry["docker"] = {"available": True, "reason": f"dockerd knows runtime runsc ({docker_runtime_mode('runsc')})"}
        else:
            entry["docker"] = {"available": False, "reason": "the running dockerd does not know runtime runsc",
                               "fix": daemon_json_fix("runsc")}
        entry["containerd"] = {"available": proc.which(CONTAINERD_SHIMS["runsc"]) is not None,
                               "reason": f"needs {CONTAINERD_SHIMS['runsc']} (not in Debian's runsc package)"}
    out.append(entry)
    kata = kata_status(paths)
    out.append({"name": "kata", "what": "Kata Containers", "installed": any(proc.which(b) for b in KATA),
                "version": _kata_version(), "available": kata.available, "reason": kata.reason, "fix": kata.fix})
    return out


def _kata_version() -> str:
    if proc.which("kata-runtime") is None:
        return ""
    lines = proc.run(["kata-runtime", "--version"], timeout=30, check=False).stdout.strip().splitlines()
    return lines[0] if lines else ""

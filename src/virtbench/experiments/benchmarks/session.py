"""Everything a run needs, built and checked before the first measurement.

Constructing platforms and benchmarks validates their options; probing platforms and
building the image happen here too, so a campaign that cannot run fails with one message
and exit 2 before anything is measured or stored.
"""
from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import hostinfo as hostfacts
from ...benchmarks.base import Benchmark
from ...errors import InputError, UnavailableError, VirtbenchError, disk_full
from ...executor import Outside
from ...images import build as images
from ...images.image import Image
from ...platforms.availability import availability_of
from ...platforms.base import Availability, Paths, Platform
from ...probes.base import Probe
from ...registry import BENCHMARKS, PLATFORMS

if TYPE_CHECKING:
    from ...config import Campaign


@dataclass
class Session:
    campaign: Campaign
    paths: Paths
    platforms: dict[str, Platform]
    benchmarks: dict[str, Benchmark]
    image: Image | None = None
    availability: dict[str, Availability] = field(default_factory=dict)
    probes: list[Probe] = field(default_factory=list)


def build_objects(campaign: Campaign, paths: Paths) -> Session:
    """Instantiate plugins (validates options) without touching the host."""
    platforms: dict[str, Platform] = {}
    for pentry in campaign.platforms:
        pcls = PLATFORMS.get(pentry.type)
        executor = Outside(pentry.name, pentry.inside) if pentry.inside else None  # bound per unit
        platforms[pentry.name] = pcls(pentry.name, pcls.Options(**pentry.options), paths, executor)
    benchmarks: dict[str, Benchmark] = {}
    for bentry in campaign.benchmarks:
        bcls = BENCHMARKS.get(bentry.name)
        benchmarks[bentry.key] = bcls(bcls.Params(**bentry.params))
    from ...config.consent import build_probes

    return Session(campaign=campaign, paths=paths, platforms=platforms, benchmarks=benchmarks,
                   probes=build_probes(campaign))


def outer_of(session: Session, name: str) -> Platform | None:
    """The platform whose instances this one runs in (a stack), if any."""
    inside = session.campaign.platform(name).inside
    return session.platforms[inside] if inside else None


def memory_limited(session: Session) -> list[str]:
    """The platforms on the host whose instances get a memory limit (a cgroup memory controller
    is needed; a VM's memory is its own)."""
    on_host = {n: p for n, p in session.platforms.items() if outer_of(session, n) is None}
    return [n for n, p in on_host.items() if p.kind != "vm" and getattr(p.options, "memory", None)]


def refuse_unlimited_memory(host: str, limited: list[str], cgroups: str | None = None) -> None:
    """One line naming the host and the fix when `limited` platforms need a memory controller
    the host's kernel lacks or disables (Raspberry Pi OS). cgroups: that host's /proc/cgroups
    (None: this host's)."""
    if limited and (why := hostfacts.memory_controller_problem(cgroups)):
        raise InputError(f"host {host}: {why}, so {', '.join(limited)} cannot limit memory",
                         hostfacts.MEMORY_CGROUP_FIX)


V2_CONTROLLERS = Path("/sys/fs/cgroup/cgroup.controllers")
PREPARE_WORTH_SAYING_S = 2.0
"""A platform's prepare() (an image import, a VM disk, a trial pod) this long or longer is
logged with its time: the image imports into docker, podman and containerd took 3.5 minutes on
the emulated reference host, unexplained."""
UNDELEGATED_FIX = ("give virtbench a cgroup v2 root with the controller: a systemd host has every controller "
                   "the kernel enables (check the kernel command line for cgroup_disable=), a container or "
                   "unit needs it delegated (Delegate=yes)")


def refuse_undelegated(host: str, session: Session, controllers: str | None = None) -> None:
    """One line naming the host, the missing controller and the fix when a cgroup v2 host's root
    lacks a controller the campaign's limits need (a container or unit without delegation).
    controllers: that host's /sys/fs/cgroup/cgroup.controllers (None: this host's; '' or a
    failed read: not a v2 host, nothing to check)."""
    if controllers is None:
        try:
            controllers = V2_CONTROLLERS.read_text()
        except OSError:
            return
    if not controllers.strip():
        return
    have = set(controllers.split())
    for controller, names in _limited_by_controller(session).items():
        if names and controller not in have:
            raise InputError(f"host {host}: cgroup v2 without the {controller} controller delegated "
                             f"(cgroup.controllers has: {' '.join(sorted(have))}), so {', '.join(names)} "
                             f"cannot be limited", UNDELEGATED_FIX)


def _limited_by_controller(session: Session) -> dict[str, list[str]]:
    """The platforms on the host whose instances get a limit, by the controller it needs."""
    on_host = {n: p for n, p in session.platforms.items() if outer_of(session, n) is None and p.kind != "vm"}
    return {"memory": memory_limited(session),
            "cpu": [n for n, p in on_host.items() if getattr(p.options, "cpus", None) is not None],
            "cpuset": [n for n, p in on_host.items() if getattr(p.options, "cpuset", None) is not None]}


def refuse_read_only_cgroups(host: str, session: Session, mountinfo: str | None = None) -> None:
    """One line naming the host, the read-only hierarchy and the fix when the campaign's limits
    would be written into a cgroup hierarchy mounted read-only (virtbench in a container).
    mountinfo: that host's /proc/self/mountinfo (None: this host's)."""
    limited = sorted({n for names in _limited_by_controller(session).values() for n in names})
    if limited and (read_only := hostfacts.read_only_cgroups(mountinfo)):
        raise InputError(f"host {host}: the cgroup hierarchy is mounted read-only ({read_only[0]}), so "
                         f"{', '.join(limited)} cannot be limited", hostfacts.READ_ONLY_CGROUP_FIX)


LeftOut = list[dict[str, str]]
"""{platform, reason, fix} of each platform a generated campaign goes on without."""


def check_available(session: Session, log: Callable[[str], None] = lambda _m: None,
                    left_out: LeftOut | None = None) -> None:
    """Probe what runs on this host; a stacked platform's runtime runs in its VM instead.
    left_out: see prepare."""
    on_host = {n: p for n, p in session.platforms.items() if outer_of(session, n) is None}
    types = sorted({p.type for p in on_host.values()})
    refuse_unlimited_memory(socket.gethostname(), memory_limited(session))
    refuse_undelegated(socket.gethostname(), session)
    refuse_read_only_cgroups(socket.gethostname(), session)
    todo = [t for t in types if t not in session.availability]  # not taken already (the quick campaign's)
    if todo:
        session.availability = {**session.availability, **availability_of(todo, session.paths, log)}
    for name, platform in on_host.items():
        verdict = session.availability[platform.type]
        if verdict.available:
            continue
        error = UnavailableError(f"platform {name!r} ({platform.type}) is not available here: {verdict.reason}",
                                 verdict.fix or "remove it from the campaign (see `virtbench doctor`)")
        if left_out is None or name == session.campaign.baseline:
            raise error
        leave_out(session, name, verdict.reason, verdict.fix, left_out, log)
    for name, platform in list(on_host.items()):
        if name not in session.platforms:
            continue
        try:  # the entry's own options against what they name (a cluster): refused before the image is built
            platform.preflight()
        except VirtbenchError as exc:
            if left_out is None or name == session.campaign.baseline:
                raise
            leave_out(session, name, exc.message, exc.fix or "", left_out, log)


def leave_out(session: Session, name: str, reason: str, fix: str, left_out: LeftOut,
              log: Callable[[str], None] = lambda _m: None) -> None:
    """Go on without platform `name` (and whatever is stacked in it): out of the session and of
    the campaign the run stores (so a resume does not bring it back), into left_out with why."""
    gone = {name} | {n for n in session.platforms if session.campaign.platform(n).inside == name}
    data = session.campaign.model_dump(mode="json")
    data["platforms"] = [p for p in data["platforms"] if p["name"] not in gone]
    session.campaign = type(session.campaign).model_validate(data)  # a subset of a valid campaign
    for n in sorted(gone):
        session.platforms.pop(n, None)
        left_out.append({"platform": n, "reason": reason if n == name else f"inside {name}: {reason}",
                         "fix": fix or ""})
        log(f"skipping {n}: {left_out[-1]['reason']}" + (f" (fix: {fix})" if fix else ""))


def _setup_failure(exc: Exception) -> tuple[str, str]:
    """A platform's failed setup as (reason, fix)."""
    if isinstance(exc, VirtbenchError):
        return f"setup failed: {exc.message}", exc.fix or ""
    return f"setup failed: {type(exc).__name__}: {exc}", ""


def image_recipe(campaign: Campaign) -> images.Recipe:
    """`auto`: exactly the tools of the campaign's benchmarks (heavy ones only when chosen);
    the same package set as a profile gives the same image, since the hash is of the packages."""
    profile = campaign.image.profile
    if profile == "auto":
        needed = sorted({p for b in campaign.benchmarks for p in BENCHMARKS.get(b.name).packages})
        base = images.recipe_for("quick", campaign.image.release, mirrors=campaign.image.mirrors)
        quick = set(base.packages)
        if set(needed) <= quick and set(needed) == set(_packages_of_benchmarks(quick)):
            return base
        return images.Recipe(release=base.release, arch=base.arch, profile="auto",
                             packages=tuple(sorted(set(images.BASE_PACKAGES) | set(needed))), mirrors=base.mirrors)
    recipe = images.recipe_for(profile, campaign.image.release, mirrors=campaign.image.mirrors)
    missing = {b.name for b in campaign.benchmarks} - _benchmarks_in(recipe)
    if missing:
        raise InputError(f"image profile {profile!r} lacks the tools of {', '.join(sorted(missing))}",
                         "set image.profile to full or auto")
    return recipe


def with_platform_packages(recipe: images.Recipe, platforms: Iterable[Platform]) -> images.Recipe:
    """The recipe plus what the platforms' options need inside (systemd for an LXC system
    container): one image for all platforms, so every platform still runs the same binaries."""
    extra = {p for platform in platforms for p in platform.image_packages()}
    if extra <= set(recipe.packages):
        return recipe
    return replace(recipe, packages=tuple(sorted(set(recipe.packages) | extra)))


def _packages_of_benchmarks(packages: set[str]) -> set[str]:
    return packages - set(images.BASE_PACKAGES)


def _benchmarks_in(recipe: images.Recipe) -> set[str]:
    return {name for name, cls in BENCHMARKS.items() if set(cls.packages) <= set(recipe.packages)}


def prepare(session: Session, *, cache: Path = images.DEFAULT_CACHE,
            log: Callable[[str], None] = lambda _m: None, left_out: LeftOut | None = None) -> None:
    """Check the probes, probe the platforms, build the image, and make it known to each runtime.

    left_out: given for a generated campaign (the quick one, which nobody wrote): a platform
    that fails its probe or its setup is left out with the reason, added to the list, and the
    run goes on without it (not the baseline). None: it stops the run, since a campaign file
    names exactly what its author wants measured."""
    from .probing import check_probes

    check_probes(session.probes)
    check_available(session, log, left_out)
    for name, platform in session.platforms.items():
        if (outer := outer_of(session, name)) is not None:
            outer.accept_inner(platform)
    session.image = images.build(with_platform_packages(image_recipe(session.campaign), session.platforms.values()),
                                 cache, log=log)
    for name, platform in list(session.platforms.items()):
        if name not in session.platforms or outer_of(session, name) is not None:
            continue  # left out with its VM; stacked ones are prepared in each fresh VM
        try:
            t0 = time.monotonic()
            platform.prepare(session.image)
            if (took := time.monotonic() - t0) >= PREPARE_WORTH_SAYING_S:
                log(f"{name}: ready in {took:.0f} s")
        except Exception as exc:
            if left_out is None or name == session.campaign.baseline or disk_full(exc):
                raise
            leave_out(session, name, *_setup_failure(exc), left_out, log)


def tool_versions(session: Session) -> dict[str, str]:
    """Versions of each benchmark's packages, read from the image manifest (same bytes everywhere)."""
    assert session.image is not None
    installed = session.image.manifest.get("installed", {})
    out: dict[str, str] = {}
    for bench in session.benchmarks.values():
        out[bench.name] = ", ".join(f"{p} {installed.get(p, '?')}" for p in bench.packages)
    return out


def platform_rows(session: Session) -> list[dict[str, Any]]:
    rows = []
    for name, platform in session.platforms.items():
        if outer_of(session, name) is not None:
            rows.append(_stacked_row(session, name, platform))
            continue
        try:
            versions = platform.versions()
        except Exception as exc:  # noqa: BLE001 - provenance is best effort, recorded as such
            versions = {"error": str(exc)}
        rows.append({"name": name, "type": platform.type, "kind": platform.kind, "label": platform.label(),
                     "config": platform.describe(), "versions": versions})
    return rows


def _stacked_row(session: Session, name: str, platform: Platform) -> dict[str, Any]:
    """A stack is labelled by its path (qemu(tcg,2 vcpu)/docker); its runtime is the VM image's."""
    outer = outer_of(session, name)
    assert outer is not None
    return {"name": name, "type": platform.type, "kind": "stack", "label": f"{outer.label()}/{platform.label()}",
            "config": {**platform.describe(), "inside": outer.name, "outer": outer.describe()},
            "versions": {"runtime": f"the {platform.type} package of {outer.name}'s VM image"}}


def session_details(session: Session) -> dict[str, Any]:
    """What a run records about the host that measures it (a remote agent sends its own)."""
    from ... import __version__
    from ...platforms import enforcement
    from .probing import probe_facts

    assert session.image is not None
    versions = tool_versions(session)
    limits = enforcement.for_platforms(session.paths, [(p.name, p.type, p.options) for p in session.campaign.platforms])
    return {
        "host_facts": hostfacts.facts(session.paths.state),
        "image": session.image.provenance(),
        "provenance": {"virtbench": __version__, "tools": versions, **({"limits": limits} if limits else {}),
                       "availability": {k: v.reason for k, v in session.availability.items()},
                       **({"probes": probe_facts(session.probes)} if session.probes else {})},
        "platforms": platform_rows(session),
        "benchmarks": [{"key": b.key, "name": b.name,
                        "params": session.benchmarks[b.key].params.model_dump(mode="json"),
                        "tool_version": versions[b.name],
                        "metrics": [asdict(m) for m in session.benchmarks[b.key].metrics()]}
                       for b in session.campaign.benchmarks],
    }

"""The `density` experiment kind: how many instances fit, what each gets, and what stops it.

Studies 000 and 002 (`seeds/`): 54 Debian 12 containers on an 8 GB Raspberry Pi, boards that
crashed when two 256 MB VMs did not fit. For each platform, instances are started (in
parallel batches, as many as the host takes) and kept running; at each count of the schedule
every instance runs the workload at the same time, and the count is healthy when every
instance started, every workload succeeded, no OOM kill happened (kernel counters),
throughput did not collapse and the host guard did not trip. `counts: [..]` measures the
listed counts; `counts: {until: failure, max: N}` ramps (doubling, or by `step`) until a
count fails, then bisects between the last good and the failing count keeping the fleet
(shrinking it by its newest instances, growing it again), and confirms the maximum from an
empty fleet (ramp.py).

Throughput collapse (documented thresholds, configurable): the aggregate throughput at a
count falls below `collapse` (0.25) x the median aggregate of the lower counts (CPU sharing
keeps the aggregate flat; thrashing and stalls drop it), or instances get less than
`starved` (0.1) x the median instance at that count. Both read the host's load too: other
work on a shared host lowers throughput as well, so the evidence carries the load average.
CPU starvation: instances whose workload got no CPU in its window (openssl counts 0). Up to
`starved_share` (1 %, rounded down) of a count's instances may starve or fall below `starved`
x the median without failing the count: at hundreds of processes per CPU single instances
miss a 2 s window by chance (session 21's runc search: 1-4 of 408-568, not repeated at the
same count), so the count is healthy and the point says how many starved.

`host_memory:` confines every instance under one parent cgroup of that size (memory and
memory+swap), so "a 1 GiB host" is studied on a bigger machine without risking it; the
report says it is a cgroup-confined host.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ... import hostinfo
from ...benchmarks.base import PairBenchmark
from ...errors import InputError
from ...images import build as images
from ...images import guest
from ...images.image import Image
from ...platforms import cgroups, slices
from ...platforms.base import Paths, Platform, Size
from ...platforms.closing import close_platforms
from ...registry import BENCHMARKS, PLATFORMS
from ...store.db import now
from ..base import Experiment, ExperimentContext
from ..planning import Done, Past, Plan, Work, execution_s, instance_s, platform_kinds, rounds_of
from .guard import Guard, GuardSettings, ParentPressure, read_parent
from .ramp import Ramp, Stop
from .resume import resumed
from .threads import signals_held

PARENT_PREFIX = "virtbench-density-"


def parent_prefix(paths: Paths) -> str:
    """The confining parents of one state directory: cleanup of another state directory (a test
    session, a second installation) must never remove a parent that a run of this one uses."""
    return f"{PARENT_PREFIX}{hashlib.sha256(str(paths.state).encode()).hexdigest()[:8]}-"
MAX_COUNT = 4096
"""The most instances one count may start, listed or ramped (`max` of until: failure)."""
STOP_KEY = "density-stop"
"""Benchmark key of the per-platform summary execution (stop reason, evidence, maximum)."""


class Until(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    until: Literal["failure"] = Field(description="ramp the count until a count fails")
    max: int | None = Field(None, ge=1, le=MAX_COUNT, description=f"never go beyond this count (at most {MAX_COUNT})")
    step: int | Literal["double"] = Field("double", description="ramp by doubling, or by this many instances")
    groups: list[int] = Field(default_factory=list, description=(
        "counts to measure first, in order (study 000's groups: 1-5, 10 to 50 by 5, 53, 54, 63); past the last, "
        "the ramp goes on by `step` up to `max`"))
    bisect: bool = Field(True, description=(
        "after a failing count, bisect down to the exact maximum (false: the last healthy count is the maximum, "
        "as the paper's groups report it)"))
    precision: int = Field(1, ge=1, le=MAX_COUNT, description=(
        "bisect until the last good and the failing count are this close (1: the exact maximum)"))
    confirm: bool = Field(True, description=(
        "confirm the maximum from an empty fleet (it must run, and 1 % above it must fail)"))

    @field_validator("step")
    @classmethod
    def _step(cls, v: int | str) -> int | str:
        if isinstance(v, int) and not 1 <= v <= MAX_COUNT:
            raise ValueError(f"step must be from 1 to {MAX_COUNT}")
        return v

    @field_validator("groups")
    @classmethod
    def _groups(cls, v: list[int]) -> list[int]:
        if v and (v[0] < 1 or any(b <= a for a, b in zip(v, v[1:])) or v[-1] > MAX_COUNT):
            raise ValueError(f"groups: give increasing whole numbers from 1 to {MAX_COUNT}")
        return v

    def ramp(self) -> list[int]:
        """The counts in the order the search measures them (groups first, then the ramp)."""
        cap = self.max or MAX_COUNT
        counts = [c for c in self.groups if c <= cap]
        n = counts[-1] if counts else 1
        if counts:
            n = n * 2 if self.step == "double" else n + int(self.step)
        while n < cap:
            counts.append(n)
            n = n * 2 if self.step == "double" else n + int(self.step)
        return [*counts, cap] if not counts or counts[-1] < cap else counts


class DensitySection(BaseModel):
    """The `density:` section of a campaign with `experiment: density`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    workload: dict[str, Any] = Field(description="benchmark name and parameters, e.g. {name: openssl, seconds: 10}")
    counts: list[int] | Until = Field(description=f"counts to measure (each at most {MAX_COUNT}), or "
                                                  "{until: failure, max: N}")
    host_memory: Size | None = Field(None, description="confine all instances to a parent cgroup of this size")
    guard: GuardSettings = Field(default_factory=GuardSettings)
    collapse: float = Field(0.25, ge=0, lt=1, description=(
        "aggregate throughput below this x the median of the lower counts' is a collapse (0: off)"))
    starved: float = Field(0.1, ge=0, lt=1, description=(
        "an instance below this x the median (more than `starved_share` of them): collapse"))
    starved_share: float = Field(0.01, ge=0, lt=1, description=(
        "share of a count's instances that may get no CPU in their window, or less than `starved` x the "
        "median, without failing the count (rounded down: below 100 instances any one fails it). Far beyond "
        "one process per CPU the scheduler leaves single instances out of a short window by chance, and a "
        "search on such events does not converge; they are counted and shown (0: any one fails the count)"))
    min_overlap: float = Field(0.5, ge=0, le=1, description=(
        "share of a count's window every instance must run together; below it the count is flagged "
        "(its aggregate is not a concurrent measurement). Under CPU oversubscription the tools' own "
        "start-up spreads the starts (N instances share the CPUs), so 1.0 is out of reach at high counts"))
    settle: float = Field(1.0, ge=0, le=600, description="seconds to wait after the last start before measuring")
    parallel: int | Literal["auto"] = Field("auto", description=(
        "instances started at once while the fleet grows: auto (doubling while starts get faster, "
        "up to 16, within the guard's room), or at most this many (1: one by one)"))

    @field_validator("parallel")
    @classmethod
    def _parallel(cls, v: int | str) -> int | str:
        if isinstance(v, int) and not 1 <= v <= 256:
            raise ValueError("parallel must be from 1 to 256, or auto")
        return v

    @field_validator("workload", mode="before")
    @classmethod
    def _workload(cls, v: Any) -> dict[str, Any]:
        if isinstance(v, str):
            v = {"name": v}
        if not isinstance(v, dict) or "name" not in v:
            raise ValueError("workload: give {name: BENCHMARK, ...parameters}")
        name = str(v["name"])
        if name not in BENCHMARKS.names():
            raise ValueError(f"workload: unknown benchmark {name!r}")
        bench = BENCHMARKS.get(name)
        if issubclass(bench, PairBenchmark):
            raise ValueError(f"workload: {name} is a client-server benchmark; give a single-instance one")
        try:
            bench.Params.model_validate({k: x for k, x in v.items() if k != "name"})
        except ValidationError as exc:  # named here: the section's path cannot walk into a plain mapping
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            what = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
            raise ValueError(f"workload: {name} parameter {where or name}: {what}; its parameters: "
                             f"{', '.join(bench.Params.model_fields) or 'none'}") from None
        return dict(v)

    @field_validator("counts")
    @classmethod
    def _counts(cls, v: list[int] | Until) -> list[int] | Until:
        if isinstance(v, list):
            if not v or any(c < 1 for c in v) or sorted(set(v)) != v:
                raise ValueError("counts: give increasing whole numbers from 1, e.g. [1, 2, 4, 8]")
            if v[-1] > MAX_COUNT:
                raise ValueError(f"counts: {v[-1]} instances at once is more than {MAX_COUNT} (the cap of "
                                 "until: failure's max too); give smaller counts")
        return v

    @model_validator(mode="after")
    def _limited(self) -> DensitySection:
        if isinstance(self.counts, Until) and self.counts.max is None and not self.guard.enabled:
            raise ValueError("counts: {until: failure} with no max and the guard off has no limit; "
                             "give max or keep the guard on")
        if not self.guard.enabled and self.host_memory is None:
            raise ValueError("guard: off needs host_memory (confined instances), or the host is unprotected")
        return self

    def benchmark(self):
        cls = BENCHMARKS.get(self.workload["name"])
        return cls(cls.Params(**{k: v for k, v in self.workload.items() if k != "name"}))


@dataclass
class PlatformResult:
    platform: str
    max_count: int
    stop: Stop
    probes: list[dict] = field(default_factory=list)


class Density(Experiment):
    name: ClassVar[str] = "density"
    description: ClassVar[str] = ("instances started one by one until a count fails (OOM, start failure, "
                                  "collapse, kernel limit, host guard); throughput per count")
    Section = DensitySection
    default_baseline: ClassVar[str] = ""
    main_table: ClassVar[bool] = False
    uses_platform_images: ClassVar[bool] = True
    """None by default: a native platform, when listed and named as baseline, runs once at count 1."""
    across_hosts = "agents"
    """With `hosts:` each host's agent runs the search on that host (its memory, its guard, its
    cgroups), from the image built here and shipped."""

    @classmethod
    def plan(cls, campaign: Any, seed: int = 0, done: Done = frozenset(), past: Past | None = None) -> Plan:
        """One search per platform, in its own order (no rounds): each count an execution of that
        many instances at once, then the platform's stop record. Ramped until a count fails, the
        counts are what it may reach (open-ended: the search bisects and stops where it fails)."""
        section: DensitySection = campaign.section
        platforms = platform_kinds(campaign)
        bench = section.workload
        seconds, source = execution_s(str(bench["name"]), bench, past)
        counts = section.counts.ramp() if isinstance(section.counts, Until) else list(section.counts)
        work = []
        for name, _, kind in platforms:
            for n in [1] if name == campaign.baseline else counts:
                work.append(Work(name, f"density[count={n}]", instances=n, source=source,
                                 expected_s=seconds + section.settle + n * instance_s(kind)))
            work.append(Work(name, STOP_KEY, expected_s=0.0, source="the search's summary", lifecycle=True))
        ramped = isinstance(section.counts, Until)
        return Plan(kind=cls.name, rounds=rounds_of(campaign), platforms=platforms, round=work, open_ended=ramped,
                    in_rounds=False, done=frozenset(done),
                    order=("per platform, counts ramped until one fails, then bisected (estimated: the whole "
                           "ramp)" if ramped else "per platform, the counts in turn"))

    @classmethod
    def validate_campaign(cls, campaign: Any) -> None:
        for p in campaign.platforms:
            if p.type in PLATFORMS.names() and (gap := PLATFORMS.get(p.type).fleet_gap):
                raise InputError(f"platform {p.name!r} ({p.type}): density cannot run on it yet: {gap}",
                                 "measure it with experiment: benchmarks, or migration with mode: lifecycle (N at "
                                 "once); density of the runtime under it with containerd")
        own = next((p.name for p in campaign.platforms if p.image is not None), None)
        if campaign.hosts and own is not None:
            raise InputError(f"platform {own!r}: a per-platform image: is not shipped to hosts: yet",
                             "drop the platform's image: (the campaign's image is built and shipped to every "
                             "host), or run the campaign with `virtbench run` on the host itself")

    def __init__(self, campaign: Any, paths: Paths) -> None:
        super().__init__(campaign, paths)
        self.platforms: dict[str, Platform] = {}
        self.image: Image | None = None
        self.images: dict[str, Image] = {}
        """Each platform's image: its own `image:` or the campaign's."""
        self.tool_versions: dict[str, str] = {}

    @property
    def baseline(self) -> str | None:
        """The platform run once at count 1 for the ratio: the campaign's baseline, else a
        listed bare-metal platform (native), else none."""
        names = [p.name for p in self.campaign.platforms]
        if self.campaign.baseline in names:
            return self.campaign.baseline
        return next((p.name for p in self.campaign.platforms
                     if p.type in PLATFORMS.names() and PLATFORMS.get(p.type).kind == "baseline"), None)

    def build_platforms(self) -> dict[str, Platform]:
        if not self.platforms:
            for entry in self.campaign.platforms:
                cls = PLATFORMS.get(entry.type)
                self.platforms[entry.name] = cls(entry.name, cls.Options(**entry.options), self.paths)
        return self.platforms

    def recipe(self) -> images.Recipe:
        bench = self.section.benchmark()
        release = getattr(getattr(self.campaign, "image", None), "release", "bookworm")
        extra = {p for plat in self.build_platforms().values() for p in plat.image_packages()}
        base = images.recipe_for("quick", release)
        return images.Recipe(release=base.release, arch=base.arch, profile="density",
                             packages=tuple(sorted(set(images.BASE_PACKAGES) | set(bench.packages) | extra)))

    def host_recipe(self) -> images.Recipe:
        return self.recipe()

    def confining(self) -> int | None:
        """The confining parent's size: host_memory, unless it names this host's own nominal size
        (a paper's 8G board preset on an "8 GB" board): then the whole host, unconfined."""
        memory = self.section.host_memory
        if memory is None or cgroups.whole_board(memory, cgroups.host_memory_total()):
            return None
        return memory

    def prepare(self, log: Callable[[str], None]) -> None:
        if (memory := self.confining()) is not None:
            cgroups.Confinement("check", memory).check()
        elif self.section.host_memory is not None:
            log(f"host_memory {self.section.host_memory >> 20} MiB is this host's own size (MemTotal "
                f"{cgroups.host_memory_total() >> 20} MiB, a board's firmware and GPU keep the rest): the whole host")
        for name, plat in self.build_platforms().items():
            if memory is not None and not plat.confinable and name != self.baseline:
                raise InputError(f"platform {name!r} ({plat.type}) cannot place its instances under host_memory's "
                                 "parent cgroup", "use lxc, docker, podman or qemu, or drop host_memory")
            verdict = type(plat).availability(self.paths)
            if not verdict.available:
                raise InputError(f"platform {name!r} ({plat.type}) is not available here: {verdict.reason}",
                                 verdict.fix or "remove it from the campaign")
        recipe = self.recipe()
        self.image = images.build(recipe, self.image_cache or images.DEFAULT_CACHE, log=log)  # an agent: the shipped one
        bench = self.section.benchmark()
        version = bench.version_command() or [bench.tool, "--version"]
        tools = tuple(dict.fromkeys([bench.command("/tmp")[0], version[0]]))
        for entry in self.campaign.platforms:
            plat = self.platforms[entry.name]
            spec = guest.PlatformImage(**entry.image) if entry.image else None
            if spec is not None and plat.kind == "vm" and spec.release not in images.RELEASES:
                raise InputError(f"platform {entry.name!r} ({plat.type}): a VM boots Debian release images only "
                                 f"(its agent and kernel come from Debian), not {spec.describe()}",
                                 "give the VM image: {release: bookworm} (or bullseye, trixie)")
            image = guest.resolve(spec, recipe.packages, tools, log=log) if spec else self.image
            self.tool_versions[entry.name] = guest.tool_version(image, version)
            self.images[entry.name] = image
        for name, plat in self.platforms.items():
            plat.prepare(self.images[name])

    def provenance(self) -> dict[str, Any]:
        return {"density": {"host_memory": self.section.host_memory,
                            "confined": self.confining() is not None,
                            "whole_board": self.section.host_memory is not None and self.confining() is None,
                            "mem_total": cgroups.host_memory_total(),
                            "image": self.image.provenance() if self.image else {},
                            "images": {n: {"name": guest.describe(i), **i.provenance(),
                                           "tool_version": self.tool_versions.get(n)}
                                       for n, i in self.images.items()}}}

    def platform_rows(self) -> list[dict[str, Any]]:
        rows = []
        for name, plat in self.build_platforms().items():
            try:
                versions = plat.versions()
            except Exception as exc:  # noqa: BLE001 - provenance is best effort
                versions = {"error": str(exc)}
            rows.append({"name": name, "type": plat.type, "label": plat.label(), "config": plat.describe(),
                         "versions": versions})
        return rows

    def run(self, ctx: ExperimentContext) -> None:
        if not self.images:
            self.prepare(ctx.log)
        section: DensitySection = self.section
        parent = None
        if (memory := self.confining()) is not None:
            parent = cgroups.Confinement(slices.parent_path(f"{parent_prefix(self.paths)}{ctx.run_id}"), memory)
            parent.create()
            ctx.log(f"cgroup-confined host: every instance under {parent.relative} "
                    f"({memory >> 20} MiB memory, no swap)")
        try:
            done = {platform for _, platform, key in ctx.done() if key == STOP_KEY}
            executions = ctx.sink.executions(ctx.run_id)  # a resumed run: what was measured before
            samples = ctx.sink.samples(ctx.run_id, per_instance=True) if executions else []
            for name, plat in self.platforms.items():
                if ctx.stop_requested():
                    raise KeyboardInterrupt
                if name in done:  # resumed: this platform's search finished before the interruption
                    continue
                plat.cgroup_parent = parent.relative if parent else None
                guard = Guard(section.guard, parent=self._parent_reader(parent) if plat.confinable else None)
                ramp = Ramp(ctx=ctx, platform=plat, image=self.images[name], section=section, guard=guard,
                                parent=parent.relative if parent else None, bench=section.benchmark(),
                                baseline=name == self.baseline)
                started = time.time()
                state = resumed(executions, samples, name, ramp.metric.name) if executions else None
                if state is not None and (state.probe_no or state.stop):
                    ctx.log(f"{name}: resuming the search after probe {state.probe_no}: last good count "
                            f"{state.good}" + (f", {state.failing} failed" if state.failing else ""))
                scaling = hostinfo.parallel_scaling()
                if name == self.baseline:
                    result = ramp.search([1], bisect=False, resume=state)
                elif isinstance(section.counts, Until):
                    result = ramp.search(section.counts.ramp(), bisect=section.counts.bisect, resume=state,
                                         precision=section.counts.precision, confirm=section.counts.confirm)
                else:
                    result = ramp.search(section.counts, bisect=False, resume=state)
                self._record_stop(ctx, name, plat, result, ramp, guard, parent, time.time() - started,
                                  {"before": scaling, "after": hostinfo.parallel_scaling()})
        finally:
            with signals_held():  # a second signal must not cut the removal short
                for plat in self.platforms.values():  # what a signal mid-create or a failed stop left
                    try:
                        for line in type(plat).cleanup(self.paths, ctx.run_id):
                            ctx.log(f"removed leftover {line}")
                    except Exception as exc:  # noqa: BLE001 - the parent's removal below says what is left
                        ctx.log(f"{plat.name}: cleanup: {exc}")
                close_platforms(self.platforms.values(), ctx.log)  # what they made for the run (LXC's pivot)
                if parent is not None:
                    parent.remove()

    @staticmethod
    def _parent_reader(parent: cgroups.Confinement | None) -> Callable[[], ParentPressure] | None:
        """The guard's view of the confining parent (its own stalls are not the host's)."""
        if parent is None:
            return None
        return lambda: read_parent(parent.relative, parent.memory)

    def _record_stop(self, ctx: ExperimentContext, name: str, plat: Platform, result: Any, ramp: Ramp,
                     guard: Guard, parent: cgroups.Confinement | None, seconds: float,
                     scaling: dict[str, Any]) -> None:
        summary = {
            "platform": name, "label": plat.label(), "type": plat.type,
            "max_count": result.max_count, "stop_reason": result.stop.reason, "stop_detail": result.stop.detail,
            "stop_count": result.stop.count, "stop_evidence": result.stop.evidence,
            "memory_per_instance_bytes": ramp.memory_per_instance(result.max_count),
            "mem_available_drop_per_instance_bytes": ramp.available_drop_per_instance(result.max_count),
            "confined": parent is not None and plat.confinable, "host_memory": parent.memory if parent else None,
            "mem_total": cgroups.host_memory_total(), "guard_thresholds": guard.thresholds(
                cgroups.host_memory_total(), parent.memory if parent is not None and plat.confinable else None),
            "guard_series": guard.series[-400:], "min_overlap": self.section.min_overlap, "probes": result.probes,
            "duration_s": round(seconds, 1), "scaling": scaling, "pod": plat.pod,
            "start_batches": ramp.grower.batches[-400:],
            "image": {"name": guest.describe(self.images[name]), "release": self.images[name].release,
                      "short": self.images[name].short, "tool_version": self.tool_versions.get(name)},
        }
        stamp = now()
        ctx.sink.record(run_id=ctx.run_id, round=0, warmup=False, platform=name, benchmark=STOP_KEY,
                         status="ok", started_at=stamp, finished_at=stamp, duration_s=seconds,
                         stdout=json.dumps(summary, indent=1, default=str),
                         error=f"{result.stop.reason}: {result.stop.detail}")
        ctx.log(f"{name}: maximum {result.max_count}; stopped by {result.stop.reason}: {result.stop.detail}")

    @classmethod
    def cleanup(cls, paths: Paths, run_id: str | None = None) -> list[str]:
        """Confining parents left by a crash (instances are removed by their platforms first)."""
        removed = []
        prefix = parent_prefix(paths)
        for rel in cgroups.leftover_parents(prefix):
            if run_id is None or rel == slices.parent_path(f"{prefix}{run_id}"):
                removed += cgroups.remove_tree(rel)
        return removed

"""The built-in kind `benchmarks`: every benchmark on every platform, the classic campaign.

It is the default when a campaign has no `experiment:` key. Its run is the rounds loop
(`rounds.py`: interleaved platform order, adaptive repetition); the session it measures with
(platforms, benchmarks, image, probes) is built in `prepare`, before the run is recorded.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from ...config import cross_host
from ...constants import LIFECYCLE
from ...errors import InputError
from ...platforms.closing import close_platforms
from ..base import Experiment, ExperimentContext, HostLink
from ..planning import Done, Past, Plan, Work, execution_s, instance_s, platform_kinds, rounds_of
from . import crosspair, rounds
from .schedule import noise_rounds, schedule, without
from .session import (
    Session,
    build_objects,
    image_recipe,
    memory_limited,
    prepare,
    refuse_read_only_cgroups,
    refuse_undelegated,
    refuse_unlimited_memory,
    session_details,
    with_platform_packages,
)

if TYPE_CHECKING:
    from ...config import Campaign
    from ...images.build import Recipe
    from ...images.image import Image
    from ...store.models import Run


class Benchmarks(Experiment):
    name: ClassVar[str] = "benchmarks"
    description: ClassVar[str] = "every benchmark on every platform, interleaved rounds, verdicts against the baseline"
    uses_benchmarks: ClassVar[bool] = True
    uses_probes: ClassVar[bool] = True
    uses_adaptive: ClassVar[bool] = True
    across_hosts = "agents"

    prepared: Session | None = None

    @classmethod
    def of(cls, session: Session) -> Benchmarks:
        """The kind over a session built already (one host's share of a run across hosts)."""
        kind = cls(session.campaign, session.paths)
        kind.prepared = session
        return kind

    @classmethod
    def plan(cls, campaign: Campaign, seed: int = 0, done: Done = frozenset(), past: Past | None = None) -> Plan:
        """Every benchmark in an instance of every platform, each round; each instance's life is
        an execution of its own (`lifecycle`). Extra adaptive rounds grow it up to the cap."""
        platforms = platform_kinds(campaign)
        seconds = {b.key: execution_s(b.name, b.params, past) for b in campaign.benchmarks}
        work = [Work(name, b.key, instances=b.instances or 1, expected_s=seconds[b.key][0], source=seconds[b.key][1])
                for name, _, _ in platforms for b in campaign.benchmarks]
        life = {name: Work(name, LIFECYCLE, expected_s=instance_s(kind), source="an instance's life", lifecycle=True)
                for name, _, kind in platforms}
        round_ = [w for name, _, _ in platforms for w in (*(x for x in work if x.platform == name), life[name])]
        noise = [w for w in round_ if w.platform == campaign.baseline]
        sweeps: dict[str, list[str]] = defaultdict(list)
        for b in campaign.benchmarks:
            if b.sweep:
                sweeps[b.name].append(b.key)
        tcg = [p.name for p in campaign.platforms if p.options.get("accel") == "tcg"]
        notes = [f"{', '.join(tcg)}: a TCG guest emulates the CPU (10-50x slower): its executions take longer than "
                 "estimated"] if tcg else []

        def scheduled() -> list[Work]:
            return [Work(u.platform, k[2], round=u.round, warmup=u.warmup) for u in schedule(campaign, seed)
                    for k in u.keys()]

        return Plan(kind=cls.name, rounds=rounds_of(campaign), platforms=platforms, round=round_, noise=noise,
                    budget=(sum(b.instances or 1 for b in campaign.benchmarks), "benchmark executions"),
                    schedule=scheduled, notes=notes, sweeps=dict(sweeps), done=frozenset(done))

    def prepare(self, log: Callable[[str], None]) -> None:
        """Probe, build the image, and drop the platforms a generated campaign goes on without."""
        session = build_objects(self.campaign, self.paths)
        session.availability = dict(self.known_availability or {})
        for platform in session.platforms.values():
            platform.cgroup_parent = self.cgroup_parent if platform.confinable else None
        kwargs: dict[str, Any] = {"cache": self.image_cache} if self.image_cache is not None else {}
        try:
            prepare(session, log=log, left_out=self.left_out, **kwargs)
        except BaseException:
            close_platforms(session.platforms.values())  # what the platforms prepared before the failure
            raise
        self.prepared, self.campaign = session, session.campaign  # without the platforms left out

    def built(self) -> Session:
        if self.prepared is None:
            raise RuntimeError("the benchmarks kind measures only after prepare()")
        return self.prepared

    def objects(self) -> Session:
        """The session prepared here, else its platforms and benchmarks built (options checked)
        without touching the host: what the checks of another host read."""
        if self.prepared is not None:
            return self.prepared
        if self._objects is None:
            self._objects = build_objects(self.campaign, self.paths)
        return self._objects

    _objects: Session | None = None

    # -- on each of `hosts:` ------------------------------------------------------------------
    def remote_checks(self, host: str, read: Callable[[str], str | None]) -> None:
        """The limits the campaign's platforms need from that host's cgroups: its memory
        controller (a board booted without it), delegation (v2), a writable hierarchy."""
        session = self.objects()
        if limited := memory_limited(session):  # a board booted without it (Raspberry Pi OS): refused now
            refuse_unlimited_memory(host, limited, read("/proc/cgroups") or "")
        refuse_undelegated(host, session, read("/sys/fs/cgroup/cgroup.controllers") or "")
        refuse_read_only_cgroups(host, session, read("/proc/self/mountinfo") or "")

    def host_recipe(self) -> Recipe:
        """The campaign's image with what its platforms need inside (a profile lacking the
        benchmarks' tools refuses here, before anything is built)."""
        return with_platform_packages(image_recipe(self.campaign), self.objects().platforms.values())

    def host_image(self) -> Image | None:
        return self.prepared.image if self.prepared is not None else None

    @classmethod
    def part_campaign(cls, campaign: Campaign) -> Campaign:
        return without(campaign, set(cross_host(campaign)))

    def host_part(self) -> Benchmarks:
        """This host's part: without the pairs across hosts (the controller's after_parts)."""
        session = self.built()
        return Benchmarks.of(replace(session, campaign=self.part_campaign(session.campaign)))

    def after_parts(self, ctx: ExperimentContext, hosts: Sequence[HostLink]) -> None:
        if cross_host(self.campaign) and self.prepared is not None:
            crosspair.cross_phase(ctx, self.campaign, self.prepared, hosts)

    def describe_work(self) -> str:
        return f"{len(self.campaign.benchmarks)} benchmarks"

    def serve(self, job: dict[str, Any], requests: Iterable[str], emit: Callable[..., None]) -> None:
        if job.get("mode") != crosspair.SERVER_MODE:
            super().serve(job, requests, emit)
        crosspair.serve(self.built(), job["instance_run_id"], requests, emit)

    def details(self) -> dict[str, Any]:
        details = session_details(self.built())
        if self.left_out:
            details["provenance"]["left_out"] = self.left_out
        return details

    def summary(self, run_id: str, seed: int) -> str:
        c = self.campaign
        noise = noise_rounds(c)
        return (f"run {run_id}: {len(self.built().platforms)} platforms x {len(self.built().benchmarks)} benchmarks, "
                f"{c.repetitions} repetitions + {c.warmups} warm-up"
                + (f" + {noise} rounds of {c.baseline} alone (the noise check)" if noise else "") + f", seed {seed}")

    def resuming(self, run: Run, log: Callable[[str], None]) -> None:
        image = self.built().image
        assert image is not None
        if image.recipe_hash != run.image.get("recipe_hash"):
            raise InputError(f"run {run.id} was measured with image {run.image.get('recipe_hash', '?')[:12]}, "
                             f"this host now builds {image.short}",
                             "resume on the host and virtbench version that started the run")
        if image.tar_sha256 != run.image.get("tar_sha256"):
            log("warning: the image was rebuilt since the run started; package versions may differ")

    def run(self, ctx: ExperimentContext) -> None:
        rounds.run(ctx, self.built())

    def close(self) -> None:
        """What the platforms made for the run (a Kubernetes namespace, an imported image) removed."""
        if self.prepared is not None:
            close_platforms(self.prepared.platforms.values())

"""The `line` experiment kind (study 004): latency and loss-free rate through a line of N
forwarding nodes of each platform, for each pinning mode, with `netns` as the baseline.

Order of a run: host checks and the generator's top sending rate (before anything is
recorded: bad input is exit 2); then per round, the generator's own limit (length 0, source
straight to sink) per pinning mode, then per platform (seeded random order) and length: build
the line, measure each pinning mode, tear it down (build and teardown times are samples too).
"""
from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from typing import Any, ClassVar

from ... import proc
from ...errors import InputError, UnavailableError
from ...hostinfo import meminfo
from ...images import build as images
from ...images.image import Image
from ...platforms.base import Paths, Platform
from ...registry import PLATFORMS
from ...store.db import now
from ..base import Experiment, ExperimentContext
from ..planning import Done, Past, Plan, Work, each_round, instance_s, platform_kinds, rounds_of
from . import measure, pinning, plausible, topology, traffic
from .measure import Point, sample
from .section import LineSection, fixed_rates
from .traffic import run_trial

NETNS = "netns"
MAX_STEPS = 1000
"""Trials one point of the `steps` search may take (the cap `max_trials` has for ndr-pdr)."""
PROBE_RATE = 10_000_000
"""Asked of the generator to find how fast it can send at all."""
NODE_BYTES = {NETNS: 1 << 20, "container": 64 << 20}
"""Conservative memory per node (a namespace and its veths; a container with its runtime's
helpers), checked against MemAvailable so a line the host cannot hold is refused up front."""


class Line(Experiment):
    name: ClassVar[str] = "line"
    description: ClassVar[str] = ("a line of N kernel-forwarding nodes per platform: NDR/PDR search, HDR latency, "
                                  "worst case per 100 ms, pinning (study 004)")
    Section = LineSection
    node_types: ClassVar[tuple[str, ...]] = (NETNS,)
    default_baseline: ClassVar[str] = NETNS

    def __init__(self, campaign: Any, paths: Paths) -> None:
        super().__init__(campaign, paths)
        self.platforms: dict[str, Platform | None] = {}
        self.image: Image | None = None
        self.max_rate = 0.0
        self.skipped: dict[str, str] = {}

    @classmethod
    def work_per_round(cls, section: Any) -> tuple[int, str]:
        return sum(section.lengths) * len(section.pinning), "line nodes"

    @classmethod
    def plan(cls, campaign: Any, seed: int = 0, done: Done = frozenset(), past: Past | None = None) -> Plan:
        """Each round: the generator's own limit (length 0, the baseline's nodes), then every
        platform's line of each length built once and searched at each pinning, its build and
        teardown an execution of its own. Implausible points are measured again at the end
        (not planned: how many depends on what the rounds find)."""
        section: LineSection = campaign.section
        platforms = platform_kinds(campaign, cls.node_types)
        search = section.search
        trials = search.max_trials if search.method == "ndr-pdr" else 10
        trial_s = search.trial_seconds if search.method == "ndr-pdr" else search.seconds
        point_s = trials * trial_s + len(section.latency_rates) * section.latency_seconds
        source = "its search (at most) and latency trials"
        work = [Work(campaign.baseline, measure.key(0, m), expected_s=point_s, source=source) for m in section.pinning]
        for name, _, kind in platforms:
            for n in section.lengths:
                work += [Work(name, measure.key(n, m), instances=n, expected_s=point_s, source=source)
                         for m in section.pinning]
                work.append(Work(name, f"line-build[length={n}]", instances=n, expected_s=n * instance_s(kind),
                                 source="building and removing its nodes", lifecycle=True))
        rounds = rounds_of(campaign)
        return Plan(kind=cls.name, rounds=rounds, platforms=platforms, round=work, schedule=each_round(work, rounds),
                    budget=cls.work_per_round(section), done=frozenset(done),
                    notes=["points whose rate is implausible are measured once more at the end (not counted)"])

    @classmethod
    def validate_campaign(cls, campaign: Any) -> None:
        for p in campaign.platforms:
            if p.type != NETNS and PLATFORMS.get(p.type).kind != "container":
                raise InputError(f"platforms: {p.name} ({p.type}) cannot be a node of a line; use netns or a "
                                 "container platform (lxc, docker, podman, runc, ...)")

    # -- before anything is recorded ---------------------------------------------------
    def prepare(self, log: Callable[[str], None]) -> None:
        section: LineSection = self.section
        for tool, package in (("ip", "iproute2"), ("iperf", "iperf"), ("taskset", "util-linux"), ("tc", "iproute2")):
            if proc.which(tool) is None:
                raise UnavailableError(f"the line experiment needs {tool}", f"apt-get install {package}")
        version = proc.run(["iperf", "-v"], timeout=10, check=False)
        if "iperf version 2." not in version.stdout + version.stderr:
            raise UnavailableError("`iperf` is not iperf 2 (the line's generator needs 2.1 or later)",
                                   "apt-get install iperf")
        self._check_memory(section)
        self.skipped = {m: why for m in section.pinning if (why := pinning.unavailable(m))}
        for mode, why in self.skipped.items():
            log(f"pinning {mode}: skipped, {why}")
        for entry in self.campaign.platforms:
            self.platforms[entry.name] = None if entry.type == NETNS else self._container_platform(entry, log)
        self.max_rate = self._generator_top_rate(section)
        log(f"generator: sends at most {self.max_rate:.0f} pkt/s of {section.payload} B here")
        too_fast = [r for r in fixed_rates(section.latency_rates) if r > self.max_rate]
        if too_fast:
            raise InputError(f"line.latency_rates: {too_fast[0]:.0f} pkt/s is above the generator's measured limit "
                             f"({self.max_rate:.0f} pkt/s)", "use a lower rate or a fraction of NDR such as 0.5")
        if section.search.method == "steps" and section.search.start > self.max_rate:
            raise InputError(f"line.search.start: {section.search.start:.0f} pkt/s is above the generator's "
                             f"measured limit ({self.max_rate:.0f} pkt/s)", "start lower")
        search = section.search
        steps = int((self.max_rate - search.start) // search.step) + 1
        if search.method == "steps" and steps > MAX_STEPS:  # each a trial of `seconds`, per point
            raise InputError(f"line.search: steps of {search.step:g} pkt/s from {search.start:g} up to the generator's "
                             f"{self.max_rate:.0f} pkt/s are up to {steps} trials of {search.seconds:g} s per point, "
                             f"more than {MAX_STEPS}", f"give step: {math.ceil(self.max_rate / MAX_STEPS)} or more")

    def _check_memory(self, section: LineSection) -> None:
        longest = max(section.lengths)
        per_node = max(NODE_BYTES[NETNS if p.type == NETNS else "container"] for p in self.campaign.platforms)
        available = meminfo().get("MemAvailable", 0)
        if available and longest * per_node > available // 2:
            raise InputError(f"line.lengths: a line of {longest} nodes needs about {longest * per_node >> 20} MiB, "
                             f"more than half of what this host has available ({available >> 20} MiB)",
                             f"use lengths up to {max(1, available // 2 // per_node)}")

    def _container_platform(self, entry: Any, log: Callable[[str], None]) -> Platform:
        cls = PLATFORMS.get(entry.type)
        try:
            cls.ensure_engine(self.paths)
        except Exception as exc:  # noqa: BLE001 - the probe below says what is wrong
            log(f"{entry.type}: could not start its engine: {exc}")
        verdict = cls.availability(self.paths)
        if not verdict.available:
            raise UnavailableError(f"platform {entry.name!r} ({entry.type}) is not available here: {verdict.reason}",
                                   verdict.fix or "remove it from the campaign (see `virtbench doctor`)")
        options = cls.Options(**{**entry.options, "network": "none"})
        platform = cls(entry.name, options, self.paths)
        if self.image is None:
            recipe = images.Recipe(release=self.campaign.image.release, arch=images.host_arch(), profile="auto",
                                   packages=tuple(sorted(images.BASE_PACKAGES)))
            self.image = images.build(recipe, log=log)
        platform.prepare(self.image)
        return platform

    def _generator_top_rate(self, section: LineSection) -> float:
        line = topology.plan("probe", 0, NETNS)
        topology.build(line, self.paths, None, None)
        try:
            traffic.warm(line, section.payload)
            t, _ = run_trial(line, PROBE_RATE, section.search.trial_seconds, section.payload,
                             pinning.placement("none", 0))
        finally:
            topology.teardown(line, self.paths, None)
        return float(int(t.offered_pps))

    def provenance(self) -> dict[str, Any]:
        r = proc.run(["iperf", "-v"], timeout=10, check=False)
        return {"line": {"generator": (r.stdout + r.stderr).strip(), "generator_top_pps": self.max_rate,
                         "pinning_skipped": self.skipped, "numa_nodes": pinning.numa_nodes(),
                         "cpus": pinning.host_cpus()}}

    def platform_rows(self) -> list[dict[str, Any]]:
        rows = []
        for entry in self.campaign.platforms:
            platform = self.platforms.get(entry.name)
            if platform is None:
                rows.append({"name": entry.name, "type": NETNS, "label": "netns",
                             "config": {"type": NETNS, "kind": "baseline", "node": "bare network namespace"},
                             "versions": {"iproute2": proc.run(["ip", "-V"], timeout=10, check=False).stdout.strip()}})
                continue
            rows.append({"name": entry.name, "type": platform.type, "label": platform.label(),
                         "config": platform.describe(), "versions": platform.versions()})
        return rows

    # -- the run -------------------------------------------------------------------------
    def run(self, ctx: ExperimentContext) -> None:
        section: LineSection = self.section
        modes = [m for m in section.pinning if m not in self.skipped]
        rounds = rounds_of(self.campaign).declared
        try:
            self._rounds(ctx, modes, rounds)
            self._recheck(ctx, modes, rounds - 1)
        finally:  # whatever a failed teardown left: the containers of this run
            for platform in self.platforms.values():
                if platform is not None:
                    for line in type(platform).cleanup(self.paths, ctx.run_id):
                        ctx.log(f"removed {line}")

    def _rounds(self, ctx: ExperimentContext, modes: list[str], rounds: int) -> None:
        section: LineSection = self.section
        rng = random.Random(ctx.seed)
        baseline = self.campaign.baseline
        for rnd in range(rounds):
            warm = rnd < self.campaign.warmups
            todo = [m for m in modes if (rnd, baseline, measure.key(0, m)) not in ctx.done()]
            if todo:
                self._run_line(ctx, rnd, warm, baseline, 0, todo)
            order = list(self.campaign.platforms)
            rng.shuffle(order)
            for entry in order:
                for length in section.lengths:
                    todo = [m for m in modes if (rnd, entry.name, measure.key(length, m)) not in ctx.done()]
                    if todo:
                        self._run_line(ctx, rnd, warm, entry.name, length, todo)

    def _recheck(self, ctx: ExperimentContext, modes: list[str], last: int) -> None:
        """Measure once more each point whose rate is physically implausible (plausible.py),
        under `line-recheck[...]` in the last round: the report puts both side by side."""
        search = self.section.search
        found = plausible.suspects(plausible.rates(ctx.sink.samples(ctx.run_id)), self.campaign.baseline,
                                   plausible.noise_floor(search), search.step if search.method == "steps" else 0.0)
        for s in found:
            ctx.log(f"implausible: {s.why}")
        for platform, pin, length in plausible.to_recheck(found):
            if pin in modes and (last, platform, plausible.recheck_key(length, pin)) not in ctx.done():
                ctx.log(f"measuring {platform} length {length} pinning {pin} again")
                self._run_line(ctx, last, False, platform, length, [pin], recheck=True)

    def _run_line(self, ctx: ExperimentContext, rnd: int, warm: bool, name: str, length: int,
                  modes: list[str], recheck: bool = False) -> None:
        """Build, measure each mode, tear down. `recheck`: a re-measurement, stored under its own
        key with no build sample (the round's build was recorded already)."""
        keyof = plausible.recheck_key if recheck else measure.key
        if ctx.stop_requested():
            raise KeyboardInterrupt("stop requested")
        platform = self.platforms.get(name) if length else None
        what = f"round {rnd + 1}{' (warm-up)' if warm else ''} {name} length {length}"
        ctx.step(f"{what}: building")
        line = topology.plan(ctx.run_id, length, NETNS if platform is None else name)
        started = now()
        build_s = teardown_s = None
        error = ""
        try:
            topology.build(line, self.paths, platform, self.image, ctx.log)
            build_s = line.build_s
            traffic.warm(line, self.section.payload)
            for mode in modes:
                ctx.step(f"{what}: pinning {mode}")
                where = pinning.placement(mode, length)
                pinning.apply(line, where)
                measure.measure(ctx.sink, ctx.run_id, Point(rnd, warm, name, mode, line, where), self.section,
                                self.max_rate, ctx.log, benchmark=keyof(length, mode) if recheck else None)
        except Exception as exc:  # noqa: BLE001 - the points of this line fail, the run goes on
            error = f"{type(exc).__name__}: {exc}"
            ctx.log(f"{what}: {error}")
            for mode in modes:
                if (rnd, name, keyof(length, mode)) not in ctx.done():
                    ctx.sink.record(run_id=ctx.run_id, round=rnd, warmup=warm, platform=name,
                                     benchmark=keyof(length, mode), status="failed", started_at=started,
                                     finished_at=now(), duration_s=0.0, instance=line.tag, error=error)
        except BaseException:  # Ctrl-C, SIGTERM, a cancel: remove the line, then stop
            _quiet_teardown(line, self.paths, platform)
            raise
        t0 = time.perf_counter()
        try:
            teardown_s = topology.teardown(line, self.paths, platform)
        except Exception as exc:  # noqa: BLE001 - recorded; cleanup at the end of the run removes the rest
            error = error or f"teardown: {exc}"
            teardown_s = None
        teardown_s = teardown_s if teardown_s is not None else time.perf_counter() - t0
        if length and not recheck:
            ok = build_s is not None and not error
            ctx.sink.record(run_id=ctx.run_id, round=rnd, warmup=warm, platform=name,
                             benchmark=f"line-build[length={length}]", status="ok" if ok else "failed",
                             started_at=started, finished_at=now(), duration_s=(build_s or 0) + teardown_s,
                             instance=line.tag, error=error,
                             stdout=f"build {build_s} s, teardown {teardown_s:.3f} s",
                             samples=[sample("build_s", build_s or 0, "s", False, "lifecycle"),
                                      sample("teardown_s", teardown_s, "s", False, "lifecycle")] if ok else [])

    @classmethod
    def cleanup(cls, paths: Paths, run_id: str | None = None) -> list[str]:
        return topology.cleanup(paths, run_id)


def _quiet_teardown(line: topology.Line, paths: Paths, platform: Platform | None) -> None:
    try:
        topology.teardown(line, paths, platform)
    except Exception:  # noqa: BLE001 - the run's cleanup removes what is left
        pass

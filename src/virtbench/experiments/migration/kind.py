"""The experiment kind `migration`: N instances at once, moved offline or live, or only
started and stopped (the study's Fig. 12, seeds/000, and the lifecycle at scale behind it).

    experiment: migration
    platforms: [lxc]
    migration:
      counts: [1, 2, 4, 8]          # instances at once
      mode: offline                 # offline | live | lifecycle
      to: {path: /mnt/other-disk}   # or {host: NAME} (one of hosts:), or a list, one series each

Each (round, platform, destination, count) is one execution `migration[count=N,to=NAME]`
with one sample per phase (seconds; bytes moved; MB/s), so the usual statistics, resume and
export apply. Everything that can be checked without stopping anything is checked in
`prepare` (exit 2): the destination exists and has room, the platform can do the mode (CRIU's
own output when it cannot), the host has memory for the largest count.
"""
from __future__ import annotations

import json
import random
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ... import hostinfo as hostfacts
from ...errors import InputError, UnavailableError
from ...images import build as images
from ...images.image import Image
from ...platforms import naming
from ...platforms.availability import availability_of
from ...platforms.base import Instance, Platform, Size
from ...platforms.closing import close_platforms
from ...platforms.naming import INSTANCE_PREFIX
from ...registry import PLATFORMS
from ...store.db import now
from ..base import Experiment, ExperimentContext
from ..planning import Done, Past, Plan, Work, each_round, instance_s, platform_kinds, rounds_of
from . import fleet, live, offline, remote, storage
from .transport import Leftovers, LocalTransport, Transport
from .transport import cleanup as cleanup_copies

MAX_COUNT = 64
CONTAINER_MEMORY = 64 << 20
"""What an idle container without a memory limit is assumed to need (sleep + runtime shim)."""
UPPER_ESTIMATE = 16 << 20
"""What an instance writes besides its payload before it moves (logs, lock files)."""


def instance_names(run_id: str, platform: str, rnd: int, dest: str | None, count: int) -> list[str]:
    """The names of one measurement's instances, through naming: unique, valid for every
    runtime, with room for the copy's suffix (`-in` of a live move, `-m` of one to a host)."""
    head = f"{INSTANCE_PREFIX}{run_id}-{platform}-r{rnd}-{dest or 'n'}{count}"
    return [naming.fit(head, f"-{i}") for i in range(count)]


class Destination(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    path: Path | None = Field(None, description="a directory on this host (another disk or filesystem)")
    host: str | None = Field(None, description="another host of the campaign's `hosts:` (LXC, offline, over SSH)")
    name: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,30}$",
                             description="label in keys and figures (default: the directory's name)")

    @model_validator(mode="after")
    def _one(self) -> Destination:
        if (self.path is None) == (self.host is None):
            raise ValueError("give exactly one of path (a directory here) or host")
        if self.path is not None and not self.path.is_absolute():
            raise ValueError(f"path {str(self.path)!r} must be absolute")
        return self

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        raw = self.host or (self.path.name if self.path and self.path.name else "root")
        return re.sub(r"[^A-Za-z0-9_.-]", "-", raw)[:31] or "dest"


class MigrationSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    counts: list[int] = Field([1, 2, 4, 8], min_length=1, description="instances migrated at once")
    mode: Literal["offline", "live", "lifecycle"] = Field(
        "offline", description="offline: stop, move storage, start; live: QEMU through QMP, "
                               "containers through CRIU; lifecycle: start and stop N at once, no move")
    to: list[Destination] = Field(default_factory=list, description="where the instances move (one or a list)")
    payload: Size = Field(64 << 20, ge=0, le=64 << 30,
                          description="data each instance writes into its own storage before it moves")
    with_image: bool = Field(False, description="move a copy of the image with each instance (a full "
                                                "volume, as Proxmox migrates a container's rootfs)")
    measure_storage: bool = Field(True, description="measure each end's raw throughput with dd (O_DIRECT)")

    @field_validator("to", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        return [v] if isinstance(v, dict) else v

    @field_validator("counts")
    @classmethod
    def _counts(cls, v: list[int]) -> list[int]:
        if any(n < 1 or n > MAX_COUNT for n in v):
            raise ValueError(f"each count must be from 1 to {MAX_COUNT}")
        if len(set(v)) != len(v):
            raise ValueError("a count is listed twice")
        return sorted(v)

    @model_validator(mode="after")
    def _shape(self) -> MigrationSection:
        if self.mode == "offline" and not self.to:
            raise ValueError("mode offline needs a destination: to: {path: /mnt/other-disk}")
        if self.mode == "lifecycle" and self.to:
            raise ValueError("mode lifecycle moves nothing; remove `to`")
        labels = [d.label for d in self.to]
        if len(set(labels)) != len(labels):
            raise ValueError("two destinations have the same name; give each a distinct `name`")
        return self


METRICS: dict[str, tuple[str, bool, str]] = {
    "create_s": ("s", False, "lifecycle"), "start_s": ("s", False, "lifecycle"),
    "stop_s": ("s", False, "lifecycle"), "remove_s": ("s", False, "lifecycle"),
    "setup_s": ("s", False, "migration"), "transfer_s": ("s", False, "migration"),
    "total_s": ("s", False, "migration"), "downtime_s": ("s", False, "migration"),
    "bytes_moved": ("B", False, "migration"), "throughput_MBps": ("MB/s", True, "migration"),
}
"""Every sample's unit, direction and category; phases of the migration modes share names."""


def sample(metric: str, value: float) -> dict[str, Any]:
    unit, higher, category = METRICS[metric]
    if metric in ("start_s", "stop_s") and category == "lifecycle":
        category = "migration"
    return {"metric": metric, "value": float(value), "unit": unit, "higher_is_better": higher, "category": category}


def event_samples(per: list[dict[str, float]]) -> list[dict[str, Any]]:
    """The steps each instance's platform timed by its own events (a pod's watch): instance i+1's
    own value, and their mean as the execution's (instance 0), as for N instances of a benchmark."""
    out: list[dict[str, Any]] = []
    for metric in sorted({m for times in per for m in times}):
        values = [times[metric] for times in per if metric in times]
        base = {"metric": f"{metric}_s", "unit": "s", "higher_is_better": False, "category": "lifecycle"}
        out.append({**base, "value": sum(values) / len(values)})
        out += [{**base, "value": v, "instance": n + 1} for n, times in enumerate(per)
                if (v := times.get(metric)) is not None]
    return out


def key_of(count: int, dest: str | None) -> str:
    return f"migration[count={count}" + (f",to={dest}]" if dest else "]")


class Migration(Experiment):
    name: ClassVar[str] = "migration"
    description: ClassVar[str] = ("N instances at once moved offline (stop, move storage, start) or live "
                                  "(QEMU QMP, CRIU), or only started and stopped; every phase timed")
    Section = MigrationSection
    across_hosts = "drives"  # the destination hosts are reached from here, over SSH

    @classmethod
    def work_per_round(cls, section: Any) -> tuple[int, str]:
        return sum(section.counts) * max(1, len(section.to)), "instances moved"

    @classmethod
    def plan(cls, campaign: Any, seed: int = 0, done: Done = frozenset(), past: Past | None = None) -> Plan:
        """Each round, every platform moves each count of instances to each destination: one
        execution per (count, destination), its instances created, moved and removed."""
        section: MigrationSection = campaign.section
        platforms = platform_kinds(campaign)
        dests: list[str | None] = [d.label for d in section.to] or [None]
        took = [s for k, v in (past or {}).items() if k == "migration" for s in v]
        work = []
        for name, _, kind in platforms:
            for dest in dests:
                for n in section.counts:
                    seconds = statistics.median(took) if took else n * (4 * instance_s(kind) + section.payload / 100e6)
                    work.append(Work(name, key_of(n, dest), instances=n, expected_s=seconds,
                                     source=f"median of {len(took)} past executions" if took
                                     else "instance lives + payload at 100 MB/s (assumed)"))
        rounds = rounds_of(campaign)
        return Plan(kind=cls.name, rounds=rounds, platforms=platforms, round=work, schedule=each_round(work, rounds),
                    budget=cls.work_per_round(section), done=frozenset(done))

    @classmethod
    def validate_campaign(cls, campaign: Any) -> None:
        names = [p.name for p in campaign.platforms]
        if campaign.baseline not in names and campaign.baseline == cls.default_baseline:
            campaign.baseline = names[0]  # migration compares phases, not against bare metal
        section = campaign.section
        if section.mode == "live":
            types = {p.type for p in campaign.platforms}
            if "qemu" in types and any(d.path for d in section.to):
                raise InputError("migration.to: live migration of a VM on one host moves memory and device state, "
                                 "the disk is shared", "remove `to` (or use mode: offline to move the disk)")
            if types - {"qemu"} and not section.to:
                raise InputError("migration.to: live migration of containers (CRIU) moves their dump and storage",
                                 "give a destination: to: {path: /mnt/other-disk}")
        if any(p.inside for p in campaign.platforms):
            raise InputError("migration: stacked platforms (inside:) cannot be migrated yet",
                             "migrate the VM itself (type qemu)")
        cls.validate_hosts(campaign)

    @classmethod
    def validate_hosts(cls, campaign: Any) -> None:
        """A destination host: one of `hosts:`, reached over SSH from this host (the source);
        LXC containers moved offline only (live needs CRIU on both hosts)."""
        section = campaign.section
        wanted = [d.host for d in section.to if d.host is not None]
        names = {h.name: h for h in campaign.hosts}
        for name in wanted:
            if name not in names or names[name].is_local:
                raise InputError(f"migration.to: host {name!r} is not one of the campaign's other hosts",
                                 f"list it under hosts: (hosts: [local, {name}]) or give a directory: "
                                 "to: {path: /mnt/other-disk}")
        others = [n for n, h in names.items() if not h.is_local and n not in wanted]
        if others:
            raise InputError(f"hosts: {others[0]!r} is no migration destination: a migration runs from this host "
                             "to its destinations", f"add to: {{host: {others[0]}}} or remove it from hosts:")
        if not wanted:
            return
        if section.mode == "live":
            raise InputError("migration.to: live migration to another host needs CRIU on both hosts, which "
                             "virtbench does not drive across hosts", "use mode: offline (stop, send over SSH, start)")
        movable = sorted(name for name, cls in PLATFORMS.items() if cls.migrates_to_host)
        for p in campaign.platforms:
            if p.type not in movable:
                raise InputError(f"migration.to: host: platform {p.name!r} ({p.type}) cannot move to another "
                                 f"host; {', '.join(movable)} platforms can",
                                 f"use a {' or '.join(movable)} platform, or to: {{path: DIR}} on this host")
            if p.options.get("network") == "bridge":
                raise InputError(f"migration.to: host: platform {p.name!r} has network: bridge, whose address "
                                 "and bridge belong to this host", "use network: none or host")

    # -- before anything starts ------------------------------------------------------------
    def platforms(self) -> dict[str, Platform]:
        """The campaign's platforms, made once (a pod platform keeps its cluster and image between calls)."""
        if getattr(self, "_platforms", None) is None:
            self._platforms = {e.name: PLATFORMS.get(e.type)(e.name, PLATFORMS.get(e.type).Options(**e.options),
                                                             self.paths) for e in self.campaign.platforms}
        return self._platforms

    def prepare(self, log: Callable[[str], None]) -> None:
        section: MigrationSection = self.section
        platforms = self.platforms()
        for name, p in platforms.items():
            if section.mode == "offline" and type(p).storage is Platform.storage:
                raise InputError(f"migration: platform {name!r} ({p.type}) cannot be migrated offline: its storage "
                                 "belongs to its engine", "use lxc, runc, native or qemu, or mode: lifecycle")
            if section.mode == "offline" and section.with_image and not p.image_per_instance:
                raise InputError(f"migration.with_image: {name!r} ({p.type}) keeps no image layer apart from its own "
                                 "data (native runs the image itself; a disk: volume holds it and moves whole)",
                                 "set with_image: false (its own data still moves)")
            if section.mode == "live" and p.live_migration == "qmp" and p.options.network == "bridge":
                raise InputError(f"migration: live mode on {name!r}: a bridged VM's tap cannot be shared by the "
                                 "destination QEMU on one host yet", "use network: none or user for live migration")
            if section.mode == "live":
                ok, why = live.supports_live(p)
                if not ok:
                    raise InputError(f"migration: live mode on {name!r}: {why}",
                                     "use mode: offline (stop, move, start) or a qemu platform")
        for d in section.to:
            if d.host is not None:
                continue
            assert d.path is not None
            if not d.path.is_dir():
                raise InputError(f"migration.to: {d.path} does not exist or is not a directory",
                                 "create it (e.g. mount another disk there) or give an existing directory")
            if any(c in str(d.path) for c in ",:\\"):
                raise InputError(f"migration.to: {d.path} contains ',', ':' or '\\', which overlay and QEMU "
                                 "options cannot hold", "give a directory without those characters")
            need = self.bytes_needed(max(section.counts))
            free = storage.free_bytes(d.path)
            if free < need:
                raise InputError(f"migration.to: {d.path} has {free / 2**20:.0f} MiB free, {max(section.counts)} "
                                 f"instances need about {need / 2**20:.0f} MiB",
                                 "free space there, lower payload or counts, or pick another destination")
        self.check_memory(platforms, max(section.counts))
        verdicts = availability_of(sorted({p.type for p in platforms.values()}), self.paths, log)
        for name, p in platforms.items():
            if not verdicts[p.type].available:
                raise UnavailableError(f"platform {name!r} ({p.type}) is not available here: {verdicts[p.type].reason}",
                                       verdicts[p.type].fix or "remove it from the campaign (see `virtbench doctor`)")
            p.preflight()  # the entry's own options against what they name (a cluster)
        self._hosts = self.connect_hosts(log)
        try:
            self._facts = self.storage_facts(log)
            self._lower = {label: h.image_rootfs(self.image(), log) for label, h in self._hosts.items()}
        except BaseException:
            self.close_hosts()
            raise

    def connect_hosts(self, log: Callable[[str], None]) -> dict[str, remote.RemoteHost]:
        """Each destination host connected (host key, root) and checked for room, before anything starts."""
        section: MigrationSection = self.section
        specs = {h.name: h for h in self.campaign.hosts}
        hosts: dict[str, remote.RemoteHost] = {}
        try:
            for d in section.to:
                if d.host is None:
                    continue
                log(f"connecting to {d.host} (the migration's destination)")
                h = hosts[d.label] = remote.RemoteHost(specs[d.host], self.paths)
                h.open()
                need, free = self.bytes_needed(max(section.counts)), h.free_bytes()
                if free < need:
                    raise InputError(f"migration.to: host {d.host} has {free / 2**20:.0f} MiB free under "
                                     f"{h.lxcpath}, {max(section.counts)} instances need about {need / 2**20:.0f} MiB",
                                     "free space there, lower payload or counts, or give another work_dir")
        except BaseException:
            for h in hosts.values():
                h.close()
            raise
        return hosts

    def close_hosts(self) -> None:
        for h in getattr(self, "_hosts", {}).values():
            h.close()

    def bytes_needed(self, count: int) -> int:
        section: MigrationSection = self.section
        image = storage.tree_bytes(self.image().rootfs) if section.with_image else 0
        return int(count * (section.payload + UPPER_ESTIMATE + image) * 1.1)

    def check_memory(self, platforms: dict[str, Platform], count: int) -> None:
        available = hostfacts.meminfo().get("MemAvailable", 0)
        for name, p in platforms.items():
            each = p.options.memory or CONTAINER_MEMORY
            # live: source and destination VM exist at once during the move
            need = count * each * (2 if self.section.mode == "live" else 1)
            if available and need > 0.8 * available:
                raise InputError(f"migration.counts: {count} instances of {name!r} need about {need / 2**30:.1f} GiB, "
                                 f"the host has {available / 2**30:.1f} GiB available",
                                 "lower the largest count or the platform's memory option")

    def image(self) -> Image:
        if getattr(self, "_image", None) is None:
            profile = "full" if self.campaign.image.profile == "full" else "quick"
            self._image = images.build(images.recipe_for(profile, self.campaign.image.release))
        return self._image

    def storage_facts(self, log: Callable[[str], None]) -> dict[str, Any]:
        section: MigrationSection = self.section
        self.paths.state.mkdir(parents=True, exist_ok=True)
        measure = section.measure_storage and section.mode != "lifecycle"
        ends = {"source": self.paths.state, **{d.label: d.path for d in section.to if d.path is not None}}
        out = {}
        for label, path in ends.items():
            if measure:
                log(f"measuring raw throughput of {path} (dd, O_DIRECT)")
            out[label] = (storage.measure(path) if measure else storage.facts(path)).as_dict()
        for label, h in getattr(self, "_hosts", {}).items():
            log(f"measuring {h.spec.name}: its storage (dd, O_DIRECT) and the SSH path to it")
            out[label] = {**h.storage_facts(measure), "path_throughput": h.path_throughput()}
        return out

    def provenance(self) -> dict[str, Any]:
        section: MigrationSection = self.section
        crit = {}
        if section.mode == "live" and any(PLATFORMS.get(p.type).live_migration != "qmp"
                                          for p in self.campaign.platforms):
            ok, output = live.criu_check()
            crit = {"criu_check": {"ok": ok, "output": output[-2000:]}}
        return {"migration": {"storage": getattr(self, "_facts", {}), "image": self.image().provenance(), **crit}}

    def platform_rows(self) -> list[dict[str, Any]]:
        rows = []
        for name, p in self.platforms().items():
            try:
                versions = p.versions()
            except Exception as exc:  # noqa: BLE001 - provenance is best effort, recorded as such
                versions = {"error": str(exc)}
            rows.append({"name": name, "type": p.type, "label": p.label(), "config": p.describe(),
                         "versions": versions})
        return rows

    # -- measuring -------------------------------------------------------------------------
    def run(self, ctx: ExperimentContext) -> None:
        section: MigrationSection = self.section
        try:
            image = self.image()
            platforms = self.platforms()
            for p in platforms.values():
                p.prepare(image)
            dests: list[Destination | None] = list(section.to) or [None]
            rng = random.Random(ctx.seed)
            self.rounds(ctx, platforms, image, dests, rng, rounds_of(self.campaign).declared)
        finally:
            self.close_hosts()

    def close(self) -> None:
        close_platforms((getattr(self, "_platforms", None) or {}).values())

    def rounds(self, ctx: ExperimentContext, platforms: dict[str, Platform], image: Image,
               dests: list[Destination | None], rng: random.Random, rounds: int) -> None:
        section: MigrationSection = self.section
        for rnd in range(rounds):
            order = list(platforms)
            if self.campaign.shuffle:
                rng.shuffle(order)
            for pname in order:
                for dest in dests:
                    for count in section.counts:
                        key = key_of(count, dest.label if dest else None)
                        if (rnd, pname, key) in ctx.done():
                            continue
                        if ctx.stop_requested():
                            raise KeyboardInterrupt
                        ctx.step(f"round {rnd + 1}/{rounds} {pname}: {key}")
                        self.measure(ctx, platforms[pname], image, rnd, rnd < self.campaign.warmups, key,
                                     count, dest)

    def measure(self, ctx: ExperimentContext, platform: Platform, image: Image, rnd: int, warmup: bool,
                key: str, count: int, dest: Destination | None) -> None:
        section: MigrationSection = self.section
        names = instance_names(ctx.run_id, platform.name, rnd, dest.label if dest else None, count)
        instances: list[Instance] = []
        leftovers = Leftovers(ctx.paths, ctx.run_id)
        far = remote.RemoteLeftovers(ctx.paths, ctx.run_id)
        started, t0 = now(), time.perf_counter()
        samples: list[dict[str, Any]] = []
        log: list[str] = []
        status, error = "ok", ""
        try:
            created = fleet.create(platform, image, names, ctx.run_id, instances)
            up = fleet.at_once("start", instances, platform.start)
            if section.mode == "lifecycle":
                down = fleet.at_once("stop", instances, platform.stop)
                t1 = time.perf_counter()
                gone = fleet.discard(platform, instances)
                if gone:
                    raise RuntimeError("; ".join(gone))
                gone_ones, instances = instances, []
                samples = [sample("create_s", created.seconds), sample("start_s", up.seconds),
                           sample("stop_s", down.seconds), sample("remove_s", time.perf_counter() - t1)]
                events = [platform.event_times(i) for i in gone_ones]
                samples += event_samples([times for times, _ in events])
                log += [f"events {i.name}: {record}" for i, (_, record) in zip(gone_ones, events) if record]
                log.append(f"start each: {up.each}; stop each: {down.each}")
            elif section.mode == "offline" and dest is not None and dest.host is not None:
                for i in instances:
                    offline.write_payload(platform, i, section.payload // 2**20)
                moved = remote.migrate(platform, instances, self._hosts[dest.label], far,
                                       lower=self._lower[dest.label],
                                       image_rootfs=image.rootfs if section.with_image else None)
                samples = [sample(f"{k}_s", v) for k, v in moved.phases.items()]
                samples += [sample("bytes_moved", moved.bytes_moved), sample("throughput_MBps", moved.throughput_MBps)]
                log += [f"start before the move: {up.seconds:.4f} s", *moved.log, f"each: {moved.each}"]
            elif section.mode == "offline":
                assert dest is not None and dest.path is not None
                for i in instances:
                    offline.write_payload(platform, i, section.payload // 2**20)
                moved = offline.migrate(platform, instances, self.transport(dest), leftovers,
                                        image_rootfs=image.rootfs if section.with_image else None)
                samples = [sample(f"{k}_s", v) for k, v in moved.phases.items()]
                samples += [sample("bytes_moved", moved.bytes_moved), sample("throughput_MBps", moved.throughput_MBps)]
                log += [f"start before the move: {up.seconds:.4f} s", *moved.log, f"each: {moved.each}"]
            else:
                for i in instances:
                    offline.write_payload(platform, i, section.payload // 2**20)
                if platform.live_migration == "qmp":
                    result, instances = live.migrate_qemu(platform, instances)
                else:  # containers through CRIU (prepare checked `criu check`)
                    assert dest is not None
                    result = live.migrate_criu(platform, instances, self.transport(dest), leftovers)
                samples = [sample(f"{k}_s", v) for k, v in result.phases.items()]
                samples += [sample("bytes_moved", result.bytes_moved), sample("throughput_MBps", result.throughput_MBps)]
                log += [f"each: {result.each}", "query-migrate: " + json.dumps(result.qemu)]
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # noqa: BLE001 - a failed execution with its error, the run goes on
            status, error, samples = "failed", f"{type(exc).__name__}: {exc}", []
            ctx.log(f"{platform.name} {key}: {error}")
        finally:
            problems = fleet.discard(platform, instances)
            removed = leftovers.remove_all()
            if dest is not None and dest.host is not None:
                removed += far.remove_all(self._hosts.get(dest.label))
            log += [f"cleanup: {p}" for p in problems] + [f"removed {r}" for r in removed]
            if problems:
                PLATFORMS.get(platform.type).cleanup(ctx.paths, ctx.run_id)
        ctx.sink.record(run_id=ctx.run_id, round=rnd, warmup=warmup, platform=platform.name, benchmark=key,
                         status=status, started_at=started, finished_at=now(), duration_s=time.perf_counter() - t0,
                         instance=names[0], stdout="\n".join(log), error=error, samples=samples)

    def transport(self, dest: Destination) -> Transport:
        assert dest.path is not None
        return LocalTransport(dest.path)

    @classmethod
    def cleanup(cls, paths: Any, run_id: str | None = None) -> list[str]:
        return cleanup_copies(paths, run_id) + remote.cleanup(paths, run_id)

"""Budgets checked by arithmetic before anything is built, allocated or started.

`check_budget` needs no host: the number of executions a campaign asks for is the product of
its rounds, platforms and benchmark points (each point's instances counted), computed from
the counts alone. `check_host` compares what the campaign asks of this host (CPUs, memory,
scratch space) with what the host has, reading /proc/meminfo and one statvfs: cheap, no
program run, no platform probed, so the CLI calls it before the store is opened and the
runner before its probes.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import hostinfo as hostfacts
from ..errors import InputError
from ..platforms.cgroups import online_cpus, parse_cpulist, whole_board
from ..registry import BENCHMARKS, EXPERIMENTS, PLATFORMS
from .messages import one_line

if TYPE_CHECKING:
    from ..platforms.base import Paths
    from .campaign import Campaign

MAX_EXECUTIONS = 1_000_000
"""Executions (one benchmark in one instance in one round) a campaign may ask for: at a second
each, eleven days of measuring; more is a typo (repetitions: 100000) or a generated campaign
gone wrong, refused before the schedule (a list of units) is built."""


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def check_budget(campaign: Campaign) -> None:
    """Refuse a campaign whose work exceeds MAX_EXECUTIONS: rounds x platforms x what one round
    asks of a platform (the kind's plan: benchmark points with their instances, nodes, moves)."""
    plan = EXPERIMENTS.get(campaign.experiment).plan(campaign)
    per_round, what = plan.budget
    rounds = plan.rounds.at_cap
    total = rounds * len(campaign.platforms) * per_round
    if total > MAX_EXECUTIONS:
        reps = "adaptive.max_repetitions" if plan.rounds.most > campaign.repetitions else "repetitions"
        raise InputError(f"{rounds} rounds x {len(campaign.platforms)} platforms x {per_round} {what} "
                         f"per round = {total}, more than {MAX_EXECUTIONS}",
                         f"lower {reps}, platforms or the section's counts, or split the campaign")


def _existing(path: Path) -> Path:
    """The directory itself or its nearest existing parent (a fresh machine has no state yet)."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_host(campaign: Campaign, paths: Paths, *, source: str = "", cpus: int | None = None,
               memory: int | None = None, free: int | None = None, one_of_hosts: bool = False) -> None:
    """Refuse what this host cannot give: a platform's CPUs or memory beyond the host's, a
    confined density host larger than the host, a benchmark's scratch files beyond the free
    space of the state directory's filesystem. source: the file or host, named first in the
    message. cpus/memory/free: the host's figures (another host's, tests), else read here;
    free=-1: scratch space not checked. A campaign with `hosts:` is checked host by host by the
    runner's preflight (one_of_hosts), not as a whole here."""
    if campaign.hosts and not one_of_hosts:
        return
    try:
        _check_host(campaign, paths, cpus, memory, free)
    except InputError as exc:
        raise InputError(one_line(f"{source}: {exc.message}") if source else exc.message, exc.fix) from None


def _check_host(campaign: Campaign, paths: Paths, cpus: int | None, memory: int | None, free: int | None) -> None:
    cpus = cpus if cpus is not None else len(online_cpus())
    memory = memory if memory is not None else hostfacts.meminfo().get("MemTotal", 0)
    for i, p in enumerate(campaign.platforms):
        where = f"platforms[{i}] {p.name!r}"
        if p.type in PLATFORMS.known() and PLATFORMS.get(p.type).pod:  # on a cluster's node: its preflight reads its allocatable
            continue
        if p.inside is None:
            _limits(where, p.options, cpus, memory, "this host's", "(MemTotal)")
        else:  # a container in a VM: the VM's vcpus and memory are its host
            vm: Any = PLATFORMS.get(campaign.platform(p.inside).type).Options.model_validate(
                campaign.platform(p.inside).options)
            _limits(where, p.options, getattr(vm, "vcpus", cpus), getattr(vm, "memory", memory),
                    f"its VM {p.inside!r}'s", "")
    _confined(campaign, memory)
    if free != -1:
        _check_scratch(campaign, paths, free)


def _limits(where: str, options: dict[str, Any], cpus: int, memory: int, whose: str, what: str) -> None:
    want = options.get("cpus")
    if isinstance(want, (int, float)) and want > cpus:
        raise InputError(f"{where}: cpus {want:g} is more than {whose} {cpus} CPUs", f"give cpus: {cpus} or fewer")
    cpuset = options.get("cpuset")
    if isinstance(cpuset, str) and max(parse_cpulist(cpuset), default=0) >= cpus:
        raise InputError(f"{where}: cpuset {cpuset!r} names CPU {max(parse_cpulist(cpuset))}; {whose} CPUs are "
                         f"0-{cpus - 1}", f"use CPUs from 0 to {cpus - 1}")
    mem = options.get("memory")
    if memory and isinstance(mem, int) and mem > memory:
        raise InputError(f"{where}: memory {_gib(mem)} is more than {whose} {_gib(memory)}{f' {what}' if what else ''}",
                         f"give memory: {memory * 3 // 4 >> 20}M or less")


def _confined(campaign: Campaign, memory: int) -> None:
    confined = getattr(campaign.section, "host_memory", None)
    if memory and isinstance(confined, int) and confined > memory and not whole_board(confined, memory):
        raise InputError(f"{campaign.experiment}.host_memory: {_gib(confined)} is more than this host's "
                         f"{_gib(memory)} (MemTotal), even as a board's nominal size", f"give host_memory: "
                         f"{memory * 3 // 4 >> 20}M or less")


def _check_scratch(campaign: Campaign, paths: Paths, free: int | None) -> None:
    """Each benchmark point's files (fio, dd, sysbench-fileio size, times its instances) and each
    lxc disk image, against the free space where instances keep their scratch directories."""
    needs: list[tuple[str, int, str]] = []
    for b in campaign.benchmarks:
        params: Any = BENCHMARKS.get(b.name).Params.model_validate(b.params)
        size = params.scratch_bytes() * (b.instances or 1)
        if size:
            many = f" in each of {b.instances} instances" if b.instances else ""
            needs.append((f"benchmark {b.key!r}", size, f"{_gib(size / (b.instances or 1))} of files{many}"))
    for i, p in enumerate(campaign.platforms):
        disk = p.options.get("disk")
        if isinstance(disk, int) and p.inside is None:
            needs.append((f"platforms[{i}] {p.name!r}", disk, f"a disk image of {_gib(disk)}"))
    if not needs:
        return
    where = _existing(paths.state)
    have = free if free is not None else hostfacts.free_bytes(where)
    what, size, why = max(needs, key=lambda n: n[1])
    if size > have:
        raise InputError(f"{what}: needs {why}, but {where} has {_gib(have)} free",
                         "lower the size, free space there, or set VIRTBENCH_STATE_DIR to a larger filesystem")

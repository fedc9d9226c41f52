"""What every check runs with: the host's paths, a scratch results store, CPU priority, and
a ledger of the objects the self-test makes itself, so nothing outlives it.

Campaigns run through `runner.execute.start` like a user's run, into a temporary store (a
self-test is not a result to keep). The instances of confinable platforms go under a parent
cgroup with a hundred times the default CPU weight, and the self-test process (hence native
runs and tools run directly) under nice -20: the same high CPU priority for every side of a
comparison, so other work on the host disturbs the known answers less (it cannot remove it:
the load is reported with every self-test). Objects the checks make outside the runner (that
parent cgroup, network namespaces) are written to the ledger before they exist, so
`cleanup` removes them after a crash.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import hostinfo, proc
from ..analysis.summary import Row, summarize
from ..boards import emulated
from ..config import parse_campaign
from ..errors import VirtbenchError
from ..platforms import cgroups, slices, units
from ..platforms.availability import availability_of
from ..platforms.base import Paths
from ..runner import execute
from ..store import results
from ..store.db import Store
from .base import Skip

PREFIX = "vbst-"
"""Names of the self-test's own objects (cgroups, network namespaces)."""
CPU_WEIGHT_FACTOR = 100
NICE = -20


def ledger_dir(paths: Paths) -> Path:
    return paths.runtime / "selftest"


def record(paths: Paths, kind: str, name: str) -> None:
    """Note an object before it is made (kind: cgroup or netns), for cleanup after a crash."""
    d = ledger_dir(paths)
    d.mkdir(parents=True, exist_ok=True)
    (d / _entry(kind, name)).touch()


def _entry(kind: str, name: str) -> str:
    """The ledger file of an object: a cgroup path's slashes (a slice in virtbench.slice) as ':'."""
    return f"{kind}={name.replace('/', ':')}"


def remove(paths: Paths, kind: str, name: str) -> list[str]:
    """Remove one recorded object (it may never have been made) and its ledger entry."""
    done: list[str] = []
    if kind == "cgroup":
        done += cgroups.remove_tree(name, timeout=5.0)
    elif kind == "netns":
        r = proc.run(["ip", "netns", "delete", name], timeout=30, check=False)
        if r.ok:
            done.append(f"network namespace {name}")
    (ledger_dir(paths) / _entry(kind, name)).unlink(missing_ok=True)
    return done


def cleanup(paths: Paths) -> list[str]:
    """Remove everything a self-test recorded in this runtime directory (after a crash)."""
    d = ledger_dir(paths)
    removed: list[str] = []
    for entry in sorted(d.iterdir()) if d.is_dir() else []:
        kind, _, name = entry.name.partition("=")
        removed += remove(paths, kind, name.replace(":", "/"))
    return removed + slices.remove_if_empty()


@dataclass
class Measured:
    """A campaign's outcome: its summary rows (with verdicts) and its failed executions."""

    run_id: str
    rows: list[Row]
    failures: list[dict[str, Any]]

    def row(self, platform: str, metric: str) -> Row:
        found = [r for r in self.rows if r.platform == platform and r.metric == metric]
        if not found:
            raise LookupError(f"no {metric} row for {platform} in run {self.run_id}")
        return found[0]


@dataclass
class Context:
    paths: Paths
    store: Store
    token: str
    log: Callable[[str], None] = lambda _m: None
    cgroup_parent: str | None = None
    platform: str = "runc"
    """The platform type a limit check runs on (`selftest --platform P`)."""

    def require_platform(self, platform_type: str) -> None:
        """Skip the check, with doctor's reason and fix, when the platform cannot run here."""
        verdict = availability_of([platform_type], self.paths)[platform_type]
        if not verdict.available:
            raise Skip(f"platform {platform_type} is not available here: {verdict.reason}", verdict.fix or None)

    @staticmethod
    def require_real_cpu(why: str) -> None:
        """Skip a check whose known answer is work per CPU-second on an emulated CPU (QEMU TCG):
        there a guest CPU-second does not do a fixed amount of work (the emulator's threads are
        descheduled while the guest's clock runs on), so the answer is not known there."""
        vm = hostinfo.virtualization()["vm"]
        if emulated(vm):
            raise Skip(f"this host's CPU is emulated ({vm}, no KVM): {why}",
                       "run it on the hardware, or in a KVM guest")

    @staticmethod
    def require_values(m: Measured, allowed: tuple[str, ...] = ()) -> None:
        """A check whose measurements failed cannot judge: fail it with the tool's error."""
        failed = [f for f in m.failures if f["benchmark"] not in allowed]
        if failed:
            first = failed[0]
            raise VirtbenchError(f"{len(failed)} execution(s) failed in run {m.run_id}, first on {first['platform']} "
                                 f"({first['benchmark']}): {first['error'][:300]}")

    def name(self, what: str) -> str:
        return f"{PREFIX}{self.token}-{what}"

    def run(self, data: dict[str, Any]) -> Measured:
        """One campaign through the runner (as `virtbench run` would), its instances removed after."""
        campaign = parse_campaign({"image": {"profile": "quick"}, **data}, f"selftest campaign {data['name']}")
        outcome = None
        try:
            outcome = execute.start(self.store, campaign, self.paths, cgroup_parent=self.cgroup_parent)
        finally:
            if outcome is not None:
                execute.cleanup(self.paths, outcome.run_id)
        failed = [{"platform": e.platform, "benchmark": e.benchmark, "error": e.error, "exit_code": e.exit_code}
                  for e in self.store.executions(outcome.run_id, status="failed") if not e.warmup]
        counts: dict[tuple[str, str], int] = {}
        for f in failed:
            key = (str(f["platform"]), str(f["benchmark"]))
            counts[key] = counts.get(key, 0) + 1
        rows = summarize(results.samples(self.store, outcome.run_id), counts,
                         [p.name for p in campaign.platforms], campaign.baseline)
        return Measured(outcome.run_id, rows, failed)


class Priority:
    """CPU priority for the self-test's measurements (see the module docstring); undone on exit.

    The self-test process itself moves into a `harness` child of the parent: nice alone does
    not help against other sessions where the kernel groups tasks by session (autogroup, on
    by default), while a cgroup's weight always counts."""

    def __init__(self, paths: Paths, relative: str) -> None:
        self.paths = paths
        self.relative = relative
        self.nice: int | None = None
        self.home: Path | None = None

    def _dir(self, *parts: str) -> Path:
        return (cgroups.root() if cgroups.is_v2() else cgroups.root() / "cpu").joinpath(self.relative, *parts)

    def __enter__(self) -> Priority:
        record(self.paths, "cgroup", self.relative)
        if units.unit_of(self.relative):  # systemd's tree: a slice with the weight, this process in a scope of it
            units.create(self.relative, {"CPUWeight": str(min(10000, 100 * CPU_WEIGHT_FACTOR))})
            self.home = _own_cpu_cgroup()
            if not slices.attach(os.getpid(), self.relative, f"{slices.UNIT_PREFIX}-harness-{os.getpid()}.scope"):
                self.home = None
            self._renice()
            return self
        v2 = cgroups.is_v2()
        try:
            self._dir().mkdir(exist_ok=True)
        except OSError:  # not root, or no CPU controller: measure at the normal priority
            return self
        if v2:
            _write(cgroups.root() / "cgroup.subtree_control", "+cpu")
            _write(self._dir("cgroup.subtree_control"), "+cpu +memory +io +pids")
        _write(self._dir("cpu.weight" if v2 else "cpu.shares"),
               str(min(10000, 100 * CPU_WEIGHT_FACTOR) if v2 else 1024 * CPU_WEIGHT_FACTOR))
        self.home = _own_cpu_cgroup()
        self._dir("harness").mkdir(exist_ok=True)
        if not _write(self._dir("harness", "cgroup.procs"), str(os.getpid())):
            self.home = None
        self._renice()
        return self

    def _renice(self) -> None:
        self.nice = os.getpriority(os.PRIO_PROCESS, 0)
        try:
            os.setpriority(os.PRIO_PROCESS, 0, NICE)
        except OSError:  # not root: measure at the normal priority
            self.nice = None

    def __exit__(self, *_: object) -> None:
        if self.nice is not None:
            os.setpriority(os.PRIO_PROCESS, 0, self.nice)
        if self.home is not None:
            _write(self.home / "cgroup.procs", str(os.getpid()))
        here = _own_cpu_cgroup()
        if units.unit_of(self.relative) and here is not None and \
                str(here).startswith(str(cgroups.root() / self.relative.strip("/"))):
            return  # still in the slice (home refused us): stopping it would kill this process; cleanup removes it
        remove(self.paths, "cgroup", self.relative)


def _own_cpu_cgroup() -> Path | None:
    """The directory of this process's CPU cgroup, to return to."""
    v2 = cgroups.is_v2()
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (v2 and controllers == "") or (not v2 and "cpu" in controllers.split(",")):
            base = cgroups.root() if v2 else cgroups.root() / controllers
            return base / path.lstrip("/")
    return None


def _write(path: Path, text: str) -> bool:
    try:
        path.write_text(text)
        return True
    except OSError:
        return False  # a controller this host lacks: the measurement runs at the default weight


def load() -> list[float]:
    """The host's 1/5/15-minute load averages (reported with every self-test)."""
    return [round(x, 2) for x in os.getloadavg()]


__all__ = ["Context", "Measured", "Priority", "cleanup", "load", "record", "remove"]

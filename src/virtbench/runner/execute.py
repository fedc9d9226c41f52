"""The one front door of every run: `start`, `enqueue`, `run_queued`, `resume` and `cleanup`, for
every experiment kind and every set of hosts.

A run is always the same steps: the kind (or, for a kind that runs on each of `hosts:` through
agents, the run across hosts in `hosts.py`) checks the host and prepares before anything is
recorded (bad input: exit 2, nothing stored); the run is recorded with its provenance; the
kind's run step stores executions as they complete (`measure`). Nothing there turns a failure
into data. Ctrl-C, SIGTERM or a cancel mark the run interrupted (the kind removes what is up);
`resume` completes it, skipping every execution already stored. Whatever happens, the kind's
cleanup removes what it built.
"""
from __future__ import annotations

import random
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .. import hostinfo as hostfacts
from ..config import Campaign, check_host, parse_campaign
from ..errors import InputError, StoreError, reason_of
from ..experiments.base import (
    Experiment,
    ExperimentContext,
    Interrupted,
    QuietReporter,
    Reporter,
    Sink,
    Unfinished,
    sigterm_as_interrupt,
)
from ..experiments.registry import EXPERIMENTS
from ..platforms import slices
from ..platforms.base import Availability, Paths
from ..platforms.closing import NotRemoved
from ..registry import PLATFORMS
from ..store.db import Store
from . import hostlock
from .hosts import AcrossHosts
from .parts import cleanup_host

__all__ = ["Interrupted", "RunOutcome", "QuietReporter", "Reporter", "StopCheck", "cleanup", "enqueue", "measure",
           "new_run_id", "resume", "run_queued", "start", "stopped_by_store"]

StopCheck = Callable[[], bool]

NOT_YET_MEASURED: dict[str, Any] = {"host_id": None, "host_facts": {}, "image": {}, "provenance": {},
                                    "platforms": [], "benchmarks": []}
"""The details of a queued run: filled in by the host that measures it (run_queued)."""


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    executions: int
    failed: int
    interrupted: bool = False
    unfinished: str = ""
    """Why part of the run was not measured (a host lost), when it was not: `run --resume` completes it."""


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def new_seed(campaign: Campaign) -> int:
    """The campaign's seed, or a fresh one (stored with the run, so resume repeats its order)."""
    return campaign.seed if campaign.seed is not None else random.SystemRandom().randrange(2**31)


def _kind(store: Store, campaign: Campaign, paths: Paths) -> tuple[Experiment, bool]:
    """The kind that runs the campaign here, and whether it runs on each of `hosts:` through agents
    (the campaign's parse refused a kind that cannot run with its `hosts:`)."""
    kind = EXPERIMENTS.get(campaign.experiment)(campaign, paths)
    if campaign.hosts and kind.across_hosts == "agents":
        return AcrossHosts(kind, store), True
    return kind, False


@contextmanager
def _closing(kind: Experiment) -> Iterator[Experiment]:
    try:
        yield kind
    finally:
        kind.close()


def _create_run(store: Store, run_id: str, campaign: Campaign, *, source: str, seed: int, status: str,
                details: dict[str, Any]) -> None:
    store.create_run(run_id=run_id, name=campaign.name, campaign=campaign.model_dump(mode="json"), source=source,
                     seed=seed, status=status, **details)


def _details(store: Store, kind: Experiment) -> dict[str, Any]:
    """What the run records about the host that measures it, and about its kind and plan."""
    details = kind.details()
    details["provenance"] = {**details.get("provenance", {}), "plan": kind.recorded()}
    return {"host_id": store.upsert_host(hostfacts.stable_facts()), **details}


def start(store: Store, campaign: Campaign, paths: Paths, *, source: str = "",
          reporter: Reporter | None = None, run_id: str | None = None,
          stop_requested: StopCheck | None = None, left_out: list[dict[str, str]] | None = None,
          cgroup_parent: str | None = None, availability: dict[str, Availability] | None = None) -> RunOutcome:
    """Validate, probe, build, record the run, then execute it.

    left_out: given for a generated campaign (the quick one): the platforms it did not include,
    each with the reason and the fix; a platform that then fails its probe or setup joins them
    and the run goes on without it (prepare). Stored in the run's provenance so reports can say
    why they are missing. None (a campaign file): such a failure stops the run.
    cgroup_parent: a cgroup every instance of a confinable platform is placed under (the
    self-test's CPU priority parent); the others run where virtbench runs.
    availability: platform types' verdicts taken already (the quick campaign's), not tried again."""
    run_id = run_id or new_run_id()
    reporter = reporter or QuietReporter()
    kind, across = _kind(store, campaign, paths)
    if not across:  # a run across hosts checks each host in its preflight
        check_host(campaign, paths, one_of_hosts=True)  # CPUs, memory, scratch space: before any probe
    hostlock.announce_run(paths, run_id)
    kind.cgroup_parent = cgroup_parent
    kind.left_out = None if left_out is None else list(left_out)
    kind.known_availability = availability
    with _closing(kind):
        kind.prepare(reporter.log)
        seed = new_seed(campaign)
        _create_run(store, run_id, kind.campaign, source=source, seed=seed, status="running",
                    details=_details(store, kind))
        reporter.log(kind.summary(run_id, seed))
        return measure(kind, _context(store, run_id, seed, paths, reporter, stop_requested))


def enqueue(store: Store, campaign: Campaign, *, source: str = "") -> str:
    """Record a run to be executed later by a worker (the web app's schedule)."""
    run_id = new_run_id()
    _create_run(store, run_id, campaign, source=source, seed=new_seed(campaign), status="queued",
                details=NOT_YET_MEASURED)
    return run_id


def run_queued(store: Store, run_id: str, paths: Paths, *, reporter: Reporter | None = None,
               stop_requested: StopCheck | None = None) -> RunOutcome:
    """Execute a queued run: probe, build and record its provenance now, on this host (with
    `hosts:`, this worker's host is the controller, as `virtbench run` would be)."""
    reporter = reporter or QuietReporter()
    run = store.run(run_id)
    if run.status != "queued":
        raise InputError(f"run {run.id} is {run.status}, not queued")
    hostlock.announce_run(paths, run.id)
    campaign = parse_campaign(run.campaign, f"run {run.id}")
    kind, across = _kind(store, campaign, paths)
    with _closing(kind):
        try:
            if not across:
                check_host(campaign, paths)  # CPUs, memory, scratch space: before any probe
            kind.prepare(reporter.log)
        except Exception as exc:  # the queued run says why it did not start
            store.set_status(run.id, "failed", exc.message if isinstance(exc, InputError) else reason_of(exc))
            raise
        store.fill_run(run.id, **_details(store, kind))
        store.set_status(run.id, "running")
        return measure(kind, _context(store, run.id, run.seed, paths, reporter, stop_requested))


def resume(store: Store, run_ref: str, paths: Paths, *, reporter: Reporter | None = None,
           stop_requested: StopCheck | None = None) -> RunOutcome:
    """Complete an interrupted run with the same campaign, seed and image."""
    reporter = reporter or QuietReporter()
    run = store.run(run_ref)
    if run.status == "finished":
        raise InputError(f"run {run.id} is already finished", "start a new run instead")
    hostlock.announce_run(paths, run.id)
    campaign = parse_campaign(run.campaign, f"run {run.id}")
    kind, _ = _kind(store, campaign, paths)
    with _closing(kind):
        kind.prepare(reporter.log)
        kind.resuming(run, reporter.log)
        for line in cleanup(paths, run.id):
            reporter.log(f"removed leftover: {line}")
        store.set_status(run.id, "running")
        return measure(kind, _context(store, run.id, run.seed, paths, reporter, stop_requested))


def _context(store: Store, run_id: str, seed: int, paths: Paths, reporter: Reporter,
             stop_requested: StopCheck | None) -> ExperimentContext:
    return ExperimentContext(sink=store, run_id=run_id, seed=seed, paths=paths, log=reporter.log,
                             step=reporter.step, stop_requested=stop_requested or (lambda: False),
                             reporter=reporter)


def measure(kind: Experiment, ctx: ExperimentContext) -> RunOutcome:
    """The kind's run step, and the run's status after it: finished, interrupted (Ctrl-C,
    SIGTERM, a cancel), failed (with the reason). The kind's cleanup runs whatever happens."""
    sink, run_id, reporter = ctx.sink, ctx.run_id, ctx.reporter
    before = len(sink.executions(run_id))
    unfinished = ""
    reporter.begin(0, 0)
    try:
        with sigterm_as_interrupt():
            kind.run(ctx)
    except (KeyboardInterrupt, Interrupted):
        sink.set_status(run_id, "interrupted", "interrupted by user or signal")
        return RunOutcome(run_id, len(sink.executions(run_id)) - before, 0, interrupted=True)
    except Unfinished as exc:  # part of it not measured (a host lost): what was measured stays
        sink.set_status(run_id, "failed", str(exc))
        unfinished = str(exc)
    except StoreError as exc:  # the kind's instances are gone already, or go in the finally below
        raise stopped_by_store(sink, run_id, exc) from None
    except BaseException as exc:
        sink.set_status(run_id, "failed", f"{type(exc).__name__}: {exc}")
        raise
    else:
        sink.set_status(run_id, "finished")
    finally:
        for line in type(kind).cleanup(kind.paths, run_id):
            reporter.log(f"removed {line}")
        reporter.end()
    failed = sum(1 for ex in sink.executions(run_id, status="failed") if not ex.warmup)
    return RunOutcome(run_id, len(sink.executions(run_id)) - before, failed, unfinished=unfinished)


def stopped_by_store(sink: Sink, run_id: str, exc: StoreError) -> StoreError:
    """A run whose results can no longer be written stops: marked interrupted if the store
    takes that write now (else a reader marks it once this process is gone, store/owner.py),
    and said in one line with the way to complete it. Every execution stored so far stays;
    the one whose write failed was rolled back whole, so a resume measures it again."""
    try:
        sink.set_status(run_id, "interrupted", f"stopped: {exc.message}")
    except StoreError:
        pass
    return StoreError(f"run {run_id} stopped: {exc.message}",
                      f"{exc.fix}; then `virtbench run --resume {run_id}` measures what is missing")


def cleanup(paths: Paths, run_id: str | None = None, *, wait: bool = False,
            log: Callable[[str], None] = lambda _m: None, host: str | None = None,
            store: Store | None = None) -> list[str]:
    """Remove every object virtbench left behind (of one run, or all) on every platform.

    Everything: under the host lock, so the instances of a run that is measuring are never
    taken (refused, or waited for with wait). One run: refused if that run is measuring.
    host: another host of a run across hosts (its agent cleans up there; found in store)."""
    if host is not None and host != "local":
        if store is None:
            raise InputError(f"cleanup on host {host}: no store to look the host up in", "give --db")
        return cleanup_host(store, host, paths, run_id)
    if run_id is not None:
        hostlock.refuse_if_measuring(paths, run_id)
        return _cleanup(paths, run_id)
    with hostlock.hold(paths, "`virtbench cleanup`", wait=wait, log=log):
        return _cleanup(paths, None)


def _cleanup(paths: Paths, run_id: str | None) -> list[str]:
    removed: list[str] = []
    cleaners: list[tuple[str, Callable[[Paths, str | None], list[str]]]] = [
        *((name, cls.cleanup) for name, cls in PLATFORMS.items()),
        *((name, kind.cleanup) for name, kind in EXPERIMENTS.items())]
    for name, clean in cleaners:
        try:
            removed += [r.prefixed(f"{name}: ") if isinstance(r, NotRemoved) else f"{name}: {r}"
                        for r in clean(paths, run_id)]
        except Exception as exc:  # noqa: BLE001 - one runtime's trouble must not stop the others
            removed.append(NotRemoved(f"{name}: cleanup failed: {exc}"))
    if run_id is None:
        removed += slices.remove_if_empty()
    return removed

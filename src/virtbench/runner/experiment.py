"""Runner dispatch for experiment kinds other than `benchmarks`.

The kind checks the host (bad input: exit 2, nothing recorded), the run is recorded with its
provenance, then the kind's run step measures and stores executions as they complete. An
interrupt (Ctrl-C, SIGTERM, cancel) marks the run interrupted; `resume` calls the same step,
which skips what is stored. Whatever happens, the kind's cleanup removes what it built.
"""
from __future__ import annotations

import random

from .. import __version__
from .. import host as hostfacts
from ..config import Campaign
from ..errors import StoreError
from ..experiments.base import Experiment, ExperimentContext
from ..experiments.registry import EXPERIMENTS
from ..platforms.base import Paths
from ..store.db import Store
from ..store.models import Run
from .execute import (
    Interrupted,
    Outcome,
    QuietReporter,
    Reporter,
    StopCheck,
    new_run_id,
    sigterm_as_interrupt,
    stopped_by_store,
)


def kind_of(campaign: Campaign, paths: Paths) -> Experiment:
    return EXPERIMENTS.get(campaign.experiment)(campaign, paths)


def start(store: Store, campaign: Campaign, paths: Paths, *, source: str = "", reporter: Reporter | None = None,
          run_id: str | None = None, stop_requested: StopCheck | None = None) -> Outcome:
    reporter = reporter or QuietReporter()
    kind = kind_of(campaign, paths)
    kind.prepare(reporter.log)
    seed = campaign.seed if campaign.seed is not None else random.SystemRandom().randrange(2**31)
    run_id = run_id or new_run_id()
    store.create_run(run_id=run_id, name=campaign.name, campaign=campaign.model_dump(mode="json"), source=source,
                     seed=seed, status="running", **_details(store, kind))
    reporter.log(f"run {run_id}: experiment {campaign.experiment} on {len(campaign.platforms)} platforms, seed {seed}")
    return execute(store, kind, run_id, seed, reporter, stop_requested)


def run_queued(store: Store, run: Run, campaign: Campaign, paths: Paths, *, reporter: Reporter | None = None,
               stop_requested: StopCheck | None = None) -> Outcome:
    """A queued run (checked and parsed by `execute.run_queued`)."""
    reporter = reporter or QuietReporter()
    kind = kind_of(campaign, paths)
    try:
        kind.prepare(reporter.log)
    except Exception as exc:
        store.set_status(run.id, "failed", str(exc))
        raise
    store.fill_run(run.id, **_details(store, kind))
    store.set_status(run.id, "running")
    return execute(store, kind, run.id, run.seed, reporter, stop_requested)


def resume(store: Store, run: Run, campaign: Campaign, paths: Paths, *, reporter: Reporter | None = None,
           stop_requested: StopCheck | None = None) -> Outcome:
    """An interrupted run (checked and parsed by `execute.resume`)."""
    reporter = reporter or QuietReporter()
    kind = kind_of(campaign, paths)
    kind.prepare(reporter.log)
    for line in type(kind).cleanup(paths, run.id):
        reporter.log(f"removed leftover: {line}")
    store.set_status(run.id, "running")
    return execute(store, kind, run.id, run.seed, reporter, stop_requested)


def execute(store: Store, kind: Experiment, run_id: str, seed: int, reporter: Reporter,
            stop_requested: StopCheck | None = None) -> Outcome:
    ctx = ExperimentContext(store=store, run_id=run_id, seed=seed, paths=kind.paths, log=reporter.log,
                            step=reporter.step, stop_requested=stop_requested or (lambda: False))
    before = len(store.executions(run_id))
    reporter.begin(0, 0)
    try:
        with sigterm_as_interrupt():
            kind.run(ctx)
    except (KeyboardInterrupt, Interrupted):
        store.set_status(run_id, "interrupted", "interrupted by user or signal")
        return Outcome(run_id, len(store.executions(run_id)) - before, 0, interrupted=True)
    except StoreError as exc:  # the kind's instances go in the finally below
        raise stopped_by_store(store, run_id, exc) from None
    except BaseException as exc:
        store.set_status(run_id, "failed", f"{type(exc).__name__}: {exc}")
        raise
    finally:
        for line in type(kind).cleanup(kind.paths, run_id):
            reporter.log(f"removed {line}")
        reporter.end()
    failed = sum(1 for ex in store.executions(run_id, status="failed") if not ex.warmup)
    store.set_status(run_id, "finished")
    return Outcome(run_id, len(store.executions(run_id)) - before, failed)


def _details(store: Store, kind: Experiment) -> dict:
    return {"host_id": store.upsert_host(hostfacts.stable_facts()), "host_facts": hostfacts.facts(), "image": {},
            "provenance": {"virtbench": __version__, "experiment": kind.campaign.experiment, **kind.provenance()},
            "platforms": kind.platform_rows(), "benchmarks": []}

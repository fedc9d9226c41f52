"""One campaign on several hosts, the way the runner's one lifecycle (execute.py) runs the
benchmarks kind when the campaign has `hosts:`: each host checked and supplied first (parts.py),
then each measures its own randomized interleaved order (in parallel, or one after another),
into one run.

The controller (the machine `virtbench run` starts on) measures `local` itself and starts
`virtbench agent` on every other host over SSH (hosts/ssh.py); the agent streams one JSON line
per finished execution, committed here with the host's inventory name as it arrives. A host
that cannot take part (unreachable, wrong host key, no root, a platform missing, no image for
its architecture) refuses the campaign before anything starts, naming the host and the fix. A
host lost mid-run keeps what it measured; its remaining executions are recorded as failed
with the reason (error starting with UNREACHED) and `run --resume` measures exactly those.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .. import proc
from ..config import Campaign, cross_host
from ..errors import VirtbenchError
from ..experiments.base import (
    Experiment,
    ExperimentContext,
    Forwarding,
    Interrupted,
    Reporter,
    Unfinished,
)
from ..experiments.benchmarks.kind import Benchmarks
from ..experiments.benchmarks.plan import schedule, without
from ..experiments.benchmarks.session import Session, session_details
from ..experiments.registry import EXPERIMENTS
from ..platforms.base import Paths
from ..remote import ssh
from ..store.db import Store, now
from ..store.models import Run
from . import crosspair
from .parts import Part, close, for_agent, host_seed, instance_run_id, prepare_kind_parts, prepare_parts
from .wire import decode, history, parse

UNREACHED = "not reached:"
"""Error prefix of an execution a lost host never ran (resume measures these)."""


class AcrossHosts(Experiment):
    """The benchmarks kind on every host of the campaign: prepared by checking and supplying each
    host, run by measuring `local` here and starting an agent on every other host."""

    def __init__(self, campaign: Campaign, paths: Paths, store: Store) -> None:
        super().__init__(campaign, paths)
        self.store = store
        self.local: Session | None = None
        """The benchmarks kind's session on `local`, when it is one of the hosts."""
        self.kind: Experiment | None = None
        """Another agents kind (density), prepared here: `local`'s part runs it."""
        self.parts: list[Part] = []

    @property
    def benchmarks(self) -> bool:
        """The benchmarks kind: a schedule (unreached executions are marked) and cross-host pairs."""
        return self.campaign.experiment == Benchmarks.name

    def prepare(self, log: Callable[[str], None]) -> None:
        t0 = time.monotonic()
        if self.benchmarks:
            self.local, self.parts = prepare_parts(self.campaign, self.paths, 0, log)
        else:
            self.kind = EXPERIMENTS.get(self.campaign.experiment)(self.campaign, self.paths)
            self.parts = prepare_kind_parts(self.kind, self.paths, 0, log)
        log(f"hosts ready in {time.monotonic() - t0:.1f} s: " + "; ".join(_ready(p) for p in self.parts))

    def _local_details(self) -> dict[str, Any] | None:
        if self.local is not None:
            return session_details(replace(self.local, campaign=self.campaign))
        if self.kind is not None and any(p.spec.is_local for p in self.parts):
            return self.kind.details()
        return None

    def details(self) -> dict[str, Any]:
        local = self._local_details()
        details = dict(local) if local is not None else dict(self.parts[0].details)
        details["provenance"] = {**details.get("provenance", {}), "hosts": _provenance(self.parts, local)}
        return details

    def summary(self, run_id: str, seed: int) -> str:
        c = self.campaign
        what = f"{len(c.benchmarks)} benchmarks" if self.benchmarks else f"experiment {c.experiment}"
        return (f"run {run_id}: {len(self.parts)} hosts x {len(c.platforms)} platforms x {what}, "
                f"{'in parallel' if c.parallel else 'one after another'}")

    def resuming(self, run: Run, log: Callable[[str], None]) -> None:
        """Measure what is missing: executions never stored and those a lost host never reached."""
        for part in self.parts:
            n = self.store.forget_unreached(run.id, part.name, UNREACHED)
            if n:
                log(f"{part.name}: {n} executions it never reached are measured now")
        hosts = (run.provenance or {}).get("hosts", {})
        now_ = _provenance(self.parts, self._local_details())
        for name, entry in now_.items():  # every start's shipment is kept: the first, then each resume's
            before = hosts.get(name, {})
            if "shipped" in entry:
                entry["shipments"] = [*before.get("shipments", [before["shipped"]] if "shipped" in before else []),
                                      entry["shipped"]]
        self.store.update_run(run.id, provenance={**(run.provenance or {}), "hosts": {**hosts, **now_}})

    def run(self, ctx: ExperimentContext) -> None:
        for part in self.parts:
            part.seed = host_seed(ctx.seed, part.name)
        own: Experiment | None = self.kind
        if self.local is not None:  # the pairs across hosts are the cross phase's, not local's part
            own = Benchmarks.of(replace(self.local, campaign=without(self.campaign, set(cross_host(self.campaign)))))
        _run_parts(self.store, ctx.run_id, self.campaign, self.local, own, self.parts, ctx.reporter)

    def close(self) -> None:
        try:
            if self.local is not None:
                Benchmarks.of(self.local).close()
            elif self.kind is not None:
                self.kind.close()
        finally:
            close(self.parts)


def _ready(part: Part) -> str:
    if part.spec.is_local:
        return "local"
    sent = part.shipped
    return (f"{part.name}: sent {sent.bytes / 2**20:.1f} MiB ({len(sent.sent)} files), "
            f"{len(sent.skipped)} already there; clock offset {part.clock.get('offset_s', float('nan')) * 1e3:+.2f} ms")


def _provenance(parts: list[Part], local: dict[str, Any] | None) -> dict[str, Any]:
    """Each host's facts, image, platforms, tools and clock; `local`: the details of the part
    measured here."""
    out: dict[str, Any] = {}
    for part in parts:
        if part.spec.is_local:
            assert local is not None
            d = local
            out[part.name] = {"facts": d["host_facts"], "image": d["image"], "platforms": d["platforms"],
                              "tools": d["provenance"].get("tools", {}), "clock": {"offset_s": 0.0,
                                                                                   "method": "the controller"}}
        else:
            d = part.details
            out[part.name] = {"address": part.spec.address, "facts": d.get("host_facts", {}),
                              "image": d.get("image", {}), "platforms": d.get("platforms", []),
                              "tools": d.get("provenance", {}).get("tools", {}), "clock": part.clock,
                              "shipped": part.shipped.public(), "shipments": [part.shipped.public()]}
    return out


class HostView(Forwarding):
    """The store as the local part of a multi-host run writes to it: every execution carries
    the host's name, and only this host's executions count as done."""

    def __init__(self, store: Store, host: str) -> None:
        self.store, self.host, self.status = store, host, ""

    def done_units(self, run_id: str) -> set[tuple[int, str, str]]:
        return self.store.done_units(run_id, host=self.host)

    def put(self, fields: dict[str, Any]) -> int:
        return self.store.record(**fields, host=self.host)

    def executions(self, run_id: str, *, status: str | None = None) -> list[Any]:
        return [e for e in self.store.executions(run_id, status=status) if e.host == self.host]

    def samples(self, run_id: str, *, include_warmup: bool = False, per_instance: bool = False) -> list[Any]:
        mine = {e.id for e in self.executions(run_id)}
        return [s for s in self.store.samples(run_id, include_warmup=include_warmup, per_instance=per_instance)
                if s.execution_id in mine]

    def set_status(self, run_id: str, status: str, error: str = "") -> None:  # noqa: ARG002
        self.status = status  # the run's status is the controller's (its lifecycle sets it)


def _run_parts(store: Store, run_id: str, campaign: Campaign, session: Session | None, own: Experiment | None,
               parts: list[Part], reporter: Reporter) -> None:
    """Every part: `own` (the kind) measures `local` here, an agent each other host."""
    stop = threading.Event()
    remote = [p for p in parts if not p.spec.is_local]
    threads = [threading.Thread(target=_remote_part, args=(store, run_id, campaign, p, reporter, stop),
                                name=f"host-{p.name}", daemon=True) for p in remote]
    interrupted = False
    try:
        if campaign.parallel:
            for t in threads:
                t.start()
        for part in parts:
            if part.spec.is_local:
                assert own is not None
                try:
                    own.run(ExperimentContext(sink=HostView(store, part.name), run_id=run_id, seed=part.seed,
                                              paths=own.paths, log=reporter.log, step=reporter.step,
                                              stop_requested=stop.is_set, reporter=reporter))
                    part.status = "finished"
                except (KeyboardInterrupt, Interrupted):
                    part.status, interrupted = "interrupted", True
            elif not campaign.parallel and not stop.is_set():
                t = threads[remote.index(part)]
                t.start()
                t.join()
        for t in threads:
            while t.is_alive():
                t.join(0.5)
    except (KeyboardInterrupt, Interrupted):
        interrupted = True
    if interrupted:
        stop.set()
        for part in remote:
            if part.stream is not None:
                part.stream.close(grace=60)  # stdin closes: the agent stops and cleans up
        for t in threads:
            if t.is_alive():
                t.join(90)
        raise Interrupted("interrupted by user or signal")
    if cross_host(campaign) and session is not None:
        _cross_phase(store, run_id, campaign, session, parts, reporter)
    lost = [p for p in parts if p.status != "finished"]
    if lost:
        raise Unfinished("; ".join(f"{p.name}: {p.reason or p.status}" for p in lost)
                         + f" (complete it with `virtbench run --resume {run_id}`)")


_SILENT = (f"connection closed: the host closed it, or did not answer SSH keepalives for "
           f"{ssh.ALIVE_INTERVAL * ssh.ALIVE_COUNT} s")


def _remote_part(store: Store, run_id: str, campaign: Campaign, part: Part, reporter: Reporter,
                 stop: threading.Event) -> None:
    assert part.executor is not None
    done = store.done_units(run_id, host=part.name)
    job = {"mode": "run", "campaign": for_agent(campaign), "run_id": run_id,
           "instance_run_id": instance_run_id(run_id, part.name), "seed": part.seed,
           "done": sorted(done), "image_cache": part.image_cache, "skip": sorted(cross_host(campaign))}
    scheduled = campaign.experiment == Benchmarks.name  # what a lost host never ran is known, and marked
    if done and not scheduled:  # a kind that resumes from what it measured (density)
        view = HostView(store, part.name)
        job["history"] = history(view.executions(run_id), view.samples(run_id, per_instance=True))
    end: dict[str, Any] = {}
    try:
        part.stream = proc.stream(part.agent_argv())
        part.stream.send(json.dumps(job))
        for line in part.stream.lines():
            msg = parse(line)
            if msg is None:
                continue
            event = msg.get("event")
            if event == "record":
                fields = decode(msg["record"])
                fields["run_id"] = run_id
                store.record(**fields, host=part.name)
                reporter.log(f"[{part.name}] round {fields['round'] + 1} {fields['platform']} "
                             f"{fields['benchmark']}: {fields['status']}")
            elif event == "log":
                reporter.log(f"[{part.name}] {msg.get('message', '')}")
            elif event in ("end", "error"):
                end = msg
        rc = part.stream.close()
        if end.get("status") == "finished":
            part.status = "finished"
            return
        part.reason = end.get("message") or (
            f"host {part.name} lost (ssh exit {rc}: {_tail(part.stream.stderr()) or _SILENT})"
            if rc == 255 or not end else f"agent ended {end.get('status', '?')}")
    except VirtbenchError as exc:
        part.reason = f"host {part.name}: {exc}"
    except Exception as exc:  # noqa: BLE001 - a broken host must not stop the others
        part.reason = f"host {part.name}: {type(exc).__name__}: {exc}"
    part.status = "lost" if not stop.is_set() else "interrupted"
    if not stop.is_set() and scheduled:
        reporter.log(f"[{part.name}] {part.reason}; its remaining executions are marked failed")
        mark_unreached(store, run_id, campaign, part)
    elif not stop.is_set():  # nothing to mark: resume goes on from what the part measured
        reporter.log(f"[{part.name}] {part.reason}")


def mark_unreached(store: Store, run_id: str, campaign: Campaign, part: Part) -> int:
    """Every execution of the host's schedule not stored: failed, with the reason (resume redoes them)."""
    own = without(campaign, set(cross_host(campaign)))
    todo = [(u.round, u.warmup, u.platform, k[2]) for u in schedule(own, part.seed) for k in u.keys()]
    return _mark(store, run_id, part.name, todo, part.reason)


def _mark(store: Store, run_id: str, host: str, todo: list[tuple[int, bool, str, str]], reason: str) -> int:
    done = store.done_units(run_id, host=host)
    n = 0
    for rnd, warmup, platform, bench in todo:
        if (rnd, platform, bench) in done:
            continue
        t = now()
        store.record(run_id=run_id, round=rnd, warmup=warmup, platform=platform, benchmark=bench, status="failed",
                     started_at=t, finished_at=t, duration_s=0.0, error=f"{UNREACHED} {reason}", host=host)
        n += 1
    return n


def _cross_phase(store: Store, run_id: str, campaign: Campaign, session: Session, parts: list[Part],
                 reporter: Reporter) -> None:
    """The pairs across hosts, after each host's own part (they would disturb it); one server
    host at a time. A server host that is lost or unreachable: its pairs fail with the reason."""
    by_host: dict[str, list[str]] = {}
    for key, server in cross_host(campaign).items():
        by_host.setdefault(server.host, []).append(key)
    local = next(p for p in parts if p.spec.is_local)
    for host, keys in by_host.items():
        part = next(p for p in parts if p.name == host)
        only = campaign.model_copy(update={"benchmarks": [b for b in campaign.benchmarks if b.key in keys]})
        todo = crosspair.plan(only, local.seed)
        if part.status != "finished" or part.executor is None:
            _mark(store, run_id, "local", todo, part.reason or f"host {host} did not finish its part")
            continue
        reporter.log(f"pairs across hosts: client here, server on {host} ({part.spec.address})")
        agent = crosspair.ServerAgent(part.agent_argv(),
                                      {"mode": "pair-server", "campaign": for_agent(campaign), "run_id": run_id,
                                       "instance_run_id": instance_run_id(run_id, host),
                                       "image_cache": part.image_cache})
        try:
            agent.ask(None, "hello", 600)
            crosspair.run_phase(store, run_id, only, session, agent, host, part.spec.address, local.seed,
                                part.clock, reporter)
        except VirtbenchError as exc:
            part.status, part.reason = "lost", f"host {host}: {exc}"
            reporter.log(f"[{host}] {part.reason}; its remaining pairs are marked failed")
            _mark(store, run_id, "local", todo, part.reason)
        finally:
            agent.close()


def _tail(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-2:])

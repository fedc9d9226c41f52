"""One campaign on several hosts, the way the runner's one lifecycle (execute.py) runs a kind
that runs through agents (`across_hosts = "agents"`: the benchmarks kind, density, a plugin's)
when the campaign has `hosts:`: each host checked and supplied first (parts.py, through the
kind's host hooks), then each measures its own part (in parallel, or one after another) into
one run, then the kind's after_parts here (the benchmarks kind's pairs across hosts). Nothing
here knows a kind by name: what a host measures, what it never reached, and what it keeps to go
on after a resume come from the kind's Plan and its state through the sink.

The controller (the machine `virtbench run` starts on) measures `local` itself and starts
`virtbench agent` on every other host over SSH (hosts/ssh.py); the agent streams one JSON line
per finished execution, committed here with the host's inventory name as it arrives. A host
that cannot take part (unreachable, wrong host key, no root, a platform missing, no image for
its architecture) refuses the campaign before anything starts, naming the host and the fix. A
host lost mid-run keeps what it measured; the rest of its part's plan (when the kind knows it
in advance) is recorded as failed with the reason (error starting with UNREACHED) and `run
--resume` measures exactly those.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import proc
from ..config import Campaign
from ..constants import UNREACHED
from ..errors import VirtbenchError
from ..experiments.base import (
    Experiment,
    ExperimentContext,
    Forwarding,
    Interrupted,
    Reporter,
    Unfinished,
)
from ..experiments.planning import Work
from ..remote import ssh
from ..store.db import Store, now
from ..store.models import Run
from .parts import Part, close, for_agent, host_seed, instance_run_id, link, prepare_parts
from .wire import decode, history, parse

__all__ = ["UNREACHED", "AcrossHosts", "HostView", "mark_unreached"]


class AcrossHosts(Experiment):
    """A kind that runs through agents (`across_hosts = "agents"`) on every host of the campaign:
    prepared by checking and supplying each host (the kind's host hooks), run by measuring
    `local` here with the kind's own part and starting an agent on every other host, then the
    kind's after_parts here (the benchmarks kind's pairs across hosts)."""

    def __init__(self, kind: Experiment, store: Store) -> None:
        super().__init__(kind.campaign, kind.paths)
        self.kind = kind
        self.store = store
        self.parts: list[Part] = []

    def prepare(self, log: Callable[[str], None]) -> None:
        t0 = time.monotonic()
        self.parts = prepare_parts(self.kind, self.paths, 0, log)
        log(f"hosts ready in {time.monotonic() - t0:.1f} s: " + "; ".join(_ready(p) for p in self.parts))

    def _local_details(self) -> dict[str, Any] | None:
        return self.kind.details() if any(p.spec.is_local for p in self.parts) else None

    def details(self) -> dict[str, Any]:
        local = self._local_details()
        details = dict(local) if local is not None else dict(self.parts[0].details)
        details["provenance"] = {**details.get("provenance", {}), "hosts": _provenance(self.parts, local)}
        return details

    def recorded(self) -> dict[str, Any]:
        return self.kind.recorded()

    def summary(self, run_id: str, seed: int) -> str:
        c = self.campaign
        return (f"run {run_id}: {len(self.parts)} hosts x {len(c.platforms)} platforms x {self.kind.describe_work()}, "
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
        own = self.kind.host_part() if any(p.spec.is_local for p in self.parts) else None
        _run_parts(self.store, ctx.run_id, self.kind, own, self.parts, ctx.reporter)

    def close(self) -> None:
        try:
            close(self.parts)
        finally:
            self.kind.close()  # what its platforms made here (a Kubernetes namespace, an imported image)


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
    """The store as one host's part of a multi-host run writes to it: every execution carries
    the host's name, only this host's executions count as done, and the kind's state of this
    host's part (its adaptive log) is kept apart, under the run's provenance `host_state`."""

    _state_lock = threading.Lock()
    """The parts write their states into one provenance document: one at a time."""

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

    def state(self, run_id: str) -> dict[str, Any]:
        return dict(self.store.state(run_id).get("host_state", {}).get(self.host, {}))

    def set_state(self, run_id: str, key: str, value: Any) -> None:
        with self._state_lock:
            states = dict(self.store.state(run_id).get("host_state", {}))
            states[self.host] = {**states.get(self.host, {}), key: value}
            self.store.set_state(run_id, "host_state", states)


def _run_parts(store: Store, run_id: str, kind: Experiment, own: Experiment | None, parts: list[Part],
               reporter: Reporter) -> None:
    """Every part: `own` (the kind's part) measures `local` here, an agent each other host; then
    the kind's after_parts here."""
    campaign = kind.campaign
    stop = threading.Event()
    remote = [p for p in parts if not p.spec.is_local]
    threads = [threading.Thread(target=_remote_part, args=(store, run_id, kind, p, reporter, stop),
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
    links = [link(p, job_of(run_id, campaign, p)) for p in parts]
    kind.after_parts(ExperimentContext(sink=HostView(store, "local"), run_id=run_id, seed=0, paths=kind.paths,
                                       log=reporter.log, step=reporter.step, reporter=reporter), links)
    for part, after in zip(parts, links):  # a host lost in after_parts is lost for the run too
        part.status, part.reason = after.status, after.reason
    lost = [p for p in parts if p.status != "finished"]
    if lost:
        raise Unfinished("; ".join(f"{p.name}: {p.reason or p.status}" for p in lost)
                         + f" (complete it with `virtbench run --resume {run_id}`)")


_SILENT = (f"connection closed: the host closed it, or did not answer SSH keepalives for "
           f"{ssh.ALIVE_INTERVAL * ssh.ALIVE_COUNT} s")


def job_of(run_id: str, campaign: Campaign, part: Part) -> dict[str, Any]:
    """What every job for the part's agent carries."""
    return {"campaign": for_agent(campaign), "run_id": run_id, "instance_run_id": instance_run_id(run_id, part.name),
            "image_cache": part.image_cache}


def _remote_part(store: Store, run_id: str, kind: Experiment, part: Part, reporter: Reporter,
                 stop: threading.Event) -> None:
    assert part.executor is not None
    view = HostView(store, part.name)
    done = view.done_units(run_id)
    plan = kind.plan(kind.part_campaign(kind.campaign), part.seed, done)
    job = {**job_of(run_id, kind.campaign, part), "mode": "run", "seed": part.seed, "done": sorted(done),
           "state": view.state(run_id)}
    if done and (plan.open_ended or plan.schedule is None or plan.rounds.cap is not None):
        # a kind that goes on from what it measured (density's search, adaptive rounds)
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
            elif event == "state":
                view.set_state(run_id, str(msg["key"]), msg.get("value"))
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
    if stop.is_set():
        return
    todo = plan.unreached(view.done_units(run_id))  # what a lost host never ran is known, and marked
    if todo:
        reporter.log(f"[{part.name}] {part.reason}; its remaining executions are marked failed")
        mark_unreached(store, run_id, part.name, todo, part.reason)
    else:  # nothing to mark: resume goes on from what the part measured
        reporter.log(f"[{part.name}] {part.reason}")


def mark_unreached(store: Store, run_id: str, host: str, todo: list[Work], reason: str) -> int:
    """Every execution of `todo` (the host's plan) not stored: failed, with the reason (resume redoes them)."""
    done = store.done_units(run_id, host=host)
    n = 0
    for work in todo:
        if work.key in done:
            continue
        t = now()
        store.record(run_id=run_id, round=work.round, warmup=work.warmup, platform=work.platform,
                     benchmark=work.benchmark, status="failed", started_at=t, finished_at=t, duration_s=0.0,
                     error=f"{UNREACHED} {reason}", host=host)
        n += 1
    return n


def _tail(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-2:])

"""One campaign on several hosts: checked and supplied first, then each host measures its own
randomized interleaved order (in parallel, or one after another), into one run.

The controller (the machine `virtbench run` starts on) measures `local` itself and starts
`virtbench agent` on every other host over SSH (hosts/ssh.py); the agent streams one JSON line
per finished execution, committed here with the host's inventory name as it arrives. A host
that cannot take part (unreachable, wrong host key, no root, a platform missing, no image for
its architecture) refuses the campaign before anything starts, naming the host and the fix. A
host lost mid-run keeps what it measured; its remaining executions are recorded as failed
with the reason (error starting with UNREACHED) and `run --resume` measures exactly those.
"""
from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

from .. import host as hostfacts
from .. import proc
from ..config import Campaign, check_host, cross_host
from ..errors import InputError, VirtbenchError
from ..experiments.benchmarks.plan import schedule
from ..experiments.benchmarks.session import (
    Session,
    build_objects,
    image_recipe,
    memory_limited,
    prepare,
    refuse_undelegated,
    refuse_unlimited_memory,
    with_platform_packages,
)
from ..experiments.registry import EXPERIMENTS
from ..hosts import ship, ssh
from ..hosts.inventory import HostSpec
from ..hosts.ssh import SSHExecutor
from ..images import build as images
from ..images.arch import MACHINE_TO_DEB
from ..platforms.base import Paths
from ..store.db import Store, now
from ..store.models import Run
from . import crosspair
from .agent import decode, without
from .execute import Outcome, Reporter, execute, session_details

UNREACHED = "not reached:"
"""Error prefix of an execution a lost host never ran (resume measures these)."""
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass
class Part:
    """One host's share of the run."""

    spec: HostSpec
    seed: int
    executor: SSHExecutor | None = None
    agent: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    shipped: ship.Shipment = field(default_factory=ship.Shipment)
    clock: dict[str, Any] = field(default_factory=dict)
    stream: proc.Stream | None = None
    status: str = "pending"
    reason: str = ""

    @property
    def name(self) -> str:
        return self.spec.name

    def remote_env(self) -> list[str]:
        work = self.spec.work_dir
        tag = hashlib.sha256(work.encode()).hexdigest()[:8]
        return [f"VIRTBENCH_STATE_DIR={work}/state", f"VIRTBENCH_RUNTIME_DIR=/run/virtbench-remote/{tag}",
                f"PATH={PATH}"]

    @property
    def image_cache(self) -> str:
        return f"{self.spec.work_dir}/images"


def host_seed(seed: int, name: str) -> int:
    """Each host its own order, reproducible from the run's seed."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:4], "big") % 2**31


def instance_run_id(run_id: str, name: str) -> str:
    """The id a remote host labels its instances with: another host's cleanup never matches it."""
    return f"{run_id}-{hashlib.sha256(name.encode()).hexdigest()[:4]}"


# -- before anything starts ------------------------------------------------------------------
def prepare_parts(campaign: Campaign, paths: Paths, seed: int, log: Any) -> tuple[Session | None, list[Part]]:
    """Check and supply every host; raise InputError naming the first that cannot take part."""
    if campaign.adaptive is not None:
        raise InputError("adaptive: is not supported with hosts: yet", "give a fixed number of repetitions")
    if not EXPERIMENTS.get(campaign.experiment).uses_benchmarks:  # it ran as benchmarks with none, silently
        raise InputError(f"experiment {campaign.experiment!r} does not run with hosts: yet (benchmark "
                         f"campaigns and migration to: {{host}} do)",
                         "run it on that host itself: virtbench run there, without hosts:")
    session = build_objects(campaign, paths)
    parts = [Part(spec=h, seed=host_seed(seed, h.name)) for h in campaign.hosts]
    try:
        for part in parts:  # the cheap checks first: a host that cannot be reached refuses at once
            if part.spec.is_local:
                check_host(campaign, paths, source=f"host {part.name}", one_of_hosts=True)
            else:
                part.executor = SSHExecutor(part.spec, paths.runtime)
                part.executor.open()  # host key, reachability, root or sudo: InputError naming the host
                _check_remote(part, campaign, paths)
                if limited := memory_limited(session):  # a board booted without it (Raspberry Pi OS): refused now
                    cgroups = part.executor.run(["cat", "/proc/cgroups"], timeout=30, check=False).stdout
                    refuse_unlimited_memory(part.name, limited, cgroups)
                v2 = part.executor.run(["cat", "/sys/fs/cgroup/cgroup.controllers"], timeout=30, check=False)
                refuse_undelegated(part.name, session, v2.stdout if v2.ok else "")
        if any(p.spec.is_local for p in parts):
            prepare(session, log=log)
        else:  # no image for the controller's own architecture: only the hosts' (a board's) are built
            image_recipe(campaign)  # a profile lacking the benchmarks' tools refuses now
        for part in parts:
            if not part.spec.is_local:
                _prepare_remote(part, campaign, session, paths, log)
    except BaseException:
        close(parts)
        raise
    return (session if any(p.spec.is_local for p in parts) else None), parts


def _check_remote(part: Part, campaign: Campaign, paths: Paths) -> None:
    """The host's CPUs and memory against the campaign's limits (config.check_host), read over
    SSH before anything is built or started there."""
    assert part.executor is not None
    out = part.executor.run(["sh", "-c", "nproc; cat /proc/meminfo"], timeout=30, check=False).stdout
    first, _, meminfo = out.partition("\n")
    if first.strip().isdigit():
        check_host(campaign, paths, source=f"host {part.name}", cpus=int(first), free=-1, one_of_hosts=True,
                   memory=hostfacts.meminfo(meminfo).get("MemTotal", 0))


def _prepare_remote(part: Part, campaign: Campaign, session: Session, paths: Paths, log: Any) -> None:
    ex = part.executor
    assert ex is not None
    machine = ex.run(["uname", "-m"], timeout=30).stdout.strip()
    py = ex.run(["python3", "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"], timeout=30,
                check=False)
    if not py.ok or tuple(map(int, py.stdout.strip().split("."))) < (3, 11):
        raise InputError(f"host {part.name}: needs Python 3.11 or later with venv "
                         f"({(py.stdout or py.stderr).strip()[-80:] or 'no python3'})",
                         f"install python3 and python3-venv on {part.name}")
    arch = MACHINE_TO_DEB.get(machine, machine)
    image = session.image
    if image is None or arch != image.arch:  # the same recipe for that host's architecture (qemu-user)
        recipe = replace(with_platform_packages(image_recipe(campaign), session.platforms.values()), arch=arch)
        try:
            image = images.build(recipe, log=log)
        except VirtbenchError as exc:
            raise InputError(f"host {part.name} is {machine}: no {arch} guest image for it: {exc.message}",
                             exc.fix or f"build it first: virtbench image build --arch {arch}") from None
    part.agent = ship.ensure_virtbench(ex, machine, py.stdout.strip(), part.shipped, log)
    ship.ensure_image(ex, image.root, part.image_cache, part.shipped, log)
    part.clock = clock_offset(ex)
    msgs = _talk(part, {"mode": "check", "campaign": _for_agent(campaign), "run_id": "check",
                        "image_cache": part.image_cache})
    end = msgs[-1] if msgs else {}
    if end.get("event") == "error" or end.get("status") != "checked":
        raise InputError(f"host {part.name}: {end.get('message') or 'the agent did not answer'}",
                         end.get("fix") or f"see `virtbench doctor` on {part.name}")
    part.details = next((m["details"] for m in msgs if m.get("event") == "hello"), {})


def _for_agent(campaign: Campaign) -> dict[str, Any]:
    """The campaign as a host's agent gets it (it measures only where it runs)."""
    return campaign.model_dump(mode="json")


def _talk(part: Part, job: dict[str, Any]) -> list[dict[str, Any]]:
    """A short agent job (check, cleanup): every line it wrote, until it exits."""
    assert part.executor is not None
    stream = proc.stream(part.executor.ssh_argv(["env", *part.remote_env(), part.agent, "agent"]))
    stream.send(json.dumps(job))
    msgs = [m for m in map(_parse, stream.lines()) if m]
    rc = stream.close()
    if not msgs:
        return [{"event": "error", "message": f"the agent exited with status {rc}: {stream.stderr().strip()[-300:]}"}]
    return msgs


def _parse(line: str) -> dict[str, Any] | None:
    try:
        msg = json.loads(line)
    except json.JSONDecodeError:
        return None
    return msg if isinstance(msg, dict) else None


def clock_offset(ex: SSHExecutor, tries: int = 20) -> dict[str, Any]:
    """The host's clock minus ours, NTP-style: one remote shell answers each request with its
    time, so every exchange is a symmetric round trip on an open session; the exchange with the
    smallest round trip gives the offset, known to within half of it. Plus the host's chrony
    state where chrony runs."""
    stream = proc.stream(ex.ssh_argv(["sh", "-c", "while read -r _; do date +%s.%N; done"]))
    best: tuple[float, float] | None = None
    try:
        replies = stream.lines()
        for _ in range(tries):
            t0 = time.time()
            if not stream.send("t"):
                break
            reply = next(replies, "")
            t1 = time.time()
            try:
                remote = float(reply.strip())
            except ValueError:
                break
            if best is None or t1 - t0 < best[1]:
                best = (remote - (t0 + t1) / 2, t1 - t0)
    finally:
        stream.close(grace=5)
    out: dict[str, Any] = {"method": f"time requests over SSH, smallest round trip of {tries}"}
    if best is not None:
        out.update(offset_s=best[0], uncertainty_s=best[1] / 2)
    chrony = ex.run(["chronyc", "-c", "tracking"], timeout=30, check=False)
    if chrony.ok:
        fields = chrony.stdout.strip().split(",")
        if len(fields) > 4:
            out["chrony"] = {"reference": fields[1], "system_time_offset_s": float(fields[4])}
    return out


def close(parts: list[Part]) -> None:
    for part in parts:
        if part.executor is not None:
            part.executor.close()


# -- the run ---------------------------------------------------------------------------------
def start(store: Store, campaign: Campaign, paths: Paths, *, source: str, reporter: Reporter,
          run_id: str) -> Outcome:
    seed = campaign.seed if campaign.seed is not None else random.SystemRandom().randrange(2**31)

    def record(details: dict[str, Any]) -> None:
        store.create_run(run_id=run_id, name=campaign.name, campaign=campaign.model_dump(mode="json"),
                         source=source, seed=seed, status="running", **details)

    return _start(store, campaign, paths, run_id, seed, reporter, record)


def run_queued(store: Store, run: Run, campaign: Campaign, paths: Paths, *, reporter: Reporter) -> Outcome:
    """A run queued from the web app: this worker's host is the controller, as `virtbench run` would be."""
    def record(details: dict[str, Any]) -> None:
        store.fill_run(run.id, **details)
        store.set_status(run.id, "running")

    return _start(store, campaign, paths, run.id, run.seed, reporter, record)


def _start(store: Store, campaign: Campaign, paths: Paths, run_id: str, seed: int, reporter: Reporter,
           record: Any) -> Outcome:
    t0 = time.monotonic()
    session, parts = prepare_parts(campaign, paths, seed, reporter.log)
    try:
        reporter.log(f"hosts ready in {time.monotonic() - t0:.1f} s: " + "; ".join(_ready(p) for p in parts))
        details = session_details(replace(session, campaign=campaign)) if session is not None \
            else dict(parts[0].details)
        details["provenance"] = {**details.get("provenance", {}), "hosts": _provenance(parts, session)}
        record({**details, "host_id": store.upsert_host(hostfacts.stable_facts())})
        reporter.log(f"run {run_id}: {len(parts)} hosts x {len(campaign.platforms)} platforms x "
                     f"{len(campaign.benchmarks)} benchmarks, {'in parallel' if campaign.parallel else 'one after another'}")
        return _run_parts(store, run_id, campaign, session, parts, reporter)
    finally:
        close(parts)


def resume(store: Store, run: Run, campaign: Campaign, paths: Paths, *, reporter: Reporter) -> Outcome:
    """Measure what is missing: executions never stored and those a lost host never reached."""
    t0 = time.monotonic()
    session, parts = prepare_parts(campaign, paths, run.seed, reporter.log)
    try:
        reporter.log(f"hosts ready in {time.monotonic() - t0:.1f} s: " + "; ".join(_ready(p) for p in parts))
        for part in parts:
            n = store.forget_unreached(run.id, part.name, UNREACHED)
            if n:
                reporter.log(f"{part.name}: {n} executions it never reached are measured now")
        hosts = (run.provenance or {}).get("hosts", {})
        now_ = _provenance(parts, session)
        for name, entry in now_.items():  # every start's shipment is kept: the first, then each resume's
            before = hosts.get(name, {})
            if "shipped" in entry:
                entry["shipments"] = [*before.get("shipments", [before["shipped"]] if "shipped" in before else []),
                                      entry["shipped"]]
        store.update_run(run.id, provenance={**(run.provenance or {}), "hosts": {**hosts, **now_}})
        store.set_status(run.id, "running")
        return _run_parts(store, run.id, campaign, session, parts, reporter)
    finally:
        close(parts)


def _ready(part: Part) -> str:
    if part.spec.is_local:
        return "local"
    sent = part.shipped
    return (f"{part.name}: sent {sent.bytes / 2**20:.1f} MiB ({len(sent.sent)} files), "
            f"{len(sent.skipped)} already there; clock offset {part.clock.get('offset_s', float('nan')) * 1e3:+.2f} ms")


def _provenance(parts: list[Part], session: Session | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in parts:
        if part.spec.is_local:
            assert session is not None
            d = session_details(session)
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


class HostView:
    """The store as the local part of a multi-host run writes to it: every execution carries
    the host's name, and only this host's executions count as done."""

    def __init__(self, store: Store, host: str) -> None:
        self.store, self.host, self.status = store, host, ""

    def done_units(self, run_id: str) -> set[tuple[int, str, str]]:
        return self.store.done_units(run_id, host=self.host)

    def record(self, **fields: Any) -> int:
        return self.store.record(**fields, host=self.host)

    def executions(self, run_id: str, *, status: str | None = None) -> list[Any]:
        return [e for e in self.store.executions(run_id, status=status) if e.host == self.host]

    def set_status(self, run_id: str, status: str, error: str = "") -> None:  # noqa: ARG002
        self.status = status

    def run(self, ref: str) -> Run:
        return self.store.run(ref)


def _run_parts(store: Store, run_id: str, campaign: Campaign, session: Session | None, parts: list[Part],
               reporter: Reporter) -> Outcome:
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
                assert session is not None
                view = HostView(store, part.name)
                own = replace(session, campaign=without(campaign, set(cross_host(campaign))))
                out = execute(view, own, run_id, part.seed, reporter, stop_requested=stop.is_set)  # type: ignore[arg-type]
                part.status = "interrupted" if out.interrupted else "finished"
                interrupted |= out.interrupted
            elif not campaign.parallel and not stop.is_set():
                t = threads[remote.index(part)]
                t.start()
                t.join()
        for t in threads:
            while t.is_alive():
                t.join(0.5)
    except KeyboardInterrupt:
        interrupted = True
    if interrupted:
        stop.set()
        for part in remote:
            if part.stream is not None:
                part.stream.close(grace=60)  # stdin closes: the agent stops and cleans up
        for t in threads:
            if t.is_alive():
                t.join(90)
        store.set_status(run_id, "interrupted", "interrupted by user or signal")
        return Outcome(run_id, 0, 0, interrupted=True)
    if cross_host(campaign) and session is not None:
        _cross_phase(store, run_id, campaign, session, parts, reporter)
    lost = [p for p in parts if p.status != "finished"]
    failed = sum(1 for ex in store.executions(run_id, status="failed") if not ex.warmup)
    total = len(store.executions(run_id))
    if lost:
        store.set_status(run_id, "failed", "; ".join(f"{p.name}: {p.reason or p.status}" for p in lost)
                         + f" (complete it with `virtbench run --resume {run_id}`)")
    else:
        store.set_status(run_id, "finished")
    reporter.end()
    return Outcome(run_id, total, failed)


_SILENT = (f"connection closed: the host closed it, or did not answer SSH keepalives for "
           f"{ssh.ALIVE_INTERVAL * ssh.ALIVE_COUNT} s")


def _remote_part(store: Store, run_id: str, campaign: Campaign, part: Part, reporter: Reporter,
                 stop: threading.Event) -> None:
    assert part.executor is not None
    done = store.done_units(run_id, host=part.name)
    job = {"mode": "run", "campaign": _for_agent(campaign), "run_id": run_id,
           "instance_run_id": instance_run_id(run_id, part.name), "seed": part.seed,
           "done": sorted(done), "image_cache": part.image_cache, "skip": sorted(cross_host(campaign))}
    end: dict[str, Any] = {}
    try:
        part.stream = proc.stream(part.executor.ssh_argv(["env", *part.remote_env(), part.agent, "agent"]))
        part.stream.send(json.dumps(job))
        for line in part.stream.lines():
            msg = _parse(line)
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
    if not stop.is_set():
        reporter.log(f"[{part.name}] {part.reason}; its remaining executions are marked failed")
        mark_unreached(store, run_id, campaign, part)


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
        agent = crosspair.ServerAgent(part.executor.ssh_argv(["env", *part.remote_env(), part.agent, "agent"]),
                                      {"mode": "pair-server", "campaign": _for_agent(campaign), "run_id": run_id,
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


def cleanup_host(store: Store, name: str, paths: Paths, run_id: str | None = None) -> list[str]:
    """`cleanup --host NAME`: the agent there removes what virtbench left (of one run, or all),
    under that host's own state; NAME is looked up in the newest run whose campaign lists it."""
    spec = next((HostSpec(**h) for r in store.runs(limit=1000) for h in (r.campaign or {}).get("hosts", [])
                 if isinstance(h, dict) and h.get("name") == name), None)
    if spec is None:
        raise InputError(f"no run in the store lists a host named {name!r}",
                         "give a host of a multi-host campaign run from this store (see `virtbench runs`)")
    part = Part(spec=spec, seed=0)
    part.executor = SSHExecutor(spec, paths.runtime)
    part.executor.open()
    try:
        res = part.executor.run(["find", spec.work_dir, "-maxdepth", "3", "-path", "*/venv-*/bin/virtbench",
                                 "-printf", "%T@ %p\n"], timeout=30, check=False)
        found = sorted((float(t), p) for t, p in (ln.split(" ", 1) for ln in res.stdout.splitlines() if " " in ln))
        if not found:
            return []  # virtbench never ran there: nothing of it to clean up
        part.agent = found[-1][1]  # the newest environment shipped there
        job: dict[str, Any] = {"mode": "cleanup",
                               "run_id": instance_run_id(run_id, name) if run_id else None}
        msgs = _talk(part, job)
    finally:
        part.executor.close()
    end = msgs[-1] if msgs else {}
    if end.get("event") == "error":
        raise VirtbenchError(f"host {name}: cleanup failed: {end.get('message')}")
    return [f"{name}: {line}" for line in end.get("removed", [])]

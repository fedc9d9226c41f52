"""Pairs across hosts (`server: {host: NAME}`): the server in an instance of the platform on
that host, the client in an instance of the same platform here, on the controller.

Both ends are brought up at once and the client starts only when both are ready: the
controller's instance is up and the remote agent has reported its server listening (it polls
`ss` in its instance, as for every pair): a barrier, never a fixed sleep. Instances use host
networking, so the client reaches the server at the host's own address (the inventory's
`address`); no ports are published. The server host's agent serves one pair at a time over
one SSH session for the whole phase (`serve`, the kind's `pair-server` job), and removes its
instance after each. The phase runs after every host's own part (they would disturb it).
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ... import proc
from ...benchmarks.base import PairBenchmark
from ...config import Campaign, cross_host
from ...constants import UNREACHED
from ...errors import CommandError, VirtbenchError, reason_of
from ...platforms import naming
from ...store.db import now
from ..base import ExperimentContext, HostLink, Interrupted, Reporter, Sink
from .pair import wait_listening
from .rounds import parsed_samples
from .schedule import schedule
from .session import Session

READY_TIMEOUT = 300.0
SERVER_MODE = "pair-server"
"""The agent job that serves the server ends (Benchmarks.serve)."""


def plan(campaign: Campaign, seed: int) -> list[tuple[int, bool, str, str]]:
    """(round, warmup, platform, benchmark) of every cross-host execution, interleaved like the rest."""
    keys = set(cross_host(campaign))
    only = campaign.model_copy(update={"benchmarks": [b for b in campaign.benchmarks if b.key in keys]})
    return [(u.round, u.warmup, u.platform, b) for u in schedule(only, seed ^ 0x5A5A) for b in u.benchmarks]


class ServerAgent:
    """The agent on the server's host, serving one pair at a time."""

    def __init__(self, argv: list[str], job: dict[str, Any]) -> None:
        self.stream = proc.stream(argv)
        self.stream.send(json.dumps(job))
        self.replies = self.stream.lines()

    def ask(self, request: dict[str, Any] | None, want: str, timeout: float) -> dict[str, Any]:
        """Send a request (or none), read until the reply (an error event raises with the agent's words)."""
        if request is not None and not self.stream.send(json.dumps(request)):
            raise VirtbenchError(f"the server host's agent is gone: {self.stream.stderr().strip()[-200:]}")
        deadline = time.monotonic() + timeout
        for line in self.replies:
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            if msg.get("event") == want:
                return dict(msg)
            if msg.get("event") == "error":
                raise VirtbenchError(f"server end: {msg.get('message')}")
            if time.monotonic() > deadline:
                break
        raise VirtbenchError(f"the server host's agent did not answer ({want}): "
                             f"{self.stream.stderr().strip()[-200:] or 'connection closed'}")

    def close(self) -> int:
        return self.stream.close(grace=60)


def cross_phase(ctx: ExperimentContext, campaign: Campaign, session: Session, hosts: Sequence[HostLink]) -> None:
    """The pairs across hosts, one server host at a time. A server host that is lost or
    unreachable: its pairs fail with the reason (error starting with UNREACHED: resume redoes them)."""
    by_host: dict[str, list[str]] = {}
    for key, server in cross_host(campaign).items():
        by_host.setdefault(server.host, []).append(key)
    local = next(h for h in hosts if h.local)
    for host, keys in by_host.items():
        link = next(h for h in hosts if h.name == host)
        only = campaign.model_copy(update={"benchmarks": [b for b in campaign.benchmarks if b.key in keys]})
        todo = plan(only, local.seed)
        if link.status != "finished" or link.agent is None:
            mark(ctx.sink, ctx.run_id, todo, link.reason or f"host {host} did not finish its part")
            continue
        ctx.reporter.log(f"pairs across hosts: client here, server on {host} ({link.address})")
        agent = ServerAgent(link.agent, {**link.job, "mode": SERVER_MODE})
        try:
            agent.ask(None, "hello", 600)
            run_phase(ctx.sink, ctx.run_id, only, session, agent, host, link.address, local.seed, link.clock,
                      ctx.reporter)
        except VirtbenchError as exc:
            link.status, link.reason = "lost", f"host {host}: {exc}"
            ctx.reporter.log(f"[{host}] {link.reason}; its remaining pairs are marked failed")
            mark(ctx.sink, ctx.run_id, todo, link.reason)
        finally:
            agent.close()


def mark(sink: Sink, run_id: str, todo: list[tuple[int, bool, str, str]], reason: str) -> int:
    """Every pair of `todo` not stored: failed, with the reason."""
    done = sink.done_units(run_id)
    n = 0
    for rnd, warmup, platform, bench in todo:
        if (rnd, platform, bench) in done:
            continue
        t = now()
        sink.record(run_id=run_id, round=rnd, warmup=warmup, platform=platform, benchmark=bench, status="failed",
                    started_at=t, finished_at=t, duration_s=0.0, error=f"{UNREACHED} {reason}")
        n += 1
    return n


def run_phase(sink: Sink, run_id: str, campaign: Campaign, session: Session, agent: ServerAgent,
              server_host: str, address: str, seed: int, clock: dict[str, Any], reporter: Reporter) -> int:
    """Every cross-host execution not stored yet; returns how many ran."""
    done = sink.done_units(run_id)
    n = 0
    for rnd, warmup, pname, key in plan(campaign, seed):
        if (rnd, pname, key) in done:
            continue
        _one(sink, run_id, session, agent, server_host, address, rnd, warmup, pname, key, clock, reporter)
        n += 1
    return n


def _one(sink: Sink, run_id: str, session: Session, agent: ServerAgent, server_host: str, address: str,
         rnd: int, warmup: bool, pname: str, key: str, clock: dict[str, Any], reporter: Reporter) -> None:
    platform = session.platforms[pname]
    bench = session.benchmarks[key]
    assert isinstance(bench, PairBenchmark) and session.image is not None
    name = naming.derived(naming.unit_name(run_id, pname, rnd), "-x")
    workdir = f"/var/tmp/virtbench/{name}"
    argv = bench.client_command(workdir, address)
    started, t0 = now(), time.perf_counter()
    status, error, stdout, stderr, exit_code, samples = "ok", "", "", "", None, []
    instance = None
    server: dict[str, Any] = {}
    reporter.step(f"round {rnd + 1} {pname}: {key} to {server_host}")
    try:
        agent.stream.send(json.dumps({"op": "serve", "platform": pname, "benchmark": key, "round": rnd}))
        instance = platform.create(session.image, name, run_id)
        platform.start(instance)
        platform.exec(instance, ["mkdir", "-p", workdir], timeout=60)
        agent.ask(None, "listening", READY_TIMEOUT)  # the barrier: both ends up
        result = platform.host.run(platform.exec_argv(instance, argv), timeout=bench.execution_timeout(),
                                   check=False)
        stdout, stderr, exit_code = result.stdout, result.stderr, result.returncode
        server = agent.ask({"op": "stop"}, "server", 120)
        stderr += (f"\n--- server on {server_host} ({address}) exit {server.get('returncode')} ---\n"
                   f"{server.get('stdout', '')}{server.get('stderr', '')}")
        if result.returncode != 0:
            raise CommandError(argv, result.returncode, result.stdout, result.stderr)
        samples = parsed_samples(bench, result, f"{bench.tool} output ({pname} to {server_host})")
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # noqa: BLE001 - a failed execution with its output, the run goes on
        status, error = "failed", reason_of(exc)
        if isinstance(exc, CommandError):
            stdout, exit_code = stdout or exc.stdout, exit_code if exit_code is not None else exc.returncode
        if not server:
            try:
                agent.ask({"op": "stop"}, "server", 60)
            except VirtbenchError:
                pass
    finally:
        if instance is not None:
            platform.discard(instance)
    header = (f"# cross-host pair: client on local, server on {server_host} ({address}); "
              f"clock offset of {server_host}: {clock.get('offset_s', float('nan')) * 1e3:+.3f} ms "
              f"(±{clock.get('uncertainty_s', float('nan')) * 1e3:.3f} ms)\n")
    sink.record(run_id=run_id, round=rnd, warmup=warmup, platform=pname, benchmark=key, status=status,
                started_at=started, finished_at=now(), duration_s=time.perf_counter() - t0, instance=name,
                argv=argv, exit_code=exit_code, stdout=header + stdout, stderr=stderr, error=error,
                samples=samples)
    reporter.log(f"round {rnd + 1} {pname} {key} (local -> {server_host}): {status}"
                 + (f": {error}" if error else ""))


def serve(session: Session, run_id: str, requests: Iterable[str], emit: Callable[..., None]) -> None:
    """Server ends of cross-host pairs, one at a time (the agent's `pair-server` job): `serve`
    brings an instance up and starts the server in it, answered by `listening` once it listens;
    `stop` ends it and answers with its output. The end of the requests (the controller or the
    link gone) removes whatever is up."""
    up: list[Any] = []  # [platform, instance, background] of the pair being served

    def down() -> dict[str, Any]:
        if not up:
            return {}
        platform, instance, background = up
        up.clear()
        res = background.stop() if background is not None else None
        platform.discard(instance)
        return {} if res is None else {"returncode": res.returncode, "stdout": res.stdout, "stderr": res.stderr}

    try:
        for line in requests:
            try:
                req = json.loads(line)
            except json.JSONDecodeError:
                continue
            if req.get("op") == "stop":
                emit("server", **down())
                continue
            if req.get("op") != "serve":
                continue
            down()
            try:
                platform = session.platforms[req["platform"]]
                bench = session.benchmarks[req["benchmark"]]
                assert isinstance(bench, PairBenchmark) and session.image is not None
                name = naming.derived(naming.unit_name(run_id, req["platform"], int(req["round"])), "-s")
                workdir = f"/var/tmp/virtbench/{name}"
                instance = platform.create(session.image, name, run_id)
                up[:] = [platform, instance, None]
                platform.start(instance)
                platform.exec(instance, ["mkdir", "-p", workdir], timeout=60)
                up[2] = platform.spawn(instance, bench.server_command(workdir))
                wait_listening(platform, instance, bench, up[2])
                emit("listening")
            except Exception as exc:  # noqa: BLE001 - the controller records the pair as failed
                emit("error", message=exc.message if isinstance(exc, VirtbenchError) else reason_of(exc))
                down()
    except Interrupted:
        pass
    finally:
        down()

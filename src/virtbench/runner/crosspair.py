"""Pairs across hosts (`server: {host: NAME}`): the server in an instance of the platform on
that host, the client in an instance of the same platform here, on the controller.

Both ends are brought up at once and the client starts only when both are ready: the
controller's instance is up and the remote agent has reported its server listening (it polls
`ss` in its instance, as for every pair): a barrier, never a fixed sleep. Instances use host
networking, so the client reaches the server at the host's own address (the inventory's
`address`); no ports are published. The server host's agent serves one pair at a time over
one SSH session for the whole phase, and removes its instance after each.
"""
from __future__ import annotations

import json
import time
from typing import Any

from .. import proc
from ..benchmarks.base import PairBenchmark
from ..config import Campaign, cross_host
from ..errors import CommandError, VirtbenchError
from ..experiments.base import Reporter
from ..experiments.benchmarks.schedule import schedule
from ..experiments.benchmarks.rounds import describe, parsed_samples
from ..experiments.benchmarks.session import Session
from ..platforms import naming
from ..store.db import Store, now

READY_TIMEOUT = 300.0


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


def run_phase(store: Store, run_id: str, campaign: Campaign, session: Session, agent: ServerAgent,
              server_host: str, address: str, seed: int, clock: dict[str, Any], reporter: Reporter) -> int:
    """Every cross-host execution not stored yet; returns how many ran."""
    done = store.done_units(run_id, host="local")
    n = 0
    for rnd, warmup, pname, key in plan(campaign, seed):
        if (rnd, pname, key) in done:
            continue
        _one(store, run_id, session, agent, server_host, address, rnd, warmup, pname, key, clock, reporter)
        n += 1
    return n


def _one(store: Store, run_id: str, session: Session, agent: ServerAgent, server_host: str, address: str,
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
        status, error = "failed", describe(exc)
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
    store.record(run_id=run_id, round=rnd, warmup=warmup, platform=pname, benchmark=key, status=status,
                 started_at=started, finished_at=now(), duration_s=time.perf_counter() - t0, instance=name,
                 argv=argv, exit_code=exit_code, stdout=header + stdout, stderr=stderr, error=error,
                 samples=samples, host="local")
    reporter.log(f"round {rnd + 1} {pname} {key} (local -> {server_host}): {status}"
                 + (f": {error}" if error else ""))

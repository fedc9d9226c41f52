"""The benchmarks kind's loop: instances up, benchmarks inside, results committed one execution at a time.

Nothing here turns a failure into data: a tool that exits non-zero, times out or prints what
its parser cannot read becomes a *failed* execution with its raw output and the error text,
and the run goes on. Ctrl-C, SIGTERM or a cancel stop it cleanly (instance removed); `resume`
completes it, skipping every execution already stored.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ... import boards, proc, writeback
from ...benchmarks.base import Benchmark, PairBenchmark
from ...constants import LIFECYCLE, LIFECYCLE_STEPS
from ...errors import CommandError, StoreError, reason_of
from ...images.image import Image
from ...platforms import naming
from ...platforms.base import Instance, InstanceExecutor, Platform
from ...probes.base import Target
from ...store.db import now
from ..base import ExperimentContext, Interrupted, Reporter, Sink
from . import adaptive, probing
from .multi import combine, run_instances
from .oomwatch import OomWatch
from .pair import run_pair
from .schedule import Unit, extra_round, noise_rounds, schedule
from .session import Session, outer_of

SCRATCH = "/var/tmp/virtbench"


def run(ctx: ExperimentContext, session: Session) -> None:
    """Run every unit not yet stored, in interleaved rounds; ctx.stop_requested is polled
    between instances (cancel). An interrupt or a failed write stops it with nothing of the
    unit in progress kept; the runner marks the run (runner.execute.measure)."""
    sink, run_id, seed, reporter, stop_requested = ctx.sink, ctx.run_id, ctx.seed, ctx.reporter, ctx.stop_requested
    campaign = session.campaign
    units = schedule(campaign, seed)
    extra = adaptive.log_of(sink, run_id) if campaign.adaptive else []
    units += [u for entry in extra if "round" in entry for u in extra_round(campaign, seed, entry)]
    done = sink.done_units(run_id)
    reporter.begin(*_planned(units, done))
    noise_due = noise_rounds(campaign) > 0 and "noise" not in sink.state(run_id)
    flushed = False
    pending = list(units)
    while pending:
        for unit in pending:
            todo = [k for k in unit.keys() if k not in done]
            if not todo:
                continue
            if stop_requested():
                raise Interrupted("stop requested")
            if unit.round >= campaign.warmups and not flushed:  # the warm-up's image imports written back first
                flushed = True
                if (flush := writeback.flush()).dirty_bytes >= writeback.WORTH_SAYING or not flush.done:
                    reporter.log(flush.line())
            if not unit.warmup and noise_due:  # the noise check's rounds are done: say what to expect
                noise_due = False
                for line in adaptive.note_noise(sink, campaign, run_id, ctx.started):
                    reporter.log(line)
            _run_unit(sink, session, run_id, unit, {k[2] for k in todo}, reporter)
        pending = []
        if campaign.adaptive and not any("stop" in e for e in adaptive.log_of(sink, run_id)):
            entry = adaptive.plan_next(sink, campaign, run_id, max(u.round for u in units) + 1, ctx.started)
            if entry is not None:
                for line in adaptive.progress_lines(entry, adaptive.log_of(sink, run_id)):
                    reporter.log(line)
                pending = extra_round(campaign, seed, entry)
                units += pending
                reporter.begin(*_planned(units, sink.done_units(run_id)))
            elif (stopped := adaptive.stop_line(adaptive.log_of(sink, run_id))) is not None:
                reporter.log(stopped)


def _planned(units: list[Unit], done: set[tuple[int, str, str]]) -> tuple[int, int]:
    """(executions planned, of which done): what a reporter's begin is told, at the start and
    whenever an adaptive round grows the plan."""
    return sum(len(u.keys()) for u in units), sum(1 for u in units for k in u.keys() if k in done)


def _run_unit(sink: Sink, session: Session, run_id: str, unit: Unit, todo: set[str],
              reporter: Reporter) -> tuple[int, int]:
    platform = session.platforms[unit.platform]
    outer = outer_of(session, unit.platform)
    name = naming.unit_name(run_id, unit.platform, unit.round)
    tag = f"round {unit.round + 1}{' (warm-up)' if unit.warmup else ''} {unit.platform}"
    times: dict[str, float] = {}
    log: list[str] = []
    layers: list[tuple[Platform, Instance]] = []  # outermost first, for teardown
    executions = failed = 0
    instance: Instance | None = None
    started = now()
    try:
        reporter.step(f"{tag}: starting")
        with _timed(times, "create", log):
            image = session.image
            assert image is not None, "prepare() builds the image before any unit runs"
            if outer is not None:  # a stack: boot the VM, start the runtime in it, import the image
                outer_instance = outer.create(image, naming.derived(name, "-vm"), run_id)
                layers.append((outer, outer_instance))
                outer.start(outer_instance)
                platform = platform.bind(InstanceExecutor(outer, outer_instance))
                platform.ensure_engine_in(platform.host)
                image = outer.inner_image(image)
                platform.prepare(image)
            instance = platform.create(image, name, run_id)
            layers.append((platform, instance))
        with _timed(times, "start", log):
            platform.start(instance)
        for key in unit.benchmarks:
            if key not in todo:
                continue
            reporter.step(f"{tag}: {key}")
            ok = _run_benchmark(sink, session, platform, instance, image, run_id, unit, key,
                                session.benchmarks[key])
            executions, failed = executions + 1, failed + (0 if ok else 1)
            reporter.advance()
        reporter.step(f"{tag}: stopping")
        with _timed(times, "stop", log):
            platform.stop(instance)
        with _timed(times, "remove", log):  # innermost first: a stack's VM goes last
            while layers:
                plat, inst = layers.pop()
                if inst is not instance:
                    plat.stop(inst)
                plat.remove(inst)
    except (KeyboardInterrupt, Interrupted, StoreError):  # a failed write stops the run: nothing is kept
        _discard(layers)
        raise
    except Exception as exc:  # noqa: BLE001 - recorded as failed executions, the run goes on
        error = reason_of(exc)
        reporter.log(f"{tag}: instance failed: {error}")
        log.append(f"error: {error}")
        try:
            for key in unit.benchmarks:
                if key in todo and (unit.round, unit.platform, key) not in sink.done_units(run_id):
                    sink.record(run_id=run_id, round=unit.round, warmup=unit.warmup, platform=unit.platform,
                                 benchmark=key, status="failed", started_at=started, finished_at=now(),
                                 duration_s=0.0, instance=name, error=f"instance failed: {error}",
                                 **_output_of(exc))
                    executions, failed = executions + 1, failed + 1
                    reporter.advance()
        finally:
            _discard(layers)
    events, record = platform.event_times(instance) if instance is not None else ({}, "")
    if record:
        log.append(f"events: {record}")
    if LIFECYCLE in todo:
        ok = set(times) == set(LIFECYCLE_STEPS)
        sink.record(run_id=run_id, round=unit.round, warmup=unit.warmup, platform=unit.platform,
                     benchmark=LIFECYCLE, status="ok" if ok else "failed", started_at=started,
                     finished_at=now(), duration_s=sum(times.values()), instance=name,
                     stdout="\n".join(log), error="" if ok else (log[-1] if log else "incomplete"),
                     samples=[_lifecycle_sample(step, times[step]) for step in LIFECYCLE_STEPS]
                     + [_lifecycle_sample(k, v) for k, v in events.items()] if ok else [])
        executions, failed = executions + 1, failed + (0 if ok else 1)
        reporter.advance()
    return executions, failed


def _run_benchmark(sink: Sink, session: Session, platform: Platform, instance: Instance, image: Image,
                   run_id: str, unit: Unit, key: str, bench: Benchmark) -> bool:
    workdir = f"{SCRATCH}/{instance.name}/{key}".replace("[", "_").replace("]", "_").replace("=", "-")
    entry = next(b for b in session.campaign.benchmarks if b.key == key)
    source = f"{bench.tool} output ({unit.platform}, round {unit.round})"
    target = _target(platform, instance, run_id, unit, key) if session.probes else None
    started, t0 = now(), time.perf_counter()
    status, error = "ok", ""
    samples: list[dict[str, Any]] = []
    argv: list[str] = []
    stdout = stderr = ""
    exit_code: int | None = None
    attachments: list[dict[str, Any]] = []
    oom = OomWatch(platform, instance)
    board_before = boards.throttle_state()
    try:
        result = None
        if isinstance(bench, PairBenchmark):
            assert session.image is not None
            with _probed(session, target, attachments):
                pair = run_pair(platform, instance, bench, workdir, session.image, session.paths,
                                bench.execution_timeout())
            argv, result = pair.argv, pair.client
            stdout, exit_code = result.stdout, result.returncode
            stderr = (f"{result.stderr}\n--- server ({pair.address}) exit {pair.server.returncode} ---\n"
                      f"{pair.server.stdout}{pair.server.stderr}")
        elif entry.instances is not None:
            argv = bench.command(workdir)
            with _probed(session, target, attachments):
                outcomes = run_instances(platform, instance, image, entry.instances, argv, workdir,
                                         bench.execution_timeout())
            exit_code = max(abs(r.returncode) for _, r in outcomes)
            stdout, stderr, samples = combine(bench, outcomes, source, totals=True)
            if not samples:  # every instance failed: a failed sample with their outputs, never a crash
                raise CommandError(argv, exit_code, stdout, stderr)
        else:
            argv = bench.command(workdir)
            platform.exec(instance, ["mkdir", "-p", workdir], timeout=60)
            with _probed(session, target, attachments):
                result = platform.exec(instance, argv, timeout=bench.execution_timeout(), check=False)
            stdout, stderr, exit_code = result.stdout, result.stderr, result.returncode
        if not samples:
            assert result is not None
            if result.returncode != 0:
                raise CommandError(argv, result.returncode, result.stdout, result.stderr)
            samples = parsed_samples(bench, result, source)
    except (KeyboardInterrupt, Interrupted):
        raise
    except Exception as exc:  # noqa: BLE001 - a failed sample, kept with its raw output
        status, error = "failed", reason_of(exc)
        if isinstance(exc, CommandError):
            stdout, stderr = stdout or exc.stdout, stderr or exc.stderr
            exit_code = exc.returncode if exit_code is None else exit_code
    finally:
        try:
            platform.exec(instance, ["rm", "-rf", workdir], timeout=300, check=False)
        except Exception:  # noqa: BLE001 - scratch goes with the instance anyway
            pass
    if (killed := oom.kills()) is not None:  # whatever the tool printed, its numbers are not a result
        status, error, samples = "failed", f"{killed}; {error}" if error else killed, []
    attachments += boards.throttle_attachment(board_before, boards.throttle_state())
    sink.record(run_id=run_id, round=unit.round, warmup=unit.warmup, platform=unit.platform, benchmark=key,
                 status=status, started_at=started, finished_at=now(), duration_s=time.perf_counter() - t0,
                 instance=instance.name, argv=argv, exit_code=exit_code, stdout=stdout, stderr=stderr,
                 error=error, samples=samples, attachments=attachments)
    return status == "ok"


def parsed_samples(bench: Benchmark, result: proc.Result, source: str) -> list[dict[str, Any]]:
    """The samples of a successful tool run, each with its metric's unit, direction and category."""
    values = bench.parse(result.stdout, result.stderr, source=source)
    metrics = {m.name: m for m in bench.metrics()}
    return [{"metric": n, "value": float(v), "unit": metrics[n].unit,
             "higher_is_better": metrics[n].higher_is_better, "category": metrics[n].category}
            for n, v in values.items()]


def _target(platform: Platform, instance: Instance, run_id: str, unit: Unit, key: str) -> Target:
    """What the probes watch: the instance's host pid where its platform gives one."""
    try:
        pid = platform.host_pid(instance)
    except Exception:  # noqa: BLE001 - the probes then watch the host only, and say so
        pid = None
    return Target(run_id=run_id, platform=unit.platform, platform_type=platform.type, benchmark=key,
                  round=unit.round, instance=instance.name, pids=(pid,) if pid else ())


@contextmanager
def _probed(session: Session, target: Target | None, attachments: list[dict[str, Any]]) -> Iterator[None]:
    """The campaign's probes watching exactly the benchmark's command(s)."""
    if target is None:
        yield
        return
    found: list[dict[str, Any]] = []
    try:
        with probing.around(session.probes, target) as found:
            yield
    finally:  # kept when the command failed too: the probe saw that execution
        attachments.extend(found)


def _lifecycle_sample(step: str, seconds: float) -> dict[str, Any]:
    return {"metric": f"{step}_s", "value": seconds, "unit": "s", "higher_is_better": False,
            "category": "lifecycle"}


@contextmanager
def _timed(times: dict[str, float], step: str, log: list[str]) -> Iterator[None]:
    t0 = time.perf_counter()
    yield
    times[step] = time.perf_counter() - t0
    log.append(f"{step}: {times[step]:.4f} s")


def _discard(layers: list[tuple[Platform, Instance]]) -> None:
    """Stop and remove what is up, innermost first; best effort, cleanup is the backstop."""
    while layers:
        platform, instance = layers.pop()
        platform.discard(instance)


def _output_of(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, CommandError):
        return {"stdout": exc.stdout, "stderr": exc.stderr, "exit_code": exc.returncode, "argv": exc.argv}
    return {}

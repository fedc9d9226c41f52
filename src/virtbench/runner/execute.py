"""Run a campaign: instances up, benchmarks inside, results committed one execution at a time.

Nothing here turns a failure into data: a tool that exits non-zero, times out or prints what
its parser cannot read becomes a *failed* execution with its raw output and the error text,
and the run goes on. Ctrl-C or SIGTERM stop the run cleanly (instance removed, status
'interrupted'); `resume` completes it, skipping every execution already stored.
"""
from __future__ import annotations

import random
import secrets
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from .. import __version__, boards, proc
from .. import host as hostfacts
from ..benchmarks.base import Benchmark, PairBenchmark
from ..config import Campaign, check_host, parse_campaign
from ..constants import LIFECYCLE, LIFECYCLE_STEPS
from ..errors import CommandError, InputError, StoreError, VirtbenchError
from ..experiments.benchmarks import adaptive, probing
from ..experiments.benchmarks.multi import combine, run_instances
from ..experiments.benchmarks.oomwatch import OomWatch
from ..experiments.benchmarks.pair import run_pair
from ..experiments.benchmarks.plan import Unit, extra_round, noise_rounds, schedule
from ..experiments.benchmarks.session import Session, build_objects, outer_of, platform_rows, prepare, tool_versions
from ..experiments.registry import EXPERIMENTS
from ..images.image import Image
from ..platforms import naming, slices
from ..platforms.base import Instance, InstanceExecutor, Paths, Platform
from ..probes.base import Target
from ..registry import PLATFORMS
from ..store.db import Store, now
from . import hostlock

SCRATCH = "/var/tmp/virtbench"


class Reporter(Protocol):
    def begin(self, total: int, done: int) -> None: ...
    def step(self, description: str) -> None: ...
    def advance(self, n: int = 1) -> None: ...
    def log(self, message: str) -> None: ...
    def end(self) -> None: ...


class QuietReporter:
    def begin(self, total: int, done: int) -> None: ...
    def step(self, description: str) -> None: ...
    def advance(self, n: int = 1) -> None: ...
    def log(self, message: str) -> None: ...
    def end(self) -> None: ...


@dataclass(frozen=True)
class Outcome:
    run_id: str
    executions: int
    failed: int
    interrupted: bool = False


StopCheck = Callable[[], bool]


class Interrupted(BaseException):
    """SIGTERM or a cancel: treated like Ctrl-C so the instances in use are removed first.

    A BaseException, like KeyboardInterrupt, so no `except Exception` on the way (a retry
    loop, a best-effort probe) can swallow it and let the run go on."""


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def start(store: Store, campaign: Campaign, paths: Paths, *, source: str = "",
          reporter: Reporter | None = None, run_id: str | None = None,
          stop_requested: StopCheck | None = None, left_out: list[dict[str, str]] | None = None,
          cgroup_parent: str | None = None) -> Outcome:
    """Validate, probe, build, record the run, then execute it.

    left_out: given for a generated campaign (the quick one): the platforms it did not include,
    each with the reason and the fix; a platform that then fails its probe or setup joins them
    and the run goes on without it (prepare). Stored in the run's provenance so reports can say
    why they are missing. None (a campaign file): such a failure stops the run.
    cgroup_parent: a cgroup every instance of a confinable platform is placed under (the
    self-test's CPU priority parent); the others run where virtbench runs."""
    run_id = run_id or new_run_id()
    if campaign.hosts and not EXPERIMENTS.get(campaign.experiment).drives_hosts:
        from . import hosts

        return hosts.start(store, campaign, paths, source=source, reporter=reporter or QuietReporter(),
                           run_id=run_id)
    check_host(campaign, paths, one_of_hosts=True)  # CPUs, memory, scratch space: before any probe
    hostlock.announce_run(paths, run_id)
    if not EXPERIMENTS.get(campaign.experiment).uses_benchmarks:
        from . import experiment

        return experiment.start(store, campaign, paths, source=source, reporter=reporter, run_id=run_id,
                                stop_requested=stop_requested)
    reporter = reporter or QuietReporter()
    session = build_objects(campaign, paths)
    for platform in session.platforms.values():
        platform.cgroup_parent = cgroup_parent if platform.confinable else None
    left_out = None if left_out is None else list(left_out)
    prepare(session, log=reporter.log, left_out=left_out)
    campaign = session.campaign  # without the platforms left out at setup
    seed = campaign.seed if campaign.seed is not None else random.SystemRandom().randrange(2**31)
    details = _run_details(store, session)
    if left_out:
        details["provenance"]["left_out"] = left_out
    store.create_run(run_id=run_id, name=campaign.name, campaign=campaign.model_dump(mode="json"),
                     source=source, seed=seed, status="running", **details)
    reporter.log(f"run {run_id}: {len(session.platforms)} platforms x {len(session.benchmarks)} benchmarks, "
                 f"{campaign.repetitions} repetitions + {campaign.warmups} warm-up"
                 + (f" + {noise_rounds(campaign)} rounds of {campaign.baseline} alone (the noise check)"
                    if noise_rounds(campaign) else "") + f", seed {seed}")
    return execute(store, session, run_id, seed, reporter, stop_requested)


def enqueue(store: Store, campaign: Campaign, *, source: str = "") -> str:
    """Record a run to be executed later by a worker (the web app's schedule)."""
    run_id = new_run_id()
    seed = campaign.seed if campaign.seed is not None else random.SystemRandom().randrange(2**31)
    store.create_run(run_id=run_id, name=campaign.name, campaign=campaign.model_dump(mode="json"), source=source,
                     seed=seed, host_id=None, host_facts={}, image={}, provenance={}, platforms=[], benchmarks=[],
                     status="queued")
    return run_id


def run_queued(store: Store, run_id: str, paths: Paths, *, reporter: Reporter | None = None,
               stop_requested: StopCheck | None = None) -> Outcome:
    """Execute a queued run: probe, build and record its provenance now, on this host."""
    reporter = reporter or QuietReporter()
    run = store.run(run_id)
    if run.status != "queued":
        raise InputError(f"run {run.id} is {run.status}, not queued")
    hostlock.announce_run(paths, run.id)
    campaign = parse_campaign(run.campaign, f"run {run.id}")
    if campaign.hosts and not EXPERIMENTS.get(campaign.experiment).drives_hosts:  # the worker's host is the controller
        from . import hosts

        try:
            return hosts.run_queued(store, run, campaign, paths, reporter=reporter)
        except InputError as exc:  # a host refused in preflight: the queued run says why
            store.set_status(run.id, "failed", exc.message)
            raise
    try:
        check_host(campaign, paths)  # CPUs, memory, scratch space: before any probe
    except InputError as exc:
        store.set_status(run.id, "failed", exc.message)
        raise
    if not EXPERIMENTS.get(campaign.experiment).uses_benchmarks:
        from . import experiment

        return experiment.run_queued(store, run, campaign, paths, reporter=reporter, stop_requested=stop_requested)
    session = build_objects(campaign, paths)
    try:
        prepare(session, log=reporter.log)
    except Exception as exc:
        store.set_status(run.id, "failed", _describe(exc))
        raise
    store.fill_run(run.id, **_run_details(store, session))
    store.set_status(run.id, "running")
    return execute(store, session, run.id, run.seed, reporter, stop_requested)


def _run_details(store: Store, session: Session) -> dict[str, Any]:
    return {"host_id": store.upsert_host(hostfacts.stable_facts()), **session_details(session)}


def session_details(session: Session) -> dict[str, Any]:
    """What a run records about the host that measures it (a remote agent sends its own)."""
    assert session.image is not None
    versions = tool_versions(session)
    return {
        "host_facts": hostfacts.facts(session.paths.state),
        "image": session.image.provenance(),
        "provenance": {"virtbench": __version__, "tools": versions,
                       "availability": {k: v.reason for k, v in session.availability.items()},
                       **({"probes": probing.describe(session.probes)} if session.probes else {})},
        "platforms": platform_rows(session),
        "benchmarks": [{"key": b.key, "name": b.name,
                        "params": session.benchmarks[b.key].params.model_dump(mode="json"),
                        "tool_version": versions[b.name],
                        "metrics": [asdict(m) for m in session.benchmarks[b.key].metrics()]}
                       for b in session.campaign.benchmarks],
    }


def resume(store: Store, run_ref: str, paths: Paths, *, reporter: Reporter | None = None,
           stop_requested: StopCheck | None = None) -> Outcome:
    """Complete an interrupted run with the same campaign, seed and image."""
    reporter = reporter or QuietReporter()
    run = store.run(run_ref)
    if run.status == "finished":
        raise InputError(f"run {run.id} is already finished", "start a new run instead")
    hostlock.announce_run(paths, run.id)
    campaign = parse_campaign(run.campaign, f"run {run.id}")
    if campaign.hosts and not EXPERIMENTS.get(campaign.experiment).drives_hosts:
        from . import hosts

        return hosts.resume(store, run, campaign, paths, reporter=reporter)
    if not EXPERIMENTS.get(campaign.experiment).uses_benchmarks:
        from . import experiment

        return experiment.resume(store, run, campaign, paths, reporter=reporter, stop_requested=stop_requested)
    session = build_objects(campaign, paths)
    prepare(session, log=reporter.log)
    assert session.image is not None
    if session.image.recipe_hash != run.image.get("recipe_hash"):
        raise InputError(f"run {run.id} was measured with image {run.image.get('recipe_hash', '?')[:12]}, "
                         f"this host now builds {session.image.short}",
                         "resume on the host and virtbench version that started the run")
    if session.image.tar_sha256 != run.image.get("tar_sha256"):
        reporter.log("warning: the image was rebuilt since the run started; package versions may differ")
    removed = cleanup(paths, run.id)
    for line in removed:
        reporter.log(f"removed leftover: {line}")
    store.set_status(run.id, "running")
    return execute(store, session, run.id, run.seed, reporter, stop_requested)


def cleanup(paths: Paths, run_id: str | None = None, *, wait: bool = False,
            log: Callable[[str], None] = lambda _m: None) -> list[str]:
    """Remove every object virtbench left behind (of one run, or all) on every platform.

    Everything: under the host lock, so the instances of a run that is measuring are never
    taken (refused, or waited for with wait). One run: refused if that run is measuring."""
    if run_id is not None:
        hostlock.refuse_if_measuring(paths, run_id)
        return _cleanup(paths, run_id)
    with hostlock.hold(paths, "`virtbench cleanup`", wait=wait, log=log):
        return _cleanup(paths, None)


def _cleanup(paths: Paths, run_id: str | None) -> list[str]:
    removed: list[str] = []
    for name, cls in PLATFORMS.items():
        try:
            removed += [f"{name}: {r}" for r in cls.cleanup(paths, run_id)]
        except Exception as exc:  # noqa: BLE001 - one runtime's trouble must not stop the others
            removed.append(f"{name}: cleanup failed: {exc}")
    for name, kind in EXPERIMENTS.items():
        try:
            removed += [f"{name}: {r}" for r in kind.cleanup(paths, run_id)]
        except Exception as exc:  # noqa: BLE001 - as above
            removed.append(f"{name}: cleanup failed: {exc}")
    if run_id is None:
        removed += slices.remove_if_empty()
    return removed


def execute(store: Store, session: Session, run_id: str, seed: int, reporter: Reporter,
            stop_requested: StopCheck | None = None) -> Outcome:
    """Run every unit not yet stored. stop_requested is polled between instances (cancel)."""
    campaign = session.campaign
    units = schedule(campaign, seed)
    extra = adaptive.log_of(store, run_id) if campaign.adaptive else []
    units += [u for entry in extra if "round" in entry for u in extra_round(campaign, seed, entry)]
    done = store.done_units(run_id)
    total = sum(len(u.keys()) for u in units)
    reporter.begin(total, sum(1 for u in units for k in u.keys() if k in done))
    executions = failed = 0
    noise_due = noise_rounds(campaign) > 0 and "noise" not in store.run(run_id).provenance
    try:
        with sigterm_as_interrupt():
            pending = list(units)
            while pending:
                for unit in pending:
                    todo = [k for k in unit.keys() if k not in done]
                    if not todo:
                        continue
                    if stop_requested is not None and stop_requested():
                        raise Interrupted("stop requested")
                    if not unit.warmup and noise_due:  # the noise check's rounds are done: say what to expect
                        noise_due = False
                        for line in adaptive.note_noise(store, campaign, run_id, store.run(run_id).started_at or now()):
                            reporter.log(line)
                    e, f = _run_unit(store, session, run_id, unit, {k[2] for k in todo}, reporter)
                    executions, failed = executions + e, failed + f
                pending = []
                if campaign.adaptive and not any("stop" in e for e in adaptive.log_of(store, run_id)):
                    entry = adaptive.plan_next(store, campaign, run_id, max(u.round for u in units) + 1,
                                               store.run(run_id).started_at or now())
                    if entry is not None:
                        for line in adaptive.progress_lines(entry):
                            reporter.log(line)
                        pending = extra_round(campaign, seed, entry)
                        units += pending
                        reporter.begin(sum(len(u.keys()) for u in units), 0)
    except (KeyboardInterrupt, Interrupted):
        store.set_status(run_id, "interrupted", "interrupted by user or signal")
        reporter.end()
        return Outcome(run_id, executions, failed, interrupted=True)
    except StoreError as exc:  # the unit's instance is gone already (_run_unit)
        reporter.end()
        raise stopped_by_store(store, run_id, exc) from None
    except BaseException as exc:
        store.set_status(run_id, "failed", f"{type(exc).__name__}: {exc}")
        reporter.end()
        raise
    failed_total = sum(1 for ex in store.executions(run_id, status="failed") if not ex.warmup)
    store.set_status(run_id, "finished")
    reporter.end()
    return Outcome(run_id, executions, failed_total)


def _run_unit(store: Store, session: Session, run_id: str, unit: Unit, todo: set[str],
              reporter: Reporter) -> tuple[int, int]:
    platform = session.platforms[unit.platform]
    outer = outer_of(session, unit.platform)
    name = naming.unit_name(run_id, unit.platform, unit.round)
    tag = f"round {unit.round + 1}{' (warm-up)' if unit.warmup else ''} {unit.platform}"
    times: dict[str, float] = {}
    log: list[str] = []
    layers: list[tuple[Platform, Instance]] = []  # outermost first, for teardown
    executions = failed = 0
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
            ok = _run_benchmark(store, session, platform, instance, image, run_id, unit, key,
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
        error = _describe(exc)
        reporter.log(f"{tag}: instance failed: {error}")
        log.append(f"error: {error}")
        try:
            for key in unit.benchmarks:
                if key in todo and (unit.round, unit.platform, key) not in store.done_units(run_id):
                    store.record(run_id=run_id, round=unit.round, warmup=unit.warmup, platform=unit.platform,
                                 benchmark=key, status="failed", started_at=started, finished_at=now(),
                                 duration_s=0.0, instance=name, error=f"instance failed: {error}",
                                 **_output_of(exc))
                    executions, failed = executions + 1, failed + 1
                    reporter.advance()
        finally:
            _discard(layers)
    if LIFECYCLE in todo:
        ok = set(times) == set(LIFECYCLE_STEPS)
        store.record(run_id=run_id, round=unit.round, warmup=unit.warmup, platform=unit.platform,
                     benchmark=LIFECYCLE, status="ok" if ok else "failed", started_at=started,
                     finished_at=now(), duration_s=sum(times.values()), instance=name,
                     stdout="\n".join(log), error="" if ok else (log[-1] if log else "incomplete"),
                     samples=[_lifecycle_sample(step, times[step]) for step in LIFECYCLE_STEPS] if ok else [])
        executions, failed = executions + 1, failed + (0 if ok else 1)
        reporter.advance()
    return executions, failed


def stopped_by_store(store: Store, run_id: str, exc: StoreError) -> StoreError:
    """A run whose results can no longer be written stops: marked interrupted if the store
    takes that write now (else a reader marks it once this process is gone, store/owner.py),
    and said in one line with the way to complete it. Every execution stored so far stays;
    the one whose write failed was rolled back whole, so a resume measures it again."""
    try:
        store.set_status(run_id, "interrupted", f"stopped: {exc.message}")
    except StoreError:
        pass
    return StoreError(f"run {run_id} stopped: {exc.message}",
                      f"{exc.fix}; then `virtbench run --resume {run_id}` measures what is missing")


def _run_benchmark(store: Store, session: Session, platform: Platform, instance: Instance, image: Image,
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
        status, error = "failed", _describe(exc)
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
    store.record(run_id=run_id, round=unit.round, warmup=unit.warmup, platform=unit.platform, benchmark=key,
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


def _describe(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, VirtbenchError) else f"{type(exc).__name__}: {exc}"


def _output_of(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, CommandError):
        return {"stdout": exc.stdout, "stderr": exc.stderr, "exit_code": exc.returncode, "argv": exc.argv}
    return {}


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    def handler(signum: int, frame: Any) -> None:  # noqa: ARG001
        raise Interrupted(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not in the main thread (e.g. a web worker): leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)

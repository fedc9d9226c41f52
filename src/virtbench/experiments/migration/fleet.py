"""N instances at once: create, start until all are ready, stop until all are down, remove.

What an operator restarting a host (or the study's migration of 8 containers) waits for is
the *last* instance, so each phase is timed from its first call to the last instance's
readiness; the instances' own times are kept too, to show the spread. Every instance is
started from its own thread: the platforms' start() returns only once a command runs inside
(wait_ready), so threads measure readiness, not the runtime's return.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from ...images.image import Image
from ...platforms.base import Instance, Platform


@dataclass
class Phase:
    """One phase over all instances: wall time until the last finished, and each one's time."""

    seconds: float
    each: list[float] = field(default_factory=list)
    results: list[object] = field(default_factory=list)
    """What step returned for each instance, in the instances' order."""


class FleetError(Exception):
    """Some instances failed a phase; carries every instance's error, not just the first."""

    def __init__(self, phase: str, errors: dict[str, BaseException]) -> None:
        self.phase, self.errors = phase, errors
        first = "; ".join(f"{n}: {e}" for n, e in list(errors.items())[:3])
        super().__init__(f"{phase} failed for {len(errors)} instance(s): {first}")


def at_once(phase: str, instances: Sequence[Instance], step: Callable[[Instance], object]) -> Phase:
    """Run step(instance) for all instances concurrently; time until the last is done."""
    def timed(instance: Instance) -> tuple[float, object]:
        t0 = time.perf_counter()
        result = step(instance)
        return time.perf_counter() - t0, result

    t0 = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=max(1, len(instances)))
    futures: dict[str, Future[tuple[float, object]]] = {}
    try:
        for i in instances:
            futures[i.name] = pool.submit(timed, i)
        wait(futures.values())
    except BaseException:
        # Ctrl-C or SIGTERM: the steps already running go on in their threads. Whoever cleans up
        # next must see all they made, so wait for them (a second Ctrl-C does not cut this short).
        pool.shutdown(wait=False, cancel_futures=True)  # what has not started never will
        _wait_through_interrupts(futures.values())
        raise
    pool.shutdown(wait=True)
    seconds = time.perf_counter() - t0
    errors = {n: e for n, f in futures.items() if (e := f.exception()) is not None}
    if errors:
        raise FleetError(phase, errors)
    done = [futures[i.name].result() for i in instances]
    return Phase(seconds, [t for t, _ in done], [r for _, r in done])


def _wait_through_interrupts(futures: Iterable[Future[tuple[float, object]]]) -> None:
    """Wait until every step has ended, whatever interrupts arrive meanwhile."""
    while True:
        try:
            wait(list(futures))
            return
        except BaseException:  # noqa: BLE001 - the first interrupt is re-raised by the caller
            continue


def create(platform: Platform, image: Image, names: Sequence[str], run_id: str,
           into: list[Instance]) -> Phase:
    """Create one after another (runtimes serialise creation and address leases anyway);
    each created instance is appended to `into` at once, so a failure leaves nothing unknown."""
    t0, each = time.perf_counter(), []
    for name in names:
        t1 = time.perf_counter()
        into.append(platform.create(image, name, run_id))
        each.append(time.perf_counter() - t1)
    return Phase(time.perf_counter() - t0, each)


def discard(platform: Platform, instances: Sequence[Instance]) -> list[str]:
    """Stop and remove, best effort, returning what went wrong (cleanup is the backstop)."""
    problems = []
    for instance in instances:
        for step in (platform.stop, platform.remove):
            try:
                step(instance)
            except Exception as exc:  # noqa: BLE001 - try every instance
                problems.append(f"{instance.name}: {step.__name__}: {exc}")
    return problems

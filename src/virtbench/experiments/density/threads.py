"""Threads of a density fleet: many instances started at once, and removals a signal must not cut short."""
from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


def all_at_once(one: Callable[[str], T], names: list[str]) -> list[T]:
    """one(name) for every name, each in a thread of its own, at once. A signal while the threads
    are being started cancels them all before any creates anything (each waits for `go`); a
    signal once they run lets every create and start under way end first, so what they made is
    in the fleet's `created` for close() and no thread outlives the call."""
    results: dict[str, T] = {}
    go, cancelled = threading.Event(), threading.Event()
    done = {n: threading.Event() for n in names}

    def run(name: str) -> None:
        try:
            go.wait()
            if not cancelled.is_set():
                results[name] = one(name)
        finally:
            done[name].set()

    threads = [threading.Thread(target=run, args=(n,), name=f"density-start-{n}", daemon=True) for n in names]
    started: list[str] = []
    try:
        for t, n in zip(threads, names):
            t.start()
            started.append(n)
    except BaseException:
        cancelled.set()
        go.set()
        raise
    try:
        go.set()
        for n in names:
            done[n].wait()
        for t in threads:
            t.join()
    except BaseException:
        # A signal raised anywhere from go.set() on. Waited for on each thread's own event, not
        # Thread.join: a KeyboardInterrupt inside join() on Python < 3.13 can mark a thread that
        # still runs as stopped (threading's bpo-45274 handling releases the lock the live thread
        # holds), and the next join then returns at once with the start still under way (the
        # unit test's "3 of 4 instances live", 3 of 20 runs alone).
        with signals_held():
            go.set()  # again: the signal may have cut the first short before it woke every thread
            for n in started:
                done[n].wait()
            for t in threads[:len(started)]:
                t.join()
        raise
    return [results[n] for n in names]


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGTERM and SIGINT wait (pending) until the block ends: removing instances must finish.
    Outside the main thread signals are not ours to mask: nothing changes there."""
    held = {signal.SIGTERM, signal.SIGINT}
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)

"""Run the registered checks in order, each on its own, and say whether all that ran passed.

The whole self-test holds the host's measurement lock (a run measuring at the same time
would disturb the known answers, and the self-test's instances would disturb it), uses a
scratch results store that is deleted afterwards, and removes everything it made, also
when a check fails or the user interrupts it.
"""
from __future__ import annotations

import secrets
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from ..platforms import slices
from ..platforms.base import Paths
from ..registry import hint
from ..runner import hostlock
from ..store.db import Store
from .base import CHECKS, CheckResult
from .context import Context, Priority, cleanup, load

ORDER = ("cpu-quota", "io-throttle", "netem", "oom", "harness-overhead", "aa")
"""The built-ins in the issue's order; third-party checks follow by name."""


@dataclass
class SuiteResult:
    checks: list[CheckResult]
    load_before: list[float]
    load_after: list[float]
    seconds: float
    removed: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when every check that could run passed (skipped ones neither pass nor fail)."""
        return all(c.passed for c in self.checks if not c.skipped)

    def public(self) -> dict[str, Any]:
        return {"passed": self.passed, "checks": [c.public() for c in self.checks],
                "load": {"before": self.load_before, "after": self.load_after}, "seconds": round(self.seconds, 1)}


def names() -> list[str]:
    known = CHECKS.names()
    return [n for n in ORDER if n in known] + sorted(n for n in known if n not in ORDER)


def select(wanted: Sequence[str]) -> list[str]:
    """The checks to run: all, or the named ones (an unknown name: one line, exit 2)."""
    every = names()
    for name in wanted:
        if name not in every:
            raise InputError(f"unknown selftest check {name!r}", hint(name, every))
    return [n for n in every if not wanted or n in wanted]


def run(paths: Paths, wanted: Sequence[str] = (), *, log: Callable[[str], None] = lambda _m: None,
        wait: bool = False) -> SuiteResult:
    chosen = select(wanted)
    t0, before = time.monotonic(), load()
    token = secrets.token_hex(3)
    work = paths.runtime / f"selftest-{token}"
    results: list[CheckResult] = []
    removed: list[str] = []
    with hostlock.hold(paths, "`virtbench selftest`", wait=wait, log=log):
        removed += cleanup(paths)  # what a crashed self-test left
        work.mkdir(parents=True, exist_ok=True)
        try:
            store = Store(f"sqlite:///{work / 'selftest.db'}")
            ctx = Context(paths, store, token, log, cgroup_parent=slices.parent_path(f"vbst-{token}"))
            with Priority(paths, ctx.cgroup_parent or ""):
                for name in chosen:
                    log(f"{name}: measuring ...")
                    result = CHECKS.get(name)().run(ctx)
                    results.append(result)
                    log(f"{name}: {'skipped' if result.skipped else 'passed' if result.passed else 'FAILED'} "
                        f"({result.seconds:.0f} s)")
        finally:
            removed += cleanup(paths)
            shutil.rmtree(work, ignore_errors=True)
    return SuiteResult(results, before, load(), time.monotonic() - t0, removed)

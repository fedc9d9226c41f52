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

from ..errors import InputError, VirtbenchError
from ..platforms import enforcement, slices
from ..platforms.base import Paths
from ..registry import PLATFORMS, hint
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


def select(wanted: Sequence[str], platforms: Sequence[str] = ()) -> list[str]:
    """The checks to run: all, or the named ones (an unknown name: one line, exit 2); with
    platforms named, only the limit checks unless checks are named too."""
    every = names()
    for name in wanted:
        if name not in every:
            raise InputError(f"unknown selftest check {name!r}", hint(name, every))
    if platforms:
        known = PLATFORMS.names()
        for p in platforms:
            if p not in known:
                raise InputError(f"unknown platform {p!r}", hint(p, known))
        if not wanted:
            return [n for n in every if CHECKS.get(n).limit]
    return [n for n in every if not wanted or n in wanted]


def run(paths: Paths, wanted: Sequence[str] = (), *, log: Callable[[str], None] = lambda _m: None,
        wait: bool = False, platforms: Sequence[str] = ()) -> SuiteResult:
    """The chosen checks, each limit check once per platform named (runc when none is), its
    verdict recorded for that platform (platforms/enforcement.py)."""
    chosen = select(wanted, platforms)
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
            _start_engines(paths, platforms or [ctx.platform])
            with Priority(paths, ctx.cgroup_parent or ""):
                for name in chosen:
                    check = CHECKS.get(name)
                    for platform in (platforms or [ctx.platform]) if check.limit else [None]:
                        if platform is not None:
                            ctx.platform = platform
                        label = name + (f" ({platform})" if platform and platforms else "")
                        log(f"{label}: measuring ...")
                        result = check().run(ctx)
                        results.append(result)
                        if check.limit and platform is not None:
                            remember(paths, check.limit, result)
                        log(f"{label}: {'skipped' if result.skipped else 'passed' if result.passed else 'FAILED'} "
                            f"({result.seconds:.0f} s)")
        finally:
            removed += cleanup(paths)
            shutil.rmtree(work, ignore_errors=True)
    return SuiteResult(results, before, load(), time.monotonic() - t0, removed)


def _start_engines(paths: Paths, platforms: Sequence[str]) -> None:
    """The platforms' daemons (containerd, dockerd) started before the self-test moves into its
    `harness` cgroup: a daemon outlives the self-test, and one it started from there stayed in
    that cgroup, which then could not be removed. One that cannot start is left to its check,
    which says so."""
    for name in platforms:
        try:
            PLATFORMS.get(name).ensure_engine(paths)
        except VirtbenchError:
            pass


def remember(paths: Paths, limit: str, result: CheckResult) -> None:
    """Record whether the platform's limit held (skipped: not checked; a check that could not
    measure: not shown), for the reports of runs that use it."""
    if result.platform is None:
        return
    if result.skipped:
        enforcement.record(paths, result.platform, limit, {"checked": False, "reason": result.reason})
        return
    held = result.details.get("held")
    enforcement.record(paths, result.platform, limit, {
        "checked": True, "held": held, "check_passed": result.passed, "measured": result.measured,
        "reason": result.reason})

"""The check plugin interface: one known answer per check, judged by a pure function.

A check sets up something whose answer is known (a 50 % CPU quota halves a CPU-bound
benchmark; a throttle of N IOPS reads N IOPS; an allocation above a memory limit is an OOM
kill), measures it through virtbench's own runner, platforms and statistics, and judges the
measurement with a pure function of the numbers, so the judging is unit-tested on known
numbers and the measuring is tested for real. A host that cannot run a check raises `Skip`
with the reason and the fix; a skipped check neither passes nor fails.

Checks register like every other plugin: entry points in the `virtbench.selftest` group.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import VirtbenchError
from ..registry import Registry

if TYPE_CHECKING:
    from .context import Context


@dataclass(frozen=True)
class Judgement:
    """What a judge says about a measurement: the number shown and whether it is right."""

    passed: bool
    measured: str
    reason: str = ""


@dataclass(frozen=True)
class CheckResult:
    name: str
    expected: str
    measured: str
    passed: bool | None
    """None when skipped: the host could not run the check (see `reason`)."""
    skipped: bool
    reason: str
    details: dict[str, Any] = field(default_factory=dict)
    """The numbers behind `measured` (values, load, run ids) for scripts and bug reports."""
    seconds: float = 0.0
    platform: str | None = None
    """The platform type a per-platform check ran on (None: a check of the host's chain)."""

    def public(self) -> dict[str, Any]:
        return {"name": self.name, "platform": self.platform, "expected": self.expected, "measured": self.measured,
                "passed": self.passed, "skipped": self.skipped, "reason": self.reason, "details": self.details,
                "seconds": round(self.seconds, 1)}


class Skip(VirtbenchError):
    """This host cannot run the check: the reason, and the fix for hosts that want it."""


class Check(ABC):
    name: ClassVar[str]
    title: ClassVar[str]
    """What the check proves, in one line (README, --help)."""
    limit: ClassVar[str | None] = None
    """The platform limit the check proves enforced ("cpu", "memory"): it then runs on the
    platform `selftest --platform P` names (ctx.platform; runc by default) and its verdict is
    recorded for P (platforms/enforcement.py)."""
    on: str = "runc"
    """The platform type the check runs on now (set by run())."""

    @abstractmethod
    def expected(self) -> str:
        """The known answer with its tolerance, as printed."""

    @abstractmethod
    def measure(self, ctx: Context) -> tuple[Judgement, dict[str, Any]]:
        """Measure through virtbench and judge: (the judgement, the numbers behind it).
        Raise Skip when the host cannot run the check."""

    def run(self, ctx: Context) -> CheckResult:
        """measure(), timed; a skip or an error becomes a result, never an escape."""
        t0 = time.monotonic()
        self.on = getattr(ctx, "platform", self.on)
        platform = self.on if self.limit else None
        try:
            judgement, details = self.measure(ctx)
        except Skip as exc:
            reason = exc.message + (f" (fix: {exc.fix})" if exc.fix else "")
            return CheckResult(self.name, self.expected(), "-", None, True, reason, seconds=time.monotonic() - t0,
                               platform=platform)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # noqa: BLE001 - a check that cannot measure has failed, with why
            reason = f"could not measure: {exc}" if isinstance(exc, VirtbenchError) else \
                f"could not measure: {type(exc).__name__}: {exc}"
            return CheckResult(self.name, self.expected(), "-", False, False, reason, seconds=time.monotonic() - t0,
                               platform=platform)
        return CheckResult(self.name, self.expected(), judgement.measured, judgement.passed, False, judgement.reason,
                           details, time.monotonic() - t0, platform)


CHECKS: Registry[Check] = Registry("virtbench.selftest", "selftest check")

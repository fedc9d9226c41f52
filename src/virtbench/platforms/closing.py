"""Ending a run's platforms: every kind that prepared platforms closes them the same way, and
what a cleanup could not remove."""
from __future__ import annotations

from collections.abc import Callable, Iterable

from .base import Platform


def close_platforms(platforms: Iterable[Platform], log: Callable[[str], None] = lambda _m: None) -> None:
    """Each platform's close() (what prepare made for the run), whatever the others do."""
    for platform in platforms:
        try:
            platform.close()
        except Exception as exc:  # noqa: BLE001 - one platform's trouble must not keep the others' objects
            log(f"{platform.name}: closing: {exc}")


class NotRemoved(str):
    """A line of a cleanup's answer that is not a removal: what it could not remove or visit,
    and why (a cluster whose kubeconfig is gone, a runtime whose cleanup failed). The user sees
    it as such, not among what was removed."""

    def prefixed(self, prefix: str) -> NotRemoved:
        return NotRemoved(f"{prefix}{self}")

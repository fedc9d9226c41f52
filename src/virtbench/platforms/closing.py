"""Ending a run's platforms: every kind that prepared platforms closes them the same way."""
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

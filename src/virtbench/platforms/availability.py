"""Which platform types run on this host, decided by trying (each plugin's probe).

Below the runner so experiment kinds (which sit under it) check their platforms before
anything starts, as the benchmark runner does."""
from __future__ import annotations

from collections.abc import Callable

from ..registry import PLATFORMS
from .base import Availability, Paths


def availability_of(types: list[str], paths: Paths, log: Callable[[str], None] = lambda _m: None
                ) -> dict[str, Availability]:
    """Start engines where needed, then probe each platform type by really trying it."""
    result: dict[str, Availability] = {}
    for ptype in types:
        cls = PLATFORMS.get(ptype)
        try:
            cls.ensure_engine(paths)
        except Exception as exc:  # noqa: BLE001 - reported through probe's verdict below
            log(f"{ptype}: could not start its engine: {exc}")
        result[ptype] = cls.availability(paths)
    return result

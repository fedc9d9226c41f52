"""Probes around each execution: started right before the benchmark's command, stopped
right after, their data stored as attachments in the execution's own transaction.

A probe that fails to start or stop is recorded as a failed attachment with its error; the
execution's status and samples never depend on a probe.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ...probes.base import Probe, ProbeData, Target


def check_probes(probes: list[Probe]) -> None:
    """Each probe tries what it needs on this host (a meter runs once); InputError, exit 2."""
    for p in probes:
        p.check()


def probe_facts(probes: list[Probe]) -> list[dict[str, Any]]:
    """Stored in the run's provenance: what each probe found here."""
    return [p.describe() for p in probes]


@contextmanager
def around(probes: list[Probe], target: Target) -> Iterator[list[dict[str, Any]]]:
    """Run the body with every probe watching; yields the list the attachments go into
    (filled when the body ends, whether it succeeded or failed)."""
    attachments: list[dict[str, Any]] = []
    started: list[Probe] = []
    for p in probes:
        try:
            p.start(target)
            started.append(p)
        except Exception as exc:  # noqa: BLE001 - a probe's failure is its own data
            attachments.append(_attachment(p, ProbeData.failed(f"start: {type(exc).__name__}: {exc}")))
    try:
        yield attachments
    finally:
        for p in started:
            try:
                data = p.stop()
            except Exception as exc:  # noqa: BLE001 - as above
                data = ProbeData.failed(f"stop: {type(exc).__name__}: {exc}")
            attachments.append(_attachment(p, data))


def _attachment(p: Probe, data: ProbeData) -> dict[str, Any]:
    return {"name": p.kind, "kind": p.kind, "data": {"probe": p.name, **data.data},
            "status": data.status, "error": data.error}

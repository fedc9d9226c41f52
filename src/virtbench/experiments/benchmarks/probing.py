"""Probes around each execution: started right before the benchmark's command, stopped
right after, their data stored as attachments in the execution's own transaction.

A probe that fails to start or stop is recorded as a failed attachment with its error; the
execution's status and samples never depend on a probe.
"""
from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ...errors import InputError
from ...probes.base import Probe, ProbeData, Target
from ...registry import PROBES

if TYPE_CHECKING:
    from ...config import Campaign


def build_probes(campaign: Campaign) -> list[Probe]:
    """Instantiate the campaign's probes (options were validated with the campaign)."""
    out = []
    for entry in campaign.probes:
        cls = PROBES.get(entry.name)
        out.append(cls(cls.Options(**entry.options)))
    return out


ALLOW_METER_FIX = "run it only if you trust the campaign: add --allow-meter (run, worker, serve)"


def require_consent(campaign: Campaign, allowed: bool) -> None:
    """A campaign may name programs for its probes to run as root (an energy meter); they run
    only where the operator said so (`--allow-meter`), so a campaign file from elsewhere
    cannot run a program of its choosing. InputError, exit 2, before anything starts."""
    if allowed:
        return
    for probe in build_probes(campaign):
        for argv in probe.commands():
            shown = shlex.join(argv)
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            raise InputError(f"the campaign's {probe.name} probe would run the command {shown} as root, "
                             "which needs --allow-meter", ALLOW_METER_FIX)


def check_probes(probes: list[Probe]) -> None:
    """Each probe tries what it needs on this host (a meter runs once); InputError, exit 2."""
    for p in probes:
        p.check()


def describe(probes: list[Probe]) -> list[dict[str, Any]]:
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

"""A campaign's probes as objects, and the operator's consent to the commands they would run.

Here, with the campaign's other checks, because every front door needs it before anything
starts (`virtbench run`, the queue worker, the web form, a study), whatever the experiment kind.
"""
from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from ..errors import InputError
from ..probes.base import Probe
from ..registry import PROBES

if TYPE_CHECKING:
    from .campaign import Campaign

ALLOW_METER_FIX = "run it only if you trust the campaign: add --allow-meter (run, worker, serve)"


def build_probes(campaign: Campaign) -> list[Probe]:
    """Instantiate the campaign's probes (options were validated with the campaign)."""
    out = []
    for entry in campaign.probes:
        cls = PROBES.get(entry.name)
        out.append(cls(cls.Options(**entry.options)))
    return out


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

"""The five studies of `seeds/` as data: what each measures, and its parts as shipped campaigns.

A part is one or more campaign files in `virtbench/campaigns/` (one run each: a campaign has
one experiment kind, and the parts of a study are of different kinds), named
`study<ID>-<part>[-<variant>]-<scale>.yaml`. `quick` keeps the paper's shape (the same
series, axes and sweeps) at the smallest settings that still measure something; `paper` uses
the paper's durations, sizes and repetition counts. What a part needs beyond the platforms
its campaign names (KVM, a second host, a PMU, a meter) is listed in `needs`: the
capability checks (studies/capabilities.py) decide it, and a part that cannot run is
skipped with the reason, never silently. `degrades` lists what runs but is missing a
measurement without the capability (dTLB misses without a PMU).

The studies themselves (their commands, stated settings and every difference of the presets
from them) are in studies/catalog/, one module per study; the types in studies/model.py.
"""
from __future__ import annotations

from ..config import SHIPPED
from ..errors import InputError
from .catalog import STUDIES
from .model import SCALES, Difference, Option, PaperCommand, PaperSetting, Part, Study

__all__ = ["SCALES", "SHIPPED", "STUDIES", "Difference", "Option", "PaperCommand", "PaperSetting", "Part", "Study",
           "check_scale", "study"]


def study(sid: str) -> Study:
    """The study with this id; unknown: one line with the ids that exist (exit 2)."""
    for s in STUDIES:
        if s.id == sid or s.id == sid.zfill(3):
            return s
    raise InputError(f"unknown study {sid!r}", f"use one of {', '.join(s.id for s in STUDIES)} "
                     "(`virtbench study list`)")


def check_scale(scale: str) -> str:
    if scale not in SCALES:
        raise InputError(f"unknown scale {scale!r}", f"use --scale {' or --scale '.join(SCALES)}")
    return scale

"""`study run --option NAME`: a part run closer to its paper than the preset runs it by default.

Each option rewrites the part's campaign before it is validated (so the stored campaign shows
what ran), and says from a stored campaign whether it was used, so `study report` drops the
difference it removes for that run.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from .model import Option, Part, Study

PAPER_COUNTS = [1, 2, 3, 4, 5, *range(10, 55, 5), 53, 54, 63]

"""Study 000's Fig. 4 groups: 1-5, 10 to 50 by 5, 53, 54 and 63 containers (sorted when applied)."""


def _platforms(data: dict[str, Any], ptype: str) -> list[dict[str, Any]]:
    out = []
    for p in data.get("platforms") or []:
        entry = {"name": p} if isinstance(p, str) else p
        if entry.get("type", entry.get("name")) == ptype:
            out.append(entry)
    return out


def _paper_counts(data: dict[str, Any]) -> dict[str, Any]:
    section = dict(data.get("density") or {})
    counts = section.get("counts")
    top = counts.get("max") if isinstance(counts, dict) else None
    section["counts"] = {"until": "failure", "groups": PAPER_COUNTS, "bisect": False,
                         **({"max": top} if top else {})}
    return {**data, "density": section}


def _used_paper_counts(campaign: dict[str, Any]) -> bool:
    counts = ((campaign.get("settings") or campaign.get("density") or {}).get("counts"))
    return isinstance(counts, dict) and bool(counts.get("groups"))


def _proxmox(data: dict[str, Any]) -> dict[str, Any]:
    platforms = []
    for p in data.get("platforms") or []:
        entry = {"name": p} if isinstance(p, str) else dict(p)
        if entry.get("type", entry.get("name")) == "lxc":
            entry["proxmox"] = True
        platforms.append(entry)
    return {**data, "platforms": platforms}


def _used_proxmox(campaign: dict[str, Any]) -> bool:
    entries = [p for p in campaign.get("platforms") or [] if isinstance(p, dict)]
    return any(p.get("proxmox") or (p.get("options") or {}).get("proxmox") for p in entries)


@dataclass(frozen=True)
class Behaviour:
    option: Option
    apply: Callable[[dict[str, Any]], dict[str, Any]]
    used: Callable[[dict[str, Any]], bool]


OPTIONS: dict[str, Behaviour] = {
    "paper-counts": Behaviour(
        Option("paper-counts", "the paper's container counts (1-5, 10 to 50 by 5, 53, 54, 63) in order until one "
                               "fails, no bisection: its maximum is the last group that ran"),
        _paper_counts, _used_paper_counts),
    "proxmox": Behaviour(
        Option("proxmox", "LXC containers with Proxmox VE's defaults: unprivileged (ids shifted by 100000), "
                          "lxcfs, `cores` as a set of CPUs (needs FUSE and lxcfs running)"),
        _proxmox, _used_proxmox),
}


def check(names: tuple[str, ...], parts: list[Part], study: Study) -> list[str]:
    """The options asked for, each known and taken by one of the chosen parts (one line, exit 2, if not)."""
    for name in names:
        if name not in OPTIONS:
            raise InputError(f"--option {name}: no such option", f"use one of {', '.join(OPTIONS)}")
        if not any(name in p.options for p in parts):
            takers = [p.name for p in study.parts if name in p.options]
            raise InputError(f"--option {name}: no chosen part of study {study.id} takes it",
                             (f"add --part {takers[0]} (it is taken by {', '.join(takers)})" if takers else
                              f"see `virtbench study show {study.id}` for each part's options"))
    return list(names)


def apply(names: list[str], part: Part, data: dict[str, Any]) -> dict[str, Any]:
    """The campaign with the options this part takes applied."""
    for name in names:
        if name in part.options:
            data = OPTIONS[name].apply(data)
    return data


def used(campaign: dict[str, Any]) -> set[str]:
    """The options a stored campaign was run with."""
    return {name for name, b in OPTIONS.items() if b.used(campaign)}

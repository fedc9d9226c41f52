"""The headline: per platform, one line a person reads in ten seconds.

For each platform: its kind (from the stored run), its overall verdict per category, the
biggest cost found, and for the run the host facts that change how to read it (the host is
itself a VM, the frequency governor, the load). Built from the rows' verdicts, so the
headline can never say more than the cells behind it:

- a category is **same** when every decided cell in it is same, **slower** (or **faster**)
  when at least one cell is slower (faster) and none goes the other way, **mixed** when both
  occur, **inconclusive** when no cell is decided; its number is the geometric mean of the
  category's ratios;
- the biggest cost is the decided "slower" cell with the lowest ratio.

A category's cell says its verdict with its size, never a signed change that can contradict
the arrow: "▼7%" is 7 % slower (the geometric mean of the category's slower cells), "▲3%" 3 %
faster, "▼7% ▲3%" mixed, "=" the same; undecided, "? -3% [-8, +2]" says the estimate (the
geometric mean of its ratios) and the interval its cells leave open (from the lowest end of
their 95 % intervals to the highest: one cell's own interval), so an undecided answer still
says how large the cost could be (`cell_text`). Lifecycle: the median start time in ms.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .. import notation
from ..analysis import quality
from ..analysis.summary import Row
from ..analysis.tables import CATEGORIES as ORDER
from ..analysis.tables import geomean
from ..analysis.verdict import combine
from ..boards import emulated

CATEGORIES = (*ORDER, "lifecycle")
"""The headline's categories, in the order and with the names of every table (analysis.tables)."""
LEGEND = ("▼7% = 7 % slower, ▲ faster, = the same within the margin, ? undecided with its estimate and "
          "interval; lifecycle: median start in ms")
"""How to read the category cells (`cell_text`)."""


@dataclass
class CategoryVerdict:
    category: str
    verdict: str
    """same, slower, faster, mixed or inconclusive (lifecycle: 'measured', with the median start time)."""
    ratio: float | None
    """Geometric mean of the category's ratios (lifecycle: median start time in seconds)."""
    cells: dict[str, int] = field(default_factory=dict)
    """How many cells of each verdict went in."""
    slower_by: float | None = None
    """Slower or mixed: how much slower its slower cells are (geometric mean; 0.07 = 7 %)."""
    faster_by: float | None = None
    """Faster or mixed: how much faster its faster cells are (geometric mean; 0.03 = 3 %)."""
    ci: list[float] | None = None
    """The lowest and highest end of its cells' 95 % intervals (one cell: its own interval)."""


@dataclass
class PlatformLine:
    platform: str
    kind: str
    """baseline, container, sandbox, vm or stack, from the stored run."""
    categories: list[CategoryVerdict]
    biggest_cost: dict[str, Any] | None
    """The slowest decided cell: benchmark, metric, ratio, verdict_reason."""
    decided: int
    compared: int


def platform_kind(config: Mapping[str, Any], ptype: str) -> str:
    """The kind as stored with the run: a platform inside another is a stack."""
    if config.get("inside"):
        return "stack"
    return str(config.get("kind") or ("baseline" if ptype == "native" else "container"))


def _category(cat: str, rows: Sequence[Row]) -> CategoryVerdict | None:
    if not rows:
        return None
    if cat == "lifecycle":
        start = [r.median for r in rows if r.metric == "start_s" and r.median is not None]
        return CategoryVerdict(cat, "measured", start[0] if start else None, {"steps": len(rows)})
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.verdict or "inconclusive"] = counts.get(r.verdict or "inconclusive", 0) + 1
    ratio = geomean(r.relative for r in rows if r.relative is not None)
    verdict = combine([r.verdict for r in rows])
    slow = geomean(r.relative for r in rows if r.verdict == "slower" and r.relative)
    fast = geomean(r.relative for r in rows if r.verdict == "faster" and r.relative)
    cis = [r.relative_ci95 for r in rows if r.relative_ci95]
    return CategoryVerdict(cat, verdict, ratio, counts, None if slow is None else 1 - slow,
                           None if fast is None else fast - 1,
                           [min(c[0] for c in cis), max(c[1] for c in cis)] if cis else None)


def _size(x: float) -> str:
    return "<1%" if abs(x) < 0.005 else f"{abs(x) * 100:.0f}%"


def cell_text(cv: CategoryVerdict) -> str:
    """The category's verdict with its size, unsigned: the arrow says the direction."""
    if cv.category == "lifecycle":
        return f"{cv.ratio * 1000:.0f} ms" if cv.ratio is not None else "-"
    parts = []
    if cv.slower_by is not None:
        parts.append("▼" + _size(cv.slower_by))
    if cv.faster_by is not None:
        parts.append("▲" + _size(cv.faster_by))
    if parts or cv.verdict == "same":
        return " ".join(parts) or "="
    if cv.ratio is None:
        return "?"
    span = f" {notation.change_interval(cv.ci[0], cv.ci[1], 0)}" if cv.ci else ""
    return f"? {_signed(cv.ratio)}%{span}"


def _signed(ratio: float) -> str:
    """The change of a ratio in whole per cent with its sign ('-3', '+2'), '±0' when it rounds to 0."""
    pct = round((ratio - 1) * 100)
    return f"{pct:+d}" if pct else "±0"


def headline(platforms: Sequence[tuple[str, str, Mapping[str, Any]]], rows: Sequence[Row],
             baseline: str) -> list[PlatformLine]:
    """One line per platform but the baseline. platforms: (name, type, stored config) in run order."""
    out = []
    for name, ptype, config in platforms:
        if name == baseline:
            continue
        mine = [r for r in rows if r.platform == name]
        cats = []
        for cat in CATEGORIES:
            cv = _category(cat, [r for r in mine if r.category == cat and (cat == "lifecycle" or r.verdict)])
            if cv is not None:
                cats.append(cv)
        cats += [cv for c in sorted({r.category for r in mine} - set(CATEGORIES))
                 if (cv := _category(c, [r for r in mine if r.category == c and r.verdict])) is not None]
        slower = [r for r in mine if r.verdict == "slower" and r.relative is not None]
        worst = min(slower, key=lambda r: r.relative or np.inf) if slower else None
        compared = [r for r in mine if r.verdict in ("slower", "faster", "same", "inconclusive")]
        out.append(PlatformLine(
            name, platform_kind(config, ptype), cats,
            {"benchmark": worst.benchmark, "metric": worst.metric, "ratio": worst.relative,
             "verdict_reason": worst.verdict_reason} if worst else None,
            sum(r.verdict != "inconclusive" for r in compared), len(compared)))
    return out


def host_notes(facts: Mapping[str, Any]) -> list[str]:
    """The host facts that change how to read the numbers, shortest first: the architecture
    with its AES instructions (22-41x on crypto in the studies) and an emulated host (QEMU
    without KVM measures the emulator, not the board it imitates) come first."""
    out = []
    virt = facts.get("virtualization")
    vm = str(virt.get("vm") or "") if isinstance(virt, dict) else ""
    if facts.get("arch"):
        crypto = facts.get("crypto") or {"aes": bool(facts.get("aes"))}
        out.append(f"{facts['arch']}, AES {'yes' if crypto.get('aes') else 'no'}")
    if emulated(vm):
        out.append("emulated (QEMU TCG): its numbers measure the emulator, not a board")
    elif vm not in ("", "none"):
        out.append(f"host is itself a VM ({vm}): costs are relative to it")
    gov = str(facts.get("governor") or "")
    if gov:
        out.append(f"governor {gov.split(' ')[0]}")
    scaling = facts.get("parallel_scaling")
    if isinstance(scaling, dict) and scaling.get("scaling") is not None:
        out.append(f"parallel scaling {scaling['scaling']:.2f}x with {scaling.get('processes')} processes")
    load = facts.get("loadavg")
    if isinstance(load, (list, tuple)) and load:
        busy = float(load[0]) > quality.LOAD_PER_CPU * (facts.get("cpus") or 1)
        out.append(f"load {float(load[0]):.2f} on {facts.get('cpus', '?')} CPUs{' (busy)' if busy else ''}")
    return out


def to_json(lines: Sequence[PlatformLine], facts: Mapping[str, Any],
            hosts: Sequence[tuple[str, Mapping[str, Any]]] = ()) -> dict[str, Any]:
    """hosts: (name, facts) of each host of a multi-host run, each described like the one host."""
    doc: dict[str, Any] = {"platforms": [asdict(line) for line in lines], "host": host_notes(facts)}
    if len(hosts) > 1:
        doc["hosts"] = {name: host_notes(f) for name, f in hosts}
    return doc

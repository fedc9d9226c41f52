"""Numbers as people read them: SI prefixes instead of exponents, µs instead of us, each
metric's label ("µs of CPU per I/O") where its declaration has one, times with their zone and
the rounds a run actually measured.

A column of one metric is scaled once, by its largest magnitude, so the values in it stay
comparable at a glance: openssl's 1.873e+09 B/s is 1.873 GB/s.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..notation import UNITS
from ..notation import when as notation_when
from .runinfo import kind_of

SCALABLE = {"B/s": "B/s", "B": "B", "bit/s": "bit/s", "Hz": "Hz", "b/s": "bit/s"}
"""Units an SI prefix goes in front of (k, M, G, T)."""
PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
SPELLED = UNITS


def scale(values: Iterable[float | None], unit: str) -> tuple[float, str]:
    """(divisor, shown unit) for a column of values in `unit`: 1e9 and 'GB/s' for 1.9e9 B/s."""
    if unit == "s":  # start-up times, phases: below a second in ms
        big = max((abs(v) for v in values if v is not None and math.isfinite(v)), default=1.0)
        return (1e-3, "ms") if big < 1 else (1.0, "s")
    if unit in SCALABLE:
        big = max((abs(v) for v in values if v is not None and math.isfinite(v)), default=0.0)
        for factor, prefix in PREFIXES:
            if big >= factor:
                return factor, prefix + SCALABLE[unit]
        return 1.0, SCALABLE[unit]
    return 1.0, SPELLED.get(unit, unit)


def shown(value: float | None, unit: str) -> tuple[float | None, str]:
    """One value in its own scale: (1.873, 'GB/s') of (1.873e9, 'B/s')."""
    factor, text = scale([value], unit)
    return (None if value is None else value / factor), text


def labelled(unit: str, label: str = "") -> str:
    """The unit as a person reads it: the metric's label with the unit put in, else the unit."""
    return label.replace("{unit}", unit) if label else unit


def labels_of(run: Any) -> dict[tuple[str, str], str]:
    """(benchmark key, metric) -> label, from the declarations stored with the run (older runs
    declared none: their units show alone)."""
    return {(b.key, m["name"]): str(m.get("label") or "") for b in run.benchmarks for m in (b.metrics or [])
            if isinstance(m, Mapping)}


def _own_steps(run: Any, rows: Iterable[Any]) -> str | None:
    """The kind of a run that measured in steps of its own, not rounds (density: counts); None otherwise."""
    kind = kind_of(run)
    return kind if kind != "benchmarks" and not any(row.rounds for row in rows) else None


def rounds_measured(run: Any, rows: Iterable[Any]) -> str:
    """What the header says of the repetitions: the rounds actually measured (adaptive rounds
    included), beside what the campaign asked for when that differs."""
    rows = list(rows)
    measured = {r_ for row in rows for r_ in row.rounds}
    asked = run.campaign.get("repetitions")
    if not measured:
        if (kind := _own_steps(run, rows)) is not None:
            return f"a {kind} run, in steps of its own (its section below)"
        return f"{asked} repetitions asked, none measured"
    n = len(measured)
    if not asked or n == asked:
        return f"{n} rounds measured"
    return f"{n} rounds measured ({asked} asked, {n - asked} added to decide)" if n > asked else \
        f"{n} rounds measured (of {asked} asked)"


def round_numbers(campaign: Mapping[str, Any] | None) -> Callable[[int, bool], int]:
    """stored round -> the round a reader sees: the measured rounds 1, 2, 3..., the warm-up
    rounds 0 and below, the adaptive noise check's executions (stored as rounds of their own
    after the warm-up, though they run inside its last round) 0 too. Before, a quick run's
    trend figure drew its three noise-check executions as rounds 1-3 and its warnings named
    the measured rounds 4, 5, 6 of a run that said '3 rounds measured'."""
    warm = int((campaign or {}).get("warmups") or 0)
    noise = int(((campaign or {}).get("adaptive") or {}).get("noise_check") or 0)
    first = warm + noise

    def shown(stored: int, warmup: bool) -> int:
        # one number per stored round outside the warm-up (statistics pair the platforms by it):
        # the noise check's rounds 0 and below, a kind measuring from round 0 keeps its rounds apart
        return min(stored - warm + 1, 0) if warmup and stored < first else stored - first + 1
    return shown


def noise_checked(campaign: Mapping[str, Any] | None) -> bool:
    return bool(((campaign or {}).get("adaptive") or {}).get("noise_check"))


def warmups(run: Any, rows: Iterable[Any]) -> int | None:
    """The campaign's warm-up rounds, where the run measured in rounds; None for a kind in steps
    of its own (density ignores `warmups`, so its header must not claim one)."""
    return None if _own_steps(run, rows) is not None else run.campaign.get("warmups")


def when(t: Any) -> str:
    """A stored time (UTC, naive or aware) with its zone: '2026-11-27 12:58:44 UTC' (notation.when)."""
    return notation_when(t)

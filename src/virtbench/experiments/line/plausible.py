"""Results the physics of a line rules out, flagged so they are measured again, not believed.

Each node of a line forwards every packet once more, so a longer line cannot forward more
packets per second than a shorter one of the same platform and pinning; and a container adds
work to a bare network namespace's forwarding (netns, the baseline), never removes it. A run
on this project's 2-CPU machine still gave a PDR of 225 kpkt/s for 8 nodes against 116 kpkt/s
for 1 node: a neighbour's time slice during the short line's trials, or a search that went
astray. Such a point is flagged when it is faster *beyond the noise* (the rounds' spread of
both points, the search's precision or step, and at least MIN_NOISE), and the run measures it
once more (`line-recheck[...]`, outside the statistics); the report shows both.
"""
from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MIN_NOISE = 0.05
"""Differences below 5 % are never flagged: on a shared 2-CPU host two searches of the same
line differ by that much."""
METRICS = ("ndr_pps", "pdr_pps")
MAX_RECHECKS = 8
"""Re-measurements a run makes at most (each a whole search on a line built again)."""
KEY_RE = re.compile(r"^line\[length=(?P<length>\d+),pinning=(?P<pinning>[a-z]+)\]$")
RECHECK_RE = re.compile(r"^line-recheck\[length=(?P<length>\d+),pinning=(?P<pinning>[a-z]+)\]$")

Point = tuple[str, str, int]
"""(platform, pinning, length)."""


def recheck_key(length: int, pinning: str) -> str:
    return f"line-recheck[length={length},pinning={pinning}]"


@dataclass(frozen=True)
class Suspect:
    point: Point
    metric: str
    value: float
    against: Point
    other: float
    noise: float

    @property
    def why(self) -> str:
        platform, pin, length = self.point
        o_platform, _, o_length = self.against
        than = f"the {o_length}-node line" if o_platform == platform else f"{o_platform} (the baseline)"
        return (f"{platform} {length} node{'' if length == 1 else 's'} (pinning {pin}): {self.metric} {self.value:.0f} pkt/s is "
                f"{100 * (self.value / self.other - 1):.0f} % above {than}'s {self.other:.0f}, beyond the noise "
                f"(+-{100 * self.noise:.0f} %)")

    def public(self) -> dict[str, Any]:
        return {"platform": self.point[0], "pinning": self.point[1], "length": self.point[2], "metric": self.metric,
                "value": self.value, "against": {"platform": self.against[0], "length": self.against[2]},
                "other": self.other, "noise": self.noise, "why": self.why}


def rates(samples: Sequence[Any]) -> dict[Point, dict[str, list[float]]]:
    """Each point's NDR and PDR per round from a run's stored samples (measured rounds only)."""
    out: dict[Point, dict[str, list[float]]] = {}
    for s in samples:
        if (m := KEY_RE.match(s.benchmark)) and s.metric in METRICS and not s.warmup:
            out.setdefault((s.platform, m["pinning"], int(m["length"])), {}).setdefault(s.metric, []).append(s.value)
    return out


def noise_floor(search: Any) -> float:
    """The least relative difference two results of this search can show by its own resolution:
    twice the bisection's precision (each may be off by it); a stepped search's step is added
    per value in `spread` terms by `suspects` (`step_pps`)."""
    if getattr(search, "method", "ndr-pdr") == "steps":
        return MIN_NOISE
    return max(MIN_NOISE, 2 * float(getattr(search, "precision", 0.0)))


def _spread(values: Sequence[float]) -> float:
    """The rounds' relative range (max - min) / median; 0 for a single round."""
    med = statistics.median(values)
    return (max(values) - min(values)) / med if len(values) > 1 and med > 0 else 0.0


def suspects(rates: Mapping[Point, Mapping[str, Sequence[float]]], baseline: str, floor: float = MIN_NOISE,
             step_pps: float = 0.0) -> list[Suspect]:
    """Every point faster than a shorter line of its platform and pinning, or than the baseline at its
    length and pinning, beyond the noise; one Suspect per point and metric (its largest excess)."""
    found: dict[tuple[Point, str], Suspect] = {}

    def compare(point: Point, other: Point, metric: str) -> None:
        mine, theirs = rates[point].get(metric) or [], rates[other].get(metric) or []
        if not mine or not theirs:
            return
        a, b = statistics.median(mine), statistics.median(theirs)
        if b <= 0:
            return
        noise = max(floor, _spread(mine), _spread(theirs), step_pps / b)
        if a > b * (1 + noise):
            s = Suspect(point, metric, a, other, b, noise)
            old = found.get((point, metric))
            if old is None or a / b > old.value / old.other:
                found[(point, metric)] = s

    points = [p for p in rates if p[2] > 0]  # length 0: the generator straight to the sink
    for point in points:
        platform, pin, length = point
        for other in points:
            if other[0] == platform and other[1] == pin and other[2] < length:
                for m in METRICS:
                    compare(point, other, m)
        if platform != baseline and (baseline, pin, length) in rates:
            for m in METRICS:
                compare(point, (baseline, pin, length), m)
    return sorted(found.values(), key=lambda s: (s.point[1], s.point[2], s.point[0], s.metric))


def to_recheck(found: Sequence[Suspect], limit: int = MAX_RECHECKS) -> list[Point]:
    """The points to measure again, each once, the most implausible first, at most `limit`."""
    order = sorted(found, key=lambda s: -s.value / s.other)
    return list(dict.fromkeys(s.point for s in order))[:limit]

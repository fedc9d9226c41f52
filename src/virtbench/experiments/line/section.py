"""The campaign's `line:` section (declared once, unknown keys rejected)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .iperf2 import MAX_PAYLOAD, MIN_PAYLOAD
from .pinning import MODES
from .topology import MAX_LENGTH

MAX_RATE = 1e9
"""Packets per second no generator reaches (a 64 B line rate of 400 Gbit/s is 0.6e9)."""
MAX_LATENCY_RATES = 16


class Search(BaseModel):
    """How the loss-free rate is found (see search.py for both algorithms)."""

    model_config = ConfigDict(extra="forbid")
    method: Literal["ndr-pdr", "steps"] = Field("ndr-pdr", description="ndr-pdr (MLRsearch-like) or steps (the study's)")
    loss: list[float] = Field([0.0, 0.005], min_length=1, max_length=2,
                              description="loss ratios of the goals: NDR (0) and PDR (0.005 = 0.5 %)")
    trial_seconds: float = Field(1.0, gt=0, le=3600, description="ndr-pdr: duration of a search trial")
    final_seconds: float | None = Field(None, gt=0, le=3600,
                                        description="ndr-pdr: duration of each goal's confirming trial (default: trial_seconds)")
    precision: float = Field(0.01, gt=0, lt=1, description="ndr-pdr: stop when (upper - lower) / upper is below this")
    max_trials: int = Field(40, ge=2, le=1000, description="ndr-pdr: cap on trials per point")
    start: float = Field(1000, gt=0, le=MAX_RATE, description="steps: first rate in pkt/s")
    step: float = Field(1000, ge=1, le=MAX_RATE, description="steps: rate increase per step in pkt/s")
    seconds: float = Field(20, gt=0, le=3600, description="steps: duration of each step")
    past_loss: int = Field(0, ge=0, le=1000,
                           description="steps: more steps after every goal failed, to trace the loss curve past the "
                                       "first loss (the paper's Fig. 3); the NDR and PDR found stay the same")

    @field_validator("loss")
    @classmethod
    def _loss(cls, v: list[float]) -> list[float]:
        if any(not 0 <= x < 1 for x in v) or v != sorted(v):
            raise ValueError("give loss ratios from 0 up to below 1, in increasing order, e.g. [0, 0.005]")
        return v


class Worst(BaseModel):
    """The paper's Fig. 8: the N worst latencies over time at one rate (17.3 kpkt/s there)."""

    model_config = ConfigDict(extra="forbid")
    rate: float = Field(17300, gt=1, le=MAX_RATE,
                        description="pkt/s whose latency trial the worst-latency figure draws (the measured rate "
                                    "nearest to it that the line sustained; the paper: 17300)")
    count: int = Field(5000, ge=1, le=100_000, description="how many of the worst latencies (the paper: 5000)")


class LineSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lengths: list[int] = Field([1, 2, 4, 8, 16, 32, 64], min_length=1,
                               description=f"numbers of forwarding nodes between source and sink (1..{MAX_LENGTH})")
    payload: int = Field(64, description=f"UDP payload in bytes ({MIN_PAYLOAD}..{MAX_PAYLOAD})")
    link: Literal["veth"] = Field("veth", description="how nodes are joined: veth pairs node to node")
    pinning: list[str] = Field(["none"], min_length=1, description="none, node, core: where forwarding work runs")
    search: Search = Field(default_factory=Search)
    latency_rates: list[float | Literal["max"]] = Field(
        [0.1, 0.5, 0.9, "max"], max_length=MAX_LATENCY_RATES,
        description="up to 1: fractions of the found NDR ('max' = 1); above: fixed rates in pkt/s")
    latency_seconds: float = Field(5.0, gt=0, le=3600, description="duration of each latency trial")
    counters: bool = Field(True, description="perf stat, softirq and rescheduling interrupt counts during latency "
                                             "trials")
    worst: Worst = Field(default_factory=Worst)

    @field_validator("lengths")
    @classmethod
    def _lengths(cls, v: list[int]) -> list[int]:
        bad = [n for n in v if not 1 <= n <= MAX_LENGTH]
        if bad:
            raise ValueError(f"length {bad[0]} is outside 1..{MAX_LENGTH} (each node decrements the IPv4 TTL, "
                             "which starts at 255); use shorter lines")
        if len(set(v)) != len(v):
            raise ValueError("a length is listed twice")
        return sorted(v)

    @field_validator("payload")
    @classmethod
    def _payload(cls, v: int) -> int:
        if v < MIN_PAYLOAD:
            raise ValueError(f"{v} B is below the {MIN_PAYLOAD} B header iperf 2 puts in every packet (sequence "
                             f"number and send time); use at least {MIN_PAYLOAD} (the study used 64)")
        if v > MAX_PAYLOAD:
            raise ValueError(f"{v} B does not fit one Ethernet frame without fragments; use at most {MAX_PAYLOAD}")
        return v

    @field_validator("pinning")
    @classmethod
    def _pinning(cls, v: list[str]) -> list[str]:
        bad = [m for m in v if m not in MODES]
        if bad:
            raise ValueError(f"unknown pinning mode {bad[0]!r}; known: {', '.join(MODES)}")
        return list(dict.fromkeys(v))

    @field_validator("latency_rates")
    @classmethod
    def _rates(cls, v: list[float | str]) -> list[float | str]:
        if any(not isinstance(r, str) and not 0 < r <= MAX_RATE for r in v):
            raise ValueError(f"rates must be positive: fractions of NDR up to 1 or pkt/s above (at most {MAX_RATE:g})")
        return v

    @model_validator(mode="after")
    def _final(self) -> LineSection:
        if self.search.final_seconds is None:
            self.search.final_seconds = self.search.trial_seconds
        return self


def rate_label(rate: float | str) -> str:
    """`0.5ndr`, `1ndr` ('max'), or `20000pps`: names of latency points in metrics and attachments."""
    if rate == "max":
        return "1ndr"
    assert not isinstance(rate, str)
    return f"{rate:g}ndr" if rate <= 1 else f"{int(rate)}pps"


def fixed_rates(rates: Sequence[float | str]) -> list[float]:
    return [float(r) for r in rates if not isinstance(r, str) and r > 1]

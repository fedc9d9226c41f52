"""The papers' published values, as data with their source (studies/paper/<id>.yaml).

Declared once here (pydantic, unknown keys rejected) so a transcription mistake in a file
fails the unit tests, not a user's report. Kinds:
- relative: the paper's value against its baseline (native, or another point), compared as
  the direction-aware ratio the report computes for the user's runs;
- value: an absolute number on the paper's hardware, shown beside the user's;
- range: Table 7's range over the paper's machines of the best platform of a kind;
- best: Tables 5/6: which runtime or hypervisor wins a category;
- claim: a statement of the text, checked where the user's runs give the numbers.
"""
from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

PAPER_DIR = Path(__file__).parent / "paper"

Capability = Literal["kvm", "second_host", "pmu", "meter"]
Depends = Literal["aes", "virtualized", "memory", "cpus", "storage", "network", "kvm", "quick"]
"""What a difference between the paper and this host is likely due to (compare.REASONS)."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Yours(Strict):
    """Where the user's number comes from: a report row, a section's data, or an aggregate."""

    part: str | None = Field(None, description="the study part whose runs hold it (default: any)")
    benchmark: str | None = None
    params: dict[str, Any] = Field(default_factory=dict, description="parameters the benchmark point must have")
    metric: str | None = None
    platform: str | None = None
    section: str | None = Field(None, description="a report section's key (density, line, migration)")
    where: dict[str, Any] = Field(default_factory=dict, description="the section entry to take")
    field: str | None = Field(None, description="the entry's field; a/b/c walks nested data, a list by an item's value")
    baseline: dict[str, Any] | None = Field(None, description="section entry the value is relative to")
    factor: float = Field(1.0, description="unit conversion to the paper's unit")
    overall: Literal["container", "vm"] | None = Field(None, description="geomean of all rows, best platform of a kind")
    stacks: bool = False


class Expect(Strict):
    near: float | None = None
    tolerance: float = 0.05
    within: float | None = Field(None, description="every matching ratio within 1 +- this")
    below: float | None = Field(None, description="every matching ratio below this")
    above: float | None = Field(None, description="every matching ratio above this (better than the baseline "
                                                  "where it is 1: a ratio is direction-aware)")
    cpu_share: bool = Field(False, description="every ratio near the CPU its VM gets against native: "
                                               "min(threads, vCPUs, host CPUs / VMs at once) / min(threads, host CPUs), "
                                               "within `tolerance` of it (relative)")
    ratio: tuple[float, float | None] | None = Field(None, description="boards: the ratio of a host with AES "
                                                                      "instructions to one without, within [low, high]")


class PaperValue(Strict):
    id: str
    where: str = Field(description="table or figure of the paper")
    section: str = Field(description="section of the paper (the seeds carry no page numbers)")
    kind: Literal["relative", "value", "range", "best", "claim"]
    quantity: str = ""
    unit: str = ""
    higher_is_better: bool = True
    paper: dict[str, Any] = Field(default_factory=dict)
    claim: str = ""
    category: str | None = None
    of: Literal["container", "vm"] | None = None
    yours: Yours | None = None
    expect: Expect | None = None
    needs: Capability | None = None
    depends: tuple[Depends, ...] = ()
    tolerance: float = Field(0.05, description="relative: agreement within this (0.05 = 5 points)")
    paper_aes: bool | None = Field(None, description="AES instructions on the machine of this value, "
                                                     "where it is not the paper's main one (RPi 5 vs 4B)")
    how: str = Field("", description="what would measure it where no preset does (a brought image, another board)")
    judge: Literal["boards", "density-trend", "migration-storage", "owd", "read-over-write", "ping", "spikes",
                   "core-pin", "pin-rate", "pin-latency"] | None = Field(
        None, description="a claim judged by its own rule (studies/claims.py) from the data `yours` points at")

    def label(self) -> str:
        return self.quantity or (f"{self.category} ({self.of})" if self.category else self.id)


class PaperHost(Strict):
    machine: str
    arch: str
    cpus: int
    memory_gib: float
    aes: bool
    virtualized: bool


class CategorySpec(Strict):
    benchmarks: list[str]
    category: str | None = None
    metrics: list[str] | None = None


class PaperValues(Strict):
    study: str
    host: PaperHost
    repetitions: int | None
    """The paper's repetitions per point; None where it states no number ("several")."""
    categories: dict[str, CategorySpec] = Field(default_factory=dict)
    values: list[PaperValue]


def repetitions_text(repetitions: int | None) -> str:
    return f"{repetitions} repetition(s) per point" if repetitions else "repetitions per point not stated"


@cache
def load(study_id: str) -> PaperValues:
    """The study's published values (validated; a broken file fails loudly in the tests)."""
    data = yaml.safe_load((PAPER_DIR / f"{study_id}.yaml").read_text())
    return PaperValues(**data)

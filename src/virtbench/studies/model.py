"""What a study is made of, as data: its parts, the papers' commands and stated settings, and
every deliberate difference of the shipped presets from them.

The catalog (studies/catalog/) fills these for the five studies; registry.py gathers them.
The unit tests hold every paper command against the presets' argv flag by flag
(tests/unit/test_study_commands.py) and every stated setting against the paper-scale preset:
a value that is not the paper's must be named by a Difference of the part (`settings`), an
argv word the preset adds or leaves out by one (`adds`, `drops`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..config import SHIPPED
from ..errors import InputError

SCALES = ("quick", "paper")
Role = Literal["command", "client", "server", "write", "read", "make"]


@dataclass(frozen=True)
class PaperCommand:
    """A tool invocation as the paper printed it. `{param}` stands for a value the preset fills from
    the benchmark's parameter of that name: `given` holds the paper's value of each (absent: the
    paper left it open, as its `$duration`); `<...>` words are what the harness fills in (a server's
    address, a file), mapped in `fills` to the preset's word."""

    where: str
    """The paper's figure or section that prints it (with its line number)."""
    benchmark: str
    argv: tuple[str, ...]
    role: Role = "command"
    """Which of the benchmark's commands it is: its one command, a pair's client or server, or one
    phase of a benchmark that runs several (dd's write and read, build's make)."""
    select: Mapping[str, Any] = field(default_factory=dict)
    """Parameters a preset's benchmark entry must have to be this command (mode: tcp)."""
    given: Mapping[str, Any] = field(default_factory=dict)
    fills: Mapping[str, str] = field(default_factory=dict)
    note: str = ""

    def text(self) -> str:
        """The command as printed, the paper's given values filled in (a list: its values with |),
        what it left open as {param}."""
        def fill(word: str) -> str:
            for k, v in self.given.items():
                shown = "|".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)
                word = word.replace("{" + k + "}", shown)
            return word
        return " ".join(fill(w) for w in self.argv)


@dataclass(frozen=True)
class PaperSetting:
    """Values the paper states in prose (001, 003, 004) or in its set-up section (000's containers),
    held against the paper-scale preset. target: `campaign` (repetitions), `section` (the
    experiment kind's section, keys as dotted paths: search.seconds), `platform:TYPE` (options of
    the platforms of that type) or `benchmark:NAME` (parameters of that benchmark's entries; a
    list is the set of values its entries take, a sweep)."""

    where: str
    target: str
    values: Mapping[str, Any]
    select: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""

    def keys(self) -> list[str]:
        return [f"{self.target}.{k}" for k in self.values]


@dataclass(frozen=True)
class Difference:
    """A deliberate difference between the paper's set-up and the part's presets: shown in `study
    show`, in `study report` beside the values it affects and in its JSON, with why and what it
    is expected to do to the results."""

    what: str
    why: str
    effect: str = ""
    """What it is expected to do to the results (empty: nothing measurable)."""
    affects: tuple[str, ...] = ()
    """Ids of the paper values (studies/paper/<id>.yaml) whose comparison it bears on."""
    adds: tuple[str, ...] = ()
    """argv words (an option with its value as one string: "-p 5201") the presets add to the paper's."""
    drops: tuple[str, ...] = ()
    """argv words of the paper's command the presets leave out ("-f m")."""
    settings: tuple[str, ...] = ()
    """Keys of PaperSettings (`target.key`) or `benchmark.param` of a command's `{param}` whose
    paper value the presets do not use."""
    scales: tuple[str, ...] = SCALES
    one_host: bool = False
    """Only while the part ran on this host alone: not listed for a run that used a second host
    (`study run --hosts NAME`), which did as the paper did."""
    hosts_only: bool = False
    """Only in a run across hosts (`--hosts NAME`): what running that part across two hosts changes."""
    option: str = ""
    """The `study run --option NAME` that removes it (not listed for a run made with it)."""
    handled_by: str = ""
    """Another issue that removes it (e.g. '#38'): said with it."""

    def line(self) -> str:
        """One sentence: what, why, the expected effect and what removes it."""
        out = f"{self.what} ({self.why}"
        if self.effect:
            out += f"; expected effect: {self.effect}"
        if self.option:
            out += f"; `--option {self.option}` runs it as the paper did"
        elif self.one_host:
            out += "; `--hosts NAME` runs it as the paper did"
        if self.handled_by:
            out += f"; handled by {self.handled_by}"
        return out + ")"

    def as_json(self, part: str) -> dict[str, Any]:
        removed = f"--option {self.option}" if self.option else "--hosts NAME" if self.one_host else None
        return {"part": part, "what": self.what, "why": self.why, "effect": self.effect or None,
                "scales": list(self.scales), "only_with_hosts": self.hosts_only, "removed_by": removed,
                "handled_by": self.handled_by or None}


@dataclass(frozen=True)
class Option:
    """A way to run a part closer to the paper than its preset does by default (`study run --option
    NAME`), with what it needs; studies/options.py applies it to the campaign."""

    name: str
    help: str


@dataclass(frozen=True)
class Part:
    name: str
    title: str
    """What the part measures, with the paper's figure or table it reproduces."""
    variants: tuple[str, ...] = ("",)
    """Campaign files of the part: one per variant (e.g. host RAM sizes), each one run."""
    needs: tuple[str, ...] = ()
    """Capabilities without which the part cannot run (capabilities.CHECKS names)."""
    degrades: tuple[str, ...] = ()
    """Capabilities without which the part runs but lacks a measurement."""
    differs: str = ""
    """How the part differs from the paper here, in one line (the differences say it in full)."""
    commands: tuple[PaperCommand, ...] = ()
    """The paper's printed commands of the part's workload."""
    settings: tuple[PaperSetting, ...] = ()
    """What the paper states in prose about the part's set-up."""
    differences: tuple[Difference, ...] = ()
    """Every deliberate difference of the presets from the paper's commands and set-up."""
    options: tuple[str, ...] = ()
    """Names of the Options this part takes."""
    hosts: str = ""
    """What a second host does for this part (`--hosts NAME`), where it uses one."""
    size_to_host: tuple[str, ...] = ()
    """VM platforms the paper-scale plan sizes to this host (every CPU, most of the memory)."""
    duration: Mapping[str, str] = field(default_factory=dict)
    """About how long each scale takes on a 2-core host: estimates (`study show` adds the presets' own
    --dry-run estimate for benchmark parts; `study run` prints the time each part took)."""

    @property
    def command(self) -> PaperCommand | None:
        """The first printed command (the openssl command of 000's density parts)."""
        return self.commands[0] if self.commands else None

    def campaign_stems(self, study: str, scale: str) -> list[str]:
        return [f"study{study}-{self.name}{'-' + v if v else ''}-{scale}" for v in self.variants]


@dataclass(frozen=True)
class Study:
    id: str
    title: str
    measures: str
    seed: str
    """Seed file name prefix (`seeds/<id>_*.txt`)."""
    parts: tuple[Part, ...] = field(default_factory=tuple)

    def part(self, name: str) -> Part:
        for p in self.parts:
            if p.name == name:
                return p
        raise InputError(f"study {self.id} has no part {name!r}",
                         f"use one of {', '.join(p.name for p in self.parts)} (`virtbench study list`)")

    def campaign_files(self, scale: str) -> list[Path]:
        return [SHIPPED / f"{stem}.yaml" for p in self.parts for stem in p.campaign_stems(self.id, scale)]

"""Platform and benchmark entries as a campaign lists them, each validated by its plugin's model.

A benchmark entry with a `sweep` becomes the cartesian product of its lists; the number of
points is the product of the lists' lengths, computed before any point is built, so a
campaign of a few hundred bytes cannot make the process allocate the product (a six-list
sweep of 40 values is four billion points) before it is refused.
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..benchmarks.base import PairBenchmark
from ..images.guest import PlatformImage
from ..registry import BENCHMARKS, PLATFORMS, hint
from .messages import first_error

NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
MAX_POINTS = 1000
"""Benchmark points (entries and their sweeps' products) in one campaign."""
MAX_SWEEP_POINTS = MAX_POINTS
MAX_INSTANCES = 256


class PlatformEntry(BaseModel):
    """A platform as declared: its unique name, its type, and its validated options."""

    model_config = ConfigDict(frozen=True)
    name: str
    type: str
    options: dict[str, Any] = Field(default_factory=dict)
    inside: str | None = None
    """Name of the platform (a VM) whose instances this one runs in: a stack."""
    image: dict[str, Any] | None = None
    """The platform's own guest image (images.guest.PlatformImage), else the campaign's."""


def check_name(name: str) -> str:
    """A name that goes into instance names, paths and argv: letters, digits, . _ - (not first)."""
    if not re.fullmatch(NAME_RE, name):
        raise ValueError(f"{name!r} is not a valid name (letters, digits, . _ -, starting with a letter or "
                         "digit; at most 63)")
    return name


def _as_mapping(value: Any, where: str, expected: str) -> dict[str, Any]:
    """A plain name is short for {name: ...}; anything else must be a mapping with a name."""
    if isinstance(value, str):
        value = {"name": value}
    if not isinstance(value, dict) or "name" not in value:
        raise ValueError(f"{where}: give {expected}")
    return dict(value)


def _platform_entry(index: int, value: Any, node_types: tuple[str, ...] = ()) -> PlatformEntry:
    where = f"platforms[{index}]"
    value = _as_mapping(value, where, "a platform type name or a mapping with 'name' (and 'type')")
    if isinstance(value.get("options"), dict) and set(value) <= {"name", "type", "options", "inside", "image"}:
        value = {**value.pop("options"), **value}  # the stored (canonical) form of a run
    name = str(value.pop("name"))
    inside = value.pop("inside", None)
    image = value.pop("image", None)
    if image is not None:
        try:
            image = PlatformImage.model_validate(image) if isinstance(image, dict) else PlatformImage(release=str(image))
        except ValidationError as exc:
            raise ValueError(first_error(exc, f"{where}.image", PlatformImage).replace(
                f"{where}.image: image", f"{where}.image")) from None
    if inside is not None and not isinstance(inside, str):
        raise ValueError(f"{where}.inside: give the name of the platform this one runs inside")
    try:
        check_name(name)
    except ValueError as exc:
        raise ValueError(f"{where}.name: {exc}") from None
    ptype = str(value.pop("type", name))
    if ptype in node_types:  # a node the experiment kind builds itself (e.g. a bare netns): no options
        if value or inside is not None:
            raise ValueError(f"{where}: {ptype} takes no options")
        return PlatformEntry(name=name, type=ptype)
    if ptype not in PLATFORMS.names():
        known = [*node_types, *PLATFORMS.names()]
        raise ValueError(f"{where}.type: unknown platform type {ptype!r}; {hint(ptype, known)}")
    options_model = PLATFORMS.get(ptype).Options
    for key, why in (("disk", "a root filesystem size"), ("swap", "a memory+swap limit")):
        if key in value and key not in options_model.model_fields:
            raise ValueError(f"{where}.{key}: {ptype} cannot enforce {why} here; {key} is an option of lxc "
                             "(an ext4 image per container / memsw)")
    try:
        options = options_model.model_validate(value)
    except ValidationError as exc:
        raise ValueError(first_error(exc, where, options_model)) from None
    return PlatformEntry(name=name, type=ptype, options=options.model_dump(mode="json", exclude_unset=True),
                         inside=inside, image=image.model_dump(exclude_none=True) if image else None)


@dataclass(frozen=True)
class _Point:
    name: str
    params: dict[str, Any]
    sweep: tuple[str, ...] = ()
    key: str | None = None
    instances: int | None = None
    """Given only in the stored form of a run, whose keys must not change on resume."""


def _benchmark_points(index: int, value: Any, full: bool = False, room: int = MAX_POINTS) -> list[_Point]:
    """One benchmark entry -> its points: one, or the cartesian product of its `sweep` lists.
    room: how many points the campaign has left; more is refused before any point is built."""
    where = f"benchmarks[{index}]"
    value = _as_mapping(value, where, "a benchmark name or a mapping with 'name' and its parameters")
    stored: dict[str, Any] = {}
    if isinstance(value.get("params"), dict) and "key" in value and \
            set(value) <= {"key", "name", "params", "sweep", "instances"}:
        stored = {"key": str(value["key"]), "sweep": tuple(value.get("sweep") or ())}
        value = {"name": value["name"], **value["params"],
                 **({"instances": value["instances"]} if value.get("instances") is not None else {})}
    name = str(value.pop("name"))
    if name not in BENCHMARKS.names():
        raise ValueError(f"{where}.name: unknown benchmark {name!r}; {hint(name, BENCHMARKS.names())}")
    sweep = value.pop("sweep", None) or {}
    if not isinstance(sweep, dict) or not all(isinstance(v, list) and v for v in sweep.values()):
        raise ValueError(f"{where}.sweep: give a mapping of parameter -> non-empty list of values, "
                         "e.g. sweep: {threads: [1, 2, 4]}")
    both = set(sweep) & set(value)
    if both:
        raise ValueError(f"{where}.sweep: {sorted(both)[0]!r} is both fixed and swept; keep one")
    count = math.prod(len(v) for v in sweep.values())
    if count > room:
        what = f"{where}.sweep: {' x '.join(str(len(v)) for v in sweep.values())} = {count} points" if sweep else where
        raise ValueError(f"{what}: more than {MAX_POINTS} benchmark points in a campaign"
                         + (" with the entries before it" if room < MAX_POINTS else "")
                         + "; sweep fewer values or split the campaign")
    combos = itertools.product(*sweep.values()) if sweep else iter([()])
    cls = BENCHMARKS.get(name)
    params_model = cls.Params
    if full and not stored:  # the study's values, under what the campaign sets itself
        value = {**{k: v for k, v in cls.study.items() if k not in sweep}, **value}
    points = []
    for combo in combos:
        params = {**value, **dict(zip(sweep, combo))}
        instances = params.pop("instances", None)
        if instances is not None:
            if isinstance(instances, bool) or not isinstance(instances, int) or not 1 <= instances <= MAX_INSTANCES:
                raise ValueError(f"{where}.instances: give a whole number from 1 to {MAX_INSTANCES} "
                                 "(or sweep it: sweep: {instances: [1, 2, 4]})")
            if issubclass(cls, PairBenchmark):
                raise ValueError(f"{where}.instances: {name} is a client-server benchmark; "
                                 "several instances at once are supported for single-instance benchmarks")
        try:
            params_model.model_validate(params)
        except ValidationError as exc:
            raise ValueError(first_error(exc, where, params_model)) from None
        points.append(_Point(name, params, tuple(sweep), instances=instances))
    if stored:
        return [_Point(name, points[0].params, instances=points[0].instances, **stored)]
    return points


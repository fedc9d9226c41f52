"""The schedule form: the same mapping a YAML campaign file holds, built from form fields.

Every field comes from the models themselves (platform options, benchmark parameters, the
experiment kinds' sections, the adaptive rule, the probes), so a new field shows up in the form
without an edit here; campaigns.from_mapping then validates it exactly as the CLI does a file.
"""
from __future__ import annotations

import re
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from ..config import Adaptive, Campaign, load_yaml
from ..errors import InputError
from ..experiments.registry import DEFAULT as DEFAULT_EXPERIMENT
from ..experiments.registry import EXPERIMENTS
from ..images.build import RELEASES
from ..images.profiles import PROFILES
from ..platforms.sizes import is_size, parse_size, size_words
from ..registry import BENCHMARKS, PLATFORMS, PROBES
from .campaigns import FORM_SOURCE, check_yaml_shape, from_mapping, plugin_fields

SECTION_RE = re.compile(r"^x\.([a-z][a-z0-9_-]{0,31})\.([A-Za-z_][A-Za-z0-9_]{0,63})$")
ADAPTIVE_RE = re.compile(r"^adaptive\.([a-z_]{1,32})$")
PROBE_RE = re.compile(r"^probe\.([a-z][a-z0-9_-]{0,31})$")
ROW_RE = re.compile(r"^(p|b)(\d{1,3})\.(use|name|type|opt|param)(?:\.([A-Za-z_][A-Za-z0-9_]{0,63}))?$")


def field_kind(annotation: Any) -> tuple[str, list[str]]:
    """('select', choices) for Literal and bool fields, ('list', choices) for list/tuple fields
    (typed comma-separated, also when optional: `tuple[...] | None`), ('text', []) otherwise."""
    args = typing.get_args(annotation)
    inner = [a for a in args if a is not type(None)]
    if type(None) in args and len(inner) == 1:
        return field_kind(inner[0])
    if typing.get_origin(annotation) in (list, tuple, set, frozenset):
        inner = [a for a in args if typing.get_origin(a) is typing.Literal]
        return "list", [str(v) for v in typing.get_args(inner[0])] if inner else []
    if typing.get_origin(annotation) is typing.Literal:
        return "select", [str(a) for a in args]
    literals = [a for a in args if typing.get_origin(a) is typing.Literal]
    if literals:
        return "select", [str(v) for v in typing.get_args(literals[0])]
    if annotation is bool:
        return "select", ["true", "false"]
    return "text", []


def fields_of(model: type[BaseModel]) -> list[dict[str, Any]]:
    out = []
    for name, f in model.model_fields.items():
        kind, choices = field_kind(f.annotation)
        if f.is_required():
            default: Any = ""
        elif f.default_factory is not None:
            made = f.get_default(call_default_factory=True)
            default = made.model_dump(mode="json") if isinstance(made, BaseModel) else made
            default = yaml.safe_dump(default, default_flow_style=True, width=10**6).strip() if default else ""
        else:
            default = f.default if f.default is not None and not callable(f.default) else ""
        if is_size(f) and isinstance(default, int) and not isinstance(default, bool):
            default = size_words(default)  # 1 GiB, not 1073741824 (typed back the same way)
        if isinstance(default, bool):
            default = str(default).lower()
        elif isinstance(default, (list, tuple, set, frozenset)):
            default = ", ".join(str(v) for v in default)
        out.append({"name": name, "kind": kind, "choices": choices, "default": str(default),
                    "description": f.description or "", "required": f.is_required()})
    return out


def catalog() -> dict[str, Any]:
    """Every platform type with its options and every benchmark with its parameters (the form's rows)."""
    platforms = [{"type": name, "kind": cls.kind, "description": cls.description,
                  "options": [o for o in fields_of(cls.Options)]} for name, cls in PLATFORMS.items()]
    benchmarks = []
    for name, cls in BENCHMARKS.items():
        try:
            metrics = [{"name": m.name, "unit": m.unit, "higher_is_better": m.higher_is_better,
                        "category": m.category} for m in cls(cls.Params()).metrics()]
        except Exception:  # noqa: BLE001 - a plugin whose defaults cannot build metrics still lists
            metrics = []
        benchmarks.append({"name": name, "tool": cls.tool, "description": cls.description,
                           "params": fields_of(cls.Params), "metrics": metrics})
    experiments = [{"name": name, "description": cls.description, "uses_benchmarks": cls.uses_benchmarks,
                    "baseline": cls.default_baseline, "fields": fields_of(cls.Section) if cls.Section else []}
                   for name, cls in EXPERIMENTS.items()]
    return {"platforms": platforms, "benchmarks": benchmarks, "experiments": experiments,
            "adaptive": fields_of(Adaptive), "probes": [{"name": n, "description": c.description}
                                                        for n, c in PROBES.items()],
            "profiles": field_kind(Campaign.model_fields["profile"].annotation)[1],
            "image_profiles": ["auto", *PROFILES], "releases": list(RELEASES)}


def default_form() -> dict[str, Any]:
    """What the empty form shows: one row per platform type (native ticked), one per benchmark."""
    cat = catalog()
    return {"name": "", "description": "", "baseline": "", "repetitions": "5", "warmups": "1", "seed": "",
            "shuffle": True, "profile": "auto", "target_host": "", "experiment": DEFAULT_EXPERIMENT, "hosts": "",
            "bench_profile": "quick", "release": "", "parallel": True, "probes": [], "adaptive": {"use": False},
            "section": {e["name"]: {} for e in cat["experiments"]},
            "platforms": [{"use": p["type"] == "native", "name": p["type"], "type": p["type"], "opt": {}}
                          for p in cat["platforms"]],
            "benchmarks": [{"use": False, "name": b["name"], "param": {}} for b in cat["benchmarks"]]}


def quick_form(availability: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The quick comparison (`virtbench run --quick`) as the form: its benchmarks, rounds and
    adaptive rule, its platforms ticked where a worker's probe found them available (native
    always), and its KVM guest as a qemu row to tick where KVM runs guests."""
    from ..experiments.benchmarks.quick import ADAPTIVE, KVM_GUEST, QUICK_BENCHMARKS, REPETITIONS, WARMUPS, quick_platforms

    model = default_form()
    model.update(name="quick", baseline="native", repetitions=str(REPETITIONS), warmups=str(WARMUPS),
                 adaptive={"use": True, **{k: _text(v) for k, v in ADAPTIVE.items()}})
    tried = quick_platforms()
    for row in model["platforms"]:
        if row["type"] in tried:
            found = availability.get(row["type"], {}).values()
            row["use"] = row["type"] == "native" or any(v.get("available") for v in found)
        elif row["type"] == KVM_GUEST["type"]:
            row["name"] = KVM_GUEST["name"]
            row["opt"] = {k: size_words(parse_size(v)) if k == "memory" else _text(v)
                          for k, v in KVM_GUEST.items() if k not in ("name", "type")}
    order = [b["name"] for b in QUICK_BENCHMARKS]
    model["benchmarks"].sort(key=lambda row: order.index(row["name"]) if row["name"] in order else len(order))
    for row in model["benchmarks"]:
        given = next((b for b in QUICK_BENCHMARKS if b["name"] == row["name"]), None)
        if given:
            row["use"], row["param"] = True, {k: _text(v) for k, v in given.items() if k != "name"}
    return model


def _text(value: Any) -> str:
    """A campaign value as the form shows it: lists comma-separated, booleans lower-case."""
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def parse_form(form: Mapping[str, str]) -> dict[str, Any]:
    """The submitted form as the form model (values as typed, so a refused form is shown again)."""
    model: dict[str, Any] = {k: str(form.get(k, "")).strip() for k in ("name", "description", "baseline", "repetitions",
                                                       "warmups", "seed", "profile", "target_host", "hosts",
                                                       "bench_profile", "release")}
    model["experiment"] = str(form.get("experiment", "") or DEFAULT_EXPERIMENT).strip()
    model["shuffle"] = form.get("shuffle") in ("on", "true", "1")
    model["parallel"] = form.get("sequential") not in ("on", "true", "1")  # unticked: the file's default
    model["adaptive"] = {"use": form.get("adaptive.use") in ("on", "true", "1")}
    model["probes"] = []
    model["section"] = {name: {} for name in EXPERIMENTS.names()}
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for key, value in form.items():
        a, probe = ADAPTIVE_RE.match(key), PROBE_RE.match(key)
        if a and a.group(1) != "use":
            model["adaptive"][a.group(1)] = str(value).strip()
            continue
        if probe and value in ("on", "true", "1"):
            model["probes"].append(probe.group(1))
            continue
        x = SECTION_RE.match(key)
        if x and x.group(1) in model["section"]:
            model["section"][x.group(1)][x.group(2)] = str(value).strip()
            continue
        m = ROW_RE.match(key)
        if not m:
            continue
        kind, idx, part, sub = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        row = rows.setdefault((kind, idx), {"use": False, "name": "", "type": "", "opt": {}, "param": {}})
        value = str(value).strip()
        if part == "use":
            row["use"] = value in ("on", "true", "1")
        elif part in ("opt", "param") and sub:
            row[part][sub] = value
        elif part in ("name", "type"):
            row[part] = value
    model["platforms"] = [rows[k] for k in sorted(rows) if k[0] == "p"]
    model["benchmarks"] = [rows[k] for k in sorted(rows) if k[0] == "b"]
    return model


def to_mapping(model: dict[str, Any]) -> dict[str, Any]:
    """The form model as the campaign mapping a YAML file would hold (empty fields left out)."""
    data: dict[str, Any] = {"name": model["name"]}
    if model.get("description"):
        data["description"] = model["description"]
    kind = model.get("experiment") or DEFAULT_EXPERIMENT
    if kind != DEFAULT_EXPERIMENT:
        data["experiment"] = kind
    if model.get("baseline"):  # empty: the kind's default (native; netns for a line)
        data["baseline"] = model["baseline"]
    for key in ("repetitions", "warmups", "seed"):
        if model.get(key) not in (None, ""):
            data[key] = _scalar(model[key])
    data["shuffle"] = bool(model.get("shuffle"))
    image = {k: model[f] for k, f in (("profile", "profile"), ("release", "release"))
             if model.get(f) and model[f] != "auto"}
    if image:
        data["image"] = image
    adaptive = model.get("adaptive") or {}
    if adaptive.get("use"):
        data["adaptive"] = {k: _scalar(v) for k, v in adaptive.items() if k != "use" and v != ""}
    if model.get("bench_profile"):
        data["profile"] = model["bench_profile"]
    data["platforms"] = []
    for row in model["platforms"]:
        if row.get("use"):
            pentry: dict[str, Any] = {"name": row.get("name") or row.get("type"), "type": row.get("type") or row.get("name")}
            fields = _model_fields(PLATFORMS, pentry["type"], "Options")
            pentry.update({k: _value(v, fields.get(k)) for k, v in row.get("opt", {}).items() if v != ""})
            data["platforms"].append(pentry)
    data["benchmarks"] = []
    for row in model["benchmarks"]:
        if row.get("use"):
            fields = _model_fields(BENCHMARKS, row.get("name", ""), "Params")
            entry: dict[str, Any] = {"name": row.get("name")}
            for k, v in row.get("param", {}).items():
                if v == "":
                    continue
                if "," in v and not _is_list(fields.get(k)):  # "1, 2, 4" in a one-value field: a sweep
                    entry.setdefault("sweep", {})[k] = _values(v)
                else:
                    entry[k] = _value(v, fields.get(k))
            data["benchmarks"].append(entry)
    if not data["benchmarks"] and kind != DEFAULT_EXPERIMENT:
        del data["benchmarks"]  # the other kinds take no list (a ticked row is kept: config says so)
    section = _section(kind, model.get("section", {}).get(kind, {}))
    if section:
        data[kind] = section
    if model.get("probes"):
        data["probes"] = list(model["probes"])
    if model.get("hosts"):
        data["hosts"] = _hosts(model["hosts"])
        if not model.get("parallel", True):
            data["parallel"] = False
    return data


def _section(kind: str, values: Mapping[str, str]) -> dict[str, Any]:
    """The kind's section from its fields: a list field comma-separated, a mapping or list in
    YAML flow style (`{name: openssl, seconds: 5}`, `{until: failure, max: 64}`)."""
    try:
        fields = {k: f.annotation for k, f in (EXPERIMENTS.get(kind).Section or BaseModel).model_fields.items()}
    except InputError:
        return {}  # an unknown kind: parse_campaign names it
    out: dict[str, Any] = {}
    for key, text in values.items():
        if text == "":
            continue
        if text[:1] in "[{":
            out[key] = _flow(text, f"{kind}.{key}")
        elif "," in text and not _is_list(fields.get(key)):
            out[key] = _values(text)
        else:
            out[key] = _value(text, fields.get(key))
    return out


def _flow(text: str, where: str) -> Any:
    """One value in YAML flow style, checked like an upload (no aliases, small)."""
    source = f"{FORM_SOURCE}: {where}"
    check_yaml_shape(text, source, 4096, aliases=False)
    return load_yaml(text, source)


def _hosts(text: str) -> Any:
    """`a, b` (host names), or YAML: a list of entries or `{inventory: PATH, group: NAME}`."""
    if text[:1] in "[{" or "\n" in text or text.lstrip().startswith("-"):
        return _flow(text, "hosts")
    return [part.strip() for part in text.split(",") if part.strip()]


def _is_list(annotation: Any) -> bool:
    return annotation is not None and field_kind(annotation)[0] == "list"


def _model_fields(registry: Any, name: str, attr: str) -> dict[str, Any]:
    """Field annotations of a plugin's options or parameters."""
    return {k: f.annotation for k, f in plugin_fields(registry, name, attr).items()}


def _value(text: str, annotation: Any) -> Any:
    return _values(text) if _is_list(annotation) else _scalar(text)


def _values(text: str) -> list[Any]:
    """'1, 2,4' -> [1, 2, 4]: a list field's items, or a sweep's points."""
    return [_scalar(part.strip()) for part in text.split(",") if part.strip()]


def _scalar(text: str) -> Any:
    """'2' -> 2, '1.5' -> 1.5, 'true' -> True, else the text: what YAML would make of it."""
    if re.fullmatch(r"[+-]?\d{1,18}", text):
        return int(text)
    if re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?", text):
        return float(text)
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def from_form(model: dict[str, Any], allowed: Sequence[Path] = (), allow_meter: bool = False) -> tuple[Campaign, str]:
    data = to_mapping(model)
    campaign = from_mapping(data, FORM_SOURCE, allowed, allow_meter)
    return campaign, yaml.safe_dump(data, sort_keys=False)

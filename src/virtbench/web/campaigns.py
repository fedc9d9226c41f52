"""Campaigns from the schedule form or an upload, validated exactly as the CLI validates files.

The form becomes the same mapping a YAML file holds and goes through config.parse_campaign,
so every message is the CLI's (`<source>: <field>: <what>`, with its fix). Uploaded YAML
is checked before it is parsed: size, nesting depth, node count, and no aliases (a few
hundred bytes of anchors can expand into gigabytes: the "billion laughs"). Then
config.load_yaml (yaml.safe_load: no Python objects) parses it with the CLI's messages.
"""
from __future__ import annotations

import itertools
import re
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from ..config import Campaign, load_yaml, parse_campaign
from ..errors import InputError
from ..experiments.registry import DEFAULT as DEFAULT_EXPERIMENT
from ..experiments.registry import EXPERIMENTS
from ..platforms.base import is_size, size_words
from ..registry import BENCHMARKS, PLATFORMS
from ..runner.execute import enqueue
from ..runner.probing import require_consent
from ..store.db import Store
from . import hostpaths

MAX_DEPTH = 12
MAX_NODES = 5000
FORM_SOURCE = "campaign form"
SECTION_RE = re.compile(r"^x\.([a-z][a-z0-9_-]{0,31})\.([A-Za-z_][A-Za-z0-9_]{0,63})$")
ROW_RE = re.compile(r"^(p|b)(\d{1,3})\.(use|name|type|opt|param)(?:\.([A-Za-z_][A-Za-z0-9_]{0,63}))?$")


def _line(event: yaml.Event) -> str:
    return str(event.start_mark.line + 1) if event.start_mark else "?"


def check_yaml_shape(text: str, source: str, limit: int) -> None:
    """Refuse what could exhaust memory or CPU before anything builds Python objects from it."""
    if len(text.encode("utf-8", "surrogatepass")) > limit:
        raise InputError(f"{source}: larger than {limit} bytes; not a campaign file",
                         "a campaign is a few hundred bytes; check you uploaded the right file")
    depth = nodes = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise InputError(f"{source}: line {_line(event)}: YAML aliases (*{event.anchor}) "
                                 "are not accepted here", "write the repeated values out")
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise InputError(f"{source}: line {_line(event)}: nested deeper than "
                                     f"{MAX_DEPTH} levels; not a campaign")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            if isinstance(event, yaml.NodeEvent):
                nodes += 1
                if nodes > MAX_NODES:
                    raise InputError(f"{source}: more than {MAX_NODES} values; not a campaign")
    except yaml.YAMLError:
        pass  # load_yaml below reports it with the CLI's own message


def from_yaml(text: str, source: str, limit: int, allowed: Sequence[Path] = (),
              allow_meter: bool = False) -> tuple[Campaign, str]:
    """(campaign, the text as given) or one InputError line."""
    check_yaml_shape(text, source, limit)
    return from_mapping(load_yaml(text, source), source, allowed, allow_meter), text


def from_mapping(data: Any, source: str, allowed: Sequence[Path] = (), allow_meter: bool = False) -> Campaign:
    """The campaign of a request: the host paths it names checked before it is parsed (parsing
    reads an inventory, see hostpaths), then exactly what the CLI does with a file; a meter
    command only where the server was started with --allow-meter (its worker refuses it too)."""
    hostpaths.check(data, allowed, source)
    campaign = parse_campaign(data, source)
    require_consent(campaign, allow_meter)
    return campaign


def decode_upload(data: bytes, source: str, limit: int) -> str:
    if len(data) > limit:
        raise InputError(f"{source}: larger than {limit} bytes; not a campaign file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: not UTF-8 text (byte {exc.start})", "upload the YAML campaign file") from None


def safe_source_name(filename: str | None) -> str:
    """The upload's base name, for messages only (never a path we open)."""
    name = (filename or "upload.yaml").replace("\\", "/").rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)[:80] or "upload.yaml"


# -- the form -------------------------------------------------------------------------------------
def field_kind(annotation: Any) -> tuple[str, list[str]]:
    """('select', choices) for Literal and bool fields, ('list', choices) for list/tuple fields
    (typed comma-separated), ('text', []) otherwise."""
    args = typing.get_args(annotation)
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
    return {"platforms": platforms, "benchmarks": benchmarks, "experiments": experiments}


def default_form() -> dict[str, Any]:
    """What the empty form shows: one row per platform type (native ticked), one per benchmark."""
    cat = catalog()
    return {"name": "", "description": "", "baseline": "", "repetitions": "5", "warmups": "1", "seed": "",
            "shuffle": True, "profile": "auto", "target_host": "", "experiment": DEFAULT_EXPERIMENT, "hosts": "",
            "section": {e["name"]: {} for e in cat["experiments"]},
            "platforms": [{"use": p["type"] == "native", "name": p["type"], "type": p["type"], "opt": {}}
                          for p in cat["platforms"]],
            "benchmarks": [{"use": False, "name": b["name"], "param": {}} for b in cat["benchmarks"]]}


def parse_form(form: Mapping[str, str]) -> dict[str, Any]:
    """The submitted form as the form model (values as typed, so a refused form is shown again)."""
    model: dict[str, Any] = {k: str(form.get(k, "")).strip() for k in ("name", "description", "baseline", "repetitions",
                                                       "warmups", "seed", "profile", "target_host", "hosts")}
    model["experiment"] = str(form.get("experiment", "") or DEFAULT_EXPERIMENT).strip()
    model["shuffle"] = form.get("shuffle") in ("on", "true", "1")
    model["section"] = {name: {} for name in EXPERIMENTS.names()}
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for key, value in form.items():
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
    if model.get("profile") and model["profile"] != "auto":
        data["image"] = {"profile": model["profile"]}
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
    if model.get("hosts"):
        data["hosts"] = _hosts(model["hosts"])
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
    check_yaml_shape(text, source, 4096)
    return load_yaml(text, source)


def _hosts(text: str) -> Any:
    """`a, b` (host names), or YAML: a list of entries or `{inventory: PATH, group: NAME}`."""
    if text[:1] in "[{" or "\n" in text or text.lstrip().startswith("-"):
        return _flow(text, "hosts")
    return [part.strip() for part in text.split(",") if part.strip()]


def _is_list(annotation: Any) -> bool:
    return annotation is not None and field_kind(annotation)[0] == "list"


def _model_fields(registry: Any, name: str, attr: str) -> dict[str, Any]:
    """Field annotations of a plugin's options or parameters ({} for an unknown plugin: parse_campaign says so)."""
    try:
        return {k: f.annotation for k, f in getattr(registry.get(name), attr).model_fields.items()}
    except InputError:
        return {}


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


# -- a stored run's campaign as a file -----------------------------------------------------------
def campaign_yaml(run: Any) -> str:
    """The run's campaign as YAML a user can save and run: the text it was scheduled with, else
    (a quick run) its stored campaign in the file's own form (file_form)."""
    if run.campaign_source and run.campaign_source.strip():
        return str(run.campaign_source)
    return yaml.safe_dump(file_form(run.campaign or {}), sort_keys=False, allow_unicode=True, width=100)


def file_form(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A stored campaign (Campaign.model_dump) as a campaign file writes it: platform options
    beside the name with sizes in binary units (1 GiB), benchmark parameters beside the name,
    defaults and empty values left out. parse_campaign reads it back to the same campaign."""
    defaults = {"description": "", "seed": None, "shuffle": True, "probes": [], "settings": {}, "hosts": [],
                "parallel": True, "experiment": DEFAULT_EXPERIMENT}
    out: dict[str, Any] = {}
    for key, value in stored.items():
        if key in defaults and value == defaults[key]:
            continue
        if key == "image":
            value = {k: v for k, v in (value or {}).items() if v not in ("auto", "bookworm", [], None)}
            if not value:
                continue
        elif key == "platforms":
            value = [_platform_form(p) for p in value]
        elif key == "benchmarks":
            value = _benchmarks_form(value)
        elif key == "settings":
            key = str(stored.get("experiment", DEFAULT_EXPERIMENT))  # the kind's section under its name
        out[key] = value
    return out


def _platform_form(p: Mapping[str, Any]) -> Any:
    if not isinstance(p, Mapping) or not isinstance(p.get("options"), Mapping):
        return p
    fields = _fields(PLATFORMS, str(p.get("type")), "Options")
    entry: dict[str, Any] = {"name": p["name"]}
    if p.get("type") != p["name"]:
        entry["type"] = p.get("type")
    for k, v in p["options"].items():
        entry[k] = size_words(v) if isinstance(v, int) and k in fields and is_size(fields[k]) else v
    entry.update({k: p[k] for k in ("inside", "image") if p.get(k) is not None})
    return entry if len(entry) > 1 or entry["name"] != p.get("type") else p["name"]


def _benchmarks_form(entries: Sequence[Any]) -> list[Any]:
    """Parameters beside the name; the points of one sweep (consecutive, the same swept names)
    back into one entry with its `sweep:` lists, which parse_campaign expands to the same points
    and keys (a variant's key is derived from its parameters again)."""
    out: list[Any] = []
    i = 0
    while i < len(entries):
        b = entries[i]
        if not isinstance(b, Mapping) or not isinstance(b.get("params"), Mapping):
            out.append(b)
            i += 1
            continue
        swept = tuple(b.get("sweep") or ())
        j = i + 1
        while swept and j < len(entries) and isinstance(entries[j], Mapping) and \
                entries[j].get("name") == b["name"] and tuple(entries[j].get("sweep") or ()) == swept:
            j += 1
        group = entries[i:j]
        entry = {"name": b["name"], **b["params"]}
        if b.get("instances") is not None:
            entry["instances"] = b["instances"]
        if swept:
            every = [{**g["params"], "instances": g.get("instances")} for g in group]
            lists = {k: list(dict.fromkeys(e.get(k) for e in every)) for k in swept}
            fixed = {k: v for k, v in entry.items() if k not in swept}
            points = [dict(zip(lists, combo)) for combo in itertools.product(*lists.values())]
            if points != [{k: e.get(k) for k in swept} for e in every] or \
                    any({k: v for k, v in e.items() if k not in swept and v is not None} !=
                        {k: v for k, v in fixed.items() if k != "name"} for e in every):
                out.extend({k: v for k, v in g.items() if v not in (None, [])} for g in group)  # kept as stored
                i = j
                continue
            entry = {**fixed, "sweep": lists}
        out.append(entry if len(entry) > 1 else b["name"])
        i = j
    return out


def _fields(registry: Any, name: str, attr: str) -> dict[str, Any]:
    try:
        return dict(getattr(registry.get(name), attr).model_fields)
    except InputError:
        return {}


def again(store: Store, run: Any, allowed: Sequence[Path], allow_meter: bool, limit: int) -> str:
    """Queue a run's campaign again, validated exactly as a scheduled one (from_yaml); the new
    run goes to the host the old one was pinned to."""
    text = campaign_yaml(run)
    campaign, text = from_yaml(text, f"run {run.id}'s campaign", max(limit, len(text.encode("utf-8")) + 1),
                               allowed, allow_meter)
    return schedule(store, campaign, text, run.target_host)


def schedule(store: Store, campaign: Campaign, source: str, target_host: str | None = None) -> str:
    """Queue the run (runner.execute.enqueue) and pin it to a host if asked."""
    run_id = enqueue(store, campaign, source=source)
    if target_host:
        store.update_run(run_id, target_host=target_host[:255])
    return run_id

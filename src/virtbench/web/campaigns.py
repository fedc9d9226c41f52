"""Campaigns from the schedule form or an upload, validated exactly as the CLI validates files.

The form becomes the same mapping a YAML file holds and goes through config.parse_campaign,
so every message is the CLI's (`<source>: <field>: <what>`, with its fix). Uploaded YAML
is checked before it is parsed: size, nesting depth and node count; then config.load_yaml
(yaml.safe_load: no Python objects) parses it with the CLI's messages and limits, aliases
bounded by the values they expand to (a few hundred bytes of anchors can expand into
gigabytes: the "billion laughs"), exactly as a file given to `virtbench run`.
"""
from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from ..config import Campaign, load_yaml, parse_campaign
from ..config.consent import require_consent
from ..errors import InputError
from ..experiments.registry import DEFAULT as DEFAULT_EXPERIMENT
from ..platforms.sizes import is_size, size_words
from ..registry import PLATFORMS
from ..runner.execute import enqueue
from ..store.db import Store
from . import hostpaths

MAX_DEPTH = 12
MAX_NODES = 5000
FORM_SOURCE = "campaign form"


def _line(event: yaml.Event) -> str:
    return str(event.start_mark.line + 1) if event.start_mark else "?"


def check_yaml_shape(text: str, source: str, limit: int, *, aliases: bool = True) -> None:
    """Refuse what could exhaust memory or CPU before anything builds Python objects from it.
    Aliases are accepted as the CLI accepts them (config.load_yaml bounds the values they expand
    to, the "billion laughs"), so a campaign file that ran from the CLI runs from the web and
    its run can be run again; aliases=False refuses them (a form field's one value)."""
    if len(text.encode("utf-8", "surrogatepass")) > limit:
        raise InputError(f"{source}: larger than {limit} bytes; not a campaign file",
                         "a campaign is a few hundred bytes; check you uploaded the right file")
    depth = nodes = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) and not aliases:
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
    defaults: dict[str, Any] = {"description": "", "seed": None, "shuffle": True, "probes": [], "settings": {}, "hosts": [],
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
    fields = plugin_fields(PLATFORMS, str(p.get("type")), "Options")
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


def plugin_fields(registry: Any, name: str, attr: str) -> dict[str, Any]:
    """The fields (FieldInfo) of a plugin's options or parameters ({} for an unknown plugin:
    parse_campaign names it)."""
    try:
        return dict(getattr(registry.get(name), attr).model_fields)
    except InputError:
        return {}


def again(store: Store, run: Any, allowed: Sequence[Path], allow_meter: bool, limit: int) -> str:
    """Queue a run's campaign again, validated exactly as a scheduled one (from_yaml); the new
    run goes to the host the old one was pinned to."""
    campaign, text = from_yaml(campaign_yaml(run), f"run {run.id}'s campaign", limit, allowed, allow_meter)
    return schedule(store, campaign, text, run.target_host)


def schedule(store: Store, campaign: Campaign, source: str, target_host: str | None = None) -> str:
    """Queue the run (runner.execute.enqueue) and pin it to a host if asked."""
    run_id = enqueue(store, campaign, source=source)
    if target_host:
        store.update_run(run_id, target_host=target_host[:255])
    return run_id

"""Reference documentation generated from the plugin registries, so the README cannot drift
from the code: `virtbench list benchmarks --markdown` prints it, a test compares it."""
from __future__ import annotations

import typing
from typing import Any

from . import notation
from .registry import BENCHMARKS, PLATFORMS

START, END = "<!-- benchmarks:start -->", "<!-- benchmarks:end -->"


def benchmark_catalog() -> list[dict[str, Any]]:
    """Every registered benchmark with its tool, packages, metrics (unit, direction, category)
    and parameters (default, description): the one catalogue the CLI list, its --json and
    the README table are made from."""
    out = []
    for name, cls in BENCHMARKS.items():
        params = cls.Params()
        out.append({
            "name": name, "tool": cls.tool, "description": cls.description, "packages": list(cls.packages),
            "metrics": [{"name": m.name, "unit": m.unit, "higher_is_better": m.higher_is_better,
                         "category": m.category, "description": m.description, "label": m.label}
                        for m in every_metric(cls)],
            "parameters": [{"name": k, "default": getattr(params, k), "description": f.description or ""}
                           for k, f in cls.Params.model_fields.items()],
        })
    return out


def every_metric(cls: Any) -> list[Any]:
    """Every metric a benchmark can report: its defaults', then those a choice of one parameter
    adds (fio's `measure: cpu` gives the `_cpu` metrics, openssl's `clock: cpu` throughput_cpu),
    each name once, in the order found."""
    found = {m.name: m for m in cls(cls.Params()).metrics()}
    for key, f in cls.Params.model_fields.items():
        choices = typing.get_args(f.annotation) if typing.get_origin(f.annotation) is typing.Literal else ()
        for choice in choices:
            try:
                params = cls.Params(**{key: choice})
            except ValueError:  # a choice that needs other parameters too
                continue
            for m in cls(params).metrics():
                found.setdefault(m.name, m)
    return list(found.values())


def metric_line(m: dict[str, Any]) -> str:
    """A metric of the catalogue for `list benchmarks`: name, unit as a person reads it, direction,
    category and description."""
    from .report.units import SPELLED, labelled

    unit = labelled(SPELLED.get(m["unit"], m["unit"]), m["label"])
    return f"{m['name']} [{unit}] {'↑' if m['higher_is_better'] else '↓'} {m['category']}: {m['description']}"


def benchmarks_markdown() -> str:
    lines = ["| benchmark | what | metrics (unit, ↑ higher / ↓ lower is better) | parameters (default) |",
             "|---|---|---|---|"]
    for b in benchmark_catalog():
        metrics = ", ".join(f"`{m['name']}` {m['unit']} {'↑' if m['higher_is_better'] else '↓'}" for m in b["metrics"])
        fields = ", ".join(f"`{p['name']}`={_default(p['default'])}" for p in b["parameters"])
        lines.append(f"| `{b['name']}` | {b['description']} | {metrics} | {fields} |")
    return "\n".join(lines)


def platforms_markdown() -> str:
    lines = ["| platform | kind | what | options |", "|---|---|---|---|"]
    for name, cls in PLATFORMS.items():
        lines.append(f"| `{name}` | {cls.kind} | {cls.description} | "
                     f"{', '.join(f'`{o}`' for o in cls.Options.model_fields) or '-'} |")
    return "\n".join(lines)


def _default(value: object) -> str:
    """A parameter's default as the README shows it: in words (yes/no, `not set`), never a repr."""
    value = value.value if hasattr(value, "value") else value
    text = "not set" if value is None else notation.option(value)
    return text.replace("|", "\\|") if text else '""'


def readme_section() -> str:
    return f"{START}\n{benchmarks_markdown()}\n\n{platforms_markdown()}\n{END}"


def update_readme(text: str) -> str:
    """The README text with its generated section replaced."""
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{readme_section()}{tail}"

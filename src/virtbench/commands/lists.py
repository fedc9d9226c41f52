"""`virtbench list benchmarks|platforms|probes|experiments`: the registered plugins.

Plain text wrapped at 100 columns at most (LOG_WIDTH, like everything virtbench prints),
continuation lines indented under their entry; --json for scripts."""
from __future__ import annotations

import json
import textwrap
from typing import Any

import click

from ..notation import params
from ..report.progress import LOG_WIDTH
from .shared import console


def _say(text: str, indent: int = 0, bold: str = "") -> None:
    """One entry wrapped at LOG_WIDTH; `bold` is a leading part of text shown in bold."""
    width = min(console.width or LOG_WIDTH, LOG_WIDTH)
    pad = " " * indent
    lines = textwrap.wrap(text, width, initial_indent=pad, subsequent_indent=pad + "    ",
                          break_on_hyphens=False) or [pad]
    for i, line in enumerate(lines):
        if i == 0 and bold and line.lstrip().startswith(bold):
            console.print(pad, end="", markup=False)
            console.print(bold, end="", markup=False, style="bold")
            console.print(line.lstrip()[len(bold):], markup=False)
        else:
            console.print(line, markup=False)


@click.group("list")
def list_group() -> None:
    """List the registered plugins."""


@list_group.command("benchmarks")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--markdown", is_flag=True, help="The README's reference tables.")
def list_benchmarks(as_json: bool, markdown: bool) -> None:
    """Benchmarks a campaign names under `benchmarks:`: each one's tool, metrics (unit, direction,
    category) and parameters with their defaults."""
    from ..docs import benchmark_catalog, metric_line, readme_section

    if markdown:
        click.echo(readme_section())
        return
    docs = benchmark_catalog()
    if as_json:
        click.echo(json.dumps(docs, indent=2, default=str))
        return
    for d in docs:
        _say(f"{d['name']} ({d['tool']}): {d['description']}", bold=d["name"])
        _say("metrics:", 2)
        for m in d["metrics"]:
            _say(metric_line(m), 4)
        _say("parameters: " + params({p["name"]: p["default"] for p in d["parameters"]}), 2)


@list_group.command("platforms")
def list_platforms() -> None:
    """Platform types a campaign names under `platforms:` (`type:`), each with its kind and options."""
    from ..registry import PLATFORMS

    for name, cls in PLATFORMS.items():
        _say(f"{name} ({cls.kind}): {cls.description}", bold=name)
        _say("options: " + (", ".join(cls.Options.model_fields) or "-"), 2)


@list_group.command("probes")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_probes(as_json: bool) -> None:
    """Probes a campaign lists under `probes:`, and whether each works on this host (and why not)."""
    from ..registry import PROBES

    docs: list[dict[str, Any]] = []
    for name, cls in PROBES.items():
        works = cls.available()
        docs.append({"name": name, "description": cls.description, "stores": cls.stores, "works": works.available,
                     "reason": works.reason, "fix": works.fix,
                     "options": [{"name": k, "default": f.default, "description": f.description or ""}
                                 for k, f in cls.Options.model_fields.items()]})
    if as_json:
        click.echo(json.dumps(docs, indent=2, default=str))
        return
    for d in docs:
        _say(f"{d['name']}: {d['description']} ({'works here' if d['works'] else 'not here'})", bold=d["name"])
        _say(d["reason"] + (f" (fix: {d['fix']})" if d["fix"] else ""), 2)
        _say("options: " + params({o["name"]: o["default"] for o in d["options"]}), 2)


@list_group.command("experiments")
def list_experiments() -> None:
    """Experiment kinds a campaign selects with `experiment: NAME` (section of the same name)."""
    from ..experiments.registry import EXPERIMENTS

    for name, cls in EXPERIMENTS.items():
        _say(f"{name}: {cls.description}", bold=name)
        _say("section keys: " + (", ".join(cls.Section.model_fields) if cls.Section is not None else "-"), 2)

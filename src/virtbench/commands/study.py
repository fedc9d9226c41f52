"""`virtbench study list|show|run|report`: the five studies of seeds/ as shipped campaigns.

The CLI only builds library objects (virtbench.studies) and prints them."""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from ..errors import InputError
from ..extras import require
from .shared import console, db_option, errconsole


@click.group()
def study() -> None:
    """The studies' experiments on this host, and their reports beside the papers' numbers."""


def _capabilities(hosts: tuple[str, ...] = (), meter: tuple[str, ...] = (), specs: dict[str, Any] | None = None) -> Any:
    from ..platforms.base import Paths
    from ..studies.capabilities import Capabilities

    return Capabilities(Paths.from_env(), hosts, log=lambda m: errconsole.print(escape(m)), meter=meter,
                        specs=specs or {})


def _availability(caps: Any) -> list[dict[str, Any]]:
    """Per study: runnable (some part runs here), and what does not run, with the reason."""
    from ..studies import run as srun
    from ..studies.registry import STUDIES

    out = []
    for s in STUDIES:
        planned = srun.plan(s, "quick", caps)
        skipped = {p.part: p.skipped for p in planned if p.skipped}
        partial = {p.part: ", ".join(f"{x['platform']} ({x['reason']})" for x in p.left_out)
                   for p in planned if not p.skipped and p.left_out}
        parts: list[dict[str, Any]] = []
        for part in s.parts:
            notes = [f"without {partial[part.name]}"] if part.name in partial else []
            notes += [f"without {cap}: {v.reason}" for cap in part.degrades if not (v := caps.check(cap)).available]
            parts.append({"name": part.name, "title": part.title, "runnable": part.name not in skipped,
                          "reason": skipped.get(part.name) or ("runs here" + "".join(f"; {n}" for n in notes))})
        runnable = any(p["runnable"] for p in parts)
        cannot = [f"{p['name']}: {p['reason']}" for p in parts if not p["runnable"]]
        partly = [f"{p['name']}: {str(p['reason']).removeprefix('runs here; ')}" for p in parts
                  if p["runnable"] and p["reason"] != "runs here"]
        reason = ("every part runs here" if not cannot else
                  ("runs here except " if runnable else "cannot run here: ") + "; ".join(cannot))
        if partly:
            reason += "; partly: " + "; ".join(partly)
        out.append({"id": s.id, "title": s.title, "runnable": runnable, "reason": reason, "measures": s.measures,
                    "parts": parts})
    return out


@study.command("list")
@click.option("--json", "as_json", is_flag=True, help="A list of {id, title, runnable, reason, ...}.")
@click.option("--wait", is_flag=True, help="If a run is measuring on this host, wait for it instead of refusing.")
def study_list(as_json: bool, wait: bool) -> None:
    """The five studies, and what this host can run of each (decided by trying, as `doctor`)."""
    from .lastprobe import probe_or_last

    caps = _capabilities()
    docs, _ = probe_or_last(caps.paths, "study-list", "`virtbench study list`", wait, lambda: _availability(caps))
    if as_json:
        click.echo(json.dumps(docs, indent=2))
        return
    from ..studies.text import wrap

    for d in docs:
        mark = "[green]runs here[/green]" if d["runnable"] else "[red]cannot run here[/red]"
        console.print(f"[bold]{d['id']}[/bold] {escape(d['title'])}: {mark}")
        for line in wrap(d["measures"], "    ", "    "):
            console.print(escape(line), style="dim", overflow="ignore", crop=False)
        for p in d["parts"]:
            lines = wrap(f"{p['name']:<18} {'yes' if p['runnable'] else 'no '}  {p['reason']}", "    ", " " * 27)
            ok = "[green]yes[/green]" if p["runnable"] else "[red]no[/red] "
            first = escape(lines[0]).replace(f" {'yes' if p['runnable'] else 'no '}  ", f" {ok}  ", 1)
            console.print(first, overflow="ignore", crop=False)
            for line in lines[1:]:
                console.print(escape(line), overflow="ignore", crop=False)
    console.print("details of a study, before any run: `virtbench study show ID`")


@study.command("show")
@click.argument("study_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="The document /api/studies/ID answers with (parts, commands, "
              "settings, differences, published values).")
def study_show(study_id: str, as_json: bool) -> None:
    """A study before any run: its parts, what each needs and takes and how long it runs, the paper's
    commands, settings, values and claims, and every difference of the presets from the paper."""
    from ..studies import show, text
    from ..studies.registry import study as find

    doc = show.document(find(study_id))
    if as_json:
        click.echo(json.dumps(doc, indent=2, default=str))
        return
    for line in text.show_lines(doc):
        click.echo(line)


@study.command("run")
@click.argument("study_id", metavar="ID")
@click.option("--scale", default="quick", show_default=True, help="quick (the same shape, minutes) or paper "
              "(the papers' durations, sizes and repetitions).")
@click.option("--part", "parts", multiple=True, metavar="NAME", help="Only this part (repeat for several); "
              "a part this host cannot run is then an error (exit 2) instead of skipped.")
@click.option("--hosts", "hosts", multiple=True, metavar="HOST", help="Other hosts for parts across nodes.")
@click.option("--inventory", metavar="FILE", help="An Ansible inventory (YAML or INI, read as data) that says how "
              "to reach the hosts named with --hosts (address, port, user, key, known_hosts); without it a name "
              "is an address reached with OpenSSH's defaults.")
@click.option("--meter", metavar="CMD", help="Your power meter, for the parts that measure power (001's power): "
              "a command that prints the current watts as one number each time it runs, e.g. --meter "
              "'/usr/local/bin/my-meter --port /dev/ttyUSB0' (split into words like a shell, never run by one). "
              "It runs as root, once before the run and about once a second during every execution: giving it is "
              "your consent, as `run --allow-meter` is (resume such a run with `virtbench run --resume RUN "
              "--allow-meter`).")
@click.option("--option", "options", multiple=True, metavar="NAME", help="Run the parts that take it closer to "
              "their paper (repeat for several): paper-counts (000's density: the paper's container counts), "
              "proxmox (000's LXC containers with Proxmox VE's defaults); `study show ID` lists each part's.")
@click.option("--wait", is_flag=True, help="If another run is measuring on this host, wait for it instead of refusing.")
@db_option
def study_run(study_id: str, scale: str, parts: tuple[str, ...], hosts: tuple[str, ...], inventory: str | None,
              meter: str | None, options: tuple[str, ...], wait: bool, db_url: str | None) -> None:
    """Run a study's campaigns (one run per campaign); parts this host cannot run are skipped with the reason."""
    from ..report.progress import RichReporter
    from ..runner import hostlock
    from ..store.db import Store
    from ..studies import run as srun
    from ..studies.capabilities import inventory_specs, parse_host_names, parse_meter
    from ..studies.registry import check_scale
    from ..studies.registry import study as find

    s, scale = find(study_id), check_scale(scale)
    chosen = [s.part(name) for name in parts] or list(s.parts)
    meter_argv = parse_meter(meter)
    if meter_argv and not any("meter" in p.needs for p in chosen):
        raise InputError(f"--meter: no {'chosen ' if parts else ''}part of study {s.id} measures power",
                         "leave out --meter" + "".join(f", or add --part {p.name}" for p in s.parts if "meter" in p.needs))
    names = tuple(parse_host_names(hosts))
    caps = _capabilities(names, tuple(meter_argv), inventory_specs(names, inventory))
    if meter_argv and not (works := caps.check("meter")).available:  # the user's meter, tried once: it must work
        raise InputError(f"--meter {shlex.join(meter_argv)}: {works.reason}", works.fix or None)
    reporter = RichReporter(console)
    with hostlock.hold(caps.paths, f"`virtbench study run {s.id}`", wait=wait, log=reporter.log):
        planned = srun.plan(s, scale, caps, parts, options)  # refusals (exit 2) before anything runs
        done = srun.run(Store(db_url), planned, caps.paths, reporter, log=lambda m: console.print(escape(m)))
    console.print(f"[bold]study {s.id} ({scale})[/bold]: {sum(d.seconds for d in done):.0f} s")
    for d in done:
        what = (f"skipped: {d.skipped}" if d.skipped else
                f"run {d.run_id}, {d.executions} executions, {d.failed} failed, {d.seconds:.0f} s")
        console.print(f"  {d.campaign:<32} {escape(what)}")
    ids = [d.run_id for d in done if d.run_id]
    if ids:
        console.print(f"report: virtbench study report {s.id} {' '.join(ids)} --html study{s.id}.html")
    if any(d.failed for d in done):
        sys.exit(1)


@study.command("report")
@click.argument("study_id", metavar="ID")
@click.argument("run_refs", nargs=-1, required=True, metavar="RUN...")
@click.option("--json", "as_json", is_flag=True, help="The study section as JSON (comparisons with sources).")
@click.option("--html", "html_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="One self-contained HTML file: the study's comparison, then every run's report.")
@click.option("--figures", "figures_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The study's figures and each run's story as PNG, SVG and PDF into this directory.")
@db_option
def study_report(study_id: str, run_refs: tuple[str, ...], as_json: bool, html_file: Path | None,
                 figures_dir: Path | None, db_url: str | None) -> None:
    """The study's tables and figures from its runs, with the paper's published values beside them."""
    from ..report import builder
    from ..studies import report as sreport
    from ..studies.registry import study as find
    from .shared import read_store

    s = find(study_id)
    store = read_store(db_url)  # a mistyped path is refused, not created
    reports = [builder.build(store, ref) for ref in run_refs]
    section = sreport.build(s, sreport.part_runs(s, reports))
    if html_file:
        sreport.write_html(html_file, section, reports)
        errconsole.print(f"wrote {html_file}")
    if figures_dir:
        require("figures", "--figures")
        from ..report import static

        specs, platforms = sreport.figure_specs(section, reports)
        written = static.export(specs, figures_dir, platforms=platforms)
        errconsole.print(f"wrote {len(written)} figure files to {figures_dir} (each run's figure per benchmark "
                         f"and metric: virtbench report RUN --figures DIR)")
    if as_json:
        click.echo(json.dumps(section.data, indent=2, default=str))
    elif not (html_file or figures_dir):
        from ..studies import text

        for line in text.report_lines(section):
            click.echo(line)
        for r in reports:
            click.echo(f"run {r.run.id} ({r.run.name}): `virtbench report {r.run.id}`")

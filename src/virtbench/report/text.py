"""The report in a terminal: the verdict first (relative performance), details on request."""
from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..analysis import quality
from ..analysis.compare import CompareRow
from ..analysis.summary import Row
from ..constants import LIFECYCLE
from ..store.models import Run
from .text_tables import render_tables


def _fmt(x: float | None, digits: int = 4) -> str:
    if x is None:
        return "-"
    if x == 0:
        return "0"
    mag = abs(x)
    if mag >= 1e6 or mag < 1e-3:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


MARK = {"not significant": " [dim]n.s.[/dim]", "negligible": " [dim]≈[/dim]", "better": " [green]▲[/green]",
        "worse": " [red]▼[/red]"}


def _rel(row: Row) -> str:
    if row.relative is None:
        return "[dim]-[/dim]" if not row.failed else f"[red]failed x{row.failed}[/red]"
    colour = "green" if row.relative >= 0.97 else "yellow" if row.relative >= 0.85 else "red"
    ci = row.relative_ci95
    text = f"[{colour}]{row.relative:.3f}[/{colour}]"
    if ci:
        text += f" [dim][{ci[0]:.2f}-{ci[1]:.2f}][/dim]"
    text += MARK.get(row.verdict or "", "")
    if any(f["severity"] == "warn" for f in row.quality):
        text += " [yellow]⚑[/yellow]"
    if row.failed:
        text += f" [red]({row.failed} failed)[/red]"
    return text


def render(run: Run, rows: list[Row], failures: list[dict[str, Any]], console: Console,
           detail: bool = False) -> None:
    facts = {**(run.host.facts if run.host else {}), **run.host_facts}
    baseline = run.campaign.get("baseline", "native")
    virt = facts.get("virtualization", {})
    console.print(f"[bold]virtbench run {run.id}[/bold] ({run.name}, {run.status})")
    console.print(f"host {facts.get('hostname', '?')}: {facts.get('cpu_model', '?')}, {facts.get('cpus', '?')} CPUs, "
                  f"{(facts.get('memory_bytes') or 0) / 2**30:.1f} GiB, kernel {facts.get('kernel', '?')}, "
                  f"governor {facts.get('governor', '?')}, cgroup {facts.get('cgroup', '?')}")
    if isinstance(virt, dict) and (virt.get("vm") not in (None, "none") or virt.get("container") not in (None, "none")):
        console.print(f"[yellow]note: this host is itself virtualized (vm: {virt.get('vm')}, container: "
                      f"{virt.get('container')}); overheads are relative to this host, not to bare metal[/yellow]")
    console.print(f"image {run.image.get('recipe_hash', '?')[:12]} ({run.image.get('release')}/{run.image.get('arch')}), "
                  f"same binaries on every platform; {run.campaign.get('repetitions')} repetitions after "
                  f"{run.campaign.get('warmups')} warm-up, randomized order (seed {run.seed})")
    platforms = [p.name for p in run.platforms]
    labels = {p.name: p.label for p in run.platforms}

    for flag in quality.host_conditions(facts) + quality.run_checks(run.campaign):
        if "is itself a VM" not in flag.message:  # said above already
            colour = "yellow" if flag.severity == "warn" else "dim"
            console.print(f"[{colour}]{flag.check}:[/{colour}] {escape(flag.message)}")
    table = Table(title=f"Performance relative to {baseline} (1.0 = same, higher = better; 95% bootstrap CI; "
                        "▲/▼ significant after Holm, n.s. not significant, ≈ negligible, ⚑ quality warning)",
                  title_justify="left")
    table.add_column("benchmark / metric")
    table.add_column("unit")
    table.add_column(f"{baseline} mean", justify="right")
    for p in platforms:
        if p != baseline:
            table.add_column(p if labels.get(p) in (None, p) else f"{p}\n[dim]{labels[p]}[/dim]")
    by_key: dict[tuple[str, str], dict[str, Row]] = {}
    for r in rows:
        if r.benchmark != LIFECYCLE:
            by_key.setdefault((r.benchmark, r.metric), {})[r.platform] = r
    for (bench, metric), per in by_key.items():
        base = per.get(baseline)
        arrow = "↑" if base and base.higher_is_better else "↓"
        any_row = next(iter(per.values()))
        table.add_row(escape(f"{bench} {metric} {arrow}"), escape(any_row.unit),
                      _fmt(base.mean) if base and base.mean is not None else "[red]no data[/red]",
                      *[_rel(per[p]) if p in per else "-" for p in platforms if p != baseline])
    console.print(table)

    life = [r for r in rows if r.benchmark == LIFECYCLE]
    if life:
        lt = Table(title="Lifecycle (median seconds, lower is better)", title_justify="left")
        lt.add_column("platform")
        steps = sorted({r.metric for r in life}, key=["create_s", "start_s", "stop_s", "remove_s"].index)
        for s in steps:
            lt.add_column(s.removesuffix("_s"), justify="right")
        for p in platforms:
            per = {r.metric: r for r in life if r.platform == p}
            lt.add_row(p, *[_fmt(per[s].median, 3) if s in per and per[s].median is not None else "-" for s in steps])
        console.print(lt)

    render_tables(run, rows, console)

    if detail:
        dt = Table(title="All statistics", title_justify="left")
        for col in ("benchmark", "metric", "platform", "n", "failed", "mean", "median", "stdev", "95% CI",
                    "relative", "relative 95% CI"):
            dt.add_column(col)
        for r in rows:
            dt.add_row(escape(r.benchmark), escape(f"{r.metric} [{r.unit}]"), escape(r.platform), str(r.n),
                       str(r.failed), _fmt(r.mean), _fmt(r.median), _fmt(r.stdev),
                       f"{_fmt(r.ci95[0])}..{_fmt(r.ci95[1])}" if r.ci95 else "-", _fmt(r.relative),
                       f"{r.relative_ci95[0]:.3f}..{r.relative_ci95[1]:.3f}" if r.relative_ci95 else "-")
        console.print(dt)
    if failures:
        console.print(f"[red]{len(failures)} failed executions[/red] (raw output kept: "
                      f"`virtbench show {run.id} --failed`):")
        for f in failures[:20]:
            console.print(f"  round {f['round']} {f['platform']} {f['benchmark']}: {f['error'][:200]}", markup=False)


def render_merged(doc: dict[str, Any], console: Console) -> None:
    """Several runs: relative performance with hosts as columns, then category ranges."""
    hosts = doc["hosts"]
    console.print(f"[bold]virtbench: {len(hosts)} runs[/bold] ("
                  + ", ".join(f"{h}: {r['run']}" for h, r in zip(hosts, doc["runs"])) + ")")
    table = Table(title="Relative performance per host (each against its own baseline)", title_justify="left")
    for col in ("benchmark / metric", "platform", *hosts, "range"):
        table.add_column(col)
    for line in doc["comparison"]:
        cells = []
        for h in hosts:
            c = line["hosts"].get(h)
            cells.append("-" if not c or c["relative"] is None else
                         f"{c['relative']:.3f}{MARK.get(c['verdict'] or '', '')}")
        rng = "-" if line["min"] is None else f"{line['min']:.3f}-{line['max']:.3f}"
        table.add_row(escape(f"{line['benchmark']} {line['metric']}"), escape(line["platform"]), *cells, rng)
    console.print(table)
    ct = Table(title="Geometric mean per category and host", title_justify="left")
    for col in ("category", "platform", *hosts, "range"):
        ct.add_column(col)
    for cat, per in doc["categories"].items():
        for platform, v in per.items():
            ct.add_row(cat, platform, *[_fmt(v["hosts"].get(h), 3) for h in hosts],
                       f"{v['min']:.0%}-{v['max']:.0%}")
    console.print(ct)


def render_compare(run_a: Run, run_b: Run, rows: list[CompareRow], console: Console,
                   notes: list[str] | None = None) -> None:
    """Before/after: each platform against itself in the other run."""
    for note in notes or []:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    console.print(f"[bold]compare {run_a.id} (A) -> {run_b.id} (B)[/bold]: ratio of B to A, direction-aware "
                  "(above 1.0: B better); Mann-Whitney with Holm's correction")
    table = Table(title_justify="left")
    for col in ("benchmark / metric", "platform", "unit", "mean A", "mean B", "B / A", "95% CI", "p (Holm)",
                "verdict"):
        table.add_column(col)
    colour = {"better": "green", "worse": "red"}
    for r in rows:
        c = colour.get(r.verdict, "dim")
        table.add_row(escape(f"{r.benchmark} {r.metric} {'↑' if r.higher_is_better else '↓'}"), escape(r.platform),
                      escape(r.unit),
                      _fmt(r.mean_a), _fmt(r.mean_b), _fmt(r.ratio),
                      f"{r.ratio_ci95[0]:.3f}-{r.ratio_ci95[1]:.3f}" if r.ratio_ci95 else "-",
                      _fmt(r.p_holm, 2), f"[{c}]{r.verdict}[/{c}]")
    console.print(table)
    common = {p.name for p in run_a.platforms} & {p.name for p in run_b.platforms}
    only = sorted(({p.name for p in run_a.platforms} | {p.name for p in run_b.platforms}) - common)
    if only:
        console.print(f"[yellow]platforms in only one run (not compared): {', '.join(only)}[/yellow]")

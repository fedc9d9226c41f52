"""The report in a terminal: the verdict first (relative performance), details on request."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ..analysis import quality
from ..analysis.compare import CompareRow
from ..analysis.summary import Row
from ..constants import LIFECYCLE
from ..store.models import Run
from . import headline as H
from .model import Section
from .sections import render_text as render_sections
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


MARK = {"slower": " [red]▼[/red]", "faster": " [green]▲[/green]", "same": " [dim]=[/dim]",
        "inconclusive": " [yellow]?[/yellow]"}
SYMBOL = {"slower": "[red]▼[/red]", "faster": "[green]▲[/green]", "same": "[dim]=[/dim]",
          "inconclusive": "[yellow]?[/yellow]", "mixed": "[yellow]~[/yellow]"}
WIDTH = 100
"""Nothing printed is wider than this unless --wide: wide tables are split by platform."""
LEGEND = "▼ slower, ▲ faster, = same within the margin, ? inconclusive, ~ mixed, ⚑ quality warning"


def _rel(row: Row, ci: bool = True) -> str:
    if row.relative is None:
        return "[dim]-[/dim]" if not row.failed else f"[red]failed x{row.failed}[/red]"
    colour = {"slower": "red", "faster": "green"}.get(row.verdict or "", "default")
    text = f"[{colour}]{row.relative:.3f}[/{colour}]"
    if ci and row.relative_ci95:
        text += f" [dim][{row.relative_ci95[0]:.2f}-{row.relative_ci95[1]:.2f}][/dim]"
    text += MARK.get(row.verdict or "", "")
    if any(f["severity"] == "warn" for f in row.quality):
        text += " [yellow]⚑[/yellow]"
    if row.failed:
        text += f" [red]({row.failed} failed)[/red]"
    return text


def _facts(run: Run) -> dict[str, Any]:
    return {**(run.host.facts if run.host else {}), **run.host_facts}


def render(run: Run, rows: list[Row], failures: list[dict[str, Any]], console: Console,
           detail: bool = False, wide: bool = False, sections: Sequence[Section] = ()) -> None:
    """Headline first, then the details and the experiment sections; at most WIDTH columns
    unless wide (the old layout)."""
    width = console.width
    if not wide:
        console.width = min(width, WIDTH)
    try:
        _render(run, rows, failures, console, detail, wide)
        render_sections(list(sections), console)
    finally:
        console.width = width


def _render(run: Run, rows: list[Row], failures: list[dict[str, Any]], console: Console, detail: bool,
            wide: bool) -> None:
    facts = _facts(run)
    baseline = run.baseline
    console.print(f"[bold]virtbench run {run.id}[/bold] ({run.name}, {run.status})")
    render_headline(run, rows, console)
    console.print()
    console.print(f"host {facts.get('hostname', '?')}: {facts.get('cpu_model', '?')}, {facts.get('cpus', '?')} CPUs, "
                  f"{(facts.get('memory_bytes') or 0) / 2**30:.1f} GiB, kernel {facts.get('kernel', '?')}, "
                  f"governor {facts.get('governor', '?')}, cgroup {facts.get('cgroup', '?')}")
    console.print(f"image {run.image.get('recipe_hash', '?')[:12]} ({run.image.get('release')}/{run.image.get('arch')}), "
                  f"same binaries on every platform; {run.campaign.get('repetitions')} repetitions after "
                  f"{run.campaign.get('warmups')} warm-up, randomized order (seed {run.seed})")
    platforms = [p.name for p in run.platforms]
    for flag in quality.host_conditions(facts) + quality.run_checks(run.campaign):
        colour = "yellow" if flag.severity == "warn" else "dim"
        console.print(f"[{colour}]{flag.check}:[/{colour}] {escape(flag.message)}")
    by_key: dict[tuple[str, str], dict[str, Row]] = {}
    for r in rows:
        if r.benchmark != LIFECYCLE:
            by_key.setdefault((r.benchmark, r.metric), {})[r.platform] = r
    others = [p for p in platforms if p != baseline]
    title = (f"Performance relative to {baseline} (1.0 = same, higher = better; "
             + ("95% interval; " if wide else "") + LEGEND + ")")
    chunks = _chunks(console, others, lambda ps: _relative_table(by_key, baseline, ps, wide, ""), wide,
                     lambda p: [_rel(per[p], ci=wide) if p in per else "-" for per in by_key.values()])
    if by_key:  # an experiment whose section is the result (density) has no main table
        console.print(escape(title))
    for i, chunk in enumerate(chunks if by_key else [], 1):
        if len(chunks) > 1:
            console.print(escape(f"part {i} of {len(chunks)}: {', '.join(chunk)}"))
        console.print(_relative_table(by_key, baseline, chunk, wide, ""))

    life = [r for r in rows if r.benchmark == LIFECYCLE]
    if life:
        lt = Table(title="Lifecycle (median seconds, lower is better)", title_justify="left")
        lt.add_column("platform")
        steps = sorted({r.metric for r in life}, key=["create_s", "start_s", "stop_s", "remove_s"].index)
        for s in steps:
            lt.add_column(s.removesuffix("_s"), justify="right")
        for p in platforms:
            per = {r.metric: r for r in life if r.platform == p}
            lt.add_row(escape(p), *[_fmt(per[s].median, 3) if s in per and per[s].median is not None else "-"
                                    for s in steps])
        console.print(lt)

    render_tables(run, rows, console)

    if detail:
        dt = Table(title="All statistics", title_justify="left")
        for col in ("benchmark", "metric", "platform", "n", "failed", "mean", "median", "stdev", "95% CI",
                    "relative", "relative 95% CI", "verdict"):
            dt.add_column(col)
        for r in rows:
            dt.add_row(escape(r.benchmark), escape(f"{r.metric} [{r.unit}]"), escape(r.platform), str(r.n),
                       str(r.failed), _fmt(r.mean), _fmt(r.median), _fmt(r.stdev),
                       f"{_fmt(r.ci95[0])}..{_fmt(r.ci95[1])}" if r.ci95 else "-", _fmt(r.relative),
                       f"{r.relative_ci95[0]:.3f}..{r.relative_ci95[1]:.3f}" if r.relative_ci95 else "-",
                       escape(r.verdict_reason or r.verdict or "-"))
        console.print(dt)
    if failures:
        console.print(f"[red]{len(failures)} failed executions[/red] (raw output kept: "
                      f"`virtbench show {run.id} --failed`):")
        for f in failures[:20]:
            console.print(f"  round {f['round']} {f['platform']} {f['benchmark']}: {f['error'][:200]}", markup=False)


def _relative_table(by_key: dict[tuple[str, str], dict[str, Row]], baseline: str, platforms: Sequence[str],
                    wide: bool, title: str) -> Table:
    table = Table(title=title or None, title_justify="left")
    table.add_column("benchmark / metric")
    table.add_column("unit")
    table.add_column(f"{baseline} mean", justify="right")
    for p in platforms:
        table.add_column(escape(p), justify="left" if wide else "right")
    for (bench, metric), per in by_key.items():
        base = per.get(baseline)
        any_row = next(iter(per.values()))
        arrow = "↑" if any_row.higher_is_better else "↓"
        table.add_row(escape(f"{bench} {metric} {arrow}"), escape(any_row.unit),
                      _fmt(base.mean) if base and base.mean is not None else "[red]no data[/red]",
                      *[_rel(per[p], ci=wide) if p in per else "-" for p in platforms])
    return table


def _chunks(console: Console, items: Sequence[str], build: Any, wide: bool,
            cells: Any = None) -> list[list[str]]:
    """Split items (platform columns) so each table built from a chunk fits the console.

    cells(item) gives the column's cell texts (markup): its width is then read from them, so
    the tables are measured once per chunk, not once per candidate split."""
    if wide or not items:
        return [list(items)]
    fixed = _natural_width(console, build([]))
    need = {i: max(Text.from_markup(c).cell_len for c in [escape(i), *cells(i)]) + 3 for i in items} if cells else {}
    out: list[list[str]] = []
    rest = list(items)
    while rest:
        k, used = 0, fixed
        while k < len(rest) and (k == 0 or used + need.get(rest[k], console.width) <= console.width):
            used += need.get(rest[k], 0)
            k += 1
        while k > 1 and _natural_width(console, build(rest[:k])) > console.width:
            k -= 1  # the estimate was short (never seen): measure as before
        out.append(rest[:k])
        rest = rest[k:]
    return out


def _natural_width(console: Console, table: Table) -> int:
    """The table's width without wrapping (console.measure clamps to the console's width)."""
    return Measurement.get(console, console.options.update_width(10_000), table).maximum


def render_headline(run: Run, rows: Sequence[Row], console: Console) -> None:
    """Per platform: kind, verdict per category, then the biggest costs and the host facts."""
    baseline = run.baseline
    lines = H.headline([(p.name, p.type, p.config or {}) for p in run.platforms], rows, baseline)
    if not lines or not rows:
        return
    cats = [c for c in H.CATEGORIES if any(cv.category == c for line in lines for cv in line.categories)]
    cats += sorted({cv.category for line in lines for cv in line.categories} - set(cats))
    console.print(f"[bold]Against {escape(baseline)}[/bold] ({H.LEGEND}):")
    t = Table(box=None, show_header=True, pad_edge=False, header_style="dim")
    t.add_column("platform")
    t.add_column("kind")
    for c in cats:
        t.add_column(H.SHORT.get(c, c), justify="right")
    t.add_column("decided", justify="right")
    for line in lines:
        by = {cv.category: cv for cv in line.categories}
        t.add_row(escape(line.platform), line.kind, *[_headline_cell(by.get(c)) for c in cats],
                  f"{line.decided}/{line.compared}")
    console.print(t)
    for line in lines:
        if line.biggest_cost:
            b = line.biggest_cost
            console.print(escape(f"  {line.platform}: biggest cost {b['benchmark']} {b['metric']}: "
                                 f"{b['verdict_reason']}"))
    labels = {p.name: p.label for p in run.platforms if p.label and p.label != p.name}
    if labels:
        console.print("[dim]platforms: " + escape("; ".join(f"{k} = {v}" for k, v in labels.items())) + "[/dim]")
    notes = H.host_notes(_facts(run))
    if notes:
        console.print("[dim]host: " + escape("; ".join(notes)) + "[/dim]")


def _headline_cell(cv: H.CategoryVerdict | None) -> str:
    if cv is None:
        return "[dim]-[/dim]"
    colour = {"slower": "red", "faster": "green", "same": "dim", "mixed": "yellow", "inconclusive": "yellow"}
    text = escape(H.cell_text(cv))
    return f"[{colour[cv.verdict]}]{text}[/]" if cv.verdict in colour else text


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
    colour = {"faster": "green", "slower": "red", "same": "default"}
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

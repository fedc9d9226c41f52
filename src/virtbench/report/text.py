"""The report in a terminal: the verdict first (relative performance), details on request."""
from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ..analysis.summary import Row
from ..notation import interval, number, percent, ratio, ratio_with_interval
from ..store.models import Run
from . import boards, layout, units
from .model import Comparison, Mark, Report, Section
from .model import Table as ModelTable


def _fmt(x: float | None, digits: int = 4) -> str:
    return number(x, digits)


MARK = {"slower": " [red]▼[/red]", "faster": " [green]▲[/green]", "same": " [dim]=[/dim]",
        "inconclusive": " [yellow]?[/yellow]"}
SYMBOL = {"slower": "[red]▼[/red]", "faster": "[green]▲[/green]", "same": "[dim]=[/dim]",
          "inconclusive": "[yellow]?[/yellow]", "mixed": "[yellow]~[/yellow]"}
WIDTH = 100
"""Nothing printed is wider than this unless --wide: wide tables are split by platform."""
LEGEND = "▼ slower, ▲ faster, = same within the margin, ? inconclusive, ~ mixed, ⚑ quality warning"


def _rel(row: Row | Comparison, ci: bool = True) -> str:
    c = row if isinstance(row, Comparison) else Comparison.of(row)
    if c.relative is None:
        return "[dim]-[/dim]" if not c.failed else f"[red]failed x{c.failed}[/red]"
    colour = {"slower": "red", "faster": "green"}.get(c.verdict or "", "default")
    text = f"[{colour}]{c.relative:.3f}[/{colour}]"
    if ci and c.ci:
        text += f" [dim]{escape(interval(*c.ci))}[/dim]"
    text += MARK.get(c.verdict or "", "")
    if c.warnings:
        text += " [yellow]⚑[/yellow]"
    if c.failed:
        text += f" [red]({c.failed} failed)[/red]"
    return text


_BOUND = re.compile(r"(?<=\S) (?=[+±-]?\d|%|\[)|(?<=\d) (?=\S)|(?<=\d,) (?=[+±-]?\d)")
"""Spaces a line is never broken at: before a number, a % or an interval ('load 0.40', '9.8 %',
'by 9.8 % [-17.5, -1.5]'), and after a number ('8 CPUs'): a phrase keeps its number."""
_GLUE = "\x00"


def say(console: Console, text: str, style: str = "", indent: str = "") -> None:
    """Free text (a header, a note) wrapped at word boundaries to the console's width, never
    inside a phrase with a number (report/text.py's _BOUND), continuation lines indented."""
    glued = _BOUND.sub(_GLUE, text)
    width = max(20, (console.width or WIDTH) - 1)
    lines = textwrap.wrap(glued, width, subsequent_indent=indent + "  ", break_long_words=False,
                          break_on_hyphens=False) or [""]
    for line in lines:
        shown = escape(line.replace(_GLUE, " "))
        console.print(f"[{style}]{shown}[/{style}]" if style else shown, soft_wrap=True)


COLOUR = {"slower": "red", "faster": "green", "same": "dim", "mixed": "yellow", "inconclusive": "yellow"}


def cell(v: Any, wide: bool = False) -> str:
    """Any cell of a model table as terminal markup."""
    if isinstance(v, Comparison):
        return _rel(v, ci=wide)
    if isinstance(v, Mark):
        colour = COLOUR.get(v.verdict or "")
        return f"[{colour}]{escape(v.text)}[/]" if colour else escape(v.text)
    if v is None:
        return "[dim]-[/dim]"
    if isinstance(v, float):
        return _fmt(v)
    return escape(str(v))


def render(report: Report, console: Console, detail: bool = False, wide: bool = False) -> None:
    """The report's layout (report/layout.py: headline, results, lifecycle, categories,
    stacks, undecided results, warnings, the run's sections, failures), the run's facts after the
    headline; at most WIDTH columns unless wide (the old layout)."""
    width = console.width
    if not wide:
        console.width = min(width, WIDTH)
    try:
        run, rows = report.run, report.rows
        secs = layout.of(report, charts=False)
        console.print(f"[bold]virtbench run {run.id}[/bold] ({run.name}, {run.status})")
        for s in secs:
            if s.key == "headline":
                _headline(s, console)
        _intro(run, rows, console)
        render_sections([s for s in secs if s.key != "headline"], console, detail=detail, wide=wide)
    finally:
        console.width = width


def _intro(run: Run, rows: list[Row], console: Console) -> None:
    facts = boards.measured_on(run)
    say(console, f"host {facts.get('hostname', '?')}: {facts.get('cpu_model', '?')}, {facts.get('cpus', '?')} CPUs, "
                 f"{(facts.get('memory_bytes') or 0) / 2**30:.1f} GiB, kernel {facts.get('kernel', '?')}, "
                 f"governor {facts.get('governor', '?')}, cgroup {facts.get('cgroup', '?')}")
    image = (f"image {run.image['recipe_hash'][:12]} ({run.image.get('release')}/{run.image.get('arch')}), "
             "same binaries on every platform" if run.image.get("recipe_hash")
             else "images named per platform in the sections below")
    warm = units.warmups(run, rows)
    say(console, f"{image}; {units.rounds_measured(run, rows)}" + (f" after {warm} warm-up" if warm is not None else "")
                  + (f", randomized order (seed {run.seed})" if (run.campaign or {}).get("shuffle", True)
                     else ", fixed order (shuffle: false)")
                  + f"; started {units.when(run.started_at or run.created_at)}")
    say(console, LEGEND, "dim")


def render_sections(secs: Sequence[Section], console: Console, *, detail: bool = False, wide: bool = False) -> None:
    """Every section the same way: its tables (split by columns to fit the width), then its notes."""
    for s in secs:
        if s.detail and not detail or (layout.base_key(s.key) == "charts_detail"):
            continue
        for t in s.tables:
            if not t.rows:
                if t.empty:
                    say(console, t.empty, "dim")
                continue
            _table(t, console, wide, f"{s.title}: {t.title}" if s.in_json else t.title)
        for note in s.notes:
            say(console, f"note: {note}", "dim")


def _table(t: ModelTable, console: Console, wide: bool, title: str) -> None:
    """A model table in parts that fit the width; the report's own parts are named by their
    table's title, a run's sections by their kind's title too."""
    k = t.key_columns
    rows = [[cell(v, wide) for v in row] for row in t.rows]
    numeric = [all(isinstance(r[i], int | float | Comparison) or r[i] is None for r in t.rows)
               for i in range(len(t.columns))]

    def build(cols: Sequence[int]) -> Table:
        table = Table(title_justify="left")
        for i in [*range(k), *cols]:
            table.add_column(escape(t.columns[i]), justify="right" if numeric[i] and not wide else "left",
                             overflow="fold")  # a long name wraps inside itself, never cut to "…"
        for row in rows:
            table.add_row(*[row[i] for i in [*range(k), *cols]])
        return table

    rest = list(range(k, len(t.columns)))
    chunks = _chunks(console, rest, build, wide, lambda i: [r[i] for r in rows],
                     label=lambda i: t.columns[i]) if k else [rest]
    say(console, title)  # a table's own title wraps to its width
    for n, chunk in enumerate(chunks, 1):
        if len(chunks) > 1:
            say(console, f"part {n} of {len(chunks)}: {', '.join(t.columns[i] for i in chunk)}")
        console.print(build(chunk))


def _chunks(console: Console, items: Sequence[Any], build: Any, wide: bool,
            cells: Any = None, label: Any = str) -> list[list[Any]]:
    """Split items (platform columns) so each table built from a chunk fits the console.

    cells(item) gives the column's cell texts (markup): its width is then read from them, so
    the tables are measured once per chunk, not once per candidate split."""
    if wide or not items:
        return [list(items)]
    fixed = _natural_width(console, build([]))
    need = {i: max(Text.from_markup(c).cell_len for c in [escape(label(i)), *cells(i)]) + 3 for i in items} \
        if cells else {}
    out: list[list[Any]] = []
    rest = list(items)
    while rest:
        k, used = 0, fixed
        while k < len(rest) and (k == 0 or used + need.get(rest[k], console.width) <= console.width):
            used += need.get(rest[k], 0)
            k += 1
        while k > 1 and used > console.width - 3 and _natural_width(console, build(rest[:k])) > console.width:
            k -= 1  # a close fit is measured (the estimate was never seen short); a clear one is not
        out.append(rest[:k])
        rest = rest[k:]
    return out


def _natural_width(console: Console, table: Table) -> int:
    """The table's width without wrapping (console.measure clamps to the console's width)."""
    return Measurement.get(console, console.options.update_width(10_000), table).maximum


def render_headline(run: Run, rows: Sequence[Row], console: Console) -> None:
    """The headline alone (report/layout.py's headline section)."""
    _headline(layout.headline(Report(run, list(rows), [])), console)


def _headline(s: Section, console: Console) -> None:
    """Per platform: kind, verdict per category, then the biggest costs and the host facts: the
    headline section drawn compactly, the first thing a reader sees."""
    for t in s.tables:
        if not t.rows:
            continue
        console.print(f"[bold]{escape(t.title)}[/bold]:")
        table = Table(box=None, show_header=True, pad_edge=False, header_style="dim")
        for i, c in enumerate(t.columns):
            table.add_column(escape(c), justify="right" if i > 1 else "left")
        for row in t.rows:
            # an undecided cell's interval on a line of its own, never broken inside ('[-4,' / '+1]')
            table.add_row(*[cell(Mark(v.text.replace(" [", "\n[", 1), v.verdict) if isinstance(v, Mark) else v)
                            for v in row])
        console.print(table)
    for note in s.notes:
        say(console, f"  {note}", indent="  ") if ": biggest cost " in note else say(console, note, "dim")


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
        rng = "-" if line["min"] is None else f"{ratio(line['min'])} to {ratio(line['max'])}"
        table.add_row(escape(f"{line['benchmark']} {line['metric']}"), escape(line["platform"]), *cells, rng)
    console.print(table)
    ct = Table(title="Geometric mean per category and host", title_justify="left")
    for col in ("category", "platform", *hosts, "range"):
        ct.add_column(col)
    for cat, per in doc["categories"].items():
        for platform, v in per.items():
            ct.add_row(cat, platform, *[_fmt(v["hosts"].get(h), 3) for h in hosts],
                       f"{percent(v['min'])} to {percent(v['max'])}")
    console.print(ct)


def render_compare(doc: dict[str, Any], console: Console) -> None:
    """Before/after (report/before_after.py's document): each platform against itself in the
    other run, at most WIDTH columns, in the rows' one order."""
    width = console.width
    console.width = min(width, WIDTH)
    try:
        _compare(doc, console)
    finally:
        console.width = width


def _compare(doc: dict[str, Any], console: Console) -> None:
    from .before_after import shown

    for note in doc["notes"]:
        say(console, f"note: {note}", "yellow")
    console.print(f"[bold]compare {escape(doc['a'])} (A) -> {escape(doc['b'])} (B)[/bold]")
    basis = (f"A and B: each platform's ratio to its own run's baseline ({doc['baseline']}); the baseline and "
             "lifecycle steps (median) absolute" if doc["mode"] == "relative" else
             "A and B: the means (lifecycle steps: the medians), absolute")
    say(console, "B / A direction-aware (above 1: B better), with the 95 % interval the verdict reads (the report's "
                 f"rule, unpaired: two runs' rounds share nothing to pair on). {basis}", "dim")
    table = Table(title_justify="left", pad_edge=False, box=None, header_style="bold")
    table.add_column("benchmark / metric", ratio=1, overflow="fold")
    for col in ("platform", "A", "B", "B / A [95 %]", "verdict"):
        table.add_column(col, no_wrap=True)
    colour = {"faster": "green", "slower": "red", "same": "default"}
    for r in doc["results"]:
        c = colour.get(r["verdict"], "dim")
        moved = " ⚑" if r["baseline_moved"] and r["basis"] == "absolute" and r["platform"] != doc["baseline"] else ""
        table.add_row(escape(f"{r['benchmark']} {r['metric']} {'↑' if r['higher_is_better'] else '↓'}"),
                      escape(r["platform"]), escape(shown(r, "a")), escape(shown(r, "b")),
                      escape(ratio_with_interval(r["ratio"], r["ratio_ci95"])),
                      f"[{c}]{escape(r['verdict'])}[/{c}]{moved}")
    console.print(table)
    if any(r["baseline_moved"] and r["basis"] == "absolute" and r["platform"] != doc["baseline"]
           for r in doc["results"]):
        say(console, f"⚑ the baseline {doc['baseline']} moved in this metric too: part of the change is the host's",
            "yellow")
    undecided = [r for r in doc["results"] if r["verdict"] == "inconclusive"]
    if undecided:
        console.print(f"{len(undecided)} of {len(doc['results'])} undecided; what would decide each:")
        for r in undecided:
            say(console, f"  {r['benchmark']} {r['metric']} @{r['platform']}: {r['verdict_reason']}", indent="  ")
    if doc["only_one_run"]:
        say(console, f"platforms in only one run (not compared): {', '.join(doc['only_one_run'])}", "yellow")


def render_pooled(doc: dict[str, Any], console: Console) -> None:
    """Repeated runs of one campaign on one host (report/repeats.py): one pooled verdict per
    cell with each run's own verdict beside it, ⚑ where they disagreed, then per category."""
    from .repeats import SYMBOL, cell_text

    width = console.width
    console.width = min(width, WIDTH)
    try:
        say(console, f"virtbench: {len(doc['runs'])} repeated runs on {doc['host'] or '?'}, pooled ("
                     + ", ".join(doc["runs"]) + ")")
        say(console, f"note: {doc['method']}", "dim")
        table = Table(title_justify="left", pad_edge=False, box=None, header_style="bold")
        table.add_column("benchmark / metric", ratio=1, overflow="fold")
        table.add_column("platform", no_wrap=True)
        table.add_column(f"pooled against {doc['baseline']} [95 %]", no_wrap=True)
        for c in doc["cells"]:
            colour = COLOUR.get(c["verdict"], "default")
            table.add_row(escape(f"{c['benchmark']} {c['metric']} {'↑' if c['higher_is_better'] else '↓'}"),
                          escape(c["platform"]), f"[{colour}]{escape(cell_text(c))}[/{colour}]")
        console.print(table)
        cats = list(dict.fromkeys(cat for per in doc["categories"].values() for cat in per))
        summary = Table(title_justify="left", header_style="bold")
        for col in ("platform", *cats):
            summary.add_column(col)
        for platform, per in doc["categories"].items():
            summary.add_row(escape(platform), *[
                "-" if cat not in per else f"{SYMBOL.get(per[cat]['verdict'], '?')} {ratio(per[cat]['relative'])}"
                + (f" ⚑{per[cat]['disagree']}" if per[cat]["disagree"] else "") for cat in cats])
        say(console, "Per category: the pooled verdicts combined (the headline's rule), ⚑ cells the runs disagreed on")
        console.print(summary)
        if doc["disagreements"]:
            say(console, f"⚑ {doc['disagreements']} of {len(doc['cells'])} cells were decided differently by the "
                         "runs: read the pooled verdict, which weighs every round of every run", "yellow")
    finally:
        console.width = width

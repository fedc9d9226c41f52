"""One self-contained HTML file: provenance, tables, interactive charts, warnings, failures.

Works offline and stays small: figures are inline SVG drawn by matplotlib (the same figures
as `--figures` writes, text as text), styles are inline, and nothing references an external
URL. The quick run's report was 4.9 MB, 4.6 of them the embedded plotly.js bundle; now it is a
few hundred kB. interactive=True embeds plotly.js again (never a CDN) for zoom and hover;
its figures are drawn when they scroll into view, so a report with a thousand charts opens at
once. Several runs (one per host) become one page with hosts as columns, followed by each
run's own section.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from .. import __version__
from ..analysis import stats, tables
from ..extras import require
from . import builder as S
from . import figures as F
from . import html_parts as H
from . import interactive as I
from . import layout, repeats, runinfo
from .model import Report
from .sections import ReportSection

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1400px;padding:0 1.2em 3em;color:#222}
h1{font-size:1.6em;margin:.8em 0 .2em}h2{border-bottom:2px solid #ddd;margin-top:2em}h3{margin:1.2em 0 .4em}
table{border-collapse:collapse;margin:.4em 0 1em;font-size:13px}td,th{border:1px solid #ddd;padding:3px 7px;
text-align:left;vertical-align:top}th{background:#f4f4f4;position:sticky;top:0}p.cap{color:#555;
margin:.8em 0 .2em;font-size:13px}table.kv td:first-child{color:#555}table.small{font-size:12px}
.cols{display:flex;gap:2em;flex-wrap:wrap}.ci{color:#777;font-size:.9em}.badge{border-radius:3px;padding:0 4px;
font-size:.85em;white-space:nowrap}.badge.good{background:#d4f4d4;color:#064}.badge.bad{background:#fbd5d5;color:#900}
.badge.ns{background:#eee;color:#555}.badge.same{background:#e4f0e4;color:#333}.badge.base{background:#dde8f8;color:#124}.bad{color:#b00}.ok{color:#070}
.flag{padding:4px 8px;margin:3px 0;border-left:4px solid #ccc}.flag.warn{border-color:#e69500;background:#fff7e6}
.flag.info{border-color:#6aa0d8;background:#f0f6fc}span.warn{color:#b36b00}.flags{color:#b36b00;cursor:help}
.fig{min-height:380px;border:1px solid #eee;margin:6px 0}.svgfig svg{max-width:100%;height:auto}.svgfig.wide{grid-column:1/-1}
.note{color:#666;font-size:12px;margin:0 0 1em}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(620px,1fr));gap:10px}
pre{white-space:pre-wrap;max-width:60em;font-size:11px;margin:0}input.filter{margin:.3em 0;padding:3px 6px;width:22em}
nav a{margin-right:1em}details{margin:.5em 0}summary{cursor:pointer;font-weight:600}
"""

SCRIPT = """
(function(){
var FIGS=JSON.parse(document.getElementById('vb-figs').textContent);
function draw(el){if(el.dataset.drawn)return;el.dataset.drawn='1';var f=FIGS[el.dataset.fig];
 Plotly.newPlot(el,f.data,f.layout,{responsive:true,displaylogo:false});}
var els=document.querySelectorAll('.fig');
// figures already in view are drawn now: the observer's first callback waits for a rendered frame,
// which a loaded machine or a headless print may never give before the page is read
els.forEach(function(el){var r=el.getBoundingClientRect();if(r.top<innerHeight+400&&r.bottom>-400)draw(el);});
if('IntersectionObserver' in window){var io=new IntersectionObserver(function(es){es.forEach(function(x){
 if(x.isIntersecting){draw(x.target);io.unobserve(x.target);}});},{rootMargin:'400px'});
 els.forEach(function(el){io.observe(el);});}else{els.forEach(draw);}
window.vbDrawAll=function(){els.forEach(draw);return els.length;};
document.querySelectorAll('input.filter').forEach(function(inp){inp.addEventListener('input',function(){
 var q=inp.value.toLowerCase(),t=document.getElementById(inp.dataset.table);
 t.querySelectorAll('tbody tr').forEach(function(tr){
  tr.style.display=tr.textContent.toLowerCase().indexOf(q)<0?'none':'';});});});
document.body.dataset.ready='1';
})();
"""


def plotly_js() -> str:
    require("figures", "the HTML report (plotly.js is embedded in it)")
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def svg_figure(spec: F.FigureSpec, palette: dict[str, str]) -> str:
    """One figure as inline SVG: matplotlib's (text escaped by it), without its RDF metadata."""
    require("figures", "the HTML report (its figures are drawn by matplotlib)")
    from . import static

    return re.sub(r"<metadata>.*?</metadata>", "", static.svg(spec, palette), count=1, flags=re.S)


class Page:
    """Collects sections and figures; ids stay unique across several runs on one page."""

    def __init__(self, palette_names: Sequence[str], interactive: bool = False) -> None:
        self.figs: dict[str, Any] = {}
        self.palette = I.colours(palette_names)
        self.tables = 0
        self.interactive = interactive

    def figure(self, spec: F.FigureSpec, prefix: str = "") -> str:
        fid = f"{prefix}{spec.id}"
        n = 2
        while fid in self.figs:
            fid, n = f"{prefix}{spec.id}-{n}", n + 1
        if not self.interactive:
            self.figs[fid] = None  # the id is taken
            wide = " wide" if spec.meta.get("story") else ""  # the story figure spans the grid
            return f'<div class="svgfig{wide}" id="fig-{H.e(fid)}">{svg_figure(spec, self.palette)}</div>'
        self.figs[fid] = I.figure(spec, self.palette)
        note = f'<p class="note">{H.e(spec.note)}</p>' if spec.note else ""
        return f'<div><div class="fig" id="fig-{H.e(fid)}" data-fig="{H.e(fid)}"></div>{note}</div>'

    def drawn(self) -> dict[str, Any]:
        """The plotly figures by id (none when the figures are inline SVG)."""
        return {k: v for k, v in self.figs.items() if v is not None}

    def grid(self, specs: Sequence[F.FigureSpec], prefix: str = "") -> str:
        return '<div class="grid">' + "".join(self.figure(s, prefix) for s in specs) + "</div>" if specs else ""

    def filterable(self, html: str) -> str:
        """Give each filterable table an id and a search box above it."""
        out, pos = [], 0
        while (i := html.find('<table class="filterable', pos)) >= 0:
            self.tables += 1
            tid = f"t{self.tables}"
            out.append(html[pos:i] + f'<input class="filter" data-table="{tid}" placeholder="filter rows…">'
                       + f'<table id="{tid}"' + html[i + 6:i + 7])
            pos = i + 7
        out.append(html[pos:])
        return "".join(out)


def section_html(page: Page, s: ReportSection, prefix: str) -> str:
    """Any section of the report's layout: its tables, figures and notes, one way for all."""
    parts = [f'<p class="note">{H.e(n)}</p>' for n in s.notes]
    for t in s.tables:
        if not t.rows:
            parts.append(f"<p>{H.e(t.empty)}</p>" if t.empty else "")
            continue
        cls = "filterable main" if t.main else "filterable" if len(t.rows) > 15 else ""
        parts.append(H.table(t.columns, [[H.cell(v) for v in row] for row in t.rows], cls, t.title))
    if s.figures:
        parts.append(page.grid(s.figures, prefix))
    body = "".join(parts)
    if s.detail:
        return f'<details id="{H.e(prefix)}{H.e(s.key)}"><summary>{H.e(s.title)}</summary>{body}</details>'
    return f'<h3 id="{H.e(prefix)}{H.e(s.key)}">{H.e(s.title)}</h3>{body}'


def experiment_html(page: Page, secs: Sequence[ReportSection], prefix: str) -> str:
    """Sections outside a run's layout (a study's section above its runs), laid out the same way."""
    return "".join(section_html(page, s, prefix) for s in secs)


def run_section(page: Page, report: Report, label: str, prefix: str = "", *, alpha: float = stats.ALPHA,
                min_effect: float = stats.MIN_EFFECT) -> str:
    """One run: a summary line, then the report's layout (report/layout.py: headline, results,
    lifecycle, categories, stacks, charts, undecided results, warnings, the run's sections,
    failures, every statistic) as every renderer shows it, then the provenance."""
    run, rows = report.run, report.rows
    platforms = [p.name for p in run.platforms]
    counts: dict[str, int] = {}
    for r in rows:
        if r.verdict and r.verdict != "baseline":
            counts[r.verdict] = counts.get(r.verdict, 0) + 1
    verdicts = ", ".join(f"{n} {H.badge(v)}" for v, n in sorted(counts.items()))
    parts = [
        f'<section id="{H.e(prefix)}run"><h2>Run {H.e(run.id)} on {H.e(label)}</h2>',
        f"<p>{len(platforms)} platforms, {len(run.benchmarks)} benchmarks, baseline <b>{H.e(run.baseline)}</b>. "
        f"Comparisons with the baseline: {verdicts or 'none'} ({H.e(S.VERDICT_RULE)} Minimum effect "
        f"{min_effect:.0%}.)</p>",
        *[section_html(page, s, prefix) for s in layout.of(report)],
        "<h3>Provenance</h3>", H.provenance(run, runinfo.facts(run), label, rows), "</section>"]
    return page.filterable("".join(parts))


def document(title: str, body: str, page: Page) -> str:
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{escape(title)}</title><style>{CSS}</style>"
            + (f'<script>{plotly_js()}</script>' if page.interactive else "")
            + f'</head><body><h1>{escape(title)}</h1>'
            f'<p class="note">virtbench {escape(__version__)}, generated {generated}. This file is '
            f"self-contained and works offline.</p>{body}"
            f'<script type="application/json" id="vb-figs">{I.script_json(page.drawn())}</script>'
            f"<script>{SCRIPT}</script></body></html>")


def render(reports: Sequence[Report], *, alpha: float = stats.ALPHA, min_effect: float = stats.MIN_EFFECT,
           interactive: bool = False) -> str:
    """The page for one run, or for several runs merged with hosts as columns, each with its
    sections (experiment kinds', probes').

    interactive: plotly.js figures (zoom, hover; 4.6 MB more) instead of inline SVG."""
    names = [p.name for r in reports for p in r.run.platforms]
    page = Page(names, interactive)
    labels = runinfo.host_labels([r.run for r in reports])
    if len(reports) == 1:
        run = reports[0].run
        body = run_section(page, reports[0], labels[0], alpha=alpha, min_effect=min_effect)
        return document(f"virtbench report: {run.name} ({run.id})", body, page)
    merged = S.merged_json(reports, alpha=alpha, min_effect=min_effect)
    cats = {lab: tables.category_table(r.rows) for lab, r in zip(labels, reports)}
    nav = " ".join(f'<a href="#r{i}-run">{H.e(lab)}</a>' for i, lab in enumerate(labels))
    baseline = reports[0].run.baseline
    cat_figs = [f for lab in labels if (f := F.category_figure(cats[lab], baseline, lab))]
    pooled = repeats.html(repeats.document(reports, min_effect=min_effect)) if repeats.repeated(reports) else ""
    body = (f"<nav>Hosts: {nav}</nav>{pooled}<h2>Across hosts</h2>"
            + H.category_ranges_html(merged["categories"], labels)
            + H.availability_html(merged["availability"])
            + page.grid(cat_figs, "m-")
            + H.hosts_html(merged["comparison"], labels))
    body = page.filterable(body)
    body += "".join(run_section(page, rep, lab, f"r{i}-", alpha=alpha, min_effect=min_effect)
                    for i, (rep, lab) in enumerate(zip(reports, labels)))
    return document(f"virtbench report: {len(reports)} runs on {len(set(labels))} hosts", body, page)


def write(path: Path, reports: Sequence[Report], **kwargs: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(reports, **kwargs), encoding="utf-8")
    return path

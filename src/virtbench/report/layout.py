"""The report's own parts as sections of the one model: what every renderer lays out.

The relative-performance table, lifecycle, per-category geometric means, the best of each
kind, performance availability, stacks, failures and every statistic are `Section`s built
here from a `Report`'s rows, beside the sections experiment kinds and probes add. The
terminal, the HTML file and the web run page draw `of(report)` with one generic code
path each (tables of plain values and `Comparison` cells, figures, notes), so a new section,
a new column or a new row field shows everywhere without renderer code of its own. The JSON
document carries the same data in its own keys (summary.to_json), so these sections are
marked `in_json=False`.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any

from ..analysis import tables
from ..analysis.summary import Row
from ..constants import LIFECYCLE, LIFECYCLE_STEPS
from ..notation import Ratio, change, interval, label, number, percent, plain, platform_label
from . import boards, run_warnings, runinfo, units
from . import headline as H
from .model import Comparison, Mark, Report, Section, Table
from .runinfo import hosts_of

VERDICT_NOTE = ("1.0 = same, above = better whatever the metric's direction; verdicts: slower/faster when the "
                "95 % interval of the ratio excludes 1, same when its 90 % interval lies within the minimum effect, "
                "otherwise "
                "inconclusive with what would decide it; ⚑ = quality warnings")
IDENTITY = ("benchmark", "metric", "platform")
HIDDEN = {f.name for f in fields(Row) if f.name in ("values", "rounds", "warmup_values", "warmup_rounds", "quality")}
"""Row fields not shown as columns of 'every statistic' (raw values; quality flags are listed apart)."""


def of(report: Report, charts: bool = True) -> list[Section]:
    """Everything a report shows, in order: the headline, the report's own parts as sections
    (results, lifecycle, categories, stacks), the charts, the undecided results with what
    would decide each, the warnings, the run's sections, then the failures and every statistic.
    Every renderer (terminal, HTML file, web run page) lays out this list; charts=False leaves
    the charts' figures out for a renderer that cannot draw them (the terminal), their section stays."""
    return [headline(report), *core_sections(report), *charts_sections(report, charts), *undecided_sections(report),
            *warnings(report), *report.sections, *closing_sections(report)]


def core_sections(report: Report) -> list[Section]:
    """The results, lifecycle, categories, best of each kind, availability and stacks; for a
    run over several hosts, each host's own (against its own baseline), one host after another."""
    return per_host(report, _core)


def closing_sections(report: Report) -> list[Section]:
    """What follows the run's own sections: the failures, then every statistic (per host too)."""
    return per_host(report, lambda r: [failures(r.failures), statistics(r.rows)])


def per_host(report: Report, build: Callable[[Report], list[Section]]) -> list[Section]:
    """build(report), or, when the rows come from several hosts, build of each host's part with
    the host in every title and key, as the text report shows one host at a time."""
    hosts = hosts_of(report.run, report.rows, report.failures)
    if not hosts:
        return build(report)
    out = []
    for h in hosts:
        part = Report(report.run, [r for r in report.rows if getattr(r, "host", None) == h],
                      [f for f in report.failures if f.get("host") == h])
        for s in build(part):
            s.key, s.title = f"{s.key}@{h}", f"host {h}: {s.title}"
            out.append(s)
    return out


def base_key(key: str) -> str:
    """A section's key without the host a multi-host layout appends (`results@pi5-a`)."""
    return key.split("@", 1)[0]


def _core(report: Report) -> list[Section]:
    run, rows = report.run, report.rows
    if not rows:
        return []  # an experiment whose section is the result (density) has no rows here
    baseline = run.baseline
    infos = runinfo.platform_infos(run)
    cat = tables.category_table(rows)
    platforms = [p.name for p in run.platforms]
    label = runinfo.host_labels([run])[0]
    order = [b.key for b in run.benchmarks]
    return [results(rows, platforms, baseline, order, units.labels_of(run)),
            lifecycle(rows, platforms), categories(cat, platforms),
            *[best(tables.best_of_kind(cat, infos, kind), kind) for kind in ("vm", "container")],
            availability(tables.availability({label: cat}, {label: infos})),
            stacks(tables.stack_predictions(rows, infos))]


def _own(key: str, title: str, table: Table, notes: Sequence[str] = (), detail: bool = False) -> Section:
    return Section(key=key, title=title, data=None, tables=[table], notes=list(notes), in_json=False, detail=detail)


def row_key(r: Row) -> tuple[str, ...]:
    """What names a result line: benchmark and metric, and the host where rows carry one."""
    host = getattr(r, "host", None)
    return (r.benchmark, r.metric, *([str(host)] if host else []))


def headline(report: Report) -> Section:
    """Per platform its kind and verdict per category (report/headline.py), then each platform's
    biggest cost, the platforms' labels and the host facts that change how to read them."""
    run, rows = report.run, report.rows
    lines = H.headline([(p.name, p.type, p.config or {}) for p in run.platforms], rows, run.baseline)
    present = {cv.category for line in lines for cv in line.categories}
    cats = [c for c in H.CATEGORIES if c in present] + sorted(present - set(H.CATEGORIES))
    body = []
    for line in lines:
        by = {cv.category: cv for cv in line.categories}
        body.append([line.platform, line.kind,
                     *[Mark(H.cell_text(by[c]), by[c].verdict) if c in by else None for c in cats],
                     f"{line.decided}/{line.compared}"])
    notes = [H.LEGEND] if body else []
    notes += [f"{line.platform}: biggest cost {b['benchmark']} {b['metric']}: {b['verdict_reason']}"
              for line in lines if (b := line.biggest_cost)]
    labels = {p.name: platform_label(p.label) for p in run.platforms if p.label and p.label != p.name}
    if labels:
        notes.append("platforms: " + "; ".join(f"{k} = {v}" for k, v in labels.items()))
    hosts = boards.host_facts(run)
    for name, facts in hosts if len(hosts) > 1 else [("", boards.measured_on(run))]:
        if facts_notes := H.host_notes(facts):
            notes.append(f"host{' ' + name if name else ''}: " + "; ".join(facts_notes))
    table = Table(f"Against {run.baseline}", ["platform", "kind", *cats, "decided"], body if rows else [],
                  key_columns=1)
    return _own("headline", "Headline", table, notes if rows else [])


def warnings(report: Report) -> list[Section]:
    """Every warning in words with its fix: host conditions, campaign design, platforms left out,
    how many comparisons are undecided, then the quality flags that may change a conclusion
    ('warn'); the flags given for context ('info') follow on request."""
    every = run_warnings.warnings(report.run, report.rows)
    info = [w for w in every if w.get("scope") == "result" and w.get("severity") != "warn"]
    shown = [w for w in every if w not in info]
    cols = ["about", "warning, and its fix"]

    def body(ws: Sequence[dict[str, Any]]) -> list[list[Any]]:
        return [[_about(w) + (" (context)" if w.get("severity") == "info" else ""),
                 str(w.get("message", "")) + (f"; fix: {w['fix']}" if w.get("fix") else "")] for w in ws]
    return [_own("warnings", "Warnings", Table("Warnings", cols, body(shown),
                                               empty="No warnings: host conditions and every quality check passed.")),
            _own("quality_info", "Quality notes (context)", Table("Quality notes on results (for context)", cols,
                                                                   body(info)), detail=True)]


def _about(w: dict[str, Any]) -> str:
    if w.get("scope") == "result":
        return f"{w.get('benchmark')} {w.get('metric')} @{w.get('platform')}: {w.get('check')}"
    scope, check = str(w.get("scope") or ""), str(w.get("check") or "")
    return scope if scope == check or not check else f"{scope}: {check}"


def undecided_sections(report: Report) -> list[Section]:
    """The undecided results (per host in a run over several hosts)."""
    return per_host(report, lambda r: [undecided(r.rows)] if r.rows else [])


def undecided(rows: Sequence[Row]) -> Section:
    """Each inconclusive comparison with its estimate, interval and what would decide it."""
    body = [[" ".join(row_key(r)[:2]) + (f" @{row_key(r)[2]}" if len(row_key(r)) > 2 else ""), r.platform,
             r.verdict_reason or ""] for r in rows if r.verdict == "inconclusive"]
    return _own("undecided", "Undecided results", Table(
        "Undecided: the estimate, its 95 % interval and what would decide it",
        ["benchmark / metric", "platform", "why undecided, what would decide it"], body, key_columns=2))


def charts_sections(report: Report, draw: bool = True) -> list[Section]:
    """The run's figures (report/figures.py): the results drawn (categories, stacks, relative
    performance per benchmark, lifecycle) as one section, every repetition (box, trend, sweeps,
    latency) as a second one shown on request. draw=False: the sections without their figures."""
    from . import figures as F

    run = report.run
    if not report.rows or not runinfo.per_benchmark_figures(run):
        return []
    figs = F.run_figures(run, report.rows) if draw else []
    main = [f for f in figs if f.group in ("overview", "stacks") or f.kind == "bar"]
    rest = [f for f in figs if f not in main]
    note = ["charts: in the HTML report (`virtbench report --html FILE`), the web run page and as files "
            "(`--figures DIR`)"]
    return [Section("charts", "Charts", None, figures=main, notes=[] if draw else note, in_json=False),
            Section("charts_detail", "Every repetition, charted", None, figures=rest, in_json=False, detail=True)]


def results(rows: Sequence[Row], platforms: Sequence[str], baseline: str, order: Sequence[str] = (),
            labels: dict[tuple[str, str], str] | None = None) -> Section:
    """Relative performance per benchmark metric (rows) and platform (columns), with verdicts;
    the baseline's mean in a unit a person reads (units.py: 1.873 GB/s, µs of CPU per I/O)."""
    pos = {k: i for i, k in enumerate(order)}
    by: dict[tuple[str, ...], dict[str, Row]] = {}
    for r in sorted(rows, key=lambda r: pos.get(r.benchmark, len(pos))):
        if r.benchmark != LIFECYCLE:
            by.setdefault(row_key(r), {})[r.platform] = r
    others = [p for p in platforms if p != baseline]
    body = []
    for key, per in by.items():
        first = next(iter(per.values()))
        base = per.get(baseline)
        name = " ".join(key[:2]) + (f" @{key[2]}" if len(key) > 2 else "")
        factor, unit = units.scale([base.mean if base else None], first.unit)
        body.append([f"{name} {'↑' if first.higher_is_better else '↓'}",
                     units.labelled(unit, (labels or {}).get((first.benchmark, first.metric), "")),
                     base.mean / factor if base and base.mean is not None else "no data",
                     *[Comparison.of(per[p]) if p in per else None for p in others]])
    table = Table(f"Performance relative to {baseline}", ["benchmark / metric", "unit", f"{baseline} mean", *others],
                  body, key_columns=3, main=True)  # none: an experiment whose section is the result (density)
    return _own("results", "Relative performance", table, [VERDICT_NOTE])


def lifecycle(rows: Sequence[Row], platforms: Sequence[str]) -> Section:
    life = [r for r in rows if r.benchmark == LIFECYCLE]
    known = [f"{s}_s" for s in LIFECYCLE_STEPS]
    steps = sorted(dict.fromkeys(r.metric for r in life), key=lambda m: known.index(m) if m in known else 99)
    per = {(r.platform, r.metric): r.median * 1000 for r in life if r.median is not None}
    body = [[p, *[per.get((p, s)) for s in steps]] for p in platforms] if life else []
    return _own("lifecycle", "Lifecycle", Table("Lifecycle (median ms per step, lower is better; the chart "
                                                "draws the same medians)",
                                                ["platform", *[s.removesuffix("_s") for s in steps]], body,
                                                key_columns=1))


def categories(cat: dict[str, dict[str, tables.CategoryCell]], platforms: Sequence[str]) -> Section:
    """Platforms as rows: any number of them fits the width."""
    body = [[p, *[_ratio(cells[p].geomean) if p in cells else None for cells in cat.values()]]
            for p in platforms if any(p in cells for cells in cat.values())]
    return _own("categories", "Per category", Table(
        "Geometric mean of relative performance per category (1.0 = baseline)", ["platform", *cat], body,
        key_columns=1))


def best(rows: Sequence[tables.BestRow], kind: str) -> Section:
    names = list(dict.fromkeys(n for b in rows for n in b.values))
    title = {"vm": "Hypervisors compared: the best of them per category",
             "container": "Container runtimes compared: the best of them per category"}.get(kind, kind)
    body = [[b.category, *[_ratio(b.values.get(n)) for n in names], b.best or ("tie" if b.decided else "?"),
             b.worst or "-"]
            for b in rows if b.values]
    return _own(f"best_{kind}", f"Best {kind}", Table(title, ["category", *names, "best", "worst"], body, key_columns=1,
                                                      empty=f"No {kind} platforms measured directly on the host."),
                notes=["best and worst follow the verdicts (faster > same > slower), not the raw ratios: "
                       "? while a platform's category is undecided"] if body else [])


def availability(avail: Sequence[dict[str, Any]], kinds: Sequence[str] = ("container", "vm")) -> Section:
    def rng(v: dict[str, Any] | None) -> str:
        if not v:
            return "-"
        return percent(v["min"]) if abs(v["max"] - v["min"]) < 5e-3 else f"{percent(v['min'])} to {percent(v['max'])}"
    body = [[a["category"], percent(1.0), *[rng(a.get(k)) for k in kinds]] for a in avail]
    return _own("availability", "Performance availability", Table(
        "Performance availability: the best platform of each kind per category, its range over the hosts",
        ["category", "bare metal", *kinds], body, key_columns=1))


def stacks(rows: Sequence[tables.StackRow]) -> Section:
    body = [[s.platform, f"{s.outer} × {s.inner}", f"{s.benchmark} {s.metric}", _ratio(s.outer_relative),
             _ratio(s.inner_relative), _ratio(s.predicted), _ratio(s.measured), change(1 + s.error)] for s in rows]
    return _own("stacks", "Stacked platforms", Table(
        "Stack prediction: measured against the product of the layers' relative performances",
        ["stack", "layers", "benchmark / metric", "outer", "inner", "predicted", "measured", "error"], body,
        key_columns=1, empty="No stacked platforms (a platform with inside:) in this run."))


def failures(items: Sequence[dict[str, Any]]) -> Section:
    body = [[f["round"], f["platform"], f["benchmark"], f.get("exit_code"), f["error"], f.get("output_tail", "")]
            for f in items]
    return _own("failures", "Failures", Table(f"{len(items)} failed executions (raw output: `virtbench show RUN "
                                              "--failed`)", ["round", "platform", "benchmark", "exit", "error",
                                                             "output (tail)"], body, empty="No failed executions."))


def statistics(rows: Sequence[Row]) -> Section:
    """Every public field of every row, in the row's own field order: a field added to Row
    (a host, a new statistic) becomes a column here without a change."""
    cols = [k for k in (rows[0].public() if rows else {}) if k not in HIDDEN]
    cols = [*IDENTITY, *[c for c in cols if c not in IDENTITY]]
    body = [[_plain(p[c]) for c in cols] for p in (r.public() for r in rows)]  # each row's fields once
    return _own("statistics", "Every statistic", Table("All statistics", [label(c) for c in cols], body, key_columns=3),
                detail=True)


def _ratio(v: float | None) -> Ratio | None:
    return None if v is None else Ratio(v)


def _plain(v: Any) -> Any:
    """A statistic as the report writes it: an interval `[lo, hi]`, booleans and lists in words."""
    if isinstance(v, list | tuple) and len(v) == 2 and all(isinstance(x, int | float) for x in v):
        return interval(v[0], v[1], number)
    return v if isinstance(v, int | float) and not isinstance(v, bool) or v is None else plain(v)

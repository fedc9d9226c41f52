"""What each figure shows, as plain data; html.py draws it with plotly, static.py with matplotlib.

Kinds: bar (relative performance with 95% CI error bars, per benchmark; category means;
lifecycle times), box (raw repetitions as box and strip), trend (value per repetition per
platform, warm-up hollow: the 'verify' view), sweep (a parameter against a metric when a
benchmark appears with several values of one parameter), count (the same for an
instance-count parameter: aggregate throughput against instances, with linear scaling from
the baseline's first point as reference), latency (percentiles on the HDR axis
x = 1/(1-p), log), stack (measured against predicted for stacked platforms).
"""
from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..analysis.stats import MIN_EFFECT
from ..analysis.summary import Row
from ..analysis.tables import CategoryCell, StackRow, category_table, stack_predictions
from ..constants import LIFECYCLE, LIFECYCLE_STEPS
from ..notation import change, ratio
from ..notation import unit as unit_of
from .runinfo import host_labels, hosts_of, platform_infos
from .units import noise_checked

COUNT_PARAMS = ("instances", "count", "containers", "vms", "copies", "parallel", "clients", "n", "multi", "threads",
                "jobs", "numjobs")
PERCENTILE_RE = re.compile(r"^(?P<pre>.*?)p(?P<int>\d{1,2})(?:_(?P<frac>\d+))?(?P<suf>_[A-Za-z]+)?$")


@dataclass
class Series:
    name: str
    x: list[Any]
    y: list[float | None]
    lo: list[float | None] | None = None
    """Lower end of each point's interval (absolute value, not a distance)."""
    hi: list[float | None] | None = None
    style: str = "line"
    """bar, box, line, points, hollow (warm-up), dashed (reference)."""
    text: list[str] | None = None
    marks: list[str | None] | None = None
    """Each point's verdict (slower, faster, same, inconclusive), drawn as its marker."""


RATIO = "ratio"
"""meta key of a figure of ratios to the baseline: drawn as points with their intervals on a
tight axis around 1.0, never as bars from 0 (a 3-10 % effect would vanish)."""
POINTS = "points"
"""meta key of a figure of absolute values drawn as points with their intervals (lifecycle
times, on a log axis), never as bars from 0."""
BAND = "band"
"""meta key: (low, high) of the verdict's 'same' band around 1.0, shaded behind the points."""
SAME_BAND = (1 / (1 + MIN_EFFECT), 1 + MIN_EFFECT)
BAND_LABEL = f"shaded: the same within {MIN_EFFECT * 100:.0f} % (the verdict's default margin)"


@dataclass
class FigureSpec:
    id: str
    kind: str
    title: str
    xlabel: str
    ylabel: str
    series: list[Series]
    group: str = ""
    """Section the figure belongs to (a benchmark key, 'overview', 'stacks')."""
    xlog: bool = False
    ylog: bool = False
    xticks: tuple[list[float], list[str]] | None = None
    refline: float | None = None
    note: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    static: bool = True
    """Written as a file by --figures; False for per-point views only the interactive reports
    show (a line run's per-length figures: as files they were hundreds)."""


def slug(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", "-".join(parts)).strip("-").lower()


def _arrow(row: Row) -> str:
    return "higher is better" if row.higher_is_better else "lower is better"


def _by_metric(rows: Sequence[Row]) -> dict[tuple[str, str], list[Row]]:
    out: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows:
        out[(r.benchmark, r.metric)].append(r)
    return out


INTERVAL_NOTE = "error bars: the verdict's 95 % interval of the ratio (paired by round where the rounds pair)"


def verdict_series(cells: Sequence[Row], label: dict[int, str]) -> list[Series]:
    """One series per platform: each cell's verdict estimate (`relative`) inside its interval
    (`relative_ci95`), marked by its verdict; label: id(row) -> its category on the axis."""
    labels = list(dict.fromkeys(label[id(r)] for r in cells))
    series = []
    for platform in dict.fromkeys(r.platform for r in cells):
        per = {label[id(r)]: r for r in cells if r.platform == platform}
        get = [per.get(k) for k in labels]
        series.append(Series(platform, labels, [r.relative if r else None for r in get],
                             [r.relative_ci95[0] if r and r.relative_ci95 else None for r in get],
                             [r.relative_ci95[1] if r and r.relative_ci95 else None for r in get], "points",
                             [f"{r.verdict}: {r.verdict_reason}" if r else "" for r in get],
                             [r.verdict if r else None for r in get]))
    return series


def story_figure(rows: Sequence[Row], baseline: str, names: dict[str, str] | None = None) -> FigureSpec | None:
    """The first figure: every platform and benchmark metric against the baseline, each as its
    verdict's estimate with its interval, marked slower, faster, same or undecided."""
    names = names or {}
    pos = {k: i for i, k in enumerate(names)}
    cells = [r for r in sorted(rows, key=lambda r: pos.get(r.benchmark, len(pos)))
             if r.benchmark != LIFECYCLE and r.platform != baseline and r.relative is not None]
    if not cells:
        return None
    series = verdict_series(cells, {id(r): f"{r.benchmark} {r.metric}" for r in cells})
    return FigureSpec("story", "bar", f"Every result relative to {baseline}", "benchmark metric",
                      f"relative to {baseline} (higher = better)", series, group="overview", refline=1.0,
                      note=f"{INTERVAL_NOTE}; {BAND_LABEL}",
                      meta={RATIO: True, "story": True, BAND: SAME_BAND, "band_label": BAND_LABEL})


def bar_figures(rows: Sequence[Row], baseline: str, names: dict[str, str] | None = None) -> list[FigureSpec]:
    """Per benchmark (all keys of one benchmark together): relative performance with the verdict's
    95 % interval (the numbers of the tables: `relative` inside `relative_ci95`).

    names: benchmark key -> benchmark name; keys of a sweep share one figure, labelled by
    the key's parameter part.
    """
    names = names or {}
    pos = {k: i for i, k in enumerate(names)}
    benches: dict[str, list[Row]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: pos.get(r.benchmark, len(pos))):
        if r.benchmark != LIFECYCLE and r.platform != baseline and r.relative is not None:
            benches[names.get(r.benchmark, r.benchmark)].append(r)
    out = []
    for bench, brs in benches.items():
        single = len({r.benchmark for r in brs}) == 1
        label = {id(r): r.metric if single else f"{r.benchmark.removeprefix(bench)} {r.metric}".strip() for r in brs}
        series = verdict_series(brs, label)
        out.append(FigureSpec(slug("bar", bench), "bar", f"{bench}: performance relative to {baseline}",
                              "metric", f"relative to {baseline} (1.0 = same, higher = better)", series,
                              group=bench, refline=1.0, note=f"{INTERVAL_NOTE}; {BAND_LABEL}",
                              meta={RATIO: True, BAND: SAME_BAND, "band_label": BAND_LABEL}))
    return out


def category_figure(table: dict[str, dict[str, CategoryCell]], baseline: str, host: str = "") -> FigureSpec | None:
    if not table:
        return None
    cats = list(table)
    platforms = list(dict.fromkeys(p for cells in table.values() for p in cells if p != baseline))
    def rng(cell: CategoryCell | None) -> str:
        return f"{cell.verdict}; metrics from {ratio(cell.low)} to {ratio(cell.high)}" if cell else ""
    series = [Series(p, cats, [table[c][p].geomean if p in table[c] else None for c in cats], style="points",
                     text=[rng(table[c].get(p)) for c in cats],
                     marks=[table[c][p].verdict if p in table[c] else None for c in cats]) for p in platforms]
    suffix = f" on {host}" if host else ""
    return FigureSpec(slug("categories", host), "bar", f"Geometric mean of relative performance per category{suffix}",
                      "category", f"relative to {baseline}", series, group="overview", refline=1.0,
                      note="points only: a geometric mean of metrics has no interval (the lowest and highest "
                      "metric are in the table)", meta={RATIO: True})


def lifecycle_figure(rows: Sequence[Row]) -> FigureSpec | None:
    """The lifecycle table's numbers drawn: the median per step in ms, with its bootstrap interval."""
    life = [r for r in rows if r.benchmark == LIFECYCLE and r.median is not None]
    if not life:
        return None
    known = [f"{s}_s" for s in LIFECYCLE_STEPS]
    steps = sorted(dict.fromkeys(r.metric for r in life), key=lambda m: known.index(m) if m in known else len(known))

    def ms(v: float | None) -> float | None:
        return None if v is None else v * 1000.0
    series = []
    for platform in dict.fromkeys(r.platform for r in life):
        per = {r.metric: r for r in life if r.platform == platform}
        get = [per.get(s) for s in steps]
        series.append(Series(platform, [s.removesuffix("_s") for s in steps], [ms(r.median) if r else None for r in get],
                             [ms(r.median_ci95[0]) if r and r.median_ci95 else None for r in get],
                             [ms(r.median_ci95[1]) if r and r.median_ci95 else None for r in get], "points"))
    return FigureSpec("lifecycle", "bar", "Instance lifecycle: median ms per step (lower is better)", "step",
                      "ms (log scale)", series, group=LIFECYCLE, ylog=True, meta={POINTS: True},
                      note="points: the median; error bars: its 95 % bootstrap interval; a log axis, so a step of "
                           "0.5 ms shows beside one of 250 ms")


def box_figures(rows: Sequence[Row], names: dict[str, str] | None = None) -> list[FigureSpec]:
    """Raw repetitions per platform: the distribution behind every mean."""
    names = names or {}
    out = []
    for (bench, metric), mrs in _by_metric(rows).items():
        series = [Series(r.platform, [r.platform] * r.n, list(r.values), style="box",
                         text=[f"round {k}" for k in r.rounds]) for r in mrs if r.values]
        if series:
            out.append(FigureSpec(slug("box", bench, metric), "box", f"{bench} {metric}: all repetitions",
                                  "platform", f"{metric} [{unit_of(mrs[0].unit)}] ({_arrow(mrs[0])})", series,
                                  group=names.get(bench, bench)))
    return out


def trend_figures(rows: Sequence[Row], names: dict[str, str] | None = None, noise_check: bool = False
                  ) -> list[FigureSpec]:
    """Value against the measured round (1, 2, ...) per platform; the warm-up at round 0 and below,
    hollow, in the platform's colour and legend entry (drift shows as slope). noise_check: the
    baseline's noise-check executions ran inside the last warm-up round, so they are drawn there."""
    names = names or {}
    out = []
    for (bench, metric), mrs in _by_metric(rows).items():
        series: list[Series] = []
        for r in mrs:
            if r.warmup_values:
                series.append(Series(r.platform, list(r.warmup_rounds), list(r.warmup_values), style="hollow"))
            if r.values:
                series.append(Series(r.platform, list(r.rounds), list(r.values), style="line"))
        if series:
            flagged = sorted({r.platform for r in mrs for f in r.quality if f["check"] == "drift"})
            notes = ["hollow: warm-up (round 0 and below), not in the statistics"
                     + (", with the baseline's noise check" if noise_check else "")]
            notes += [f"drift flagged: {', '.join(flagged)}"] if flagged else []
            out.append(FigureSpec(slug("trend", bench, metric), "trend", f"{bench} {metric}: per repetition",
                                  "measured round", f"{metric} [{unit_of(mrs[0].unit)}]", series,
                                  group=names.get(bench, bench), note="; ".join(notes)))
    return out


def _value(v: Any) -> Any:
    try:
        return float(v)
    except (TypeError, ValueError):
        return str(v)


@dataclass(frozen=True)
class BenchPoint:
    """One benchmark key of a run as the figures see it: its parameters plus the runner-level
    `instances` (kept in the run's campaign, not in the tool's parameters) so that sweeps over
    the instance count are plotted like any other sweep."""

    key: str
    name: str
    params: dict[str, Any]


def bench_points(run: Any) -> list[BenchPoint]:
    instances = {b.get("key"): b["instances"] for b in run.campaign.get("benchmarks", [])
                 if b.get("instances") is not None}
    return [BenchPoint(b.key, b.name, {**b.params, "instances": instances[b.key]} if b.key in instances else b.params)
            for b in run.benchmarks]


def sweeps(benchmarks: Sequence[Any]) -> list[tuple[str, str, dict[str, Any], list[tuple[Any, str]]]]:
    """(name, parameter, fixed parameters, [(value, key)...]) for every one-parameter sweep.

    The fixed parameters named are those that vary elsewhere in the campaign (what tells
    two sweeps of one benchmark apart), not every constant.

    Keys of one benchmark that agree on every parameter but one form a sweep over it; a
    campaign crossing two parameters yields one sweep per value of the other.
    """
    by_name: dict[str, list[Any]] = defaultdict(list)
    for b in benchmarks:
        by_name[b.name].append(b)
    out = []
    for name, group in by_name.items():
        params = sorted(set().union(*(b.params for b in group)))
        varying = [k for k in params if len({repr(b.params.get(k)) for b in group}) > 1]
        for param in varying:
            parts: dict[str, list[Any]] = defaultdict(list)
            for b in group:
                parts[repr([(k, b.params.get(k)) for k in params if k != param])].append(b)
            for members in parts.values():
                if len({repr(b.params.get(param)) for b in members}) < 2:
                    continue
                fixed = {k: members[0].params.get(k) for k in varying if k != param}
                points = sorted(((_value(b.params.get(param)), b.key) for b in members),
                                key=lambda t: (isinstance(t[0], str), t[0]))
                out.append((name, param, fixed, points))
    return out


def sweep_figures(rows: Sequence[Row], benchmarks: Sequence[Any]) -> list[FigureSpec]:
    """A line plot of each metric against the swept parameter, per platform (mean and 95% CI).

    benchmarks: the run's benchmarks (key, name, params). A count-like parameter makes a
    'count' figure (throughput metrics only, with linear scaling as reference).
    """
    out = []
    metric_rows = _by_metric(rows)
    many = len(sweeps(benchmarks)) > 1
    for name, param, fixed, points in sweeps(benchmarks):
        xs = [x for x, _ in points]
        keys = [k for _, k in points]
        numeric = all(isinstance(x, float) for x in xs)
        is_count = param.lower() in COUNT_PARAMS
        where = ", ".join(f"{k}={v}" for k, v in fixed.items()) if many and fixed else ""
        metrics = list(dict.fromkeys(m for (bench, m) in metric_rows if bench in set(keys)))
        for metric in metrics:
            lines: dict[str, list[Row | None]] = {}
            sample_row = None
            for i, key in enumerate(keys):
                for r in metric_rows.get((key, metric), []):
                    lines.setdefault(r.platform, [None] * len(keys))[i] = r
                    sample_row = r
            if sample_row is None or (is_count and not sample_row.higher_is_better):
                continue
            series = [Series(p, xs, [r.mean if r else None for r in rs],
                             [r.mean_boot_ci95[0] if r and r.mean_boot_ci95 else None for r in rs],
                             [r.mean_boot_ci95[1] if r and r.mean_boot_ci95 else None for r in rs])
                      for p, rs in lines.items()]
            if is_count and numeric and series and series[0].y[0]:
                first = series[0]
                series.append(Series(f"linear scaling ({first.name})", xs,
                                     [first.y[0] * x / xs[0] for x in xs], style="dashed"))
            xlog = numeric and min(xs) > 0 and max(xs) / min(xs) >= 100
            kind = "count" if is_count else "sweep"
            title = f"{name}: {metric} against {param}" + (" (instances at once)" if is_count else "") \
                + (f" ({where})" if where else "")
            out.append(FigureSpec(slug(kind, name, metric, param, where), kind, title, param,
                                  f"{metric} [{unit_of(sample_row.unit)}] ({_arrow(sample_row)})", series, group=name,
                                  xlog=bool(xlog), note="mean and 95% bootstrap CI per point",
                                  meta={"param": param, "fixed": fixed, "categorical_x": not numeric}))
    return out


def percentile_of(metric: str) -> tuple[str, float] | None:
    """('prefix|suffix', p) for metric names like p50, p99, p99_9, lat_p99_999_us; None otherwise."""
    m = PERCENTILE_RE.match(metric)
    if not m:
        return None
    p = float(f"{m['int']}.{m['frac'] or 0}")
    if not 0 < p < 100:
        return None
    return f"{m['pre']}|{m['suf'] or ''}", p / 100


def hdr_ticks(ps: Sequence[float]) -> tuple[list[float], list[str]]:
    """Ticks from the median up: below it the log axis crowds the labels together."""
    shown = [p for p in ps if p >= 0.5] or list(ps)
    return [1 / (1 - p) for p in shown], [f"{p * 100:.6g}%" for p in shown]


def latency_figures(rows: Sequence[Row], names: dict[str, str] | None = None) -> list[FigureSpec]:
    """Percentile metrics of one benchmark on the HDR axis: x = 1/(1-p), log scale."""
    names = names or {}
    groups: dict[tuple[str, str], dict[float, list[Row]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        hit = percentile_of(r.metric)
        if hit and r.median is not None:
            groups[(r.benchmark, hit[0])][hit[1]].append(r)
    out = []
    for (bench, tag), per_p in groups.items():
        if len(per_p) < 2:
            continue
        ps = sorted(per_p)
        platforms = list(dict.fromkeys(r.platform for p in ps for r in per_p[p]))
        series = []
        for platform in platforms:
            pick = [next((r for r in per_p[p] if r.platform == platform), None) for p in ps]
            series.append(Series(platform, [1 / (1 - p) for p in ps], [r.median if r else None for r in pick],
                                 [r.median_ci95[0] if r and r.median_ci95 else None for r in pick],
                                 [r.median_ci95[1] if r and r.median_ci95 else None for r in pick],
                                 text=[f"p{p * 100:.6g}" for p in ps]))
        unit = per_p[ps[0]][0].unit
        label = tag.replace("|", " ").strip() or "latency"
        out.append(FigureSpec(slug("latency", bench, tag), "latency", f"{bench}: {label} percentiles (HDR axis)",
                              "percentile", f"latency [{unit_of(unit)}]", series, group=names.get(bench, bench), xlog=True,
                              ylog=True,
                              xticks=hdr_ticks(ps), note="median over repetitions, 95% bootstrap CI; "
                              "p99.999 needs well over 10^5 samples per repetition to mean anything"))
    return out


def stack_figures(stacks: Sequence[StackRow]) -> list[FigureSpec]:
    """Fig. 4: measured relative performance of a stack against the product of its layers."""
    out = []
    for platform in dict.fromkeys(s.platform for s in stacks):
        rs = [s for s in stacks if s.platform == platform]
        xs = [f"{s.benchmark} {s.metric}" for s in rs]
        measured = Series("measured", xs, [s.measured for s in rs],
                          [s.measured_ci95[0] if s.measured_ci95 else None for s in rs],
                          [s.measured_ci95[1] if s.measured_ci95 else None for s in rs], "points")
        predicted = Series(f"predicted ({rs[0].outer} x {rs[0].inner})", xs, [s.predicted for s in rs], style="points",
                           text=[f"prediction error {change(1 + s.error)}" for s in rs])
        out.append(FigureSpec(slug("stack", platform), "stack", f"{platform}: measured against predicted "
                              f"({rs[0].outer} x {rs[0].inner})", "benchmark metric", "relative to baseline",
                              [measured, predicted], group="stacks", refline=1.0,
                              note="prediction = product of the layers' relative performances; error bars: "
                              "95 % interval of the measured ratio (the prediction has none)", meta={RATIO: True}))
    return out


def all_figures(rows: Sequence[Row], baseline: str, benchmarks: Sequence[Any],
                categories: dict[str, dict[str, CategoryCell]], stacks: Sequence[StackRow],
                noise_check: bool = False) -> list[FigureSpec]:
    """Every figure of one run: overview first, then per benchmark in the campaign's order."""
    names = {b.key: b.name for b in benchmarks}
    story = story_figure(rows, baseline, names)
    out: list[FigureSpec] = [story] if story else []
    cat = category_figure(categories, baseline)
    out += [cat] if cat else []
    out += stack_figures(stacks)
    per: list[FigureSpec] = [*bar_figures(rows, baseline, names), *sweep_figures(rows, benchmarks),
                             *latency_figures(rows, names)]
    life = lifecycle_figure(rows)
    per += [life] if life else []
    per += box_figures(rows, names) + trend_figures(rows, names, noise_check)
    order = {n: i for i, n in enumerate(dict.fromkeys(b.name for b in benchmarks))}
    return out + sorted(per, key=lambda f: order.get(f.group, len(order)))


def run_figures(run: Any, rows: Sequence[Row]) -> list[FigureSpec]:
    """Every figure of one run; a run over several hosts gets each host's own (its rows against
    its own baseline), the host in each id and title, as the layout gives each host its tables."""
    def of(rs: Sequence[Row]) -> list[FigureSpec]:
        return all_figures(rs, run.baseline, bench_points(run), category_table(rs),
                           stack_predictions(rs, platform_infos(run)), noise_checked(run.campaign))

    hosts = hosts_of(run, rows)
    if not hosts:
        return of(rows)
    out = []
    for h in hosts:
        for f in of([r for r in rows if getattr(r, "host", None) == h]):
            f.id, f.title = slug(h, f.id), f"host {h}: {f.title}"
            out.append(f)
    return out


def finite(v: Any) -> Any:
    """NaN and infinities become None: JSON has no NaN and browsers reject it."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def for_files(reports: Sequence[Any]) -> tuple[list[FigureSpec], list[str]]:
    """What --figures writes for these reports (model.Report): the runs' figures, then their
    sections' (experiment kinds, probes) that are meant as files; and the platform names."""
    specs, platforms = for_reports(reports)
    return [*specs, *section_figures(reports)], platforms


def section_figures(reports: Sequence[Any]) -> list[FigureSpec]:
    """The figures of the reports' sections (experiment kinds, probes) that are meant as files."""
    return [f for r in reports for s in r.sections for f in s.figures if f.static]


def for_reports(reports: Sequence[Any]) -> tuple[list[FigureSpec], list[str]]:
    """Every figure of one or several runs (ids prefixed with the host when several), and the
    platform names in run order, so static files colour platforms as the HTML report does."""
    from .runinfo import per_benchmark_figures

    specs: list[FigureSpec] = []
    labels = host_labels([r.run for r in reports])
    for report, label in zip(reports, labels):
        run, rows = report.run, report.rows
        if not per_benchmark_figures(run):
            continue  # an experiment kind's figures are its section's (one per kind, not per point)
        for spec in run_figures(run, rows):
            if len(reports) > 1:
                spec.id = slug(label, spec.id)
            specs.append(spec)
    platforms = list(dict.fromkeys(p.name for r in reports for p in r.run.platforms))
    return specs, platforms

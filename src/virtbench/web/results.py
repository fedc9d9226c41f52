"""Verify and compare: the analysis package's rows, shaped for the pages and the API.

Statistics, tests, quality flags and category tables all come from virtbench.analysis
(through report.builder), so the web shows exactly what `virtbench report` computes; the
reports come through cache.ReportCache, so a page over a large finished run is a lookup.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..analysis import quality, tables
from ..analysis import summary as summary_mod
from ..analysis.summary import Row
from ..report import figures, headline, run_warnings, runinfo
from ..report.model import Report
from ..report.progress import Cap, eta_words, remaining
from ..report.result_rows import declared_metrics
from ..rounds import Rounds
from ..store import browse
from ..store.db import Store, now
from ..store.models import Run
from . import queries
from .cache import ReportCache


def full_report(store: Store, cache: ReportCache, run_id: str) -> Report:
    """The run's report with every experiment and probe section: what `virtbench report` shows,
    for the run page, the API and the downloads alike (rows from the cache)."""
    from ..report.sections import sections

    report = cache.report(store, run_id)
    return replace(report, sections=sections(store, report.run))


def row_json(r: Row) -> dict[str, Any]:
    return {**{k: figures.finite(v) if isinstance(v, float) else v for k, v in r.public().items()},
            "category": r.category}


# -- progress -----------------------------------------------------------------------------------
def progress(store: Store, run_id: str) -> dict[str, Any]:
    """The run's live state (store/browse.py) with its counts as a person reads them: executions
    done, planned so far (the campaign's rounds plus every extra round the adaptive rule has
    added, as logged in the run) and the cap (what the adaptive rule could add at most), so an
    adaptive run never shows "254/96". `expected` is the planned count, `percent` done of it."""
    doc = queries.progress(store, run_id)
    run = queries.get_run(store, run_id)
    planned, cap = planned_executions(run)
    planned = max(planned, doc["executions"])
    cap = max(cap, planned)
    return {**doc, "expected": planned, "planned": planned, "cap": cap,
            "percent": min(100, round(100 * doc["executions"] / planned)) if planned else 0,
            **eta(run, doc["executions"], planned, cap)}


def eta(run: Run, done: int, planned: int, cap: int) -> dict[str, Any]:
    """The terminal bar's ETA (report.progress) for a running run: the planned executions at the
    rate measured since the run started, and with adaptive rounds the most it may still take
    (its round and minute caps). Time a resumed run stood still counts, so it errs long."""
    if run.status != "running" or run.started_at is None:
        return {"eta": "", "eta_seconds": None, "eta_most_seconds": None}
    elapsed = (now() - run.started_at).total_seconds()
    rule = (run.campaign or {}).get("adaptive")
    limit = None
    if isinstance(rule, dict):
        per_round = len(queries.platform_names(run)) * (len(queries.benchmark_keys(run)) + 1)
        limit = Cap(cap, per_round, 60 * float(rule.get("max_minutes", 60) or 60))  # deadline: seconds after the start
    left = remaining(done, planned, 0, elapsed, limit, now=elapsed)
    return {"eta": eta_words(left), "eta_seconds": None if left is None else round(left[0]),
            "eta_most_seconds": None if left is None or left[1] is None else round(left[1])}


def with_planned(store: Store, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run list entries with the running ones' `expected` as planned so far (progress()), so a list
    shows done/planned before its poller first asks."""
    for r in runs:
        if r["status"] == "running":
            planned, _ = planned_executions(queries.get_run(store, r["id"]))
            r["expected"] = max(planned, r["executions"])
            r["percent"] = min(100, round(100 * r["executions"] / r["expected"])) if r["expected"] else 0
    return runs


def planned_executions(run: Run) -> tuple[int, int]:
    """(planned so far, cap) of a run's executions: its plan's declared executions (as the run
    recorded them, on each of its hosts; a run stored before it recorded its plan: rounds x
    platforms x (benchmarks + lifecycle)), plus each logged extra round's platforms and
    benchmarks; the cap counts every platform up to the adaptive rule's max_repetitions (the
    time cap may stop it earlier)."""
    campaign = run.campaign or {}
    platforms, benchmarks = queries.platform_names(run), queries.benchmark_keys(run)
    recorded = runinfo.recorded(run)
    hosts = max(1, len(runinfo.run_hosts(run)))
    if "declared" in recorded:
        base, top = int(recorded["declared"]) * hosts, int(recorded.get("at_cap", recorded["declared"])) * hosts
    else:
        base = queries.expected_total(campaign, len(platforms), len(benchmarks))
        top = base + Rounds.of(campaign).extra_at_most * len(platforms) * (len(benchmarks) + 1)
    rule = campaign.get("adaptive")
    if not isinstance(rule, dict):
        return base, base
    extra = 0
    for entry in (run.provenance or {}).get("adaptive", []):
        per = entry.get("benchmarks") or {}
        extra += sum(len(per.get(p, benchmarks)) + 1 for p in entry.get("platforms", []))
    return base + extra, top


# -- verify -------------------------------------------------------------------------------------
def verify(store: Store, cache: ReportCache, run_id: str, benchmark: str | None = None,
           metric: str | None = None, table_limit: int | None = None) -> dict[str, Any]:
    """Every repetition of one metric per platform, with the flags, and an overview of all metrics.

    table_limit: rows per platform table (pages); outliers and failures are always listed,
    the chart always has every value, and the API passes None (everything).
    """
    report = cache.report(store, run_id)
    run, rows = report.run, report.rows
    overview = [{"benchmark": r.benchmark, "metric": r.metric, "platform": r.platform, "unit": r.unit,
                 "n": r.n, "failed": r.failed, "cv": figures.finite(r.cv) if r.cv is not None else None,
                 "flags": r.quality} for r in rows]
    metrics = list(dict.fromkeys((r.benchmark, r.metric) for r in rows))
    if (benchmark, metric) not in metrics:
        flagged = [(r.benchmark, r.metric) for r in rows if r.quality and r.benchmark != "lifecycle"]
        benchmark, metric = (flagged or [m for m in metrics if m[0] != "lifecycle"] or metrics or [("", "")])[0]
    out: dict[str, Any] = {"run": run.id, "name": run.name, "status": run.status, "benchmark": benchmark,
                           "metric": metric, "metrics": [{"benchmark": b, "metric": m} for b, m in metrics],
                           "overview": overview, "platforms": [], "figure": None}
    if benchmark is None or metric is None:
        return out
    mrows = [r for r in rows if r.benchmark == benchmark and r.metric == metric]
    points = queries.sample_points(store, run.id, benchmark, metric)
    fails = queries.failed_points(store, run.id, benchmark)
    by_platform: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in points:
        by_platform[p["platform"]].append(p)
    for r in mrows:
        pts = by_platform.get(r.platform, [])
        measured = [p for p in pts if not p["warmup"]]
        median = float(np.median([p["value"] for p in measured])) if measured else None
        for p, is_out in zip(measured, quality.outlier_mask([p["value"] for p in measured])):
            p["outlier"] = is_out
            p["deviation"] = (p["value"] / median - 1) if median else None
        for p in pts:
            p.setdefault("outlier", False)
            p.setdefault("deviation", None)
        out["platforms"].append({
            "platform": r.platform, "unit": r.unit, "higher_is_better": r.higher_is_better, "n": r.n,
            "mean": r.mean, "median": r.median, "stdev": r.stdev, "cv": r.cv, "ci95": r.ci95, "flags": r.quality,
            "drift": any(f["check"] == "drift" for f in r.quality),
            "outliers": sum(1 for p in pts if p["outlier"]),
            "points": pts, "failures": [f for f in fails if f["platform"] == r.platform],
            "rounds": sorted([{**p, "failed": False} for p in pts] +
                             [{**f, "failed": True} for f in fails if f["platform"] == r.platform],
                             key=lambda e: (e["round"], e["failed"]))})
    if table_limit:
        for pl in out["platforms"]:
            rounds = pl["rounds"]
            pl["rounds"] = [e for i, e in enumerate(rounds) if i < table_limit or e["failed"] or e.get("outlier")]
            pl["hidden"] = len(rounds) - len(pl["rounds"])
    specs = [f for f in figures.trend_figures(mrows)]
    out["figure"] = specs[0] if specs else None
    out["outlier_rounds"] = {pl["platform"]: [p["round"] for p in pl["points"] if p["outlier"]]
                             for pl in out["platforms"]}
    return out


# -- dashboard ----------------------------------------------------------------------------------
def with_verdicts(store: Store, cache: ReportCache, result: dict[str, Any]) -> dict[str, Any]:
    """A recent result with each platform's verdict per category (the headline's rule), so the
    dashboard colours what the statistics decided, never the raw ratio."""
    rows, _ = cache.rows(store, result["id"])
    return {**result, "verdicts": category_verdicts(rows, list(result["table"]), result["baseline"])}


def repeated_results(store: Store, cache: ReportCache, recent: int = 12, most: int = 5) -> list[dict[str, Any]]:
    """Repetitions of one campaign on one host among the recent finished runs, each group pooled
    (analysis/repeats.py: one verdict per cell from each run's ratios to its own baseline) per
    platform and category, with the cells the runs decided differently counted. Three identical
    quick runs showed lxc application ▼, = and ? side by side with nothing pooling them."""
    from ..analysis.repeats import by_category, pool, repeat_key

    runs = queries.get_runs(store, [r.id for r in browse.recent_finished(store, recent)])
    groups: dict[tuple[Any, ...], list[Run]] = defaultdict(list)
    for run in runs:
        groups[repeat_key(run)].append(run)
    out = []
    for group in groups.values():
        if len(group) < 2:
            continue
        group = sorted(group[:most], key=lambda r: r.created_at)
        cells = pool([(r.id, cache.rows(store, r.id)[0]) for r in group], group[0].baseline)
        out.append({"runs": [r.id for r in group], "name": group[0].name, "baseline": group[0].baseline,
                    "host": group[0].host.hostname if group[0].host else None, "cells": len(cells),
                    "disagreements": sum(c.disagree for c in cells), "categories": by_category(cells)})
    return out


# -- compare ------------------------------------------------------------------------------------
def _labels(runs: Sequence[Run], attr: str, ident: str, what: str) -> tuple[dict[tuple[str, str], str], list[str]]:
    """(run id, name) -> label: the name, unless another run uses it with a different setup."""
    first: dict[str, Any] = {}
    labels: dict[tuple[str, str], str] = {}
    notes: list[str] = []
    for run in runs:
        for item in getattr(run, attr):
            name, setup = getattr(item, ident), (item.params if attr == "benchmarks" else
                                                 {k: v for k, v in (item.config or {}).items() if k != "name"})
            if name not in first:
                first[name] = setup
                labels[(run.id, name)] = name
            elif first[name] == setup:
                labels[(run.id, name)] = name
            else:
                labels[(run.id, name)] = f"{name} ({run.id})"
                notes.append(f"{what} {name!r} of run {run.id} has a different setup: kept apart")
    return labels, notes


def pooled_rows(store: Store, cache: ReportCache, runs: Sequence[Run], baseline: str, *, inference: bool = True,
                bootstrap: bool = True) -> tuple[list[Row], list[str], list[str]]:
    """Samples of several runs pooled per (benchmark, metric, platform), then summarized once.

    One run with its own baseline is its cached report. Otherwise the samples come from the
    runs' cached reports; rounds are offset run after run, so the drift check sees the runs
    in the order measured. The result is cached while none of the runs changes.
    inference=False: ratios, verdicts and their intervals only (summarize_grouped), for
    views that show nothing else; bootstrap=False: all but the bootstrap intervals (the page
    shows flags and tests, the API every field).
    """
    if len(runs) == 1 and baseline == runs[0].baseline:
        rows = cache.report(store, runs[0].id).rows
        return rows, [p.name for p in runs[0].platforms], []
    images: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        images[image_tag(run)].append(run)
    if len(images) > 1:
        return _apart(store, cache, images, baseline, inference, bootstrap)
    what = f"pooled:{baseline}:{int(inference)}{int(bootstrap)}"
    return cache.pooled(store, runs, what, lambda keys: _pool(store, cache, runs, baseline, inference, bootstrap, keys))


def image_tag(run: Run) -> str:
    """What identifies the guest image a run measured: its Debian release and recipe hash."""
    image = run.image or {}
    return f"{image.get('release') or '?'} {str(image.get('recipe_hash') or '?')[:8]}"


def _apart(store: Store, cache: ReportCache, images: dict[str, list[Run]], baseline: str, inference: bool,
           bootstrap: bool) -> tuple[list[Row], list[str], list[str]]:
    """Runs of different guest images are never pooled: each image's runs are summarized against
    that image's baseline and their platforms labelled with the image (another release or recipe
    means other binaries, so a difference would not be the platform's)."""
    rows: list[Row] = []
    platforms: list[str] = []
    notes = [f"the runs measured different guest images ({', '.join(images)}): kept apart, each image's "
             f"platforms against its own {baseline}"]
    for tag, group in images.items():
        grows, gplatforms, gnotes = pooled_rows(store, cache, group, baseline, inference=inference, bootstrap=bootstrap)
        rows += [replace(r, platform=f"{r.platform} [{tag}]") for r in grows]
        platforms += [f"{p} [{tag}]" for p in gplatforms]
        notes += gnotes
    return rows, platforms, notes


def _pool(store: Store, cache: ReportCache, runs: Sequence[Run], baseline: str, inference: bool = True,
          bootstrap: bool = True, keys: dict[str, tuple] | None = None) -> tuple[list[Row], list[str], list[str]]:
    blabels, notes = _labels(runs, "benchmarks", "key", "benchmark")
    plabels, pnotes = _labels(runs, "platforms", "name", "platform")
    notes += pnotes
    grouped: summary_mod.Group = defaultdict(summary_mod.new_group)
    warm: summary_mod.Group = defaultdict(summary_mod.new_group)
    meta: dict[tuple[str, str], tuple[str, bool, str]] = {}
    failures: Counter[tuple[str, str]] = Counter()
    metrics_of: dict[str, list[tuple[str, str, bool, str]]] = {}
    platforms: list[str] = []
    offset = 0
    for run in runs:
        rows, fails = cache.rows(store, run.id, (keys or {}).get(run.id))
        last = -1
        for r in rows:  # the rows are grouped already: relabel and concatenate, sample by sample in order
            key = (blabels.get((run.id, r.benchmark), r.benchmark), r.metric,
                   plabels.get((run.id, r.platform), r.platform))
            for values, rounds, into in ((r.values, r.rounds, grouped), (r.warmup_values, r.warmup_rounds, warm)):
                if values:
                    g_rounds, g_values = into[key]
                    g_rounds.extend([rnd + offset for rnd in rounds] if offset else rounds)
                    g_values.extend(values)
                    last = max(last, max(rounds))
            if r.values or r.warmup_values:
                meta[key[:2]] = (r.unit, r.higher_is_better, r.category)
        offset += last + 1
        for f in fails:
            failures[(plabels.get((run.id, f["platform"]), f["platform"]),
                      blabels.get((run.id, f["benchmark"]), f["benchmark"]))] += 1
        for bkey, declared in declared_metrics(run).items():
            metrics_of.setdefault(blabels.get((run.id, bkey), bkey), declared)
        platforms += [plabels[(run.id, p.name)] for p in run.platforms]
    platforms = list(dict.fromkeys(platforms))
    return (summary_mod.summarize_grouped(grouped, warm, meta, dict(failures), platforms, baseline, metrics_of,
                                          inference=inference, bootstrap=bootstrap),
            platforms, notes)


def compare(store: Store, cache: ReportCache, run_ids: Sequence[str], *, baseline: str | None = None,
            by_host: bool = False, bootstrap: bool = True) -> dict[str, Any]:
    """Platforms side by side relative to the baseline; runs pooled, or hosts as columns.
    bootstrap=False: pooled rows without the bootstrap intervals (the page does not show them)."""
    runs = queries.get_runs(store, run_ids)
    if not runs:
        raise queries.NotFound("choose at least one run")
    runs.sort(key=lambda r: r.created_at)
    baseline = baseline or runs[0].baseline
    hostnames = runinfo.host_labels(runs)
    out: dict[str, Any] = {"runs": [{"id": r.id, "name": r.name, "status": r.status,
                                     "host": r.host.hostname if r.host else None} for r in runs],
                           "baseline": baseline, "by_host": by_host}
    if by_host:
        groups: dict[str, list[Run]] = defaultdict(list)
        for r in runs:
            groups[r.host.hostname if r.host else hostnames[runs.index(r)]].append(r)
        per_host: dict[str, list[Row]] = {}
        notes: list[str] = []
        for host, hruns in groups.items():
            rows, _, n = pooled_rows(store, cache, hruns, baseline, inference=False)  # ratios and verdicts shown
            per_host[host], notes = rows, notes + n
        cats = {h: tables.category_table(rows) for h, rows in per_host.items()}
        out.update(hosts=list(per_host), matrix=tables.hosts_matrix(per_host), notes=notes,
                   categories=tables.category_ranges(cats),
                   figures=[f for h, t in cats.items() if (f := figures.category_figure(t, baseline, h))])
        return out
    rows, platforms, notes = pooled_rows(store, cache, runs, baseline, bootstrap=bootstrap)
    if baseline not in platforms:
        notes.append(f"baseline {baseline!r} is not among the platforms of these runs: no relative values")
    cat = tables.category_table(rows)
    cat_fig = figures.category_figure(cat, baseline)
    rows = sorted(rows, key=lambda r: r.benchmark == "lifecycle")  # stable: lifecycle after the benchmarks
    out.update(platforms=platforms, rows=rows, notes=notes, categories=tables.table_json(cat),
               figures=([cat_fig] if cat_fig else []) + figures.bar_figures(rows, baseline),
               lifecycle=figures.lifecycle_figure(rows),
               power=run_warnings.power_note(rows), category_verdicts=category_verdicts(rows, platforms, baseline))
    return out


def before_after(store: Store, cache: ReportCache, run_a: str, run_b: str, *, absolute: bool = False
                 ) -> dict[str, Any]:
    """`virtbench compare A B` for the web: each platform of run B against itself in run A, by the
    report's verdict rule, relative to each run's baseline unless absolute (analysis.compare);
    the same document as `compare --json` (report/before_after.py)."""
    from ..analysis.compare import compare as compare_runs
    from ..errors import InputError
    from ..report import before_after as ba

    if run_a == run_b:
        raise InputError(f"A and B are the same run {run_a}: a run compared with itself tells nothing",
                         "choose the run before and the run after the change")
    a, b = cache.report(store, run_a), cache.report(store, run_b)
    ra, rows_a, rb, rows_b = a.run, a.rows, b.run, b.rows
    mode = "absolute" if absolute else "relative"
    rows = compare_runs(rows_a, rows_b, baseline=ra.baseline if ra.baseline == rb.baseline else None, mode=mode,
                        platforms=[p.name for p in rb.platforms])
    return ba.document(ra, rb, rows, mode=mode)


def category_verdicts(rows: Sequence[Row], platforms: Sequence[str], baseline: str) -> dict[str, dict[str, str]]:
    """platform -> category -> the headline's verdict for it (report.headline's rule)."""
    lines = headline.headline([(p, "", {}) for p in platforms], rows, baseline)
    return {line.platform: {cv.category: cv.verdict for cv in line.categories} for line in lines}


def compare_json(doc: dict[str, Any]) -> dict[str, Any]:
    """The compare document for the API: rows as dicts, figures left to the pages."""
    out = {k: v for k, v in doc.items() if k not in ("rows", "figures", "lifecycle")}
    if "rows" in doc:
        out["results"] = [row_json(r) for r in doc["rows"]]
    return out

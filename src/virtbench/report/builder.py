"""The report of a run as data: the `report --json` contract, built from the store.

The core fields (run ... failures, and each result's descriptive fields) stay as they were;
statistics, quality warnings and the aggregate tables are added beside them. Several runs
(one per host) merge into one document with hosts as columns.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..analysis import stats, tables
from ..analysis.summary import Row
from ..store.db import Store
from ..store.models import Run
from . import boards, headline
from .model import FORMAT_VERSION, Report, Section
from .result_rows import run_rows
from .run_warnings import warnings
from .runinfo import facts, host_labels, platform_infos
from .sections import add_to_json
from .sections import sections as build_sections

VERDICT_RULE = ("Verdicts read a 95 % t interval of the ratio on the log scale, paired by round where at least 3 "
                "rounds measured both sides (else the Welch t interval of the ratio of means): slower or faster "
                "when it excludes 1.0, same when the 90 % interval lies within the minimum effect (TOST at 5 %), "
                "otherwise inconclusive with the noise and the repetitions that would decide it.")
ESTIMATOR = ("the verdict's estimate: the geometric mean of the per-round ratios where the rounds pair (each round "
             "measures every platform, so load that drifts between rounds cancels in its ratio), else the ratio of "
             "the means; it always lies inside relative_ci95")


def build(store: Store, run_ref: str = "latest", *, alpha: float = stats.ALPHA,
          min_effect: float = stats.MIN_EFFECT, sections: bool = True, cached: bool = True) -> Report:
    """The report of a run from the store alone; sections=False skips the experiment sections.

    With the default statistics settings, a stopped run's rows come from the report cache
    (report/cache.py) when it holds them for this run and this code, and are stored there
    when computed; cached=False always computes."""
    run = store.run(run_ref)
    rows, failures = run_rows(store, run, alpha=alpha, min_effect=min_effect, cached=cached)
    return Report(run, rows, failures, build_sections(store, run) if sections else [])


def statistics_json(rows: Sequence[Row], alpha: float, min_effect: float) -> dict[str, Any]:
    return {"verdict": VERDICT_RULE, "verdict_interval": "t, 95 %, mean of the rounds' log ratios (paired by round, >= 3 "
            "common rounds; the reason says 'k rounds paired'), else Welch t of the log ratio of means (delta method)",
            "relative": ESTIMATOR,
            "p_value": "the p of the test that decided: two-sided t test of ratio = 1 for slower/faster, TOST for "
                       "same (each below alpha exactly when the verdict's interval decides); null while inconclusive",
            "alpha": alpha, "min_effect": min_effect,
            "bootstrap": {"method": "percentile", "resamples": stats.BOOTSTRAP_RESAMPLES,
                          "seed": stats.BOOTSTRAP_SEED},
            "ci95": "Student t interval of the mean", "mean_boot_ci95": "bootstrap interval of the mean",
            "median_ci95": "bootstrap interval of the median",
            "relative_ci95": "the verdict's interval: paired t by round, else Welch t, on the log scale",
            "ratio_of_means": "descriptive: the direction-aware ratio of the means (the verdict's estimate only "
                              "where the rounds do not pair)"}


def headline_json(run: Run, rows: Sequence[Row]) -> dict[str, Any]:
    """Per platform its kind, verdict per category and biggest cost; the host facts that matter."""
    lines = headline.headline([(p.name, p.type, p.config or {}) for p in run.platforms], rows,
                              run.baseline)
    return headline.to_json(lines, boards.measured_on(run), boards.host_facts(run))


def tables_json(run: Run, rows: Sequence[Row]) -> dict[str, Any]:
    infos = platform_infos(run)
    cat = tables.category_table(rows)
    label = host_labels([run])[0]
    return {
        "categories": tables.table_json(cat),
        "best": {kind: [vars(b) for b in tables.best_of_kind(cat, infos, kind)] for kind in ("vm", "container")},
        "availability": tables.availability({label: cat}, {label: infos}),
        "stacks": [s.public() for s in tables.stack_predictions(rows, infos)],
        "platform_kinds": {p.name: {"kind": p.kind, "inside": p.inside} for p in infos},
    }


def to_json(run: Run, rows: list[Row], failures: list[dict[str, Any]], *, alpha: float = stats.ALPHA,
            min_effect: float = stats.MIN_EFFECT, sections: Sequence[Section] = ()) -> dict[str, Any]:
    """The `report --json` document; each section adds its top-level key."""
    doc = {
        "format_version": FORMAT_VERSION,
        "run": run.id,
        "headline": headline_json(run, rows),
        "name": run.name,
        "status": run.status,
        "baseline": run.baseline,
        "host": facts(run),
        "image": {k: run.image.get(k) for k in ("recipe_hash", "tar_sha256", "release", "arch", "profile")},
        "platforms": [{"name": p.name, "type": p.type, "label": p.label, "kind": p.kind, "config": p.config,
                       "versions": p.versions} for p in run.platforms],
        "benchmarks": [{"key": b.key, "name": b.name, "params": b.params, "tool_version": b.tool_version,
                        "metrics": b.metrics or []} for b in run.benchmarks],
        "results": [r.public() for r in rows],
        "failures": failures,
        "campaign": {k: run.campaign.get(k) for k in ("repetitions", "warmups", "shuffle")} | {"seed": run.seed},
        "adaptive": (run.provenance or {}).get("adaptive", []),
        "statistics": statistics_json(rows, alpha, min_effect),
        "warnings": warnings(run, rows),
        "tables": tables_json(run, rows),
    }
    return add_to_json(doc, list(sections))


def report_json(report: Report, *, alpha: float = stats.ALPHA, min_effect: float = stats.MIN_EFFECT) -> dict[str, Any]:
    return to_json(report.run, report.rows, report.failures, alpha=alpha, min_effect=min_effect,
                   sections=report.sections)


def merged_json(reports: Sequence[Report], *, alpha: float = stats.ALPHA,
                min_effect: float = stats.MIN_EFFECT) -> dict[str, Any]:
    """Several runs (usually one per host) as one comparison: hosts as columns, ranges across hosts."""
    labels = host_labels([r.run for r in reports])
    cats = {lab: tables.category_table(r.rows) for lab, r in zip(labels, reports)}
    infos = {lab: platform_infos(r.run) for lab, r in zip(labels, reports)}
    return {
        "format_version": FORMAT_VERSION,
        "hosts": labels,
        "runs": [report_json(rep, alpha=alpha, min_effect=min_effect) for rep in reports],
        "comparison": tables.hosts_matrix({lab: r.rows for lab, r in zip(labels, reports)}),
        "categories": tables.category_ranges(cats),
        "availability": tables.availability(cats, infos),
    }

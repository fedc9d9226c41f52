"""The report of a run as data: the `report --json` contract, built from the store.

The core fields (run ... failures, and each result's descriptive fields) stay as they were;
statistics, quality warnings and the aggregate tables are added beside them. Several runs
(one per host) merge into one document with hosts as columns.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ..analysis import forecast, quality, stats, tables
from ..analysis.summary import Row, SampleView, summarize_values
from ..constants import LIFECYCLE, LIFECYCLE_STEPS
from ..store import results
from ..store.db import Store
from ..store.models import Run
from . import boards, cache, headline
from .model import FORMAT_VERSION, Report, Section
from .sections import add_to_json, in_main_table
from .sections import sections as build_sections

OUTPUT_TAIL = 400
VERDICT_RULE = ("Verdicts read a 95 % t interval of the ratio on the log scale, paired by round where at least 3 "
                "rounds measured both sides (else the Welch t interval of the ratio of means): slower or faster "
                "when it excludes 1.0, same when the 90 % interval lies within the minimum effect (TOST at 5 %), "
                "otherwise inconclusive with the noise and the repetitions that would decide it.")
ESTIMATOR = ("the verdict's estimate: the geometric mean of the per-round ratios where the rounds pair (each round "
             "measures every platform, so load that drifts between rounds cancels in its ratio), else the ratio of "
             "the means; it always lies inside relative_ci95")


def declared_metrics(run: Run) -> dict[str, list[tuple[str, str, bool, str]]]:
    """benchmark key -> (metric, unit, higher_is_better, category) as stored with the run
    (migration 0006), so a benchmark that failed everywhere still has its rows; never read
    from today's plugins. The lifecycle steps are the runner's own, the same for every run."""
    out: dict[str, list[tuple[str, str, bool, str]]] = {
        LIFECYCLE: [(f"{s}_s", "s", False, "lifecycle") for s in LIFECYCLE_STEPS]}
    for rb in run.benchmarks:
        out[rb.key] = [(m["name"], m["unit"], bool(m["higher_is_better"]), m["category"]) for m in rb.metrics or []]
    return out


def load_samples(store: Store, run_id: str) -> list[SampleView]:
    """The run's values per round (instance 0 of multi-instance executions), warm-up included."""
    return [SampleView(b, m, p, v, u, bool(h), c, r, bool(w)) for b, m, p, v, u, h, c, r, w in
            results.samples(store, run_id)]


def build(store: Store, run_ref: str = "latest", *, alpha: float = stats.ALPHA,
          min_effect: float = stats.MIN_EFFECT, sections: bool = True, cached: bool = True) -> Report:
    """The report of a run from the store alone; sections=False skips the experiment sections.

    With the default statistics settings, a stopped run's rows come from the report cache
    (report/cache.py) when it holds them for this run and this code, and are stored there
    when computed; cached=False always computes."""
    run = store.run(run_ref)
    default = alpha == stats.ALPHA and min_effect == stats.MIN_EFFECT
    k = cache.key(store, run.id) if cached and default else None
    got = cache.load(store, run.id, k) if k else None
    if got is None:
        got = compute(store, run, alpha=alpha, min_effect=min_effect)
        if k:
            cache.save(store, run.id, k, *got)
    rows, failures_list = got
    return Report(run, rows, failures_list, build_sections(store, run) if sections else [])


def compute(store: Store, run: Run, *, alpha: float = stats.ALPHA, min_effect: float = stats.MIN_EFFECT
            ) -> tuple[list[Row], list[dict[str, Any]]]:
    """The run's rows (statistics and verdicts per cell) and failed executions, computed now."""
    failed_execs = [e for e in store.executions(run.id, status="failed") if not e.warmup]
    baseline = run.baseline
    platforms = [p.name for p in run.platforms]
    rows: list[Row] = []
    hosts: list[str | None] = list(run_hosts(run))
    for host in (hosts or [None]) if in_main_table(run) else []:  # several hosts: each against its own baseline
        failures = Counter((e.platform, e.benchmark) for e in failed_execs if host is None or e.host == host)
        values, meta = results.sample_values(store, run.id, host)
        part = summarize_values(values, meta, dict(failures), platforms, baseline, declared_metrics(run),
                                alpha=alpha, min_effect=min_effect)
        if host is not None:  # only what this host measured (a cross-host pair is its client's)
            executed = {b for _, _, b in store.done_units(run.id, host)}
            part = [r for r in part if r.benchmark in executed]
        for r in part:
            r.host = host or ""
        rows += part
    boards.flag_rows(rows, boards.throttled(store, run))
    failures_list = [{"platform": e.platform, "benchmark": e.benchmark, "round": e.round,
                      "error": e.error, "exit_code": e.exit_code, "argv": e.argv,
                      "output_tail": (e.stderr or e.stdout)[-OUTPUT_TAIL:], **({"host": e.host} if hosts else {})}
                     for e in failed_execs]
    return rows, failures_list


def run_hosts(run: Run) -> list[str]:
    """Inventory names of a multi-host run's hosts, in campaign order ([] for a one-host run)."""
    return [str(h["name"]) for h in (run.campaign or {}).get("hosts", []) if isinstance(h, dict)]


def per_host(report: Report) -> list[tuple[str, list[Row], list[dict[str, Any]]]]:
    """A multi-host report taken apart: (host, its rows, its failures) per host, for renderers
    that lay out one host at a time."""
    return [(h, [r for r in report.rows if r.host == h], [f for f in report.failures if f.get("host") == h])
            for h in run_hosts(report.run)]


def facts(run: Run) -> dict[str, Any]:
    return {**(run.host.facts if run.host else {}), **run.host_facts}


def platform_infos(run: Run) -> list[tables.PlatformInfo]:
    return [tables.PlatformInfo.from_config(p.name, p.type, p.config or {}) for p in run.platforms]


def host_labels(runs: Sequence[Run]) -> list[str]:
    """Hostname per run; the run id is added where a host appears more than once."""
    names = [str(facts(r).get("hostname") or "?") for r in runs]
    return [n if names.count(n) == 1 else f"{n} ({r.id})" for n, r in zip(names, runs)]


def warnings(run: Run, rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Host conditions, campaign design and every result's quality flags, in that order."""
    out = [{"scope": "host", **f.public()} for f in quality.host_conditions(facts(run))]
    out += [{"scope": "run", **f.public()} for f in quality.run_checks(run.campaign)]
    out += [{"scope": "run", "check": "left_out", "severity": "info", "platform": p.get("platform"),
             "message": f"{p.get('platform')} not measured: {p.get('reason')}", "fix": p.get("fix", "")}
            for p in (run.provenance or {}).get("left_out", [])]
    if noise := (run.provenance or {}).get("noise"):
        out.append(noise_warning(noise))
    if note := power_note(rows):
        out.append(note)
    for r in rows:
        for flag in r.quality:
            out.append({"scope": "result", "benchmark": r.benchmark, "metric": r.metric, "platform": r.platform,
                        **flag})
    return out


def noise_warning(noise: dict[str, Any]) -> dict[str, Any]:
    """The noise check measured before the first round (experiments.benchmarks.adaptive.note_noise), as the run said it."""
    head, *per_metric = forecast.note_lines(noise)
    return {"scope": "run", "check": "noise",
            "severity": "info" if noise["expected_decided"] >= forecast.NOISY * noise["cells"] else "warn",
            "value": noise["expected_decided"] / noise["cells"] if noise["cells"] else None,
            "message": f"{head} ({'; '.join(line.strip() for line in per_metric)})"}


def power_note(rows: Sequence[Row]) -> dict[str, Any] | None:
    """Say how many comparisons are undecided and what would decide most of them."""
    compared = [r for r in rows if r.verdict in ("slower", "faster", "same", "inconclusive")]
    open_ = [r for r in compared if r.verdict == "inconclusive"]
    if not open_:
        return None
    needed = sorted(r.repetitions_needed for r in open_ if r.repetitions_needed)
    advice = (f"about {needed[len(needed) // 2]} repetitions would decide half of them at the noise seen"
              if needed else "more repetitions or a quieter host would narrow the intervals")
    return {"scope": "run", "check": "power", "severity": "warn" if len(open_) * 10 > len(compared) else "info",
            "value": len(open_) / len(compared),
            "message": f"{len(open_)} of {len(compared)} comparisons are inconclusive; {advice}"}


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


def merged_json(reports: Sequence[tuple[Run, list[Row], list[dict[str, Any]]]], *, alpha: float = stats.ALPHA,
                min_effect: float = stats.MIN_EFFECT) -> dict[str, Any]:
    """Several runs (usually one per host) as one comparison: hosts as columns, ranges across hosts."""
    labels = host_labels([r for r, _, _ in reports])
    cats = {lab: tables.category_table(rows) for lab, (_, rows, _) in zip(labels, reports)}
    infos = {lab: platform_infos(run) for lab, (run, _, _) in zip(labels, reports)}
    return {
        "format_version": FORMAT_VERSION,
        "hosts": labels,
        "runs": [to_json(*rep, alpha=alpha, min_effect=min_effect, sections=getattr(rep, "sections", ()))
                 for rep in reports],
        "comparison": tables.hosts_matrix({lab: rows for lab, (_, rows, _) in zip(labels, reports)}),
        "categories": tables.category_ranges(cats),
        "availability": tables.availability(cats, infos),
    }


COMPARE_METHOD = ("B against A by the verdict rule of `report`: the unpaired 95 % Welch t interval of the log ratio "
                  "of means (the rounds of two runs share nothing to pair on), same when the 90 % interval lies "
                  "within the minimum effect")


def compare_json(run_a: Run, run_b: Run, rows: Sequence[Any], *,
                 min_effect: float = stats.MIN_EFFECT) -> dict[str, Any]:
    """`virtbench compare --json`: the same platforms in two runs, B relative to A."""
    hosts = [str(facts(r).get("hostname") or "?") for r in (run_a, run_b)]
    notes = []
    if hosts[0] != hosts[1]:
        notes.append(f"the runs are from different hosts ({hosts[0]}, {hosts[1]}): differences include the hardware")
    conds = [{k: facts(r).get(k) for k in ("kernel", "governor", "turbo", "microcode")} for r in (run_a, run_b)]
    changed = [k for k in conds[0] if conds[0][k] != conds[1][k]]
    if changed:
        notes.append("changed between the runs: " + ", ".join(f"{k} {conds[0][k]} -> {conds[1][k]}" for k in changed))
    return {"format_version": FORMAT_VERSION, "a": run_a.id, "b": run_b.id, "hosts": hosts,
            "min_effect": min_effect, "method": COMPARE_METHOD, "notes": notes, "results": [r.public() for r in rows]}

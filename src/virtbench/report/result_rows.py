"""A run's result rows: statistics and a verdict per benchmark, metric and platform (host too
in a run over several), and its failed executions, computed from the store or read from the
report cache (report/cache.py).

The report's builder (summary.build) and the parts that need the rows themselves (the hosts
section) read them here.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from ..analysis import stats
from ..analysis.summary import Row, SampleView, summarize_values
from ..constants import LIFECYCLE, LIFECYCLE_STEPS
from ..store import results
from ..store.db import Store
from ..store.models import Run
from . import boards, cache, limits, units
from .runinfo import in_main_table, run_hosts
from .sections import corrections

OUTPUT_TAIL = 400


def run_rows(store: Store, run: Run, *, alpha: float = stats.ALPHA, min_effect: float = stats.MIN_EFFECT,
             cached: bool = True) -> tuple[list[Row], list[dict[str, Any]]]:
    """The run's rows and failures; with the default statistics settings from the report cache
    when it holds them for this run and this code, else computed and, for a stopped run, stored
    there (cached=False always computes)."""
    default = alpha == stats.ALPHA and min_effect == stats.MIN_EFFECT
    k = cache.key(store, run.id) if cached and default else None
    got = cache.load(store, run.id, k) if k else None
    if got is None:
        got = compute(store, run, alpha=alpha, min_effect=min_effect)
        if k:
            cache.save(store, run.id, k, *got)
    return got


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


def compute(store: Store, run: Run, *, alpha: float = stats.ALPHA, min_effect: float = stats.MIN_EFFECT
            ) -> tuple[list[Row], list[dict[str, Any]]]:
    """The run's rows (statistics and verdicts per cell) and failed executions, computed now."""
    failed_execs = [e for e in store.executions(run.id, status="failed") if not e.warmup]
    shown = units.round_numbers(run.campaign)
    fixes = corrections(store, run)  # results the run judged disturbed, replaced by their re-measurement
    baseline = run.baseline
    platforms = [p.name for p in run.platforms]
    rows: list[Row] = []
    hosts: list[str | None] = list(run_hosts(run))
    for host in (hosts or [None]) if in_main_table(run) else []:  # several hosts: each against its own baseline
        failures = Counter((e.platform, e.benchmark) for e in failed_execs if host is None or e.host == host)
        values, meta = results.sample_values(store, run.id, host)
        values = [(i, b, m, p, v if w else fixes.get((b, m, p), v), shown(r, bool(w)), w)  # rounds as a reader
                  for i, b, m, p, v, r, w in values]                                      # counts them
        part = summarize_values(values, meta, dict(failures), platforms, baseline, declared_metrics(run),
                                alpha=alpha, min_effect=min_effect)
        if host is not None:  # only what this host measured (a cross-host pair is its client's)
            executed = {b for _, _, b in store.done_units(run.id, host)}
            part = [r for r in part if r.benchmark in executed]
        for r in part:
            r.host = host or ""
        rows += part
    boards.flag_rows(rows, boards.throttled(store, run))
    limits.flag_rows(rows, run)
    failures_list = [{"platform": e.platform, "benchmark": e.benchmark, "round": shown(e.round, e.warmup),
                      "error": e.error, "exit_code": e.exit_code, "argv": e.argv,
                      "output_tail": (e.stderr or e.stdout)[-OUTPUT_TAIL:], **({"host": e.host} if hosts else {})}
                     for e in failed_execs]
    return rows, failures_list

"""What the pages and the API read: the store's browsing API (store/browse.py), and the
dashboard's at-a-glance ratios, read from the runs' reports (no statistics written twice)."""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from ..analysis.summary import Row
from ..analysis.tables import CATEGORIES, geomean
from ..store import browse
from ..store.browse import (  # noqa: F401 - the web's read API, re-exported for its modules
    ACTIVE,
    STATUSES,
    TERMINAL,
    NotFound,
    benchmark_keys,
    execution,
    execution_counts,
    executions,
    expected_total,
    failed_points,
    finished_runs,
    get_run,
    get_runs,
    hosts,
    iso,
    list_runs,
    platform_availability,
    platform_names,
    progress,
    resolve,
    run_brief,
    sample_points,
    status_counts,
    target_hosts,
    workers,
)
from ..store.db import Store
from ..store.lookup import run_with_data


def recent_results(store: Store, rows_of: Callable[[str], Sequence[Row]], limit: int = 3) -> list[dict[str, Any]]:
    """The last finished runs at a glance: per platform, geometric mean of its ratios per category.

    The ratios (the verdicts' estimates) come from the runs' reports (rows_of: the web's report cache, which
    the dashboard reads for the verdicts anyway), not from a query grouping every sample
    again: a summary to click through, the run's own page has the intervals and tests.
    """
    out = []
    for run in browse.recent_finished(store, limit):
        ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
        for r in rows_of(run.id):
            if r.category != "lifecycle" and r.relative and r.relative > 0 and math.isfinite(r.relative):
                ratios[(r.category, r.platform)].append(r.relative)
        order = {c: i for i, c in enumerate(CATEGORIES)}  # one order of the categories everywhere
        categories = sorted({c for c, _ in ratios}, key=lambda c: (order.get(c, len(order)), c))
        platforms = platform_names(run)
        table = {p: {c: geomean(ratios.get((c, p), [])) for c in categories} for p in platforms}
        out.append({"id": run.id, "name": run.name, "baseline": run.baseline, "finished_at": iso(run.finished_at),
                    "host": run.host.hostname if run.host else None, "categories": categories, "table": table})
    return out


def measured_id(store: Store, ref: str) -> str:
    """The run id a reference names (resolve: an id, 'latest' or a unique prefix), refused with
    NoData (409) while the run has recorded nothing: its report, download or comparison would
    be empty or made up."""
    return run_with_data(store, resolve(store, ref)).id

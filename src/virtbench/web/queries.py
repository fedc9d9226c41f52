"""What the pages and the API read: the store's browsing API (store/browse.py), and the
dashboard's at-a-glance ratios computed with analysis/ (no statistics written twice)."""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from ..analysis.summary import relative
from ..analysis.tables import geomean
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
    run_brief,
    sample_points,
    status_counts,
    target_hosts,
    workers,
)
from ..store.db import Store


def recent_results(store: Store, limit: int = 3) -> list[dict[str, Any]]:
    """The last finished runs at a glance: per platform, geometric mean of mean ratios per category.

    Plain ratios of means from one grouped query (no bootstrap): a summary to click through,
    the run's own page has the intervals and tests.
    """
    runs, rows = browse.recent_means(store, limit)
    means: dict[str, dict[tuple[str, str], dict[str, tuple[float, bool, str]]]] = defaultdict(lambda: defaultdict(dict))
    for run_id, bench, metric, platform, cat, hib, avg in rows:
        means[run_id][(bench, metric)][platform] = (float(avg), bool(hib), cat)
    out = []
    for run in runs:
        baseline = run.baseline
        ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
        for per_platform in means[run.id].values():
            if baseline not in per_platform:
                continue
            base, hib, _ = per_platform[baseline]
            for platform, (value, _, cat) in per_platform.items():
                r = relative(value, base, hib)
                if r and r > 0 and math.isfinite(r):
                    ratios[(cat, platform)].append(r)
        categories = sorted({c for c, _ in ratios})
        platforms = platform_names(run)
        table = {p: {c: geomean(ratios.get((c, p), [])) for c in categories} for p in platforms}
        out.append({"id": run.id, "name": run.name, "baseline": baseline, "finished_at": iso(run.finished_at),
                    "host": run.host.hostname if run.host else None, "categories": categories, "table": table})
    return out

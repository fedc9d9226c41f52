"""The report of a run as data: the `report --json` contract, built from the store."""
from __future__ import annotations

from collections import Counter
from typing import Any

from ..analysis.summary import Row, SampleView, summarize
from ..registry import BENCHMARKS
from ..runner.execute import LIFECYCLE_STEPS
from ..runner.plan import LIFECYCLE
from ..store.db import Store
from ..store.models import Run


def declared_metrics(run: Run) -> dict[str, list[tuple[str, str, bool, str]]]:
    out: dict[str, list[tuple[str, str, bool, str]]] = {
        LIFECYCLE: [(f"{s}_s", "s", False, "lifecycle") for s in LIFECYCLE_STEPS]}
    for rb in run.benchmarks:
        try:
            cls = BENCHMARKS.get(rb.name)
            metrics = cls(cls.Params(**rb.params)).metrics()
        except Exception:  # noqa: BLE001 - a plugin gone since the run: its stored samples still show
            continue
        out[rb.key] = [(m.name, m.unit, m.higher_is_better, m.category) for m in metrics]
    return out


def build(store: Store, run_ref: str = "latest") -> tuple[Run, list[Row], list[dict[str, Any]]]:
    run = store.run(run_ref)
    samples = [SampleView(s.benchmark, s.metric, s.platform, s.value, s.unit, s.higher_is_better, s.category)
               for s in store.samples(run.id)]
    failed_execs = [e for e in store.executions(run.id, status="failed") if not e.warmup]
    failures = Counter((e.platform, e.benchmark) for e in failed_execs)
    baseline = run.campaign.get("baseline", "native")
    platforms = [p.name for p in run.platforms]
    rows = summarize(samples, dict(failures), platforms, baseline, declared_metrics(run))
    failures_list = [{"platform": e.platform, "benchmark": e.benchmark, "round": e.round,
                      "error": e.error, "exit_code": e.exit_code} for e in failed_execs]
    return run, rows, failures_list


def to_json(run: Run, rows: list[Row], failures: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "run": run.id,
        "name": run.name,
        "status": run.status,
        "baseline": run.campaign.get("baseline", "native"),
        "host": {**(run.host.facts if run.host else {}), **run.host_facts},
        "image": {k: run.image.get(k) for k in ("recipe_hash", "tar_sha256", "release", "arch", "profile")},
        "platforms": [{"name": p.name, "type": p.type, "label": p.label, "config": p.config,
                       "versions": p.versions} for p in run.platforms],
        "benchmarks": [{"key": b.key, "name": b.name, "params": b.params, "tool_version": b.tool_version}
                       for b in run.benchmarks],
        "results": [r.public() for r in rows],
        "failures": failures,
    }

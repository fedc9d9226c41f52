"""The report part of pods: start-up and teardown percentiles of every pod a run made.

Each step of each pod is a lifecycle sample `pod_<step>_s` (timed by the pod's watch, see
events.py): one pod per round in a benchmarks run (the `lifecycle` row), N pods at once in a
migration run's lifecycle mode (each pod's own value, instance 1..N). Kubernetes' own SLO
reads start-up as percentiles over pods, not as a mean, so this part gives p50/p90/p99 over
every measured pod (warm-up rounds left out) for each platform, host and batch size, in
every surface (terminal, JSON `pods`, HTML, web).
"""
from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from ...report.model import Section, Table
from ...store.db import Store
from ...store.models import Run

STEPS = ("scheduled", "running", "ready", "stopped", "gone")
_COUNT = re.compile(r"count=(\d+)")
E2E_LIMITS = {"p50": 16.0, "p90": 18.0, "p99": 20.0}
"""The Kubernetes node e2e density test's limits for 10 pods created at once (ready, seconds)."""


def _batch(benchmark: str) -> int:
    m = _COUNT.search(benchmark)
    return int(m.group(1)) if m else 1


def percentiles(values: list[float]) -> dict[str, float]:
    arr = np.asarray(values, dtype=float)
    return {"p50": float(np.percentile(arr, 50)), "p90": float(np.percentile(arr, 90)),
            "p99": float(np.percentile(arr, 99)), "max": float(arr.max())}


def build(store: Store, run: Run) -> Section | None:
    if not any(isinstance(p, dict) and p.get("type") == "kubernetes" for p in (run.campaign or {}).get("platforms", [])):
        return None
    own: dict[tuple[str, str, int, str], list[float]] = defaultdict(list)
    mean: dict[tuple[str, str, int, str], list[float]] = defaultdict(list)
    for s in store.samples(run.id, per_instance=True):
        if s.category != "lifecycle" or not s.metric.startswith("pod_"):
            continue
        key = (s.platform, s.host or "", _batch(s.benchmark), s.metric.removeprefix("pod_").removesuffix("_s"))
        (own if s.instance >= 1 else mean)[key].append(s.value)
    points = {k: own.get(k) or mean[k] for k in {*own, *mean}}
    if not points:
        return None
    order = {step: i for i, step in enumerate(STEPS)}
    rows, data = [], []
    hosts = len({k[1] for k in points}) > 1
    for (platform, host, batch, step), values in sorted(points.items(),
                                                        key=lambda kv: (*kv[0][:3], order.get(kv[0][3], 99))):
        p = percentiles(values)
        data.append({"platform": platform, "host": host or None, "pods_at_once": batch, "step": step,
                     "n": len(values), "unit": "s", **p})
        rows.append([platform, *([host or "local"] if hosts else []), batch, step, len(values),
                     *(f"{p[q]:.3f}" for q in ("p50", "p90", "p99", "max"))])
    columns = ["platform", *(["host"] if hosts else []), "pods at once", "step", "pods", "p50 s", "p90 s", "p99 s",
               "max s"]
    notes = ["Each step is the arrival, on virtbench's clock, of the first watch event of the pod that shows it: "
             "scheduled, running and ready counted from the create request, stopped (container terminated) and "
             "gone (deleted) from the delete request; the API's own timestamps (whole seconds) are kept with "
             "each execution as a cross-check.",
             "Percentiles over every measured pod (numpy, linear interpolation): with fewer than 100 pods, p99 "
             "lies between the two slowest.",
             "For scale: Kubernetes' node e2e density test allows 10 pods created at once a start-up (ready) of "
             f"p50/p90/p99 <= {E2E_LIMITS['p50']:g}/{E2E_LIMITS['p90']:g}/{E2E_LIMITS['p99']:g} s."]
    return Section(key="pods", title="Pods: start-up and teardown (watched events)", data={"points": data},
                   tables=[Table("pod lifecycle steps, seconds (percentiles over pods)", columns, rows,
                                 key_columns=3 if hosts else 2)],
                   notes=notes)


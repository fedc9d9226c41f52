"""The `limits` part of every report: the host's parallel scaling, what each platform's CPU limit
is expected to change by it, and whether each limit was shown to hold on this host.

The scaling was measured when the run started (host facts) and, in a density run, before and
after each platform's search; the verdicts come from `virtbench selftest --platform P`
(platforms/enforcement.py), copied into the run's provenance. A limit shown not to hold puts a
warning on every result of the platforms that used it (`flag_rows`, from result_rows).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..analysis.summary import Row
from ..hostinfo import expected_ratio, scaling_words
from ..store.db import Store
from ..store.models import Run
from .model import Section, Table
from .runinfo import facts


def not_held(run: Run) -> dict[str, list[str]]:
    """Platform name -> the limits (cpu, memory) a self-test on this host showed not to hold."""
    out: dict[str, list[str]] = {}
    for name, v in ((run.provenance or {}).get("limits") or {}).items():
        bad = [k for k in ("cpu", "memory") if isinstance(v.get(k), dict) and v[k].get("held") is False]
        if bad:
            out[name] = bad
    return out


def flag_rows(rows: Sequence[Row], run: Run) -> None:
    """A 'limit' quality warning on every result of a platform whose limit did not hold."""
    bad = not_held(run)
    verdicts = (run.provenance or {}).get("limits") or {}
    for r in rows:
        for limit in bad.get(r.platform, []):
            v = verdicts[r.platform][limit]
            r.quality.append({"check": "limit", "severity": "warn", "value": None,
                              "message": f"{r.platform}'s {limit} limit did not hold on this host (selftest "
                                         f"--platform {verdicts[r.platform].get('type')}, {v.get('at', '?')}: "
                                         f"{v.get('measured', '')}): this result was not measured under it"})


def _threads_note(quota: float, scaling: dict[str, Any]) -> str:
    n = int(scaling.get("processes") or 1)
    one = expected_ratio(quota, 1, scaling)
    all_ = expected_ratio(quota, n, scaling)
    if one is None or all_ is None:
        return "-"
    return f"1 thread: {one:.2f}; {n} threads: {all_:.2f}"


def build(store: Store, run: Run) -> Section | None:
    f = facts(run)
    scaling = f.get("parallel_scaling") if isinstance(f.get("parallel_scaling"), dict) else None
    verdicts = (run.provenance or {}).get("limits") or {}
    limited = [(p.name, p.config or {}) for p in run.platforms if (p.config or {}).get("cpus") is not None
               or (p.config or {}).get("memory") is not None]
    if not scaling and not verdicts:  # a run stored before either was recorded: its report as it was
        return None
    rows = []
    for name, config in limited:
        v = verdicts.get(name, {})
        for limit, option in (("cpu", "cpus"), ("memory", "memory")):
            if config.get(option) is None:
                continue
            verdict = v.get(limit) or {"checked": False}
            held = ("not checked (virtbench selftest --platform " + str(config.get("type", name)) + ")"
                    if verdict.get("checked") is False else "held" if verdict.get("held") else "DID NOT HOLD")
            expected = (_threads_note(float(config["cpus"]), scaling) if limit == "cpu" and scaling
                        else "-")
            value = config[option]
            shown = f"{value / 2**20:g} MiB" if option == "memory" and isinstance(value, int | float) else value
            rows.append([name, f"{option}: {shown}", held, verdict.get("measured", "-"), expected])
    notes = []
    if words := scaling_words(scaling):
        notes.append(f"host parallel scaling when the run started: {words}, CPU-bound SHA-256 processes; a quota "
                     "of q CPUs leaves a k-thread CPU-bound load min(1, q / scaling(k)) of its unlimited throughput "
                     "(the expected effect in the table: why a limit did or did not change a result).")
    bad = not_held(run)
    if bad:
        notes.append("limits that did not hold: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in bad.items())
                     + ": every result of these platforms carries a warning.")
    data = {"parallel_scaling": scaling, "platforms": verdicts}
    table = Table("Limits: enforced on this host, and the expected effect of CPU limits",
                  ["platform", "limit", "enforced", "measured", "expected throughput (CPU-bound)"], rows,
                  empty="No platform of this run sets cpus or memory.")
    return Section(key="limits", title="Limits and the host's scaling", data=data, tables=[table], notes=notes)

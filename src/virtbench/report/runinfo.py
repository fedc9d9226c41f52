"""What a stored run says about itself, as every part of the report reads it: its host's
facts, the hosts of a run over several, its platforms and a label per run.

These sit below the report's builder (builder.py), its parts (layout, figures, boards,
hosts) and its renderers, which all read them; they import nothing of the report.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..analysis import tables

if TYPE_CHECKING:
    from ..analysis.summary import Row
    from ..store.models import Run
    from .model import Report


def facts(run: Run) -> dict[str, Any]:
    return {**(run.host.facts if run.host else {}), **run.host_facts}


def platform_infos(run: Run) -> list[tables.PlatformInfo]:
    return [tables.PlatformInfo.from_config(p.name, p.type, p.config or {}) for p in run.platforms]


def host_labels(runs: Sequence[Run]) -> list[str]:
    """Hostname per run; the run id is added where a host appears more than once."""
    names = [str(facts(r).get("hostname") or "?") for r in runs]
    return [n if names.count(n) == 1 else f"{n} ({r.id})" for n, r in zip(names, runs)]


def run_hosts(run: Run) -> list[str]:
    """Inventory names of a multi-host run's hosts, in campaign order ([] for a one-host run)."""
    return [str(h["name"]) for h in (run.campaign or {}).get("hosts", []) if isinstance(h, dict)]


def host_parts(report: Report) -> list[tuple[str, Report]]:
    """A multi-host report taken apart: (host, its part: its rows and failures) per host, for
    renderers that lay out one host at a time."""
    return [(h, replace(report, rows=[r for r in report.rows if r.host == h],
                        failures=[f for f in report.failures if f.get("host") == h], sections=[]))
            for h in run_hosts(report.run)]


def hosts_of(run: Any, rows: Sequence[Row], failures: Sequence[dict[str, Any]] = ()) -> list[str]:
    """The hosts these rows (and failures) come from, in campaign order, when there are several;
    [] for one host (a one-host run, or one host's part of a multi-host run)."""
    present = {getattr(r, "host", None) for r in rows} | {f.get("host") for f in failures}
    hosts = [h for h in run_hosts(run) if h in present]
    return hosts if len(hosts) > 1 else []


OLD_SECTION_KINDS = frozenset({"density"})
"""Kinds whose section was the whole result when a run did not yet record it (before #40):
density's per-count executions are points of a curve, not rows against a baseline."""


def recorded(run: Run) -> dict[str, Any]:
    """What the run recorded of its kind and plan (provenance `plan`, since #40; {} before)."""
    rec = (getattr(run, "provenance", None) or {}).get("plan")
    return rec if isinstance(rec, dict) else {}


def kind_of(run: Run) -> str:
    """The run's experiment kind, as it recorded it (older runs: their campaign's `experiment:`)."""
    return str(recorded(run).get("kind") or (run.campaign or {}).get("experiment") or "benchmarks")


def in_main_table(run: Run) -> bool:
    """Whether the run's executions are rows of the table against the baseline (the kind's
    `main_table`, as the run recorded it); a run stored before it recorded this: every kind but
    those in OLD_SECTION_KINDS. Never asks today's registry: a kind gone since still reports."""
    rec = recorded(run)
    return bool(rec["main_table"]) if "main_table" in rec else kind_of(run) not in OLD_SECTION_KINDS


def per_benchmark_figures(run: Run) -> bool:
    """Whether the run's figures are drawn per benchmark (the benchmarks kind's); another kind's
    figures are its section's, one per kind and not per point."""
    rec = recorded(run)
    return bool(rec["uses_benchmarks"]) if "uses_benchmarks" in rec else kind_of(run) == "benchmarks"

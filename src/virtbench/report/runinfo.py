"""What a stored run says about itself, as every part of the report reads it: its host's
facts, the hosts of a run over several, its platforms and a label per run.

These sit below the report's builder (builder.py), its parts (layout, figures, boards,
hosts) and its renderers, which all read them; they import nothing of the report.
"""
from __future__ import annotations

from collections.abc import Sequence
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


def per_host(report: Report) -> list[tuple[str, list[Row], list[dict[str, Any]]]]:
    """A multi-host report taken apart: (host, its rows, its failures) per host, for renderers
    that lay out one host at a time."""
    return [(h, [r for r in report.rows if r.host == h], [f for f in report.failures if f.get("host") == h])
            for h in run_hosts(report.run)]


def hosts_of(run: Any, rows: Sequence[Row], failures: Sequence[dict[str, Any]] = ()) -> list[str]:
    """The hosts these rows (and failures) come from, in campaign order, when there are several;
    [] for one host (a one-host run, or one host's part of a multi-host run)."""
    present = {getattr(r, "host", None) for r in rows} | {f.get("host") for f in failures}
    hosts = [h for h in run_hosts(run) if h in present]
    return hosts if len(hosts) > 1 else []

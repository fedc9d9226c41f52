"""The hosts of a multi-host run, side by side: who they are, how their clocks stood, what was
shipped to them, every platform's cost on each (against that host's own baseline), and the
pairs measured across hosts."""
from __future__ import annotations

from typing import Any

from ..store.db import Store
from ..store.models import Run
from .model import Section, Table


def build(store: Store, run: Run) -> Section | None:
    from . import summary

    names = summary.run_hosts(run)
    if not names:
        return None
    report = summary.build(store, run.id, sections=False)
    from ..analysis import tables

    rows_of = {h: rows for h, rows, _ in summary.per_host(report)}
    matrix = tables.hosts_matrix(rows_of)
    info = (run.provenance or {}).get("hosts", {})
    hosts: dict[str, Any] = {}
    for name in names:
        h = info.get(name, {})
        facts = h.get("facts", {})
        hosts[name] = {"address": h.get("address", ""), "hostname": facts.get("hostname"), "arch": facts.get("arch"),
                       "cpus": facts.get("cpus"), "kernel": facts.get("kernel"), "clock": h.get("clock", {}),
                       "shipped": h.get("shipped"),
                       "executions": sum(r.n for r in rows_of.get(name, [])),
                       "failed": sum(r.failed for r in rows_of.get(name, []))}
    host_table = Table("Machines", ["host", "address", "arch", "CPUs", "kernel", "clock offset", "shipped"], [
        [n, h["address"] or "(controller)", h["arch"] or "?", h["cpus"] or "?", h["kernel"] or "?",
         _offset(h["clock"]), _shipped(h["shipped"])] for n, h in hosts.items()])
    side = Table("Hosts side by side (each against its own baseline; relative, verdict)",
                 ["benchmark", "metric", "platform", *names], [
                     [m["benchmark"], m["metric"], m["platform"],
                      *[_cell(m["hosts"].get(n)) for n in names]] for m in matrix])
    tables_ = [host_table, side]
    notes = ["Every host ran its own randomized interleaved order; each platform is compared with the "
             "baseline measured on the same host."]
    return Section(key="hosts", title="Hosts", data={"hosts": hosts, "comparison": matrix},
                   tables=tables_, notes=notes)


def _offset(clock: dict[str, Any]) -> str:
    if "offset_s" not in clock:
        return "?"
    unc = clock.get("uncertainty_s")
    return f"{clock['offset_s'] * 1e3:+.3f} ms" + (f" ±{unc * 1e3:.3f}" if unc else "")


def _shipped(shipped: dict[str, Any] | None) -> str:
    if shipped is None:
        return "-"
    return f"{shipped.get('bytes', 0) / 2**20:.1f} MiB sent, {len(shipped.get('skipped', []))} present"


def _cell(cell: dict[str, Any] | None) -> str:
    if not cell:
        return "-"
    if cell.get("verdict") == "baseline":
        return "baseline"
    rel = cell.get("relative")
    return (f"{rel:.3f}" if rel is not None else "n/a") + (f" {cell['verdict']}" if cell.get("verdict") else "")

"""The hosts of a multi-host run, side by side: who they are, how their clocks stood, what was
shipped to them, every platform's cost on each (against that host's own baseline), and the
pairs measured across hosts."""
from __future__ import annotations

from typing import Any

from ..store.db import Store
from ..store.models import Run
from .model import Report, Section, Table
from .result_rows import run_rows
from .runinfo import host_parts, run_hosts


def build(store: Store, run: Run) -> Section | None:
    names = run_hosts(run)
    if not names:
        return None
    report = Report(run, *run_rows(store, run))
    from ..analysis import tables

    rows_of = {h: part.rows for h, part in host_parts(report)}
    matrix = tables.hosts_matrix(rows_of)
    info = (run.provenance or {}).get("hosts", {})
    hosts: dict[str, Any] = {}
    for name in names:
        h = info.get(name, {})
        facts = h.get("facts", {})
        hosts[name] = {"address": h.get("address", ""), "hostname": facts.get("hostname"), "arch": facts.get("arch"),
                       "cpus": facts.get("cpus"), "kernel": facts.get("kernel"), "clock": h.get("clock", {}),
                       "shipped": h.get("shipped"), "shipments": h.get("shipments", []),
                       "executions": sum(r.n for r in rows_of.get(name, [])),
                       "failed": sum(r.failed for r in rows_of.get(name, []))}
        state = (run.provenance or {}).get("host_state", {}).get(name)  # the kind's state of that part (#40)
        if state:
            hosts[name]["state"] = state  # the adaptive rule's log and noise check of that host
    host_table = Table("Machines", ["host", "address", "arch", "CPUs", "kernel", "clock offset", "shipped"], [
        [n, h["address"] or "(controller)", h["arch"] or "?", h["cpus"] or "?", h["kernel"] or "?",
         _offset(h["clock"]), _shipped(h["shipped"], h["shipments"])] for n, h in hosts.items()])
    side = Table("Hosts side by side (each against its own baseline; relative, verdict)",
                 ["benchmark", "metric", "platform", *names], [
                     [m["benchmark"], m["metric"], m["platform"],
                      *[_cell(m["hosts"].get(n)) for n in names]] for m in matrix])
    pairs = cross_pairs(run, report.rows, hosts)
    tables_ = [host_table, side]
    if pairs:
        tables_.append(Table("Pairs across hosts (client on local; host networking, the hosts' own addresses)",
                             ["benchmark", "metric", "platform", "server on", "mean", "unit", "timing", "valid"],
                             [[p["benchmark"], p["metric"], p["platform"], p["server_host"], _num(p["mean"]),
                               p["unit"], p["timing"], "yes" if p["valid"] else f"no: {p['why']}"] for p in pairs]))
    notes = ["Every host ran its own randomized interleaved order; each platform is compared with the "
             "baseline measured on the same host."]
    if pairs:
        notes.append("Pairs across hosts ran after each host's own part, both ends started together (the client "
                     "waits until the server listens); their round-trip figures (sockperf's latency is RTT/2, "
                     "timed on the client's clock) are valid whatever the clocks; a figure timed on two clocks "
                     "is refused when the clock offset exceeds max_clock_error of it.")
    return Section(key="hosts", title="Hosts", data={"hosts": hosts, "comparison": matrix, "pairs": pairs},
                   tables=tables_, notes=notes)


TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def cross_pairs(run: Run, rows: list[Any], hosts: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of pairs across hosts, each with the server's host and whether it stands given
    the clocks: a metric timed on two clocks (the benchmark's two_clock_metrics) is refused when
    |offset| + uncertainty exceeds max_clock_error of its value."""
    from ..registry import BENCHMARKS

    servers = {b["key"]: b["params"]["server"] for b in (run.campaign or {}).get("benchmarks", [])
               if isinstance(b.get("params", {}).get("server"), dict)}
    out = []
    for r in rows:
        server = servers.get(r.benchmark)
        if server is None or r.host != "local":
            continue
        try:
            two_clock = r.metric in getattr(BENCHMARKS.get(r.benchmark.split("[")[0]), "two_clock_metrics", ())
        except Exception:  # noqa: BLE001 - a plugin gone: its figures are taken as round trips
            two_clock = False
        clock = hosts.get(server["host"], {}).get("clock", {})
        err = abs(clock.get("offset_s", float("inf"))) + clock.get("uncertainty_s", 0.0)
        limit = server.get("max_clock_error", 0.1)
        valid, why = True, ""
        if two_clock and r.mean is not None and r.unit in TIME_UNITS:
            value_s = abs(r.mean) * TIME_UNITS[r.unit]
            if err > limit * value_s:
                valid, why = False, f"clocks differ by {err * 1e3:.3f} ms, more than {limit:g} of it"
        out.append({"benchmark": r.benchmark, "metric": r.metric, "platform": r.platform, "client_host": "local",
                    "server_host": server["host"], "mean": r.mean, "unit": r.unit, "n": r.n,
                    "timing": "two clocks" if two_clock else "one clock", "valid": valid, "why": why,
                    "clock_offset_s": clock.get("offset_s"), "clock_uncertainty_s": clock.get("uncertainty_s")})
    return out


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _offset(clock: dict[str, Any]) -> str:
    if "offset_s" not in clock:
        return "?"
    unc = clock.get("uncertainty_s")
    return f"{clock['offset_s'] * 1e3:+.3f} ms" + (f" ±{unc * 1e3:.3f}" if unc else "")


def _shipped(shipped: dict[str, Any] | None, shipments: list[dict[str, Any]] | None = None) -> str:
    """What the host was sent at each start of the run (the first, then each resume)."""
    every = shipments or ([shipped] if shipped else [])
    if not every:
        return "-"
    return "; then ".join(f"{s.get('bytes', 0) / 2**20:.1f} MiB in {len(s.get('sent', []))} files sent, "
                          f"{len(s.get('skipped', []))} present" + _how(s) for s in every)


def _how(shipment: dict[str, Any]) -> str:
    """Dependencies the index had no wheel of for the host: built here, or the host's own."""
    built = [b["requirement"].split("==")[0] for b in shipment.get("built", [])]
    system = [f"python3-{k} {v}" for k, v in shipment.get("system", {}).items()]
    return ((f", built from sdists: {' '.join(built)}" if built else "")
            + (f", the host's Debian {', '.join(system)}" if system else ""))


def _cell(cell: dict[str, Any] | None) -> str:
    if not cell:
        return "-"
    if cell.get("verdict") == "baseline":
        return "baseline"
    rel = cell.get("relative")
    return (f"{rel:.3f}" if rel is not None else "n/a") + (f" {cell['verdict']}" if cell.get("verdict") else "")

"""The report part of the `migration` experiment: phase times per count and storage kind, the
storage at both ends (so a reader sees whether storage bounded the move), and the study's
figure (seeds/000, Fig. 12): time against the number of instances, one series per platform
and storage kind.

Statistics are the report's usual ones: mean with its 95% t-interval, median, coefficient of
variation and n, over the measured (not warm-up) rounds; a failed execution is counted and
its error shown, never averaged in as a zero.
"""
from __future__ import annotations

import re
import statistics
from collections import defaultdict
from typing import Any

from ...analysis import stats
from ...analysis.summary import mean_ci
from ...notation import plain
from ...report.figures import FigureSpec, Series, slug
from ...report.sections import ReportSection, SectionTable
from ...store.db import Store
from ...store.models import Run

KEY_RE = re.compile(r"^migration\[count=(?P<count>\d+)(?:,to=(?P<to>[^\]]+))?\]$")
PHASES = {
    "offline": ("stop_s", "transfer_s", "start_s", "total_s", "downtime_s"),
    "live": ("setup_s", "transfer_s", "start_s", "total_s", "downtime_s"),
    "lifecycle": ("create_s", "start_s", "stop_s", "remove_s"),
}
FIGURE_METRIC = {"offline": "total_s", "live": "downtime_s", "lifecycle": "start_s"}


def parse_key(key: str) -> tuple[int, str | None] | None:
    m = KEY_RE.match(key)
    return (int(m.group("count")), m.group("to")) if m else None


def _stat(values: list[float]) -> dict[str, Any]:
    ci = mean_ci(values)
    return {"n": len(values), "mean": statistics.fmean(values), "median": statistics.median(values),
            "ci95": ci, "cv": stats.cv(values), "values": values}


def _cell(point: dict[str, Any] | None, scale: float = 1.0) -> str:
    if not point:
        return "-"
    mean, ci = point["mean"] / scale, point["ci95"]
    if ci and point["n"] > 1:
        return f"{_num(mean, 2)}±{_num((ci[1] - ci[0]) / 2 / scale, 1)}"
    return _num(mean, 3)


def _num(v: float, digits: int) -> str:
    """Short and without exponents: 0.11, 2.3, 67, 744."""
    return f"{v:.0f}" if abs(v) >= 10 ** (digits - 1) else f"{v:.{digits}g}"


def storage_kind(facts: dict[str, Any], label: str | None) -> str:
    if label is None:
        return "in place"
    end = facts.get(label) or {}
    return str(end.get("kind") or label)


def build(store: Store, run: Run) -> ReportSection | None:
    section = (run.campaign or {}).get("migration") or {}
    mode = section.get("mode", "offline")
    facts = ((run.provenance or {}).get("migration") or {}).get("storage") or {}
    grouped: dict[tuple[str, int, str | None], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    units: dict[str, str] = {}
    for s in store.samples(run.id):
        parsed = parse_key(s.benchmark)
        if parsed is None or s.instance != 0:
            continue
        grouped[(s.platform, parsed[0], parsed[1])][s.metric].append(s.value)
        units[s.metric] = s.unit
    failures = [{"platform": e.platform, "key": e.benchmark, "round": e.round, "error": e.error}
                for e in store.executions(run.id, status="failed") if parse_key(e.benchmark)]
    if not grouped and not failures:
        return None
    points: list[dict[str, Any]] = []
    for (platform, count, to), metrics in sorted(grouped.items(), key=lambda kv: (kv[0][0], kv[0][2] or "", kv[0][1])):
        points.append({"platform": platform, "to": to, "storage": storage_kind(facts, to), "count": count,
                       "metrics": {m: {**_stat(v), "unit": units[m]} for m, v in sorted(metrics.items())}})
    phases = PHASES.get(mode, PHASES["offline"])
    if mode == "offline":
        phases = tuple(p for p in phases if p != "downtime_s")  # = total offline (see the note)
    dests = sorted({p["to"] for p in points if p["to"]})
    one = len(dests) <= 1  # one destination: named in the title, not in a column (100 columns)
    columns = ["platform", *([] if one else ["to"]), "N", *[p.removesuffix("_s") for p in phases]]
    if mode != "lifecycle":
        columns += ["MB moved", "MB/s"]
    rows = []
    for p in points:
        m = p["metrics"]
        row = [p["platform"], *([] if one else [p["to"] or "-"]), p["count"], *[_cell(m.get(ph)) for ph in phases]]
        if mode != "lifecycle":
            row += [_cell(m.get("bytes_moved"), 1e6), _cell(m.get("throughput_MBps"))]
        rows.append(row)
    where = f" to {dests[0]}" if one and dests else ""
    tables = [SectionTable(f"{mode}{where}: seconds per phase, mean±95% CI half-width", columns, rows)]
    if mode == "lifecycle":
        facts = {}  # nothing moves: the storage is not what a reader needs here
    if facts:
        tables.append(SectionTable("storage at each end (raw: dd, O_DIRECT, bs=1M), and the network path to a host",
                                   ["end", "storage", "rotational", "write MB/s", "read MB/s", "path MB/s"],
                                   [[label, f.get("kind"), {True: "yes", False: "no"}.get(f.get("rotational"), "?"),
                                     f.get("write_MBps"), f.get("read_MBps"), _path_rate(f)]
                                    for label, f in facts.items()]))
    notes = [_where(label, f) for label, f in facts.items()] + _notes(mode, points, facts, failures)
    data = {"mode": mode, "counts": section.get("counts"), "payload_bytes": section.get("payload"),
            "with_image": section.get("with_image"), "storage": facts, "points": points, "failures": failures}
    return ReportSection(key="migration", title=f"Migration ({mode})", data=data, tables=tables,
                         figures=_figures(mode, points, units), notes=notes)


def _path_rate(f: dict[str, Any]) -> float | str:
    rate = (f.get("path_throughput") or {}).get("MBps")
    return round(rate, 1) if isinstance(rate, (int, float)) else "-"


def _where(label: str, f: dict[str, Any]) -> str:
    if f.get("host"):
        path = f.get("path_throughput") or {}
        how = (f"; the path: {path['MBps']:.0f} MB/s ({path.get('what')}, {path.get('bytes', 0) >> 20} MiB of zeros)"
               if path.get("MBps") else f"; the path not measured: {path.get('error', '?')}")
        return f"{label}: host {f['host']}, {_on(f)}{how}"
    backing = f" ({f['device']} is the file {f['backing']} on {plain(f.get('backing_device'))})" if f.get("backing") else ""
    return f"{label}: {_on(f)}{backing}"


def _on(f: dict[str, Any]) -> str:
    """Where a destination lies, as far as it is known (a run stored without its device says only the path)."""
    device, mount = f.get("device"), f.get("mountpoint")
    return f"{f.get('path')}" + (f" on {device}" if device else "") + (f" mounted at {mount}" if mount else "")


def _figures(mode: str, points: list[dict[str, Any]], units: dict[str, str]) -> list[FigureSpec]:
    figures = []
    metrics = [FIGURE_METRIC[mode]] + (["transfer_s"] if mode == "offline" else [])
    for metric in metrics:
        series: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
        for p in points:
            if metric in p["metrics"]:
                series[f"{p['platform']}: {p['storage']}"][p["count"]] = p["metrics"][metric]
        if not series:
            continue
        out = []
        for name, by_count in series.items():
            xs = sorted(by_count)
            cis = [by_count[x]["ci95"] for x in xs]
            out.append(Series(name, xs, [by_count[x]["mean"] for x in xs],
                              lo=[c[0] if c else None for c in cis], hi=[c[1] if c else None for c in cis]))
        what = metric.removesuffix("_s")
        only = f" ({out[0].name})" if len(out) == 1 else ""  # one series: no legend, so named here
        figures.append(FigureSpec(slug("migration", mode, metric), "sweep",
                                  f"Migration ({mode}): {what} time against instances at once{only}",
                                  "instances at once", f"{what} ({units.get(metric, 's')})", out, group="migration",
                                  xticks=(sorted({x for s in out for x in s.x}),
                                          [str(x) for x in sorted({x for s in out for x in s.x})])))
    return figures


def _bound(p: dict[str, Any], rate: dict[str, Any] | None, dest: dict[str, Any], source: dict[str, Any]) -> list[str]:
    """Which of the source's storage, the network path and the destination's storage was the
    slowest, and how close the move came to it: the study's question (network or storage)."""
    ends = {"this host's storage (read)": source.get("read_MBps"),
            f"the network path to {dest['host']} (SSH)": (dest.get("path_throughput") or {}).get("MBps"),
            f"{dest['host']}'s storage (write)": dest.get("write_MBps")}
    known = {k: v for k, v in ends.items() if isinstance(v, (int, float)) and v > 0}
    if not rate or not known:
        return []
    slowest = min(known, key=lambda k: known[k])
    share = rate["mean"] / known[slowest]
    verdict = (f"is the slowest and bounds it ({share:.0%} of it)" if share > 0.5 else
               f"is the slowest, but the move reached only {share:.0%} of it: neither bounded it (each "
               "container's fixed costs did, at this payload)")
    listed = ", ".join(f"{k} {v:.0f} MB/s" for k, v in known.items())
    return [f"{p['platform']} N={p['count']} to host {dest['host']}: the move ran at {rate['mean']:.0f} MB/s; of "
            f"{listed}, {slowest} {verdict}"]


def _notes(mode: str, points: list[dict[str, Any]], facts: dict[str, Any], failures: list[dict[str, Any]]) -> list[str]:
    notes = []
    if mode == "offline":
        notes.append("offline: instances are down from the first stop to the last start, so downtime = total; "
                     "transfer = copy made durable (sync) and the instance pointed at its copy")
        if not any((f or {}).get("host") for f in facts.values()):
            notes.append("the move stayed on this host (another directory): storage to storage, no network")
        top = max((p["count"] for p in points), default=0)
        for p in (p for p in points if p["count"] == top):
            rate, dest = p["metrics"].get("throughput_MBps"), facts.get(p["to"] or "") or {}
            if dest.get("host"):
                notes += _bound(p, rate, dest, facts.get("source") or {})
                continue
            raw = min([v for v in (dest.get("write_MBps"), (facts.get("source") or {}).get("read_MBps")) if v] or [0])
            if not (rate and raw):
                continue
            if rate["mean"] > raw:
                notes.append(f"{p['platform']} N={p['count']} to {p['to']}: {rate['mean']:.0f} MB/s is faster than the "
                             f"slower end's raw single-stream O_DIRECT {raw:.0f} MB/s: parallel copies or a cache "
                             "below the filesystem (a loop file's page cache, a VM's disk cache) took it, so "
                             "this storage did not bound it")
            elif rate["mean"] > 0.5 * raw:
                notes.append(f"{p['platform']} N={p['count']} to {p['to']}: {rate['mean']:.0f} MB/s is over half of "
                             f"the slower end's raw {raw:.0f} MB/s: storage bounds this migration")
    if mode == "live":
        notes.append("live (QEMU): transfer, setup and downtime are QEMU's own accounting (query-migrate); the disk "
                     "is shared on one host, so bytes moved are memory and device state; start = until the guest "
                     "answers at the destination")
    if failures:
        notes.append(f"{len(failures)} execution(s) failed, e.g. {failures[0]['platform']} {failures[0]['key']}: "
                     f"{failures[0]['error'][:200]}")
    return notes

"""The `line` experiment's report section: NDR/PDR per length, latency percentiles from the
stored HDR histograms, build times, counters, and the study's figures (HDR percentile plot on
the 1/(1-p) axis, loss against rate, NDR/PDR against length, worst case over time).

Rounds are pooled as the statistics do elsewhere: rates are medians over the measured rounds,
histograms of one rate are added together (so the count, and with it the percentiles that
can be shown, grows with the rounds)."""
from __future__ import annotations

import re
import statistics
from collections import defaultdict
from typing import Any

from ..experiments.line import hdr
from ..store.db import Store
from ..store.models import Run
from .figures import FigureSpec, Series, hdr_ticks, slug
from .model import Section, Table

KEY_RE = re.compile(r"^line\[length=(?P<length>\d+),pinning=(?P<pinning>[a-z]+)\]$")
BUILD_RE = re.compile(r"^line-build\[length=(?P<length>\d+)\]$")
LATENCY_KEYS = ("p50", "p90", "p99", "p99.9", "p99.99", "p99.999", "max", "count")
NOTES = [
    "Each node forwards in the kernel (veth pairs, ip_forward, routes through every node); traffic is 1 flow "
    "of UDP from iperf 2 in the source namespace to its sink in the sink namespace, on this host.",
    "Latency is one-way, per packet, from the source's send timestamp (in the packet) to the sink's receive "
    "time, one clock, software timestamps, binned by iperf in 1 us bins (recorded at the bin's middle) and "
    "kept whole as HDR histograms (3 significant digits; `virtbench export` writes them).",
    "A percentile is shown only when at least 10 packets lie beyond it (p99.999 needs 10^6 packets).",
    "NDR/PDR: the MLRsearch-like search (both goals at once, short trials, bisection to the precision, each "
    "result confirmed by a final-duration trial) or the study's stepped search; the generator's own limit is "
    "the same search with the source straight to the sink (length 0).",
    "Pinning on veth: there are no hardware interrupts; RPS/XPS masks and the processes (generator, sink, "
    "the containers' main processes) are pinned instead.",
]


def _int(x: float | None) -> int | None:
    return None if x is None else int(round(x))


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def build(store: Store, run: Run) -> Section | None:
    samples = [s for s in store.samples(run.id) if KEY_RE.match(s.benchmark) or BUILD_RE.match(s.benchmark)]
    execs = {e.id: e for e in store.executions(run.id) if not e.warmup and e.status == "ok"}
    atts = [a for a in store.attachments(run.id, kind="line:") if a.execution_id in execs]
    rates: dict[tuple[str, str, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    builds: dict[tuple[str, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for s in samples:
        if (m := KEY_RE.match(s.benchmark)) and s.metric in ("ndr_pps", "pdr_pps"):
            rates[(s.platform, m["pinning"], int(m["length"]))][s.metric].append(s.value)
        elif (b := BUILD_RE.match(s.benchmark)):
            builds[(s.platform, int(b["length"]))][s.metric].append(s.value)
    trials: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    hists: dict[tuple[str, str, int], dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    lat_meta: dict[tuple[str, str, int], dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for a in atts:
        ex = execs[a.execution_id]
        m = KEY_RE.match(ex.benchmark)
        if not m:
            continue
        point = (ex.platform, m["pinning"], int(m["length"]))
        if a.kind == "line:search":
            trials[point].append(a.json())
        elif a.kind == "line:hdr":
            hists[point][a.name.removeprefix("hdr@")].append(hdr.decode(a.data))
        elif a.kind == "line:latency":
            lat_meta[point][a.name.removeprefix("latency@")].append(a.json())
    limit = {pin: _median(v["ndr_pps"]) for (_, pin, length), v in rates.items() if length == 0}
    rows = []
    for point in sorted((p for p in rates if p[2] > 0), key=lambda p: (p[1], p[2], p[0])):
        platform, pin, length = point
        latency = []
        for label, hs in hists[point].items():
            summ = hdr.summary_us(hdr.merged(hs))
            metas = lat_meta[point].get(label, [])
            latency.append({"rate": label, "rate_pps": _median([m["rate_pps"] for m in metas]),
                            **{k: summ[k] for k in LATENCY_KEYS}})
        latency.sort(key=lambda r: r["rate_pps"] or 0)
        rows.append({"platform": platform, "pinning": pin, "length": length,
                     "ndr_pps": _median(rates[point]["ndr_pps"]), "pdr_pps": _median(rates[point]["pdr_pps"]),
                     "trials": sum(len(t["trials"]) for t in trials[point]), "rounds": len(trials[point]),
                     "generator_limit_pps": limit.get(pin), "latency": latency})
    if not rows and not limit:
        return None
    notes = list(NOTES)
    skipped = ((run.provenance or {}).get("line") or {}).get("pinning_skipped") or {}
    notes += [f"pinning {m} skipped: {why}" for m, why in skipped.items()]
    perf_notes = {n for metas in lat_meta.values() for ms in metas.values() for m in ms
                  for n in ((m.get("counters") or {}).get("notes") or [])}
    notes += sorted(perf_notes)
    return Section(key="line", title="Line topology", data=rows, notes=notes,
                   tables=_tables(rows, builds, lat_meta, limit, trials),
                   figures=_figures(rows, hists, trials, lat_meta))


def _tables(rows: list[dict[str, Any]], builds: dict, lat_meta: dict, limit: dict, trials: dict) -> list[Table]:
    t_rate = Table("loss-free rate per length (NDR: no loss, PDR: the second goal; pkt/s, median of rounds)",
                   ["platform", "pinning", "length", "NDR", "PDR", "trials", "generator limit", "line limits?"],
                   [[r["platform"], r["pinning"], r["length"], _int(r["ndr_pps"]), _int(r["pdr_pps"]), r["trials"],
                     _int(r["generator_limit_pps"]),
                     "yes" if r["ndr_pps"] is not None and r["generator_limit_pps"]
                     and r["ndr_pps"] < 0.95 * r["generator_limit_pps"] else "no (generator)"] for r in rows])
    gen = Table("generator limit (source straight to sink)", ["pinning", "NDR pkt/s", "trials"],
                [[pin, _int(v), sum(len(t["trials"]) for (p, pn, n), ts in trials.items() if pn == pin and n == 0 for t in ts)]
                 for pin, v in limit.items()])
    t_lat = Table("one-way latency (us) at each rate, rounds pooled; '-': too few packets for that percentile",
                  ["platform", "pinning", "length", "rate", "pkt/s", *LATENCY_KEYS],
                  [[r["platform"], r["pinning"], r["length"], lat["rate"], _int(lat["rate_pps"]), *[lat[k] for k in LATENCY_KEYS]]
                   for r in rows for lat in r["latency"]])
    order = sorted(builds, key=lambda pn: (pn[1], pn[0]))
    t_build = Table("build and teardown of a line (s, median of rounds)", ["platform", "length", "build", "teardown"],
                    [[p, n, _median(builds[p, n]["build_s"]), _median(builds[p, n]["teardown_s"])] for p, n in order])
    counter_rows = []
    for (platform, pin, length), per in sorted(lat_meta.items(), key=lambda x: (x[0][1], x[0][2], x[0][0])):
        for label, metas in per.items():
            vals = [(m.get("counters") or {}).get("values") or {} for m in metas]
            pkts = sum(m.get("received") or 0 for m in metas) or None

            def per_pkt(key: str, vals: list = vals, pkts: int | None = pkts) -> float | None:
                xs = [v.get(key) for v in vals]
                return sum(xs) / pkts if pkts and xs and None not in xs else None
            counter_rows.append([platform, pin, length, label, per_pkt("context-switches"), per_pkt("softirq_net_rx"),
                                 per_pkt("dTLB-load-misses")])
    t_cnt = Table("counters per received packet during latency trials (system-wide; null: not available here)",
                  ["platform", "pinning", "length", "rate", "context switches", "NET_RX softirqs", "dTLB load misses"],
                  counter_rows)
    return [t_rate, gen, t_lat, t_build, t_cnt]


def _figures(rows: list[dict[str, Any]], hists: dict, trials: dict, lat_meta: dict) -> list[FigureSpec]:
    """The study's figures, one of each kind: loss-free rate and latency against line length,
    then latency percentiles, loss against rate and worst latencies over time for the longest
    line (every pinning). The same three per length and pinning follow for the interactive
    reports only (`static=False`): as files they were one per point, hundreds on a paper run."""
    group = "line"
    pins = list(dict.fromkeys(r["pinning"] for r in rows))
    platforms = list(dict.fromkeys(r["platform"] for r in rows))

    def name(platform: str, pin: str, what: str = "") -> str:
        return " ".join(x for x in (platform, what, f"(pinning {pin})" if len(pins) > 1 else "") if x)

    rate, latency = [], []
    for pin in pins:
        for platform in platforms:
            rs = [r for r in rows if r["pinning"] == pin and r["platform"] == platform]
            rate += [Series(name(platform, pin, "NDR"), [r["length"] for r in rs], [r["ndr_pps"] for r in rs]),
                     Series(name(platform, pin, "PDR"), [r["length"] for r in rs], [r["pdr_pps"] for r in rs])]
            top = [(r["length"], r["latency"][-1]) for r in rs if r["latency"]]  # the highest rate measured
            latency += [Series(name(platform, pin, key), [n for n, _ in top], [lat[key] for _, lat in top])
                        for key in ("p50", "p99")]
    figs = [FigureSpec("line-ndr", "sweep", "NDR and PDR against line length", "nodes in the line", "rate [pkt/s]",
                       rate, group=group, xlog=True),
            FigureSpec("line-latency", "sweep", "one-way latency against line length (p50 and p99 at the highest "
                       "rate measured)", "nodes in the line", "latency [us]", latency, group=group, xlog=True,
                       ylog=True)]
    points = sorted({(p[1], p[2]) for p in hists}, key=lambda x: (x[0], x[1]))
    if points:
        longest = max(n for _, n in points)
        figs += _per_point(hists, trials, lat_meta, pins, longest, "", group, len(pins) > 1)
    for pin, length in points:
        for f in _per_point(hists, trials, lat_meta, [pin], length, pin, group, False):
            f.static = False
            figs.append(f)
    return figs


def _per_point(hists: dict, trials: dict, lat_meta: dict, pins: list[str], length: int, tag: str, group: str,
               say_pin: bool) -> list[FigureSpec]:
    """Latency percentiles, loss against rate and worst latencies of one line length, for the pinnings given."""
    where = f" (pinning {pins[0]})" if len(pins) == 1 else ""

    def label(platform: str, pin: str, what: str = "") -> str:
        return " ".join(x for x in (platform, what, f"(pinning {pin})" if say_pin else "") if x)

    series, ps_all = [], []
    for (platform, pn, n), per in hists.items():
        if pn not in pins or n != length:
            continue
        for rate, hs in per.items():
            curve = hdr.percentile_curve(hdr.merged(hs))
            ps_all += [p for p, _ in curve]
            series.append(Series(label(platform, pn, f"@{rate}"), [1 / (1 - p / 100) for p, _ in curve],
                                 [v for _, v in curve], text=[f"p{p:.5g}" for p, _ in curve]))
    ticks = hdr_ticks(sorted({p / 100 for p in (50, 90, 99, 99.9, 99.99, 99.999) if p <= max(ps_all or [0])}))
    loss = []
    for (platform, pn, n), ts in trials.items():
        if pn in pins and n == length:
            pts = sorted((t["rate_pps"], 100 * t["loss"]) for s in ts for t in s["trials"])
            loss.append(Series(label(platform, pn), [x for x, _ in pts], [y for _, y in pts]))
    worst = []
    for (platform, pn, n), per in lat_meta.items():
        if pn in pins and n == length and per:
            rate = max(per, key=lambda k: _median([m["rate_pps"] for m in per[k]]) or 0)
            m = per[rate][0]
            worst.append(Series(label(platform, pn, f"@{rate}"), [w[0] for w in m["worst"]], [w[1] for w in m["worst"]]))
    ids = [slug(kind, tag, str(length)) if tag else slug(kind) for kind in ("line-hdr", "line-loss", "line-worst")]
    return [FigureSpec(ids[0], "latency", f"one-way latency percentiles, {length} nodes{where}", "percentile",
                       "latency [us]", series, group=group, xlog=True, ylog=True, xticks=ticks,
                       note="HDR histograms of every packet, rounds pooled; only percentiles the count supports"),
            FigureSpec(ids[1], "sweep", f"loss against offered rate, {length} nodes{where}",
                       "rate asked of the generator [pkt/s]", "loss [%]", loss, group=group),
            FigureSpec(ids[2], "trend", f"worst latency per 100 ms, {length} nodes{where} (first round, highest rate)",
                       "time [s]", "worst latency [us]", worst, group=group, ylog=True)]

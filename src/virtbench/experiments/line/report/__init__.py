"""The `line` experiment's report section: NDR/PDR per length, latency percentiles from the
stored HDR histograms, build times, counters, implausible results and their re-measurement,
and the study's figures (figures.py beside this).

In the tables rounds are pooled as the statistics do elsewhere: rates are medians over the
measured rounds, histograms of one rate are added together (so the count, and with it the
percentiles that can be shown, grows with the rounds); each latency row also gives the round
with the highest worst case, the one the paper shows and the figures draw."""
from __future__ import annotations

import re
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

from ....report.model import Section, Table
from ....store.db import Store
from ....store.models import Run
from .. import counters, hdr, plausible
from ..plausible import KEY_RE, RECHECK_RE
from . import figures as line_figures
from .figures import median as _median

BUILD_RE = re.compile(r"^line-build\[length=(?P<length>\d+)\]$")
LATENCY_KEYS = ("p50", "p90", "p99", "p99.9", "p99.99", "p99.999", "max", "count")
ROUND_KEYS = ("p50", "p99.99", "max")
"""Kept per round too (`p50_rounds` ...): the study report's intervals over the rounds."""
NOTES = [
    "Each node forwards in the kernel (veth pairs, ip_forward, routes through every node); traffic is 1 flow "
    "of UDP from iperf 2 in the source namespace to its sink in the sink namespace, on this host.",
    "Latency is one-way, per packet, from the source's send timestamp (in the packet) to the sink's receive "
    "time, one clock, software timestamps, binned by iperf in 1 µs bins (recorded at the bin's middle) and "
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


def build(store: Store, run: Run) -> Section | None:
    samples = [s for s in store.samples(run.id) if KEY_RE.match(s.benchmark) or BUILD_RE.match(s.benchmark)]
    execs = {e.id: e for e in store.executions(run.id) if not e.warmup and e.status == "ok"}
    atts = [a for a in store.attachments(run.id, kind="line:") if a.execution_id in execs]
    rates = plausible.rates(samples)
    builds: dict[tuple[str, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for s in samples:
        if (b := BUILD_RE.match(s.benchmark)):
            builds[(s.platform, int(b["length"]))][s.metric].append(s.value)
    trials: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    hists: line_figures.Hists = defaultdict(lambda: defaultdict(dict))
    lat_meta: line_figures.Metas = defaultdict(lambda: defaultdict(dict))
    rechecks: dict[tuple[str, str, int], dict[str, Any]] = {}
    for a in atts:
        ex = execs[a.execution_id]
        if (r := RECHECK_RE.match(ex.benchmark)) and a.kind == "line:search":
            rechecks[(ex.platform, r["pinning"], int(r["length"]))] = a.json()
        if not (m := KEY_RE.match(ex.benchmark)):
            continue
        point = (ex.platform, m["pinning"], int(m["length"]))
        if a.kind == "line:search":
            trials[point].append(a.json())
        elif a.kind == "line:hdr":
            hists[point][a.name.removeprefix("hdr@")][ex.round] = hdr.decode(a.data)
        elif a.kind == "line:latency":
            lat_meta[point][a.name.removeprefix("latency@")][ex.round] = a.json()
    limit = {pin: _median(v.get("ndr_pps", [])) for (_, pin, length), v in rates.items() if length == 0}
    section = (run.campaign or {}).get("line") or {}
    search = _search(run)
    flags = _flags(_suspects(rates, run, search), rechecks)
    first = {k: dict(v) for k, v in rates.items()}
    for (point, metric), again in replaced(flags).items():  # every surface carries the re-measurement
        rates[point][metric] = [again]
    rows = []
    for point in sorted((p for p in rates if p[2] > 0), key=lambda p: (p[1], p[2], p[0])):
        platform, pin, length = point
        latency: list[dict[str, Any]] = []
        for label, by_round in hists[point].items():
            summ = hdr.summary_us(hdr.merged(by_round.values()))
            metas = lat_meta[point].get(label, {})
            rnd = line_figures.worst_round(by_round)
            worst = hdr.summary_us(by_round[rnd])
            cells = counter_cells(list(metas.values())) if metas else [None] * 5
            per_round = [hdr.summary_us(by_round[r]) for r in sorted(by_round)]
            latency.append({"rate": label, "rate_pps": _median([m["rate_pps"] for m in metas.values()]),
                            **{k: summ[k] for k in LATENCY_KEYS},
                            **{f"{k}_rounds": [x[k] for x in per_round] for k in ROUND_KEYS},
                            "worst_run": {"round": rnd, **{k: worst[k] for k in LATENCY_KEYS}},
                            "dtlb_miss_pct": cells[2], "res_interrupts": cells[3]})
        latency.sort(key=lambda r: r["rate_pps"] or 0)
        rows.append({"platform": platform, "pinning": pin, "length": length,
                     "ndr_pps": _median(rates[point].get("ndr_pps", [])),
                     "pdr_pps": _median(rates[point].get("pdr_pps", [])),
                     "ndr_pps_rounds": list(rates[point].get("ndr_pps", [])),
                     "pdr_pps_rounds": list(rates[point].get("pdr_pps", [])),
                     "trials": sum(len(t["trials"]) for t in trials[point]), "rounds": len(trials[point]),
                     "generator_limit_pps": limit.get(pin), "latency": latency,
                     "implausible": [f for f in flags if (f["platform"], f["pinning"], f["length"]) == point],
                     "remeasured": {m: {"first": _median(first[point].get(m, [])), "again": v[0]}
                                    for m, v in rates[point].items() if first[point].get(m) is not v}})
    if not rows and not limit:
        return None
    weak_limits = generator_below_line(limit, rows, plausible.noise_floor(search))
    for row in rows:
        row["generator_limit_suspect"] = row["pinning"] in weak_limits
    notes = list(NOTES)
    skipped = ((run.provenance or {}).get("line") or {}).get("pinning_skipped") or {}
    notes += [f"pinning {m} skipped: {why}" for m, why in skipped.items()]
    perf_notes = {n for metas in lat_meta.values() for ms in metas.values() for m in ms.values()
                  for n in ((m.get("counters") or {}).get("notes") or [])}
    notes += sorted(perf_notes)
    notes += [f"implausible: {f['why']}; measured again: {f['recheck']}"
              + ("; the tables, figures and JSON show the re-measurement" if f["confirmed"] is False else "")
              for f in flags]
    notes += [f"generator limit (pinning {pin}): {why}" for pin, why in weak_limits.items()]
    goals = search.loss if hasattr(search, "loss") else [0.0, 0.005]
    figs = line_figures.figures(rows, hists, trials, lat_meta, section.get("worst"), max(goals))
    return Section(key="line", title="Line topology", data=rows, notes=notes,
                   tables=[*_tables(rows, builds, lat_meta, limit, trials), *_flag_table(flags)], figures=figs)


def _search(run: Run) -> SimpleNamespace:
    section = (run.campaign or {}).get("line") or {}
    return SimpleNamespace(**{"method": "ndr-pdr", "precision": 0.01, "step": 1000.0, **(section.get("search") or {})})


def _suspects(rates: dict, run: Run, search: SimpleNamespace) -> list[plausible.Suspect]:
    return plausible.suspects(rates, run.baseline, plausible.noise_floor(search),
                              float(search.step) if search.method == "steps" else 0.0)


def replaced(flags: list[dict[str, Any]]) -> dict[tuple[tuple[str, str, int], str], float]:
    """(point, metric) -> its re-measurement, for each result the run judged disturbed: flagged
    implausible and measured again within the noise. A run on this project's host gave an 8-node
    NDR of 79,391 pkt/s (22 % above the 1-node line), measured 65,784 again and said so in a note,
    while its tables, JSON and figures still carried 79,391."""
    return {((f["platform"], f["pinning"], f["length"]), f["metric"]): float(f["recheck_pps"]) for f in flags
            if f["confirmed"] is False and f["recheck_pps"] is not None}


def remeasured(store: Store, run: Run) -> dict[tuple[str, str, str], float]:
    """(benchmark key, metric, platform) -> the value that replaces what the run judged disturbed,
    for the report's main rows (report/sections.py's corrections: every surface, one number)."""
    samples = [s for s in store.samples(run.id) if KEY_RE.match(s.benchmark)]
    execs = {e.id: e for e in store.executions(run.id) if not e.warmup and e.status == "ok"
             and RECHECK_RE.match(e.benchmark)}
    if not execs:
        return {}
    rechecks = {}
    for a in store.attachments(run.id, kind="line:search"):
        if a.execution_id in execs and (r := RECHECK_RE.match(execs[a.execution_id].benchmark)):
            rechecks[(execs[a.execution_id].platform, r["pinning"], int(r["length"]))] = a.json()
    flags = _flags(_suspects(plausible.rates(samples), run, _search(run)), rechecks)
    return {(f"line[length={length},pinning={pin}]", metric, platform): value
            for ((platform, pin, length), metric), value in replaced(flags).items()}


def generator_below_line(limit: dict[str, float | None], rows: list[dict[str, Any]], noise: float) -> dict[str, str]:
    """pinning -> why its generator limit cannot be read as one: it measured lower, beyond the
    noise, than a line's NDR (the generator alone, length 0, read 48,004 pkt/s against the 1-node
    line's 65,280: the limit's search was disturbed, so whether the line or the generator limits
    is unknown)."""
    out = {}
    for pin, gen in limit.items():
        beat = [r for r in rows if r["pinning"] == pin and gen and r["ndr_pps"] and r["ndr_pps"] > gen * (1 + noise)]
        if gen and beat:
            top = max(beat, key=lambda r: r["ndr_pps"])
            out[pin] = (f"{gen:,.0f} pkt/s reads below {top['platform']} length {top['length']}'s NDR of "
                        f"{top['ndr_pps']:,.0f} beyond the noise: the generator alone cannot be slower than through "
                        "a line, so its search was disturbed; whether the line or the generator limits is unknown")
    return out


def _flags(found: list[plausible.Suspect], rechecks: dict[tuple[str, str, int], dict[str, Any]]) -> list[dict[str, Any]]:
    """Each implausible result with its re-measurement: confirmed when the new value is still
    beyond the noise above what it was compared with, else the first measurement was off."""
    out = []
    for s in found:
        again = rechecks.get(s.point)
        value = again.get(s.metric) if again else None
        if value is None:
            said, confirmed = "not measured again (the run predates it, or it failed)", None
        else:
            confirmed = value > s.other * (1 + s.noise)
            said = (f"{value:.0f} pkt/s, " + ("still implausible: the line really measured so here" if confirmed
                                               else "not beyond the noise this time: the first was most likely disturbed"))
        out.append({**s.public(), "recheck_pps": value, "confirmed": confirmed, "recheck": said})
    return out


def _flag_table(flags: list[dict[str, Any]]) -> list[Table]:
    if not flags:
        return []
    return [Table("implausible results (a longer line or a container faster beyond the noise) and their "
                  "re-measurement", ["platform", "pinning", "length", "metric", "pkt/s", "compared with", "its pkt/s",
                                     "noise", "measured again"],
                  [[f["platform"], f["pinning"], f["length"], f["metric"], _int(f["value"]),
                    f"{f['against']['platform']} length {f['against']['length']}", _int(f["other"]),
                    f"{100 * f['noise']:.0f} %", f["recheck"]] for f in flags])]


def _tables(rows: list[dict[str, Any]], builds: dict, lat_meta: dict, limit: dict, trials: dict) -> list[Table]:
    t_rate = Table("loss-free rate per length (NDR: no loss, PDR: the second goal; pkt/s, median of rounds)",
                   ["platform", "pinning", "length", "NDR", "PDR", "trials", "generator limit", "line limits?"],
                   [[r["platform"], r["pinning"], r["length"], _int(r["ndr_pps"]), _int(r["pdr_pps"]), r["trials"],
                     _int(r["generator_limit_pps"]),
                     "unknown (generator limit suspect)" if r.get("generator_limit_suspect")
                     else "yes" if r["ndr_pps"] is not None and r["generator_limit_pps"]
                     and r["ndr_pps"] < 0.95 * r["generator_limit_pps"] else "no (generator)"] for r in rows])
    gen = Table("generator limit (source straight to sink)", ["pinning", "NDR pkt/s", "trials"],
                [[pin, _int(v), sum(len(t["trials"]) for (p, pn, n), ts in trials.items() if pn == pin and n == 0 for t in ts)]
                 for pin, v in limit.items()])
    t_lat = Table("one-way latency (µs) at each rate, rounds pooled; '-': too few packets for that percentile; "
                  "the round with the highest worst case (the paper's pick, drawn in the figures) and its max",
                  ["platform", "pinning", "length", "rate", "pkt/s", *LATENCY_KEYS, "worst round", "its max"],
                  [[r["platform"], r["pinning"], r["length"], lat["rate"], _int(lat["rate_pps"]),
                    *[lat[k] for k in LATENCY_KEYS], lat["worst_run"]["round"] + 1, lat["worst_run"]["max"]]
                   for r in rows for lat in r["latency"]])
    order = sorted(builds, key=lambda pn: (pn[1], pn[0]))
    t_build = Table("build and teardown of a line (s, median of rounds)", ["platform", "length", "build", "teardown"],
                    [[p, n, _median(builds[p, n]["build_s"]), _median(builds[p, n]["teardown_s"])] for p, n in order])
    counter_rows = []
    for (platform, pin, length), per in sorted(lat_meta.items(), key=lambda x: (x[0][1], x[0][2], x[0][0])):
        for label, by_round in per.items():
            counter_rows.append([platform, pin, length, label, *counter_cells(list(by_round.values()))])
    t_cnt = Table("counters during latency trials (system-wide, summed over rounds; per received packet unless said; "
                  "null: not available here)",
                  ["platform", "pinning", "length", "rate", "context switches", "NET_RX softirqs", "dTLB misses % of loads",
                   "RES interrupts per trial", "RES per CPU per trial"], counter_rows)
    return [t_rate, gen, t_lat, t_build, t_cnt]


def counter_cells(metas: list[dict[str, Any]]) -> list[Any]:
    """Context switches and NET_RX softirqs per received packet; dTLB load misses as a share of
    dTLB loads (the paper's Fig. 4 measure; null without a PMU); rescheduling interrupts per trial,
    in all and per CPU (the paper's cause of latency spikes), means over the rounds."""
    vals = [(m.get("counters") or {}).get("values") or {} for m in metas]
    pkts = sum(m.get("received") or 0 for m in metas) or None

    def total(key: str) -> float | None:
        xs = [v.get(key) for v in vals]
        return float(sum(xs)) if xs and None not in xs else None  # type: ignore[arg-type]

    def per_pkt(key: str) -> float | None:
        x = total(key)
        return x / pkts if x is not None and pkts else None

    share = counters.dtlb_share({counters.DTLB_LOADS: total(counters.DTLB_LOADS),
                                 counters.DTLB_MISSES: total(counters.DTLB_MISSES)})
    res = total("res_interrupts")
    per_cpu = [(m.get("counters") or {}).get("res_per_cpu") or [] for m in metas]
    cpus = "" if not per_cpu or not all(per_cpu) or len({len(c) for c in per_cpu}) != 1 else ", ".join(
        f"cpu{i} {sum(c[i] for c in per_cpu) / len(per_cpu):.0f}" for i in range(len(per_cpu[0])))
    return [per_pkt("context-switches"), per_pkt("softirq_net_rx"), None if share is None else round(share, 2),
            None if res is None else round(res / len(metas), 1), cpus or None]

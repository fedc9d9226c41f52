"""The line experiment's figures in the shapes of study 004's: loss-free rate and latency
against line length (Fig. 4), HDR percentile plots (Figs. 5-7), packet loss against the
offered rate per line length (Fig. 3) and the N worst latencies over time at one rate (Fig. 8).

Where the paper shows one run of several, it shows "the run with the highest worst-case
latency" (Section IV.B): the HDR and worst-latency figures draw that round, not the rounds
pooled, and say which. The tables (this package's __init__) keep the pooled statistics.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from ....report.figures import FigureSpec, Series, hdr_ticks, slug
from .. import hdr

GROUP = "line"
PAPER_PINNING = "node"
"""The paper's Figs. 3 and 8 are drawn with per-NUMA-node pinning."""

Hists = dict[tuple[str, str, int], dict[str, dict[int, Any]]]
"""(platform, pinning, length) -> rate label -> round -> HDR histogram."""
Metas = dict[tuple[str, str, int], dict[str, dict[int, dict[str, Any]]]]
"""(platform, pinning, length) -> rate label -> round -> the latency trial's JSON."""


def median(xs: list[float]) -> float | None:
    """The median, None for no values (a point whose every round failed)."""
    return statistics.median(xs) if xs else None


def worst_round(per_round: dict[int, Any]) -> int:
    """The round whose histogram (or latency trial) has the highest worst case: the paper's pick."""
    def top(r: int) -> float:
        v = per_round[r]
        return float(v.get("max_us") or 0) if isinstance(v, dict) else float(v.get_max_value())
    return max(sorted(per_round), key=top)


def worst_pick(per_label: dict[str, dict[int, dict[str, Any]]], target: float,
               goal: float) -> tuple[str, int, str] | None:
    """(rate label, round, what to say) of the latency trial Fig. 8 draws: the rate nearest the
    paper's `target` among those the line sustained (the source sent the rate, loss within the
    largest goal), else the nearest of all (said so); of it, the round with the highest worst case."""
    if not per_label:
        return None

    def rate(label: str) -> float:
        return median([m["rate_pps"] for m in per_label[label].values()]) or 0.0

    def held(label: str) -> bool:
        return all(m.get("sustained", True) and (m.get("loss") or 0.0) <= goal for m in per_label[label].values())

    held_labels = [lb for lb in per_label if held(lb)]
    label = min(held_labels or list(per_label), key=lambda lb: (abs(rate(lb) - target), -rate(lb)))
    got = rate(label)
    if abs(got - target) <= 0.01 * target:
        say = f"{got:.0f} pkt/s (the paper's rate)"
    elif held_labels:
        say = f"{got:.0f} pkt/s, the measured rate nearest the paper's {target:.0f} that this line sustained"
    else:
        say = f"{got:.0f} pkt/s, nearest the paper's {target:.0f}; no measured rate was sustained without loss"
    return label, worst_round(per_label[label]), say


def worst_series(meta: dict[str, Any]) -> tuple[list[float], list[float | None], list[str]]:
    """(time s, latency us, text) of a trial's worst latencies; a run recorded before worst_n
    was kept has only the worst per 100 ms."""
    if meta.get("worst_n") is not None:
        cells = meta["worst_n"]
        return [c[0] for c in cells], [c[1] for c in cells], [f"{int(c[2])} packets" for c in cells]
    return [w[0] for w in meta["worst"]], [w[1] for w in meta["worst"]], ["worst of 100 ms" for _ in meta["worst"]]


def figures(rows: list[dict[str, Any]], hists: Hists, trials: dict, lat_meta: Metas,
            worst: dict[str, Any] | None = None, goal: float = 0.005) -> list[FigureSpec]:
    """One static figure of each kind: rate and latency against length; for the longest line the
    HDR percentiles and the worst latencies (every pinning); loss against rate for every length
    (the paper's pinning where measured). The same per length and pinning follow for the
    interactive reports only (`static=False`): as files they were hundreds on a paper run."""
    worst = worst or {"rate": 17300.0, "count": 5000}
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
                       rate, group=GROUP, xlog=True),
            FigureSpec("line-latency", "sweep", "one-way latency against line length (p50 and p99 at the highest "
                       "rate measured)", "nodes in the line", "latency [µs]", latency, group=GROUP, xlog=True,
                       ylog=True)]
    points = sorted({(p[1], p[2]) for p in hists}, key=lambda x: (x[0], x[1]))
    if points:
        longest = max(n for _, n in points)
        hdr_fig, _, worst_fig = per_point(hists, trials, lat_meta, pins, longest, "", len(pins) > 1, worst, goal)
        figs += [hdr_fig, loss_figure(trials, PAPER_PINNING if PAPER_PINNING in pins else (pins or [""])[0]), worst_fig]
    for pin, length in points:
        for f in per_point(hists, trials, lat_meta, [pin], length, pin, False, worst, goal):
            f.static = False
            figs.append(f)
    return figs


def loss_figure(trials: dict, pin: str) -> FigureSpec:
    """Fig. 3: packet loss against the offered rate, one curve per line length (and platform), every
    trial of the rate searches; a rate tried in several rounds shows their median loss."""
    series = []
    for (platform, pn, n), ts in sorted(trials.items(), key=lambda x: (x[0][0], x[0][2])):
        if pn != pin or n == 0:
            continue
        by_rate: dict[float, list[float]] = defaultdict(list)
        for s in ts:
            for t in s["trials"]:
                by_rate[t["rate_pps"]].append(100 * t["loss"])
        xs = sorted(by_rate)
        series.append(Series(f"{platform} {n} node{'' if n == 1 else 's'}", xs, [statistics.median(by_rate[x]) for x in xs]))
    return FigureSpec("line-loss", "sweep", f"packet loss against offered rate per line length (pinning {pin})",
                      "rate asked of the generator [pkt/s]", "loss [%]", series, group=GROUP,
                      note="every trial of the rate searches (a stepped search with past_loss traces the curve "
                           "past the first loss, as the paper's Fig. 3); median over rounds at a repeated rate")


def per_point(hists: Hists, trials: dict, lat_meta: Metas, pins: list[str], length: int, tag: str, say_pin: bool,
              worst: dict[str, Any], goal: float) -> list[FigureSpec]:
    """HDR percentiles, loss against rate and the worst latencies of one line length, for the pinnings given."""
    where = f" (pinning {pins[0]})" if len(pins) == 1 else ""

    def label(platform: str, pin: str, what: str = "") -> str:
        return " ".join(x for x in (platform, what, f"(pinning {pin})" if say_pin else "") if x)

    series, ps_all = [], []
    for (platform, pn, n), per in hists.items():
        if pn not in pins or n != length:
            continue
        for rate, by_round in per.items():
            rnd = worst_round(by_round)
            curve = hdr.percentile_curve(by_round[rnd])
            ps_all += [p for p, _ in curve]
            series.append(Series(label(platform, pn, f"@{rate} round {rnd + 1}"), [1 / (1 - p / 100) for p, _ in curve],
                                 [v for _, v in curve], text=[f"p{p:.5g}" for p, _ in curve]))
    ticks = hdr_ticks(sorted({p / 100 for p in (50, 90, 99, 99.9, 99.99, 99.999) if p <= max(ps_all or [0])}))
    loss = []
    for (platform, pn, n), ts in trials.items():
        if pn in pins and n == length:
            pts = sorted((t["rate_pps"], 100 * t["loss"]) for s in ts for t in s["trials"])
            loss.append(Series(label(platform, pn), [x for x, _ in pts], [y for _, y in pts]))
    worst_s, says = [], []
    for (platform, pn, n), per in lat_meta.items():
        if pn in pins and n == length and (pick := worst_pick(per, float(worst["rate"]), goal)):
            rate, rnd, say = pick
            xs, ys, text = worst_series(per[rate][rnd])
            worst_s.append(Series(label(platform, pn, f"{say.split(' ')[0]} pkt/s round {rnd + 1}"), xs, ys,
                                  style="points", text=text))
            says.append(f"{label(platform, pn)}: {say}")
    ids = [slug(kind, tag, str(length)) if tag else slug(kind) for kind in ("line-hdr", "line-loss", "line-worst")]
    count = int(worst["count"])
    return [FigureSpec(ids[0], "latency", f"one-way latency percentiles, {length} nodes{where}, the run with the "
                       "highest worst case", "percentile", "latency [µs]", series, group=GROUP, xlog=True, ylog=True,
                       xticks=ticks, note="HDR histogram of every packet of the round with the highest worst-case "
                       "latency (the paper's pick); only percentiles the count supports"),
            FigureSpec(ids[1], "sweep", f"loss against offered rate, {length} nodes{where}",
                       "rate asked of the generator [pkt/s]", "loss [%]", loss, group=GROUP),
            FigureSpec(ids[2], "trend", f"{count} worst latencies over time, {length} nodes{where}, the run with the "
                       "highest worst case", "time [s]", "latency [µs]", worst_s, group=GROUP, ylog=True,
                       note="; ".join(says) + ". Times to the 100 ms interval (iperf 2 reports its latency "
                       "histogram per interval, not per packet); each point is one 1 µs bin, its packets in the text")]

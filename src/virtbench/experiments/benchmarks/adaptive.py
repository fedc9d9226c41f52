"""Adaptive repetition: after the declared rounds, add rounds for the platforms whose ratio to
the baseline is still imprecise, until the target, the repetition cap or the time cap.

Each extra round is appended to the run's log with its reasons before it starts, so a resumed
run finishes the round it was in and the report can show why every extra run happened.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...analysis import forecast
from ...analysis.stats import Need, needs_more
from ...analysis.verdict import decide
from ...registry import AIMS
from ...store.db import now
from ..base import Sink
from .schedule import LIFECYCLE, unmeasured_rounds

if TYPE_CHECKING:
    from ...config import Campaign

STOP_CONFIDENCE = 0.99
"""The interval that stops a comparison's extra rounds on a difference. Every extra round is one
more look at the data: stopping at the first 95 % 'slower' lets an A/A comparison wander into
it at one of the looks (7-8.5 % at 2-5 % noise per sample, 5 to 16 rounds, in
benchmarks/verdict_rates.py); stopping at 99 % (a Pocock-like constant boundary, calibrated
by that simulation for these looks) and reporting at 95 % keeps it at 0-4.7 % (3 to 16 rounds)."""
OUT_OF_REACH = "out of reach"
OUT_OF_REACH_FACTOR = 3
"""needs_decision: a comparison needing more than this many times the rounds the caps allow is left."""
OUT_OF_REACH_MIN_ROUNDS = 5
"""A comparison is judged out of reach only from this many rounds on, and against the rounds the
time left would allow it alone: on the quiet-looking VM of 2026-11-27 one disturbed round in 3
made openssl's spread +-10 %, and judging it then against the rounds all open comparisons could
share left 6 of 15 comparisons without rounds while 1.3 of the 6 minutes went unused."""
STOP_EQUIVALENCE = 0.95
"""The interval that stops a comparison's extra rounds on 'same' (the report's is 90 %, TOST at
5 % each): at 90 % at every look, a platform truly 2 % off was stopped and called the same
up to 12.7 % of the time; at 95 %, 5-9 % (README, "Reading the verdicts")."""


@dataclass(frozen=True)
class Aimed:
    """One undecided quantity an aim (campaign `adaptive.aim`, registry.AIMS) judges from
    several cells, such as a study's Table 7 row: the geometric mean of a category's metrics
    of the best container against the paper's range. The cells' own comparisons may each be
    decided (the same within 5 %) while the quantity, which needs a narrower interval, is not."""

    what: str
    cells: frozenset[tuple[str, str]]
    """(platform, benchmark key) to measure again."""
    needed: int
    """About how many rounds would decide it at the report's 95 %, at its noise so far."""
    reason: str


def log_of(sink: Sink, run_id: str) -> list[dict[str, Any]]:
    """The run's adaptive log (the sink's state: the run's provenance, or one host's part's)."""
    return list(sink.state(run_id).get("adaptive", []))


def plan_next(sink: Sink, campaign: Campaign, run_id: str, next_round: int,
              started_at: datetime) -> dict[str, Any] | None:
    """The next extra round (platforms and reasons), or None when done; recorded in the run."""
    assert campaign.adaptive is not None
    rule = campaign.adaptive
    log = log_of(sink, run_id)
    elapsed = (now() - started_at).total_seconds() / 60
    if elapsed >= rule.max_minutes:
        _append(sink, run_id, log, {"stop": f"time cap of {rule.max_minutes:g} min reached"})
        return None
    values: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    rounds: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    direction: dict[tuple[str, str], bool] = {}
    for s in sink.samples(run_id):
        if s.benchmark == LIFECYCLE:
            continue
        values[(s.platform, s.benchmark, s.metric)].append(s.value)
        rounds[(s.platform, s.benchmark, s.metric)].append(s.round)
        direction[(s.benchmark, s.metric)] = s.higher_is_better
    reasons: dict[str, str] = {}
    cells: dict[str, str] = {}
    worst: dict[str, float] = {}
    undecided: dict[str, set[str]] = defaultdict(set)
    capped: list[str] = []
    left: dict[tuple[str, ...], str] = {}  # out of reach: undecided, but given no more rounds (cells, aims)
    needs: dict[tuple[str, str, str], Need] = {}
    for (platform, bench, metric), vals in sorted(values.items()):
        if platform == campaign.baseline:
            continue
        base = values.get((campaign.baseline, bench, metric), [])
        if rule.until == "decided":
            needs[(platform, bench, metric)] = needs_decision(
                vals, base, direction[(bench, metric)], target=rule.target, max_n=rule.max_repetitions,
                rounds=rounds[(platform, bench, metric)], base_rounds=rounds.get((campaign.baseline, bench, metric), []))
        else:
            needs[(platform, bench, metric)] = needs_more(vals, base, direction[(bench, metric)], target=rule.target,
                                                          max_n=rule.max_repetitions)
    extra = 0
    if rule.until == "decided":  # what the time left allows, at the comparisons' own durations
        took, left_s = _durations(sink, run_id), rule.max_minutes * 60 - elapsed * 60
        extra = _rounds_that_fit(took, campaign.baseline, {(p, b) for (p, b, _), need in needs.items() if need}, left_s)
        for (platform, bench, metric), need in needs.items():
            if need and len(values[(platform, bench, metric)]) >= OUT_OF_REACH_MIN_ROUNDS:
                alone = _rounds_that_fit(took, campaign.baseline, {(platform, bench)}, left_s)
                needs[(platform, bench, metric)] = needs_decision(
                    values[(platform, bench, metric)], values.get((campaign.baseline, bench, metric), []),
                    direction[(bench, metric)], target=rule.target, max_n=rule.max_repetitions,
                    rounds=rounds[(platform, bench, metric)],
                    base_rounds=rounds.get((campaign.baseline, bench, metric), []),
                    budget=min(rule.max_repetitions, len(values[(platform, bench, metric)]) + alone))
    tally = {"decided": 0, "expected": 0, "out of reach": 0}
    for (platform, bench, metric), need in needs.items():
        tally["decided" if need.reason.startswith("decided") else "out of reach"
              if need.reason.startswith(OUT_OF_REACH) else "expected"] += 1
        if need:
            undecided[platform].add(bench)
            cells[f"{platform} {bench} {metric}"] = need.reason.removeprefix("undecided: ")
            if (need.precision or 1.0) >= worst.get(platform, 0.0):
                worst[platform] = need.precision or 1.0
                reasons[platform] = f"{bench} {metric}: {need.reason}"
        elif need.reason.startswith(OUT_OF_REACH):  # its reason also names the caps: test it first
            left[(platform, bench, metric)] = need.reason
        elif "cap" in need.reason:
            capped.append(platform)
    if rule.aim:
        _aim(AIMS.get(rule.aim)(sink, campaign, run_id), values, campaign.baseline, rule.max_repetitions,
             lambda cells: _rounds_that_fit(took, campaign.baseline, cells, left_s), undecided, cells, reasons, left)
    if not reasons:
        done = "every ratio within target" if rule.until == "precise" else "every comparison decided"
        parts = []
        if capped:
            parts.append(f"repetition cap reached for {', '.join(sorted(set(capped)))}")
        if left:
            parts.append(f"out of reach at their noise within the time left: "
                         f"{', '.join(sorted({' '.join(cell[:2]) for cell in left}))}")
        stop = "; ".join(parts) or done
        _append(sink, run_id, log, {"stop": stop})
        return None
    entry: dict[str, Any] = {"round": next_round, "platforms": sorted(reasons) + [campaign.baseline],
                             "reasons": reasons, "cells": cells}
    if left:
        entry["out_of_reach"] = {" ".join(cell): reason for cell, reason in left.items()}
    if rule.until == "decided" and not any("round" in e for e in log):  # after the declared rounds
        entry["forecast"] = (f"after {next_round - unmeasured_rounds(campaign)} rounds {tally['decided']} of "
                             f"{sum(tally.values())} comparisons decided; {tally['expected']} more expected in the "
                             f"extra rounds the caps allow (about {extra}); {tally['out of reach']} out of reach "
                             "(each gets no extra round: its reason says what would decide it)")
    if rule.until == "decided":  # run only what is still undecided (the baseline: all of those)
        entry["benchmarks"] = {p: sorted(b) for p, b in undecided.items()}
        entry["benchmarks"][campaign.baseline] = sorted(set().union(*undecided.values()))
    _append(sink, run_id, log, entry)
    return entry


def _aim(aimed: list[Aimed], values: dict[tuple[str, str, str], list[float]], baseline: str, max_n: int,
         fit: Callable[[set[tuple[str, str]]], int], undecided: dict[str, set[str]], cells: dict[str, str],
         reasons: dict[str, str], left: dict[tuple[str, ...], str]) -> None:
    """Add the aim's cells to the next round, each under the repetition cap. A quantity whose
    decision needs more rounds than its cells could still get, alone in the time left (`fit`)
    and under the cap, is left with its reason: the rounds go to what they can decide (study
    003's abstract value takes every cell; its Table 7 memory row one benchmark)."""
    for a in aimed:
        done = {c: max((len(v) for (p, b, _), v in values.items() if (p, b) == c), default=0) for c in a.cells}
        open_ = {c for c, n in done.items() if c[0] != baseline and n < max_n}
        budget = min(max_n, min(done.values(), default=0) + fit(open_)) if open_ else 0
        if a.needed > budget:
            left[(a.what,)] = f"{OUT_OF_REACH}: {a.reason}; about {budget} rounds fit the caps"
            continue
        for platform, bench in sorted(open_):
            undecided[platform].add(bench)
            cells.setdefault(f"{platform} {bench}", f"for {a.what}: {a.reason}")
            reasons.setdefault(platform, f"{bench}: for {a.what}")


def note_noise(sink: Sink, campaign: Campaign, run_id: str, started_at: datetime) -> list[str]:
    """After the noise check's rounds: each benchmark's A/A noise and what the caps can decide
    at it, stored in the run (provenance "noise") and returned as lines for the terminal."""
    assert campaign.adaptive is not None
    rule = campaign.adaptive
    first = unmeasured_rounds(campaign)
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    for s in sink.samples(run_id, include_warmup=True):
        if s.platform == campaign.baseline and campaign.warmups <= s.round < first and s.benchmark != LIFECYCLE:
            values[(s.benchmark, s.metric)].append(s.value)
    cost: dict[str, float] = defaultdict(float)  # seconds a full round spends on each benchmark
    for e in sink.executions(run_id):
        if e.round < campaign.warmups:
            cost[e.benchmark] += e.duration_s
    noises = {key: n for key, vals in sorted(values.items()) if (n := forecast.pair_noise(vals)) is not None}
    # extra rounds leave out what the declared rounds decide everywhere at this noise
    open_benches = {b for (b, _), n in noises.items() if forecast.reach(n, campaign.repetitions, rule.target).share < 1}
    full_s = sum(cost.values())
    extra_s = cost.get(LIFECYCLE, 0.0) + sum(cost[b] for b in open_benches)
    left_s = rule.max_minutes * 60 - (now() - started_at).total_seconds() - campaign.repetitions * full_s
    rounds = min(rule.max_repetitions, campaign.repetitions + (
        (forecast.rounds_within(left_s, extra_s, 0, rule.max_repetitions) + 1) if open_benches and left_s > 0 else 0))
    others = len(campaign.platforms) - 1
    per_metric: dict[str, Any] = {}
    expected = 0.0
    for (bench, metric), noise in noises.items():
        vals = values[(bench, metric)]
        r = forecast.reach(noise, rounds, rule.target)
        expected += r.share * others
        per_metric[f"{bench} {metric}"] = {"values": vals, "pair_noise": noise, "beyond": r.beyond,
                                           "within": r.within, "describe": r.describe()}
    cells = others * len(per_metric)
    note = {"rounds": rounds, "round_s": full_s, "cells": cells, "expected_decided": round(expected),
            "spread": forecast.SPREAD, "metrics": per_metric}
    sink.set_state(run_id, "noise", note)
    return forecast.note_lines(note)


def progress_lines(entry: dict[str, Any], log: Sequence[dict[str, Any]] = ()) -> list[str]:
    """What an extra round is for, for the terminal: a header, then one line per undecided
    comparison (an entry stored before cells were recorded: one per platform). A comparison
    left out of reach is named with its reason at the round it was left (the run's adaptive
    `log`, which may already end with `entry`), then only counted: it gets no more rounds, so
    its reason stands."""
    cells = entry.get("cells") or entry.get("reasons", {})
    what = "comparison" if "cells" in entry else "platform"
    left = entry.get("out_of_reach") or {}
    earlier = [e for e in log if "round" in e and e["round"] < entry["round"]]
    named = earlier[-1].get("out_of_reach") or {} if earlier else {}
    also = f" ({len(left)} more left undecided: out of reach at their noise)" if left else ""
    return [*([entry["forecast"]] if "forecast" in entry else []),
            f"extra round {entry['round'] + 1}: {len(cells)} {what}{'s' if len(cells) != 1 else ''} undecided{also}",
            *[f"  {cell}: {reason}" for cell, reason in cells.items()],
            *[f"  {cell}: left, {reason}" for cell, reason in left.items() if cell not in named]]


def stop_line(log: list[dict[str, Any]]) -> str | None:
    """Why extra rounds ended, for the terminal (the report's adaptive section keeps it too)."""
    stops = [e["stop"] for e in log if "stop" in e]
    return f"no more extra rounds: {stops[-1]}" if stops else None


def needs_decision(values: list[float], base: list[float], higher_is_better: bool, *, target: float,
                   max_n: int, min_n: int = 3, rounds: list[int] | None = None,
                   base_rounds: list[int] | None = None, budget: int | None = None) -> Need:
    """Another repetition while the comparison's verdict is inconclusive (the report's rule,
    analysis.verdict, with target as the band of "the same"). Stopping on a decision can stop
    early on a lucky draw; at least min_n repetitions and the caps bound that, and every extra
    round is logged with the undecided interval that asked for it.

    budget: the rounds the caps still allow in all. A comparison that would need more than
    OUT_OF_REACH_FACTOR times that at its noise so far gets no more rounds: the time goes to
    the comparisons it can decide. (The factor allows for a spread estimated from few rounds:
    with 2 degrees of freedom it is overestimated 1.7-fold, which triples the rounds asked,
    5 % of the time.)"""
    n, nb = len(values), len(base)
    if n >= max_n:
        return Need(False, f"cap of {max_n} repetitions reached", None)
    if n < min_n or nb < min_n:
        return Need(True, f"fewer than {min_n} repetitions ({n} here, {nb} on the baseline)", None)
    v = decide(values, base, higher_is_better, min_effect=target, rounds=rounds, base_rounds=base_rounds,
               confidence=STOP_CONFIDENCE, equivalence=STOP_EQUIVALENCE)
    if v.verdict != "inconclusive":
        return Need(False, f"decided: {v.reason}", None)
    if v.ci is None:
        return Need(False, f"{v.reason}; more repetitions cannot help", None)
    if budget is not None and (v.needed is None or v.needed > OUT_OF_REACH_FACTOR * budget):
        return Need(False, f"{OUT_OF_REACH}: {v.reason}; the caps allow about {budget} rounds", None)
    return Need(True, f"undecided: {v.reason}", (v.ci[1] - v.ci[0]) / 2)


def _durations(sink: Sink, run_id: str) -> dict[tuple[str, str], list[float]]:
    """(platform, benchmark) -> the durations of its measured executions so far."""
    took: dict[tuple[str, str], list[float]] = defaultdict(list)
    for e in sink.executions(run_id):
        if not e.warmup:
            took[(e.platform, e.benchmark)].append(e.duration_s)
    return took


def _rounds_that_fit(took: dict[tuple[str, str], list[float]], baseline: str, open_cells: set[tuple[str, str]],
                     left_s: float) -> int:
    """Extra rounds of the open comparisons (platform, benchmark) that fit in the time left (the
    round under way at the cap finishes: one more), each round costing what their executions and
    the baseline's took on average so far, with each platform's instance lifecycle."""
    if not open_cells:
        return 0

    def mean(platform: str, bench: str) -> float:
        return statistics.fmean(took[(platform, bench)]) if took.get((platform, bench)) else 0.0

    platforms = {p for p, _ in open_cells}
    round_s = sum(mean(p, LIFECYCLE) for p in platforms | {baseline})
    round_s += sum(mean(p, b) for p, b in open_cells) + sum(mean(baseline, b) for b in {b for _, b in open_cells})
    return forecast.rounds_within(left_s, round_s, 0, 10000) + 1


def _append(sink: Sink, run_id: str, log: list[dict[str, Any]], entry: dict[str, Any]) -> None:
    sink.set_state(run_id, "adaptive", [*log, entry])

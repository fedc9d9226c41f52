"""Loss-free rate searches over a trial function `trial(rate_pps, seconds) -> Trial`.

`steps` is the study's method: raise the rate by a fixed step, one trial per step, until
the loss exceeds the largest goal; NDR is the last rate before any loss, PDR the last
before the loss exceeded the PDR goal. With `past_loss: K` it goes on for K more steps after
that (up to the largest rate): the search's results stay the same, but the loss curve is
traced past the first loss, where the paper's Fig. 3 shows loss growing linearly with the
rate and, on 64 nodes, a loss-free region again above a lossy one (17.3-50 kpkt/s lossy,
50-55 kpkt/s loss-free), which a search stopping at the first loss can never show.

`ndr-pdr` follows RFC 2544's binary search and FD.io CSIT's MLRsearch (draft-ietf-bmwg-
mlrsearch): both goals (NDR: loss 0, PDR: loss <= 0.5 %) are searched at once and every
trial updates the bounds of both; short trials first, then each goal's result is confirmed
with a trial of the final duration. A trial where the source could not send the asked
rate (within 1 %) fails every goal at that rate: it did not offer the load.
  1. a trial at the largest rate (the generator's measured limit): a goal it meets is done;
  2. else the next rate is what the sink received in that trial (MLRsearch's start from the
     measured receive rate), then bisection of each goal's bracket [lower bound, upper
     bound] (lower: a rate that met the goal, upper: one that did not), lowest goal first;
  3. a goal is done when (upper - lower) / upper <= precision (or its lower bound is the
     maximum); its lower bound is then re-tested for `final_seconds`: a pass confirms it,
     a failure makes it an upper bound and the bisection goes on;
  4. a confirmed goal is settled: later trials (of the other goal) do not reopen it;
     before that, a result that contradicts a bound (a lower rate failing after a higher one passed)
     replaces the bound: the newest trial wins (MLRsearch's "newer results" rule);
  5. at most `max_trials` trials: a goal still open then reports its lower bound, flagged.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .iperf2 import Trial

TrialFn = Callable[[float, float], Trial]


@dataclass
class Goal:
    loss: float
    lower: float | None = None
    upper: float | None = None
    confirmed: bool = False

    def update(self, rate: float, loss: float, final: bool, precision: float, max_rate: float,
               sustained: bool = True) -> None:
        if self.confirmed:
            return  # settled by a final-duration trial: later short trials do not reopen it
        if loss <= self.loss and sustained:
            if self.lower is None or rate >= self.lower:
                self.lower = rate
            if self.upper is not None and self.upper <= rate:
                self.upper = None  # contradicted: the newer result wins
        else:
            if self.upper is None or rate <= self.upper:
                self.upper = rate
            if self.lower is not None and self.lower >= rate:
                self.lower = None
        self.confirmed = final and self.lower == rate and self.narrow(precision, max_rate)

    def narrow(self, precision: float, max_rate: float) -> bool:
        if self.lower is None:
            return False
        if self.upper is None:
            return self.lower >= max_rate
        return (self.upper - self.lower) / self.upper <= precision


@dataclass
class SearchResult:
    method: str
    ndr_pps: float
    pdr_pps: float
    trials: list[Trial] = field(default_factory=list)
    complete: bool = True
    """False when the trial cap ended the search before every goal was confirmed."""


def steps(trial: TrialFn, *, start: float, step: float, seconds: float, max_rate: float,
          goals: Sequence[float] = (0.0, 0.005), past_loss: int = 0) -> SearchResult:
    trials: list[Trial] = []
    best = {g: 0.0 for g in goals}
    failed: set[float] = set()
    rate = start
    extra = 0  # steps after every goal failed: the loss curve's tail, which changes no result
    while rate <= max_rate:
        if len(failed) == len(goals):
            extra += 1
            if extra > past_loss:
                break
        t = trial(rate, seconds)
        trials.append(t)
        for g in goals:
            if g not in failed:
                if t.loss <= g and t.sustained:
                    best[g] = rate
                else:
                    failed.add(g)
        rate += step
    return SearchResult("steps", best[goals[0]], best[goals[-1]], trials)


def ndr_pdr(trial: TrialFn, *, max_rate: float, min_rate: float, trial_seconds: float, final_seconds: float,
            precision: float, goals: Sequence[float] = (0.0, 0.005), max_trials: int = 40) -> SearchResult:
    state = [Goal(g) for g in goals]
    trials: list[Trial] = []

    def measure(rate: float, seconds: float) -> Trial:
        t = trial(rate, seconds)
        trials.append(t)
        for g in state:
            g.update(rate, t.loss, seconds >= final_seconds, precision, max_rate, t.sustained)
        return t

    first = measure(max_rate, trial_seconds)
    received = first.received / first.seconds if first.seconds else 0.0
    if any(g.upper is not None for g in state) and min_rate < received < max_rate:
        measure(received, trial_seconds)
    while len(trials) < max_trials:
        nxt = _next(state, max_rate, min_rate, precision)
        if nxt is None:
            break
        measure(*(nxt[0], final_seconds if nxt[1] else trial_seconds))
    done = all(g.confirmed or (g.lower is None and g.upper is not None and g.upper <= min_rate) for g in state)
    return SearchResult("ndr-pdr", state[0].lower or 0.0, state[-1].lower or 0.0, trials, done)


def _next(state: list[Goal], max_rate: float, min_rate: float, precision: float) -> tuple[float, bool] | None:
    """(rate, is_final) of the next trial, or None when every goal is settled."""
    for g in state:
        if g.confirmed:
            continue
        if g.lower is None:
            if g.upper is not None and g.upper <= min_rate:
                continue  # not even the smallest rate meets it: NDR/PDR 0
            upper = g.upper if g.upper is not None else max_rate
            return max(min_rate, upper / 2), False
        if g.narrow(precision, max_rate):
            return g.lower, True  # not confirmed yet (else skipped above)
        if g.upper is None:
            return max_rate, False
        return (g.lower + g.upper) / 2, False
    return None

"""`virtbench run --dry-run`: the validated campaign's plan and estimated duration. Starts
nothing: no probe, no image build, no run in the store, no host lock."""
from __future__ import annotations

from typing import Any

from .shared import console


def print_plan(campaign: Any, store: Any | None, *, quick: bool = False) -> None:
    from ..runner.estimate import duration, estimate

    est = estimate(campaign, store)
    p, c = est.plan, campaign
    say = lambda text: console.print(text, markup=False)  # noqa: E731 - names from campaigns are no markup
    say(f"campaign {c.name}: valid; dry run, nothing started")
    say(f"platforms ({len(p.platforms)}), baseline {c.baseline}:")
    for name, typ, kind in p.platforms:
        say(f"  {name:<16} {typ:<11} {kind}")
    if quick:
        say("  (each stays only if its probe passes at the start; kvm only where KVM boots a guest)")
    shown = p.benchmarks()
    if shown:
        say(f"{'benchmarks' if p.kind == 'benchmarks' else 'executions'} ({len(shown)}), "
            "seconds per execution estimated from:")
    for work in shown:
        say(f"  {work.benchmark[:40]:<40} {work.expected_s:>6.1f} s  {work.source}")
    for name, keys in p.sweeps.items():
        say(f"sweep {name}: {len(keys)} points")
    say(f"rounds: {p.rounds.warmups} warm-up + {p.rounds.repetitions} measured, {p.order}" if p.in_rounds
        else f"order: {p.order}")
    if c.adaptive is not None:
        a = c.adaptive
        say(f"adaptive: extra rounds until {a.until} (target +-{a.target:.0%}), at most {a.max_repetitions} "
            f"measured rounds and {a.max_minutes:g} minutes")
    if c.probes:
        say("probes: " + ", ".join(pr.name for pr in c.probes))
    for note in est.notes:
        say(note)
    if not p.round:
        return
    text = f"about {duration(est.declared_s)}"
    if est.max_s > est.declared_s * 1.05:
        text += f", at most about {duration(est.max_s)} with adaptive rounds"
    say(f"estimated duration: {text} (one round: {duration(p.round_s())})")


def dry_run(campaign: Any | None, quick: bool, probes: list[str], resume_id: str | None, db_url: str | None) -> None:
    """`run --dry-run`: the campaign file's or the quick campaign's plan; the store, when it
    exists, only read for past durations."""
    from ..errors import InputError, VirtbenchError
    from ..experiments.benchmarks.quick import unprobed_campaign
    from .shared import read_store

    if resume_id:
        raise InputError("--dry-run goes with CAMPAIGN_FILE or --quick", "a resumed run's plan is in "
                         f"`virtbench report {resume_id}`")
    try:
        store = read_store(db_url)
    except VirtbenchError:
        store = None  # no store yet: estimates without history
    print_plan(campaign if campaign is not None else unprobed_campaign(probes), store, quick=quick)

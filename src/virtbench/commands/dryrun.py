"""`virtbench run --dry-run`: the validated campaign's plan and estimated duration. Starts
nothing: no probe, no image build, no run in the store, no host lock."""
from __future__ import annotations

from typing import Any

from .shared import console


def print_plan(campaign: Any, store: Any | None, *, quick: bool = False) -> None:
    from ..runner.estimate import duration, plan

    p = plan(campaign, store)
    c = p.campaign
    say = lambda text: console.print(text, markup=False)  # noqa: E731 - names from campaigns are no markup
    say(f"campaign {c.name}: valid; dry run, nothing started")
    say(f"platforms ({len(p.platforms)}), baseline {c.baseline}:")
    for name, typ, kind in p.platforms:
        say(f"  {name:<16} {typ:<11} {kind}")
    if quick:
        say("  (each stays only if its probe passes at the start; kvm only where KVM boots a guest)")
    say(f"benchmarks ({len(p.benchmarks)}), seconds per execution estimated from:")
    for key, seconds, source in p.benchmarks:
        say(f"  {key[:40]:<40} {seconds:>6.1f} s  {source}")
    for name, keys in p.sweeps.items():
        say(f"sweep {name}: {len(keys)} points")
    say(f"rounds: {c.warmups} warm-up + {c.repetitions} measured, platforms in a random order each round")
    if c.adaptive is not None:
        a = c.adaptive
        say(f"adaptive: extra rounds until {a.until} (target +-{a.target:.0%}), at most {a.max_repetitions} "
            f"measured rounds and {a.max_minutes:g} minutes")
    if c.probes:
        say("probes: " + ", ".join(pr.name for pr in c.probes))
    for note in p.notes:
        say(note)
    est = f"about {duration(p.declared_s)}"
    if p.max_s > p.declared_s * 1.05:
        est += f", at most about {duration(p.max_s)} with adaptive rounds"
    say(f"estimated duration: {est} (one round: {duration(p.round_s)})")


def dry_run(campaign: Any | None, quick: bool, probes: list[str], resume_id: str | None, db_url: str | None) -> None:
    """`run --dry-run`: the campaign file's or the quick campaign's plan; the store, when it
    exists, only read for past durations."""
    from ..errors import InputError, VirtbenchError
    from ..runner.quick import unprobed_campaign
    from .shared import read_store

    if resume_id:
        raise InputError("--dry-run goes with CAMPAIGN_FILE or --quick", "a resumed run's plan is in "
                         f"`virtbench report {resume_id}`")
    try:
        store = read_store(db_url)
    except VirtbenchError:
        store = None  # no store yet: estimates without history
    print_plan(campaign if campaign is not None else unprobed_campaign(probes), store, quick=quick)

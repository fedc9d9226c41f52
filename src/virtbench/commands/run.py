"""`virtbench run`: a campaign file, the quick campaign, or the rest of an interrupted run."""
from __future__ import annotations

import sys

import click
from rich.markup import escape

from ..errors import InputError
from .shared import console, db_option, errconsole, open_store, print_report, state_paths


@click.command()
@click.argument("campaign_file", required=False, type=click.Path(dir_okay=False))
@click.option("--quick", is_flag=True, help="The quick campaign on every platform available here.")
@click.option("--resume", "resume_id", metavar="RUN_ID", help="Complete an interrupted run.")
@click.option("--report/--no-report", "show_report", default=True, help="Print the report when done.")
@click.option("--wait", is_flag=True, help="If another run is measuring on this host, wait for it instead of refusing.")
@click.option("--probe", "probes", multiple=True, metavar="NAME",
              help="With --quick: a probe beside every execution (energy, perf, pressure; repeat for several).")
@click.option("--dynamic-inventory", is_flag=True,
              help="Let ansible-inventory run the campaign's inventory script or plugin (it runs as this user; "
                   "without this flag an inventory is read as YAML or INI data only).")
@click.option("--allow-meter", is_flag=True,
              help="Let the campaign's energy probe run its `meter:` command (as root); refused without it.")
@click.option("--dry-run", is_flag=True, help="Validate, print the plan and an estimated duration; start nothing.")
@db_option
def run(campaign_file: str | None, quick: bool, resume_id: str | None, show_report: bool, wait: bool,
        probes: tuple[str, ...], dynamic_inventory: bool, allow_meter: bool, dry_run: bool,
        db_url: str | None) -> None:
    """Run a campaign (YAML file), the quick campaign, or resume a run."""
    from ..config import check_host, parse_campaign, read_campaign
    from ..config.consent import require_consent
    from ..experiments.benchmarks.quick import quick_campaign
    from ..experiments.planning import plan_of
    from ..report.progress import Cap, RichReporter
    from ..runner import execute, hostlock

    if sum(bool(x) for x in (campaign_file, quick, resume_id)) != 1:
        raise InputError("give exactly one of CAMPAIGN_FILE, --quick or --resume RUN_ID",
                         "e.g. `virtbench run --quick`")
    if probes and not quick:
        raise InputError("--probe goes with --quick", "in a campaign file write `probes: [...]`")
    from ..registry import PROBES

    for name in probes:
        PROBES.get(name)  # an unknown name: one line, exit 2, before anything starts
    reporter = RichReporter(console)
    source = ""
    if campaign_file:  # validated, and checked against this host, before anything is created
        from ..platforms.base import Paths

        campaign, source = read_campaign(campaign_file, dynamic_inventory=dynamic_inventory)
        require_consent(campaign, allow_meter)
        check_host(campaign, Paths.from_env(), source=campaign_file)
    if dry_run:
        from .dryrun import dry_run as print_dry_run

        print_dry_run(campaign if campaign_file else None, quick, list(probes), resume_id, db_url)
        return
    paths = state_paths()
    store = open_store(db_url)
    from ..store.queue import cancel_requested, mark_cancelled

    if resume_id:  # the stored campaign may have come from anyone (the web queue)
        stored = store.run(resume_id)
        require_consent(parse_campaign(stored.campaign, f"run {stored.id}"), allow_meter)
    run_id = stored.id if resume_id else execute.new_run_id()

    def stop_requested() -> bool:  # `virtbench cancel` or the web app, read between instances
        return cancel_requested(store, run_id)

    what = f"run {resume_id}" if resume_id else "the quick campaign" if quick else f"campaign {campaign.name!r}"
    with hostlock.hold(paths, f"`virtbench run` of {what}", wait=wait, log=reporter.log):
        if resume_id:
            outcome = execute.resume(store, run_id, paths, reporter=reporter, stop_requested=stop_requested)
        else:
            left_out, availability = None, None
            if quick:
                chosen = quick_campaign(paths, reporter.log, probes=list(probes))
                campaign, left_out, availability = chosen.campaign, chosen.left_out, chosen.availability
            reporter.cap = Cap.of(plan_of(campaign))  # the ETA's bound while adaptive rounds may grow the plan
            outcome = execute.start(store, campaign, paths, source=source, reporter=reporter, left_out=left_out,
                                    availability=availability,
                                    run_id=run_id, stop_requested=stop_requested)
    if outcome.interrupted and cancel_requested(store, outcome.run_id):
        mark_cancelled(store, outcome.run_id)
        errconsole.print(f"run {outcome.run_id} cancelled")
        sys.exit(130)
    if outcome.interrupted:
        errconsole.print(f"[yellow]run {outcome.run_id} interrupted; complete it with "
                         f"`virtbench run --resume {outcome.run_id}`[/yellow]")
        sys.exit(130)
    if show_report:
        print_report(store, outcome.run_id, as_json=False, detail=False)
    else:  # computed and stored now, as the web worker does, so the first `report` reads it
        from ..report import builder

        builder.build(store, outcome.run_id, sections=False)
    if outcome.failed:
        errconsole.print(f"[red]{outcome.failed} executions failed[/red]; raw output: "
                         f"`virtbench show {outcome.run_id} --failed`")
    if outcome.unfinished:  # a host lost before its part was done (a density part leaves no placeholders)
        errconsole.print(f"[red]run {outcome.run_id} unfinished[/red]: {escape(outcome.unfinished)}")
    if outcome.failed or outcome.unfinished:
        sys.exit(1)

"""`virtbench selftest`: known-answer checks of the measuring chain on this host."""
from __future__ import annotations

import json
import sys

import click
from rich.console import Console
from rich.markup import escape


@click.command()
@click.argument("checks", nargs=-1, metavar="[CHECK]...")
@click.option("--json", "as_json", is_flag=True, help='{"passed": bool, "checks": [{"name", "expected", "measured", '
              '"passed", "skipped", "reason", ...}]}')
@click.option("--wait", is_flag=True, help="If a run is measuring on this host, wait for it instead of refusing.")
@click.option("--platform", "platforms", multiple=True, metavar="TYPE",
              help="Prove this platform's limits enforced (cpu-quota and oom on it; repeatable). The verdicts are "
                   "kept: reports flag every result of a platform whose limit did not hold.")
def selftest(checks: tuple[str, ...], as_json: bool, wait: bool, platforms: tuple[str, ...]) -> None:
    """Prove that virtbench measures the truth here: known answers (a CPU quota, an I/O
    throttle, a netem delay, an OOM kill, the harness's own overhead, an A/A comparison),
    each measured through virtbench and judged. Exit 0 when every check that could run
    passed; checks this host cannot run are skipped with the reason. Run it once on a new host,
    and with --platform P for each platform whose cpus/memory limits a comparison relies on."""
    from ..platforms.base import Paths  # here: the platforms' import costs every other command 0.1 s
    from ..selftest import suite

    out = Console(highlight=False, soft_wrap=not sys.stdout.isatty())
    err = Console(stderr=True, highlight=False)
    outcome = suite.run(Paths.from_env(), checks, log=lambda m: err.print(escape(m)), wait=wait,
                        platforms=platforms)
    if as_json:
        click.echo(json.dumps(outcome.public(), indent=2))
    else:
        for c in outcome.checks:
            mark = ("[yellow]skipped[/yellow]" if c.skipped else "[green]passed[/green]" if c.passed
                    else "[red]FAILED[/red]")
            on = f" on {c.platform}" if c.platform else ""
            out.print(f"[bold]{c.name}[/bold]{escape(on)} {mark} ({c.seconds:.0f} s)")
            out.print(f"  expected: {escape(c.expected)}")
            out.print(f"  measured: {escape(c.measured)}")
            if c.reason:
                out.print(f"  {'why skipped' if c.skipped else 'reason'}: {escape(c.reason)}")
        ran = [c for c in outcome.checks if not c.skipped]
        verdict = "[green]passed[/green]" if outcome.passed else "[red]FAILED[/red]"
        out.print(f"[bold]selftest {verdict}[/bold]: {sum(bool(c.passed) for c in ran)} of {len(ran)} checks that "
                  f"ran passed, {len(outcome.checks) - len(ran)} skipped; {outcome.seconds:.0f} s, load "
                  f"{' '.join(map(str, outcome.load_before))} before, {' '.join(map(str, outcome.load_after))} after")
    sys.exit(0 if outcome.passed else 1)

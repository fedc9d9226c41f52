"""`virtbench worker`: execute queued runs one at a time on this host."""
from __future__ import annotations

import click

from .shared import FiniteRange, db_option


@click.command()
@click.option("--once", is_flag=True, help="Exit when the queue is empty instead of waiting for more.")
@click.option("--poll", default=2.0, show_default=True, type=FiniteRange(0.1, 3600), help="Seconds between queue checks.")
@click.option("--probe/--no-probe", default=True, show_default=True,
              help="Probe which platforms run here at start (shown in the schedule form).")
@click.option("--allow-meter", is_flag=True,
              help="Let queued campaigns' energy probes run their `meter:` command (as root); refused without it.")
@db_option
def worker(once: bool, poll: float, probe: bool, allow_meter: bool, db_url: str | None) -> None:
    """Execute queued runs one at a time on this host; resume runs a stopped worker left."""
    from ..runner.worker import main as worker_main
    from ..web.cache import precompute

    worker_main(db_url, once=once, poll_s=poll, probe=probe, after_run=precompute, allow_meter=allow_meter)

"""`virtbench agent`: the remote side of a multi-host run (started over SSH by the controller)."""
from __future__ import annotations

import sys

import click


@click.command(hidden=True)
def agent() -> None:
    """Run one job read from stdin (JSON) and stream its results as JSON lines (not for people)."""
    from ..runner.agent import main

    sys.exit(main())

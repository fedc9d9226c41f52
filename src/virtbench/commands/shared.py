"""What every CLI command shares: the consoles and the --db option.

Here rather than in cli.py so command modules (commands/*.py) need not import cli.py, which
registers them: the dependency points one way, cli -> commands."""
from __future__ import annotations

import sys

import click
from rich.console import Console

# Piped output (make run | tee, CI logs) gets wide tables instead of 80-column wrapping.
console = Console(stderr=False, highlight=False, width=None if sys.stdout.isatty() else 200)
errconsole = Console(stderr=True, highlight=False)
db_option = click.option("--db", "db_url", envvar="VIRTBENCH_DB", default=None,
                         help="SQLAlchemy URL of the results store (default: SQLite under /var/lib/virtbench).")

"""What every CLI command shares: the consoles, the --db option, one_shot.

Here rather than in cli.py so command modules (commands/*.py) need not import cli.py, which
registers them: the dependency points one way, cli -> commands."""
from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click
from rich.console import Console

# Piped output (make run | tee, CI logs) gets wide tables instead of 80-column wrapping.
console = Console(stderr=False, highlight=False, width=None if sys.stdout.isatty() else 200)
errconsole = Console(stderr=True, highlight=False)
db_option = click.option("--db", "db_url", envvar="VIRTBENCH_DB", default=None,
                         help="SQLAlchemy URL of the results store (default: SQLite under /var/lib/virtbench).")


@contextmanager
def one_shot() -> Iterator[None]:
    """Settings for a command that reads, computes once and exits (`report`), where a user waits
    for start-up and all: numpy's OpenBLAS with one thread (its matrix products are small here,
    and the second thread spins for work: a tenth of a second of CPU for a report of 100,000
    samples; only effective before numpy loads, and such a command starts no benchmark that
    could inherit it), and no cyclic garbage collection while it runs (it makes next to none,
    and the collector's passes over 100,000 sample tuples cost 0.05-0.1 s). Restored after, for
    callers in a longer-lived process (tests) and what they start."""
    set_here = "OPENBLAS_NUM_THREADS" not in os.environ
    if set_here:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        if set_here:
            os.environ.pop("OPENBLAS_NUM_THREADS", None)

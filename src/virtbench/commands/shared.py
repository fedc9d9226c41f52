"""What every CLI command shares: the consoles, the --db option, one_shot, the store and state
directories, and printing a run's report (`run` and `report`).

Here rather than in cli.py so command modules (commands/*.py) need not import cli.py, which
registers them: the dependency points one way, cli -> commands."""
from __future__ import annotations

import gc
import json
import math
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.console import Console

from ..analysis.blas import BLAS_THREADS, one_blas_thread
from ..constants import VERDICT_CONFIDENCE, VERDICT_EQUIVALENCE
from ..errors import InputError

PIPE_WIDTH = 100
"""Columns of everything printed to a pipe or file (make run | tee, CI logs); a terminal's own width on a tty."""


def width_of(stream: Any) -> int:
    """The columns to fill on this stream: the terminal's on a tty, PIPE_WIDTH otherwise."""
    try:
        return shutil.get_terminal_size((PIPE_WIDTH, 24)).columns if stream.isatty() else PIPE_WIDTH
    except (AttributeError, ValueError, OSError):
        return PIPE_WIDTH


console = Console(stderr=False, highlight=False, width=None if sys.stdout.isatty() else PIPE_WIDTH)
errconsole = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else PIPE_WIDTH)
MIN_EFFECT_HELP = (f"Margin of the 'same' verdict: same when the ratio's {VERDICT_EQUIVALENCE * 100:.0f} % interval "
                   f"lies within 1 +- this; slower or faster when its {VERDICT_CONFIDENCE * 100:.0f} % interval "
                   "excludes 1.")
db_option = click.option("--db", "db_url", envvar="VIRTBENCH_DB", default=None,
                         help="SQLAlchemy URL of the results store (default: SQLite under /var/lib/virtbench).")


class FiniteRange(click.FloatRange):
    """click's FloatRange lets `nan` through (every comparison with NaN is false)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


@contextmanager
def one_shot() -> Iterator[None]:
    """Settings for a command that reads, computes once and exits (`report`), where a user waits
    for start-up and all: one OpenBLAS thread (one_blas_thread), and no cyclic garbage
    collection while it runs (it makes next to none, and the collector's passes over 100,000
    sample tuples cost 0.05-0.1 s). Both restored after, for callers in a longer-lived process
    (tests) and what they start."""
    set_here = one_blas_thread()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        if set_here:
            os.environ.pop(BLAS_THREADS, None)


def read_store(db_url: str | None) -> Any:
    """The results store for a command that only reads it (runs, report, show, compare, export).

    A SQLite file that does not exist is a mistyped --db path or a machine that never ran
    anything: said in one line (exit 2) instead of creating an empty store that then answers
    'no runs'."""
    from ..store.db import Store, default_url
    from ..store.urls import missing_sqlite_file

    url = db_url or default_url()
    if (path := missing_sqlite_file(url)) is not None:
        raise InputError(f"no results store at {path}: nothing was ever stored there",
                         "check the --db URL or VIRTBENCH_DB (a run creates the store: `virtbench run --quick`)")
    return Store(url)


def open_store(db_url: str | None) -> Any:
    """The results store for a command that writes it (run, cancel, delete): created if missing."""
    from ..store.db import Store

    return Store(db_url)


def state_paths() -> Any:
    """The state and runtime directories (imported here: `report` and `runs` never need the platforms)."""
    from ..images.build import close_cache
    from ..platforms.base import Paths

    close_cache()
    return Paths.from_env().make_private()


def print_report(store: Any, run_ref: str, *, as_json: bool, detail: bool, min_effect: float = 0.02,
                 wide: bool = False) -> None:
    """One run's report, as text or the JSON contract: what `report` prints, and `run` when done."""
    from ..report import builder, runinfo, text

    report = builder.build(store, run_ref, min_effect=min_effect)
    if as_json:
        click.echo(json.dumps(builder.report_json(report, min_effect=min_effect), indent=2, default=str))
    elif runinfo.run_hosts(report.run):  # one host at a time, then the hosts side by side
        for host, part in runinfo.host_parts(report):
            console.rule(f"host {host}")
            text.render(part, console, detail=detail, wide=wide)
        from ..report.sections import render_text

        render_text(list(report.sections), console)
    else:
        text.render(report, console, detail=detail, wide=wide)

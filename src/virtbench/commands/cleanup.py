"""`virtbench cleanup`: remove what virtbench left behind, here or on another host."""
from __future__ import annotations

import re
import sys

import click
from rich.console import Console

from .shared import PIPE_WIDTH

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
"""Run ids as runs are named (runner.execute.new_run_id: date-time-hex); no glob or path characters."""


@click.command()
@click.option("--run", "run_id", default=None, help="Only what this run left (default: everything).")
@click.option("--wait", is_flag=True, help="If a run is measuring on this host, wait for it instead of refusing.")
@click.option("--host", "host", default=None, metavar="NAME",
              help="Clean up on that host of a multi-host campaign (reached over SSH as the newest run "
                   "listing it describes), not here.")
@click.option("--db", "db_url", envvar="VIRTBENCH_DB", default=None, help="Results store (to look the host up).")
def cleanup(run_id: str | None, wait: bool, host: str | None, db_url: str | None) -> None:
    """Remove every container, mount and instance directory virtbench left behind.

    Never while a run measures on this host (its instances would go): refused, or --wait."""
    from ..errors import InputError
    from ..platforms.base import Paths
    from ..platforms.closing import NotRemoved

    if run_id is not None and not RUN_ID.fullmatch(run_id):  # it becomes part of names matched on disk
        raise InputError(f"--run {run_id!r} is not a run id", "give an id as `virtbench runs` lists it, "
                         "e.g. 20261127-125031-a656")
    console = Console(highlight=False, width=None if sys.stdout.isatty() else PIPE_WIDTH)
    from ..runner.execute import cleanup as do_cleanup

    remote = host is not None and host != "local"
    if remote:
        from ..store.db import Store

        removed = do_cleanup(Paths.from_env(), run_id, host=host, store=Store(db_url))
    else:
        removed = do_cleanup(Paths.from_env(), run_id, wait=wait, log=console.print)
        if run_id is None:  # the self-test's own cgroups and namespaces (after a crashed selftest)
            from ..selftest.context import cleanup as selftest_leftovers

            removed += [f"selftest: {r}" for r in selftest_leftovers(Paths.from_env())]
    for line in removed:
        console.print(f"not removed: {line}" if isinstance(line, NotRemoved) else f"removed {line}", markup=False)
    kept = sum(isinstance(line, NotRemoved) for line in removed)
    console.print(summary(len(removed) - kept, kept))


def summary(removed: int, kept: int) -> str:
    """The closing line: what was removed, and what was not (listed above it)."""
    if not removed and not kept:
        return "nothing to clean up"
    said = f"{removed} leftover{'s' * (removed != 1)} removed" if removed else "nothing removed"
    return said + (f"; {kept} not removed (see above)" if kept else "")

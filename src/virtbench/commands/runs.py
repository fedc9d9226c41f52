"""`virtbench runs`, `cancel` and `delete`: the runs in the store and what may be done to them.

A run whose process died (kill -9, OOM kill, reboot) is shown as `interrupted` (the store
tells by its recorded owner process, store/owner.py), and can then be resumed, cancelled
or deleted; a run that is measuring is never deleted under its process.
"""
from __future__ import annotations

import json
from typing import Any

import click
from rich.markup import escape

from ..errors import InputError
from .shared import console, db_option, open_store, read_store

HEADER = f"{'run':<20}  {'status':<11} {'name':<20} {'created (UTC)':<16}  platforms"


def run_doc(r: Any) -> dict[str, Any]:
    return {"id": r.id, "status": r.status, "name": r.name, "created_at": f"{r.created_at:%Y-%m-%dT%H:%M:%S}Z",
            "platforms": len(r.campaign.get("platforms", []))}


@click.command("runs")
@click.option("--json", "as_json", is_flag=True, help="A list of {id, status, name, created_at, platforms}.")
@db_option
def runs_cmd(as_json: bool, db_url: str | None) -> None:
    """List runs in the store, newest first."""
    runs = read_store(db_url).runs()
    if as_json:
        click.echo(json.dumps([run_doc(r) for r in runs], indent=2))
        return
    console.print(HEADER, markup=False, style="bold")
    for r in runs:
        console.print(f"{r.id:<20}  {r.status:<11} {r.name[:20]:<20} {r.created_at:%Y-%m-%d %H:%M}  "
                      f"{len(r.campaign.get('platforms', []))}", markup=False)


@click.command()
@click.argument("run_ref", metavar="RUN")
@db_option
def cancel(run_ref: str, db_url: str | None) -> None:
    """Cancel a run: queued or interrupted at once (removing what it left on this host),
    measuring between two instances (its process stops it and marks it cancelled)."""
    from ..store import queue
    from ..store.owner import describe

    store = open_store(db_url)
    run = store.run(run_ref)
    if not queue.request_cancel(store, run.id):
        raise InputError(f"run {run.id} is {run.status}: nothing to cancel",
                         f"delete it with `virtbench delete {run.id}`")
    now = store.run(run.id)
    if now.status == "cancelled":
        _remove_leftovers(now)
        console.print(f"run {run.id} cancelled", markup=False)
    else:
        console.print(f"run {run.id} is measuring ({describe(now.owner)}); it stops after the current "
                      "instance and is then cancelled", markup=False)


@click.command()
@click.argument("run_ref", metavar="RUN")
@db_option
def delete(run_ref: str, db_url: str | None) -> None:
    """Delete a run and every execution and sample of it (not while it measures)."""
    from ..store import queue
    from ..store.browse import TERMINAL
    from ..store.owner import describe

    store = open_store(db_url)
    run = store.run(run_ref)
    if not queue.delete_idle(store, run.id, TERMINAL):
        who = f" ({describe(run.owner)})" if run.status == "running" else f" (claimed by worker {run.worker})"
        raise InputError(f"run {run.id} is {run.status}{who}: deleting it would pull its results away "
                         "while it measures", f"cancel it first: `virtbench cancel {run.id}`")
    _remove_leftovers(run)
    console.print(f"run {run.id} deleted", markup=False)


def _remove_leftovers(run: Any) -> None:
    """The instances and mounts a killed run left on this host (as `cleanup --run` does)."""
    from ..platforms.base import Paths
    from ..runner.execute import cleanup
    from ..store.owner import on_this_host

    if not on_this_host(run.owner):  # never measured here: nothing of it to remove here
        return
    for line in cleanup(Paths.from_env(), run.id):
        console.print(f"removed leftover: {escape(line)}")

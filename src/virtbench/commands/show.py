"""`virtbench show`: a run's executions, one line each; raw output only when asked for.

Every execution's full output at once was 1.4 MB for a quick run: a summary line per
execution (round, platform, benchmark, status, exit, seconds, first line of any error) comes
first, and the tools' output for one execution (`--execution ID`), the failed ones
(`--failed`, what `run` points to) or everything selected (`--raw`)."""
from __future__ import annotations

from typing import Any

import click
from rich.markup import escape

from .shared import console, db_option, read_store


def _line(ex: Any, rnd: int) -> str:
    first = (ex.error or "").strip().splitlines()
    what = f"  {first[0][:22]}" if first else ""  # within 100 columns
    exit_code = "-" if ex.exit_code is None else str(ex.exit_code)
    return (f"{ex.id:>6} {rnd:>3}{'w' if ex.warmup else ' '} {ex.platform[:14]:<14} {ex.benchmark[:28]:<28} "
            f"{ex.status:<7} {exit_code:>4} {ex.duration_s:>7.1f}{what}")


def _raw(ex: Any, rnd: int) -> None:
    console.rule(escape(f"execution {ex.id}: round {rnd}{' warm-up' if ex.warmup else ''} {ex.platform} "
                        f"{ex.benchmark}: {ex.status}"))
    if ex.argv:
        console.print(f"$ {' '.join(ex.argv)}  (exit {ex.exit_code})", markup=False)
    if ex.error:
        console.print(f"error: {ex.error}", markup=False)
    console.print(ex.stdout, markup=False)
    if ex.stderr:
        console.print(f"stderr:\n{ex.stderr}", markup=False)


@click.command()
@click.argument("run_ref", default="latest")
@click.option("--failed", is_flag=True, help="Only failed executions, with their raw output.")
@click.option("--platform", default=None, metavar="NAME", help="Only the executions of this platform (its name in the run).")
@click.option("--benchmark", default=None, metavar="KEY", help="Only the executions of this benchmark (its key in the run).")
@click.option("--execution", "execution_id", type=int, default=None, metavar="ID",
              help="The raw output of this one execution (its id is the first column).")
@click.option("--raw", is_flag=True, help="The raw output of every selected execution (long).")
@db_option
def show(run_ref: str, failed: bool, platform: str | None, benchmark: str | None, execution_id: int | None,
         raw: bool, db_url: str | None) -> None:
    """A run's executions, one line each; the raw output as the tools printed it with --execution
    ID, --failed or --raw."""
    from ..errors import InputError
    from ..report.units import round_numbers
    from ..store.lookup import run_with_data

    store = read_store(db_url)
    run_obj = run_with_data(store, run_ref)
    shown = round_numbers(run_obj.campaign)  # rounds as the report counts them
    selected = [ex for ex in store.executions(run_obj.id, status="failed" if failed else None)
                if not (platform and ex.platform != platform) and not (benchmark and ex.benchmark != benchmark)
                and (execution_id is None or ex.id == execution_id)]
    if execution_id is not None and not selected:
        raise InputError(f"run {run_obj.id} has no execution {execution_id}"
                         + (" matching the other options" if failed or platform or benchmark else ""),
                         f"`virtbench show {run_obj.id}` lists its executions with their ids")
    if raw or failed or execution_id is not None:
        for ex in selected:
            _raw(ex, shown(ex.round, ex.warmup))
        return
    console.print(f"{'id':>6} {'rnd':>4} {'platform':<14} {'benchmark':<28} {'status':<7} {'exit':>4} {'seconds':>7}",
                  markup=False, style="bold")
    for ex in selected:
        console.print(_line(ex, shown(ex.round, ex.warmup)), markup=False)
    console.print(f"{len(selected)} executions; raw output: `virtbench show {run_obj.id} --execution ID`, "
                  "--failed or --raw", markup=False, style="dim")

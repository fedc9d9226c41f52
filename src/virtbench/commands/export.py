"""`virtbench export`: a run's raw samples, executions and summaries as files."""
from __future__ import annotations

from pathlib import Path

import click

from .shared import console, db_option, read_store


@click.command("export")
@click.argument("run_ref", default="latest")
@click.option("--format", "fmt", type=click.Choice(["csv", "json", "parquet"]), default="csv", show_default=True,
              help="File format: csv and json read by pandas as they are, parquet needs pyarrow.")
@click.option("--output", "-o", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="Directory for <run>-samples, <run>-executions and <run>-summary files.")
@db_option
def export_cmd(run_ref: str, fmt: str, out_dir: Path, db_url: str | None) -> None:
    """Raw samples, executions and summaries as files pandas reads as they are."""
    from ..report.export import export
    from ..store.lookup import run_with_data

    store = read_store(db_url)
    for path in export(store, run_with_data(store, run_ref).id, out_dir, fmt):
        console.print(str(path), markup=False)

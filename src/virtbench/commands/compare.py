"""`virtbench compare`: the same platforms in two runs, B against A."""
from __future__ import annotations

import json

import click

from ..errors import InputError
from .shared import MIN_EFFECT_HELP, FiniteRange, console, db_option, read_store


@click.command()
@click.argument("run_a")
@click.argument("run_b")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (format_version 4).")
@click.option("--absolute", is_flag=True,
              help="Compare raw values. Default: each platform relative to its own run's baseline, which takes a "
                   "change of the host between the runs out (the baseline itself is always compared absolute).")
@click.option("--min-effect", type=FiniteRange(0, 1), default=0.02, show_default=True,
              help=MIN_EFFECT_HELP)
@db_option
def compare(run_a: str, run_b: str, as_json: bool, absolute: bool, min_effect: float, db_url: str | None) -> None:
    """The same platforms in two runs (before/after an upgrade): B against A by the verdict rule of
    `report`, each platform relative to its own run's baseline (unpaired: two runs' rounds share
    nothing to pair on); says when the baseline itself moved between the runs."""
    from ..analysis.compare import compare as do_compare
    from ..report import before_after, builder, text
    from ..store.lookup import run_with_data

    store = read_store(db_url)
    ra, rb = run_with_data(store, run_a), run_with_data(store, run_b)
    if ra.id == rb.id:
        raise InputError(f"A and B are the same run {ra.id}: a run compared with itself tells nothing; "
                         "give the run before and the run after the change")
    rows_a = builder.build(store, ra.id, min_effect=min_effect, sections=False).rows
    rows_b = builder.build(store, rb.id, min_effect=min_effect, sections=False).rows
    mode = "absolute" if absolute else "relative"
    baseline = ra.baseline if ra.baseline == rb.baseline else None
    rows = do_compare(rows_a, rows_b, baseline=baseline, mode=mode, min_effect=min_effect,
                      platforms=[p.name for p in rb.platforms])
    doc = before_after.document(ra, rb, rows, mode=mode, min_effect=min_effect)
    if as_json:
        click.echo(json.dumps(doc, indent=2, default=str))
    else:
        text.render_compare(doc, console)

"""`virtbench compare`: the same platforms in two runs, B against A."""
from __future__ import annotations

import json

import click

from ..errors import InputError
from .shared import MIN_EFFECT_HELP, FiniteRange, console, db_option, read_store


@click.command()
@click.argument("run_a")
@click.argument("run_b")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--min-effect", type=FiniteRange(0, 1), default=0.02, show_default=True,
              help=MIN_EFFECT_HELP)
@db_option
def compare(run_a: str, run_b: str, as_json: bool, min_effect: float, db_url: str | None) -> None:
    """The same platforms in two runs (before/after an upgrade): B against A by the verdict rule of
    `report` (unpaired: two runs' rounds share nothing to pair on)."""
    from ..analysis.compare import compare as do_compare
    from ..report import builder, text
    from ..store.lookup import run_with_data

    store = read_store(db_url)
    ra, rb = run_with_data(store, run_a), run_with_data(store, run_b)
    if ra.id == rb.id:
        raise InputError(f"A and B are the same run {ra.id}: a run compared with itself tells nothing; "
                         "give the run before and the run after the change")
    _, rows_a, _ = builder.build(store, ra.id, min_effect=min_effect, sections=False)
    _, rows_b, _ = builder.build(store, rb.id, min_effect=min_effect, sections=False)
    rows = do_compare(rows_a, rows_b, min_effect=min_effect)
    doc = builder.compare_json(ra, rb, rows, min_effect=min_effect)
    if as_json:
        click.echo(json.dumps(doc, indent=2, default=str))
    else:
        text.render_compare(ra, rb, rows, console, doc["notes"])

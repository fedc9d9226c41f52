"""`virtbench report`: statistics and relative performance of one run or several merged."""
from __future__ import annotations

import json
from pathlib import Path

import click

from ..extras import require
from .shared import MIN_EFFECT_HELP, FiniteRange, console, db_option, errconsole, one_shot, print_report, read_store


@click.command()
@click.argument("run_refs", nargs=-1, metavar="[RUN]...")
@click.option("--json", "as_json", is_flag=True, help="The scripting contract (see README).")
@click.option("--detail", is_flag=True, help="Every statistic of every platform and metric.")
@click.option("--wide", is_flag=True, help="The old layout: every platform in one table with intervals, "
              "wider than 100 columns.")
@click.option("--html", "html_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write one self-contained HTML report (works offline) to this file.")
@click.option("--figures", "figures_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write every figure as PDF, SVG and PNG with its data as CSV, and the tables as "
                   "tables.md and tables.tex, into this directory.")
@click.option("--figure-width", type=click.Choice(["column", "page"]), default="page", show_default=True,
              help="Figure files for one column (3.3 in) or two columns (7 in) of a paper.")
@click.option("--interactive", is_flag=True, help="With --html: plotly.js figures (zoom, hover; 4.6 MB more) "
              "instead of inline SVG.")
@click.option("--min-effect", type=FiniteRange(0, 1), default=0.02, show_default=True,
              help=MIN_EFFECT_HELP)
@db_option
def report(run_refs: tuple[str, ...], as_json: bool, detail: bool, wide: bool, html_file: Path | None,
           figures_dir: Path | None, figure_width: str, interactive: bool, min_effect: float,
           db_url: str | None) -> None:
    """Statistics and relative performance of runs (RUN_ID, a unique prefix, or 'latest').

    Several runs (e.g. one per host) merge into one comparison with hosts as columns; repeated
    runs of one campaign on one host are pooled: one verdict per cell from each run's ratios to
    its own baseline, the cells the runs disagreed on flagged.
    With --html or --figures the files are written and the text report is skipped.
    """
    with one_shot():
        _report(run_refs, as_json, detail, wide, html_file, figures_dir, min_effect, db_url,
                figure_width=figure_width, interactive=interactive)


def _report(run_refs: tuple[str, ...], as_json: bool, detail: bool, wide: bool, html_file: Path | None,
            figures_dir: Path | None, min_effect: float, db_url: str | None, *, figure_width: str = "page",
            interactive: bool = False) -> None:
    from ..report import builder, text
    from ..report.targets import writable_dir, writable_file

    if html_file:
        writable_file(html_file, "--html")
    if figures_dir:
        writable_dir(figures_dir, "--figures")
    from ..store.lookup import run_with_data

    store = read_store(db_url)
    refs = run_refs or ("latest",)
    if len(refs) == 1 and not (html_file or figures_dir):
        print_report(store, run_with_data(store, refs[0]).id, as_json=as_json, detail=detail, min_effect=min_effect,
                     wide=wide)
        return
    ids = [run_with_data(store, ref).id for ref in refs]  # every one refused before any is built
    reports = [builder.build(store, run_id, min_effect=min_effect) for run_id in ids]
    if html_file:
        from ..report import html

        html.write(html_file, reports, min_effect=min_effect, interactive=interactive)
        errconsole.print(f"wrote {html_file}")
    if figures_dir:
        require("figures", "--figures")
        from ..report.paper import write_figures

        written = write_figures(reports, figures_dir, size=figure_width)
        errconsole.print(f"wrote {len(written)} figure and table files to {figures_dir}")
    from ..report import repeats

    pooled = repeats.document(reports, min_effect=min_effect) if repeats.repeated(reports) else None
    if as_json:
        doc = (builder.report_json(reports[0], min_effect=min_effect) if len(reports) == 1
               else builder.merged_json(reports, min_effect=min_effect))
        if pooled is not None:
            doc["repeats"] = pooled  # repetitions of one campaign on one host: one verdict per cell
        click.echo(json.dumps(doc, indent=2, default=str))
    elif pooled is not None and not (html_file or figures_dir):
        text.render_pooled(pooled, console)
    elif len(reports) > 1 and not (html_file or figures_dir):
        text.render_merged(builder.merged_json(reports, min_effect=min_effect), console)

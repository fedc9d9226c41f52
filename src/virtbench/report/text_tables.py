"""The summary tables of one run in the terminal: per-category geometric means, the best VM and
the best container per category (the LSBS Tables 5 and 6), and stack predictions (Fig. 4)."""
from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..analysis import tables
from ..analysis.summary import Row
from ..store.models import Run
from . import summary


def render_tables(run: Run, rows: Sequence[Row], console: Console) -> None:
    infos = summary.platform_infos(run)
    cat = tables.category_table(rows)
    if cat:
        platforms = [p.name for p in infos]
        ct = Table(title="Geometric mean of relative performance per category (1.0 = baseline)",
                   title_justify="left")
        ct.add_column("platform")  # platforms as rows: any number of them fits the width
        for category in cat:
            ct.add_column(category, justify="right")
        for p in platforms:
            ct.add_row(escape(p), *[f"{cells[p].geomean:.3f}" if p in cells else "-" for cells in cat.values()])
        console.print(ct)
        for kind, title in (("vm", "hypervisors"), ("container", "container runtimes")):
            best = [b for b in tables.best_of_kind(cat, infos, kind) if b.values]
            if not best or max(len(b.values) for b in best) < 2:
                continue  # a ranking needs two candidates
            bt = Table(title=f"Best of the {title} per category", title_justify="left")
            for col in ("category", "best", "worst", "geometric means"):
                bt.add_column(col)
            for b in best:
                bt.add_row(b.category, b.best or "tie", b.worst or "-",
                           ", ".join(f"{k} {v:.3f}" for k, v in sorted(b.values.items(), key=lambda kv: -kv[1])))
            console.print(bt)
    stacks = tables.stack_predictions(rows, infos)
    if stacks:
        st = Table(title="Stacks: measured against the product of the layers (prediction)", title_justify="left")
        for col in ("stack", "benchmark / metric", "outer", "inner", "predicted", "measured", "error"):
            st.add_column(col)
        for s in stacks:
            st.add_row(s.platform, f"{s.benchmark} {s.metric}", f"{s.outer} {s.outer_relative:.3f}",
                       f"{s.inner} {s.inner_relative:.3f}", f"{s.predicted:.3f}", f"{s.measured:.3f}",
                       f"{s.error:+.1%}")
        console.print(st)


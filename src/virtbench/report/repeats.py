"""Repeated runs of one campaign on one host as one pooled report: `report RUN1 RUN2 ...` and
the dashboard (analysis/repeats.py pools them; this lays them out for every surface)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..analysis import stats
from ..analysis.repeats import by_category, pool, repeat_key
from ..notation import ratio_with_interval
from .model import Report

SYMBOL = {"slower": "▼", "faster": "▲", "same": "=", "inconclusive": "?", "mixed": "~", None: "-"}
METHOD = ("each run's per-round ratios to its own baseline pooled (the host's drift between the runs cancels within "
          "each run), read by the verdict rule of `report`; the runs' own verdicts beside it, ⚑ where they disagreed")


def repeated(reports: Sequence[Report]) -> bool:
    """Whether the runs are repetitions of one campaign on one host (at least two)."""
    return len(reports) > 1 and len({repeat_key(r.run) for r in reports}) == 1


def document(reports: Sequence[Report], *, min_effect: float = stats.MIN_EFFECT) -> dict[str, Any]:
    """The pooled comparison of repetitions: `report RUN... --json`'s `repeats`."""
    baseline = reports[0].run.baseline
    cells = pool([(r.run.id, r.rows) for r in reports], baseline, min_effect=min_effect)
    host = reports[0].run.host.hostname if reports[0].run.host else None
    return {"runs": [r.run.id for r in reports], "host": host, "baseline": baseline, "method": METHOD,
            "cells": [c.public() for c in cells], "disagreements": sum(c.disagree for c in cells),
            "categories": by_category(cells)}


def verdict_marks(verdicts: Sequence[str | None]) -> str:
    """Each run's verdict as its symbol, in the runs' order: '▼ = ?'."""
    return " ".join(SYMBOL.get(v, "?") for v in verdicts)


def cell_text(cell: dict[str, Any]) -> str:
    """A pooled cell as the terminal and the web write it: '0.953 [0.931, 0.976] ▼ (runs ▼ = ?) ⚑'."""
    return (f"{ratio_with_interval(cell['relative'], cell['relative_ci95'])} {SYMBOL.get(cell['verdict'], '?')} "
            f"(runs {verdict_marks(cell['verdicts'])})" + (" ⚑" if cell["disagree"] else ""))


def html(doc: dict[str, Any]) -> str:
    """The pooled comparison as an HTML fragment (the HTML file of `report RUN1 RUN2 ... --html`)."""
    from html import escape

    def e(x: Any) -> str:
        return escape(str(x), quote=True)

    rows = "".join(
        f'<tr><td>{e(c["benchmark"])} {e(c["metric"])}</td><td>{e(c["platform"])}</td>'
        f'<td class="v-{e(c["verdict"])}" title="{e(c["verdict_reason"])}">{e(cell_text(c))}</td></tr>'
        for c in doc["cells"])
    flagged = (f'<p class="flag warn">⚑ {doc["disagreements"]} of {len(doc["cells"])} results were decided '
               "differently by the runs: read the pooled verdict, which weighs every round of every run</p>"
               if doc["disagreements"] else "")
    return (f'<h2 id="pooled">{len(doc["runs"])} repeated runs on {e(doc["host"] or "?")}, pooled</h2>'
            f'<p class="cap">{e(doc["method"])}</p>{flagged}<table class="filterable"><thead><tr><th>benchmark metric'
            f'</th><th>platform</th><th>pooled against {e(doc["baseline"])} [95 %] (each run\'s verdict)</th></tr>'
            f"</thead><tbody>{rows}</tbody></table>")

"""A report's tables as Markdown and LaTeX (booktabs) for a paper, and `--figures`' files.

The same tables every renderer lays out (the report model's layout); a comparison cell is
written as its ratio, its interval and the verdict's word, so a table means what the
terminal's and the HTML report's mean without their colours and symbols.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..notation import ratio_with_interval
from . import layout
from .model import Comparison, Mark
from .model import Report as Model
from .sections import cell as plain_cell

WORD = {"slower": "slower", "faster": "faster", "same": "same", "inconclusive": "undecided"}


def text_cell(v: Any) -> str:
    """A cell as plain text: '0.953 [0.910, 0.990] slower'."""
    if isinstance(v, Comparison):
        if v.relative is None:
            return f"failed x{v.failed}" if v.failed else "-"
        out = ratio_with_interval(v.relative, v.ci)
        return out + (f" {WORD.get(v.verdict or '', v.verdict or '')}".rstrip())
    if isinstance(v, Mark):  # the headline's symbols as the words the comparison cells use
        text = v.text.replace("▼", "slower ").replace("▲", "faster ")
        text = "same" if text == "=" else text
        return re.sub(r"^\?( |$)", r"undecided\1", text).strip()
    text = plain_cell(v)
    return "undecided" if text == "?" else text  # one word for it in every table (the best tables wrote '?')


def _tables(report: Model) -> list[tuple[str, Any]]:
    """(section title, table) of every table with rows, the report's order."""
    return [(s.title, t) for s in layout.of(report, charts=False) if not s.detail for t in s.tables if t.rows]


def markdown(reports: Sequence[Model]) -> str:
    def esc(s: str) -> str:
        return s.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")

    out: list[str] = []
    for r in reports:
        for title, t in _tables(r):
            out += [f"### {esc(t.title or title)} (run {esc(r.run.id)})", "",
                    "| " + " | ".join(esc(str(c)) for c in t.columns) + " |",
                    "|" + "|".join("---" for _ in t.columns) + "|"]
            out += ["| " + " | ".join(esc(text_cell(v)) for v in row) + " |" for row in t.rows]
            out.append("")
    return "\n".join(out)


LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                 "↑": r"$\uparrow$", "↓": r"$\downarrow$", "±": r"$\pm$", "×": r"$\times$", "…": "...",
                 "▼": "slower ", "▲": "faster ", "⚑": " (warning)", "µ": r"$\mu$"}
"""LaTeX's special characters, and the report's symbols in what plain LaTeX has (or words)."""


def latex_escape(s: str) -> str:
    return "".join(LATEX_SPECIAL.get(ch, ch) for ch in s)


PAGE_CHARS = 100
"""Characters of \\footnotesize that fit the text width of a two-column paper's page (7 in): a
table wider than this is split into parts by its columns, each repeating the columns that name
a row (a results table of 8 platforms was one table three pages wide)."""


WRAP_CHARS = 40
"""A column of longer texts (warnings, reasons) wraps in a paragraph column this wide."""


def _widths(t: Any, cells: list[list[str]]) -> list[int]:
    """Each column's characters as set: its longest text, a wrapping column at most WRAP_CHARS."""
    return [min(WRAP_CHARS, max([len(str(c)) for c in [t.columns[i], *(row[i] for row in cells)]])) + 2
            for i in range(len(t.columns))]


def column_parts(t: Any, cells: list[list[str]], limit: int = PAGE_CHARS) -> list[list[int]]:
    """The table's data columns in parts whose text fits `limit` characters beside its key columns."""
    k = t.key_columns
    width = _widths(t, cells)
    fixed = sum(width[:k])
    parts: list[list[int]] = [[]]
    used = fixed
    for i in range(k, len(t.columns)):
        if parts[-1] and used + width[i] > limit:
            parts.append([])
            used = fixed
        parts[-1].append(i)
        used += width[i]
    return parts


def latex(reports: Sequence[Model]) -> str:
    """One table environment per table, split by columns where it would not fit a page
    (needs \\usepackage{booktabs})."""
    out = ["% virtbench tables; needs \\usepackage{booktabs}"]
    for r in reports:
        for title, t in _tables(r):
            cells = [[text_cell(v) for v in row] for row in t.rows]
            parts = column_parts(t, cells) if t.key_columns else [list(range(len(t.columns)))]
            width = _widths(t, cells)
            for n, part in enumerate(parts, 1):
                cols = [*range(t.key_columns), *part] if t.key_columns else part
                spec = "".join(f"p{{{WRAP_CHARS / PAGE_CHARS:.2f}\\linewidth}}" if width[i] > WRAP_CHARS else "l"
                               for i in cols)
                what = f", part {n} of {len(parts)}" if len(parts) > 1 else ""
                out += [r"\begin{table*}", r"\centering", r"\footnotesize",
                        rf"\caption{{{latex_escape(t.title or title)} (run {latex_escape(r.run.id)}{what})}}",
                        r"\begin{tabular}{" + spec + "}", r"\toprule",
                        " & ".join(latex_escape(str(t.columns[i])) for i in cols) + r" \\", r"\midrule"]
                out += [" & ".join(latex_escape(row[i]) for i in cols) + r" \\" for row in cells]
                out += [r"\bottomrule", r"\end{tabular}", r"\end{table*}", ""]
    return "\n".join(out)


def write_figures(reports: Sequence[Model], directory: Path, size: str = "page") -> list[Path]:
    """What `report --figures DIR` writes: every figure as PDF, SVG and PNG with its data as CSV
    (story.* first: every result with its interval), and the tables as tables.md and tables.tex."""
    from . import static
    from .figures import for_files

    specs, platforms = for_files(reports)
    written = static.export(specs, directory, platforms=platforms, size=size)
    for name, text in (("tables.md", markdown(reports)), ("tables.tex", latex(reports))):
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written

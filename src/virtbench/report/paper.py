"""A report's tables as Markdown and LaTeX (booktabs) for a paper, and `--figures`' files.

The same tables every renderer lays out (the report model's layout); a comparison cell is
written as its ratio, its interval and the verdict's word, so a table means what the
terminal's and the HTML report's mean without their colours and symbols.
"""
from __future__ import annotations

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
    if isinstance(v, Mark):
        return v.text
    return plain_cell(v)


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
                 "▼": "slower ", "▲": "faster ", "⚑": " (warning)"}
"""LaTeX's special characters, and the report's symbols in what plain LaTeX has (or words)."""


def latex_escape(s: str) -> str:
    return "".join(LATEX_SPECIAL.get(ch, ch) for ch in s)


def latex(reports: Sequence[Model]) -> str:
    """One table environment per table (needs \\usepackage{booktabs})."""
    out = ["% virtbench tables; needs \\usepackage{booktabs}"]
    for r in reports:
        for title, t in _tables(r):
            out += [r"\begin{table}", r"\centering", r"\small",
                    rf"\caption{{{latex_escape(t.title or title)} (run {latex_escape(r.run.id)})}}",
                    r"\begin{tabular}{" + "l" * len(t.columns) + "}", r"\toprule",
                    " & ".join(latex_escape(str(c)) for c in t.columns) + r" \\", r"\midrule"]
            out += [" & ".join(latex_escape(text_cell(v)) for v in row) + r" \\" for row in t.rows]
            out += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
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

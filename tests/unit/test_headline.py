"""The headline's category cells: the verdict with its size, never a sign that contradicts the arrow."""
from __future__ import annotations

from virtbench.analysis.summary import Row
from virtbench.report import headline as H


def _row(metric: str, category: str, relative: float, verdict: str) -> Row:
    return Row("b", metric, "s", False, category, "docker", n=5, failed=0, relative=relative, verdict=verdict)


def _cell(rows: list[Row]) -> str:
    [line] = H.headline([("native", "native", {}), ("docker", "docker", {})], rows, "native")
    [cv] = line.categories
    return H.cell_text(cv)


def test_a_slower_category_whose_other_cells_are_faster_reads_slower_not_plus():
    """Before: the category's number was the geometric mean of all its cells, so one decided
    slower cell beside larger inconclusive ones printed '▼+1%'."""
    rows = [_row("a", "cpu", 0.97, "slower"), _row("b", "cpu", 1.05, "inconclusive")]
    assert _cell(rows) == "▼3%"


def test_faster_mixed_same_undecided_and_tiny_sizes():
    assert _cell([_row("a", "storage", 1.12, "faster"), _row("b", "storage", 0.99, "same")]) == "▲12%"
    assert _cell([_row("a", "application", 0.90, "slower"), _row("b", "application", 1.04, "faster")]) == "▼10% ▲4%"
    assert _cell([_row("a", "cpu", 1.001, "same")]) == "="
    assert _cell([_row("a", "cpu", 0.95, "inconclusive")]) == "?"
    assert _cell([_row("a", "cpu", 0.998, "slower")]) == "▼<1%"
    for text in ("▼3%", "▲12%", "▼10% ▲4%"):
        assert "+" not in text and "-" not in text

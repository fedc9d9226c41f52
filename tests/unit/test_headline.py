"""The headline's category cells: the verdict with its size, never a sign that contradicts the arrow."""
from __future__ import annotations

from virtbench.analysis.summary import Row
from virtbench.report import headline as H


def _row(metric: str, category: str, relative: float, verdict: str, ci: list[float] | None = None) -> Row:
    return Row("b", metric, "s", False, category, "docker", n=5, failed=0, relative=relative, verdict=verdict,
               relative_ci95=ci)


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
    assert _cell([_row("a", "cpu", 0.95, "inconclusive")]) == "? -5%"
    assert _cell([_row("a", "cpu", 0.998, "slower")]) == "▼<1%"
    for text in ("▼3%", "▲12%", "▼10% ▲4%"):
        assert "+" not in text and "-" not in text


def test_the_headline_names_each_hosts_arch_aes_and_an_emulated_board():
    """#20: the ten-second summary must not pass an emulated board's numbers off as a board's."""
    board = {"arch": "aarch64", "crypto": {"aes": True, "pmull": True}, "virtualization": {"vm": "qemu"},
             "cpus": 2}
    laptop = {"arch": "x86_64", "aes": False, "virtualization": {"vm": "kvm"}, "cpus": 2}
    assert H.host_notes(board)[:2] == ["aarch64, AES yes",
                                       "emulated (QEMU TCG): its numbers measure the emulator, not a board"]
    assert H.host_notes(laptop)[:2] == ["x86_64, AES no", "host is itself a VM (kvm): costs are relative to it"]
    doc = H.to_json([], laptop, [("local", laptop), ("pi", board)])
    assert doc["hosts"]["pi"][1].startswith("emulated") and doc["hosts"]["local"][0] == "x86_64, AES no"
    assert "hosts" not in H.to_json([], laptop, [("local", laptop)])


def test_an_undecided_category_shows_its_estimate_and_interval_not_a_bare_question_mark():
    """Before: '?' alone; the reader could not tell a possible 30 % cost from a possible 1 %."""
    assert _cell([_row("a", "cpu", 0.95, "inconclusive", [0.90, 1.02])]) == "? -5% [-10, +2]"
    two = [_row("a", "cpu", 0.95, "inconclusive", [0.90, 1.02]), _row("b", "cpu", 1.0, "inconclusive", [0.97, 1.04])]
    assert _cell(two) == "? -3% [-10, +4]", "the geometric mean, inside the span of its cells' intervals"


def test_categories_have_one_name_and_one_order_everywhere():
    from virtbench.analysis.tables import CATEGORIES

    assert H.CATEGORIES[:len(CATEGORIES)] == CATEGORIES and not hasattr(H, "SHORT")
    rows = [_row("s", "lifecycle", 1.0, "")]
    rows[0].metric, rows[0].median = "start_s", 0.5304
    [line] = H.headline([("native", "native", {}), ("docker", "docker", {})], rows, "native")
    assert H.cell_text(line.categories[0]) == "530 ms"

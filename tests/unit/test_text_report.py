"""The terminal report shows the verdict tables, not only the per-metric ratios."""
from rich.console import Console

from virtbench.analysis import synthetic
from virtbench.report import summary, text
from virtbench.store.db import Store


def test_text_report_has_category_best_and_stack_tables(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    synthetic.fill(store, "sim", repetitions=4)
    run, rows, failures = summary.build(store, "sim")
    console = Console(record=True, width=220)
    text.render(run, rows, failures, console)
    out = console.export_text()
    assert "Geometric mean of relative performance per category" in out
    assert "Best of the container runtimes per category" in out
    assert any(p.config.get("inside") for p in run.platforms), "the synthetic run has a stack"
    assert "Stacks: measured against the product of the layers" in out

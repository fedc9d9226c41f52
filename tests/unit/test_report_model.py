"""The report model's section hook: a registered builder's section reaches JSON, text and HTML."""
import json

from rich.console import Console

from virtbench.analysis import synthetic
from virtbench.report import html, model, summary, text
from virtbench.store.db import Store


def _line_section(inp: model.SectionInput) -> model.Section | None:
    if inp.experiment != "benchmarks":
        return None
    return model.Section(key="line", title="Line topology", data={"lengths": [1, 2]},
                         tables=[model.Table("Loss-free rate per length", ["length", "rate"], [[1, 1.5e6], [2, None]],
                                             note="64 B UDP")],
                         notes=["a note for the reader"])


def _broken(inp: model.SectionInput) -> model.Section | None:
    raise RuntimeError("boom")


def test_registered_section_in_every_rendering(tmp_path, monkeypatch):
    monkeypatch.setattr("virtbench.report.html.plotly_js", lambda: "")
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    synthetic.fill(store, "sim", repetitions=3, platforms=synthetic.default_platforms()[:2],
                   benchmarks=synthetic.default_benchmarks()[:1])
    model.register_section("line", _line_section)
    model.register_section("zz-broken", _broken)
    try:
        report = summary.build(store, "sim")
    finally:
        model.unregister_section("line")
        model.unregister_section("zz-broken")
    doc = json.loads(json.dumps(summary.report_json(report)))
    assert doc["format_version"] == model.FORMAT_VERSION
    assert doc["line"]["lengths"] == [1, 2]
    assert doc["line"]["tables"][0]["rows"][1] == [2, None]
    assert "boom" in doc["zz-broken"]["error"], "a failing builder loses its own section only"
    console = Console(record=True, width=100)
    text.render(*report, console, sections=report.sections)
    out = console.export_text()
    assert "Loss-free rate per length" in out and "a note for the reader" in out
    page = html.render([report])
    assert "Loss-free rate per length" in page and "section-line" in page


def test_report_unpacks_as_before(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    synthetic.fill(store, "sim", repetitions=2, platforms=synthetic.default_platforms()[:2],
                   benchmarks=synthetic.default_benchmarks()[:1])
    run, rows, failures = summary.build(store, "sim")
    assert run.id == "sim" and rows and failures == []

"""The report model: sections registered by kind reach JSON, text and HTML through builder.build."""
import json

import pytest
from rich.console import Console

from virtbench.analysis import synthetic
from virtbench.report import builder, html, model, sections, text
from virtbench.store.db import Store


def _energy(store, run):
    """A report part for every run (not an experiment kind's name)."""
    return model.Section(key="energy", title="Energy", data={"joules": [1.5, None]},
                         tables=[model.Table("Energy per platform", ["platform", "J"], [["native", 1.5]])],
                         notes=["a note for the reader"])


def _other_kind(store, run):
    raise AssertionError("a kind's builder is not asked for runs of another kind")


def test_sections_in_every_rendering(tmp_path, monkeypatch):
    monkeypatch.setattr("virtbench.report.html.plotly_js", lambda: "")
    from virtbench.experiments.registry import EXPERIMENTS

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    synthetic.fill(store, "sim", repetitions=3, platforms=synthetic.default_platforms()[:2],
                   benchmarks=synthetic.default_benchmarks()[:1])
    EXPERIMENTS.register("zz-kind", object)  # type: ignore[arg-type]
    sections.SECTIONS.register("energy", _energy)
    sections.SECTIONS.register("zz-kind", _other_kind)
    try:
        report = builder.build(store, "sim")
    finally:
        sections.SECTIONS._load().pop("energy")
        sections.SECTIONS._load().pop("zz-kind")
        EXPERIMENTS._load().pop("zz-kind")
    doc = json.loads(json.dumps(builder.report_json(report)))
    assert doc["format_version"] == model.FORMAT_VERSION
    assert doc["energy"] == {"joules": [1.5, None]}
    console = Console(record=True, width=100)
    text.render(report, console)
    sections.render_text(report.sections, console)
    out = console.export_text()
    assert "Energy per platform" in out and "a note for the reader" in out
    assert "Energy per platform" in html.render([report])


def test_the_report_is_the_model_not_a_tuple(tmp_path):
    """#40: the model is what travels (store -> builder -> renderers and the web cache); the
    (run, rows, failures) unpacking it kept for older callers is gone."""
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    synthetic.fill(store, "sim", repetitions=2, platforms=synthetic.default_platforms()[:2],
                   benchmarks=synthetic.default_benchmarks()[:1])
    report = builder.build(store, "sim")
    assert report.run.id == "sim" and report.rows and report.failures == []
    with pytest.raises(TypeError):
        iter(report)  # type: ignore[call-overload]

    from virtbench.web.cache import ReportCache

    cached = ReportCache().report(store, "sim")
    assert type(cached) is type(report) and cached.rows == report.rows

"""Runs stored by older code report byte for byte as that code reported them (#40).

tests/data/report/golden/ holds stored runs of every experiment kind (benchmarks on one host and
on two, density, migration, line, and a run stored before metric declarations were stored) and
their reports as main printed them before the plan became the currency of a run: the terminal's
text, `report --json`, the web API's report and `report --html`. Today's code must print the
very same bytes. Normalized: only the HTML's generation time. A change meant to alter a report
regenerates the files with `.venv/bin/python tests/data/report/golden/make.py`; its diff is the
change to review.

The fast check draws no figure (matplotlib takes seconds per figure): every byte of the HTML but
the inline SVG figures is compared. The slow one draws them too."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

MAKE = Path(__file__).parents[1] / "data" / "report" / "golden" / "make.py"


def _make():
    spec = importlib.util.spec_from_file_location("golden_make", MAKE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make = _make()


@pytest.fixture(scope="module")
def rendered():
    return make.render_all(figures=False)


@pytest.mark.parametrize("run", list(make.RUNS))
@pytest.mark.parametrize("fmt", ["txt", "json", "api.json", "html"])
def test_a_stored_run_reports_the_same_bytes(rendered, run, fmt):
    name = f"{run}.{fmt}"
    golden = make.read(name)
    now = rendered[name]
    if fmt == "html":
        golden, now = make.without_figures(golden), make.without_figures(now)
    assert now == golden, f"{name} differs from the golden rendering (regenerate on purpose: {MAKE.name})"


@pytest.mark.slow
def test_the_html_pages_with_their_figures_are_the_same_bytes():
    for name, text in make.render_all().items():
        if name.endswith(".html"):
            assert text == make.read(name), name


def test_an_old_run_reports_without_asking_todays_kinds(monkeypatch):
    """A stored run's report reads the run alone: with every kind's class out of reach (a plugin
    uninstalled, a built-in changed), the runs of every kind print the same JSON."""
    from virtbench.registry import EXPERIMENTS

    def gone(name):
        raise AssertionError(f"the report asked today's kind {name!r}")

    monkeypatch.setattr(EXPERIMENTS, "get", gone)
    runs = ("bench", "density", "migration", "line")
    out = make.render_all(figures=False, runs=runs)
    for run in runs:
        assert out[f"{run}.json"] == make.read(f"{run}.json"), run


def test_a_run_says_its_kind_and_main_table_itself(tmp_path, monkeypatch):
    """A run records its kind, whether its executions are rows of the main table, and its plan
    (provenance `plan`): a kind nobody has installed here still reports as it said."""
    from virtbench.analysis import synthetic
    from virtbench.registry import EXPERIMENTS
    from virtbench.report import builder, runinfo
    from virtbench.store.db import Store

    monkeypatch.setattr(EXPERIMENTS, "get", lambda name: (_ for _ in ()).throw(AssertionError(name)))
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    synthetic.fill(store, "r", repetitions=2, platforms=synthetic.default_platforms()[:2],
                   benchmarks=synthetic.default_benchmarks()[:1])
    run = store.run("r")
    assert runinfo.kind_of(run) == "benchmarks" and runinfo.in_main_table(run)  # recorded nothing: as before #40
    store.update_run("r", provenance={**run.provenance, "plan": {"kind": "toy-gone", "main_table": False,
                                                                 "uses_benchmarks": False}})
    run = store.run("r")
    assert runinfo.kind_of(run) == "toy-gone" and not runinfo.in_main_table(run)
    assert builder.build(store, "r", cached=False).rows == []  # its section is the result, as it recorded

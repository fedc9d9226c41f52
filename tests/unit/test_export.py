"""Exports round-tripped through pandas; static figures written as PNG, SVG and PDF."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from virtbench.analysis import synthetic
from virtbench.cli import cli
from virtbench.report import builder, export
from virtbench.report.model import FORMAT_VERSION
from virtbench.store.db import Store, now

READ = {"csv": pd.read_csv, "json": pd.read_json, "parquet": pd.read_parquet}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("export") / "e.db"
    st = Store(f"sqlite:///{path}")
    synthetic.fill(st, "r1", repetitions=3, warmups=1, fail={("qemu", "sim-fio"): [2]})
    return st


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_round_trip_through_pandas(store, tmp_path, fmt):
    files = export.export(store, "r1", tmp_path, fmt)
    assert [f.name for f in files] == [f"r1-{t}.{fmt}" for t in ("samples", "executions", "summary")]
    samples, executions, summ = (READ[fmt](f) for f in files)

    stored = store.samples("r1", include_warmup=True)
    assert len(samples) == len(stored)
    assert samples["value"].tolist() == pytest.approx([s.value for s in stored])
    assert samples["warmup"].dtype == bool and samples["higher_is_better"].dtype == bool
    assert samples["round"].dtype.kind == "i" and samples["value"].dtype.kind == "f"
    assert set(samples["platform_kind"]) == {"baseline", "container", "vm"}
    assert set(samples.loc[samples.platform == "qemu-docker", "inside"]) == {"qemu"}
    assert samples["warmup"].sum() == sum(s.warmup for s in stored)

    assert len(executions) == len(store.executions("r1"))
    failed = executions[executions.status == "failed"]
    assert len(failed) == 1 and failed.iloc[0]["platform"] == "qemu" and "device busy" in failed.iloc[0]["error"]

    _report = builder.build(store, "r1")

    rows = _report.rows
    assert len(summ) == len(rows)
    docker = summ[(summ.platform == "docker") & (summ.metric == "HPL_Gflops")].iloc[0]
    row = next(r for r in rows if r.platform == "docker" and r.metric == "HPL_Gflops")
    assert docker["mean"] == pytest.approx(row.mean) and docker["relative"] == pytest.approx(row.relative)
    assert docker["relative_ci95_low"] == pytest.approx(row.relative_ci95[0])
    assert docker["verdict"] == row.verdict
    assert summ["p_value"].dtype.kind == "f" and "p_holm" not in summ
    assert docker["ratio_of_means"] == pytest.approx(row.ratio_of_means)
    for table in (samples, executions, summ):
        assert set(table["format_version"]) == {FORMAT_VERSION}


def test_all_failed_run_exports_empty_tables_with_headers(tmp_path):
    st = Store(f"sqlite:///{tmp_path / 'f.db'}")
    st.create_run(run_id="dead", name="t", campaign={"baseline": "native"}, source="", seed=1, host_id=None,
                  host_facts={}, image={}, provenance={}, benchmarks=[],
                  platforms=[{"name": "native", "type": "native", "label": "native", "config": {}}])
    st.record(run_id="dead", round=0, warmup=False, platform="native", benchmark="lifecycle", status="failed",
              started_at=now(), finished_at=now(), duration_s=0.0, error="boom")
    for fmt in ("csv", "json", "parquet"):
        samples, executions, summ = (READ[fmt](f) for f in export.export(st, "dead", tmp_path / fmt, fmt))
        assert len(samples) == 0 and len(executions) == 1
        if fmt != "json":
            assert "value" in samples.columns
        assert (summ["n"] == 0).all() and summ["mean"].isna().all()


def test_export_command(store, tmp_path):
    res = CliRunner().invoke(cli, ["export", "r1", "--format", "csv", "-o", str(tmp_path), "--db", store.url])
    assert res.exit_code == 0, res.output
    assert len(pd.read_csv(tmp_path / "r1-samples.csv")) == len(store.samples("r1", include_warmup=True))
    bad = CliRunner().invoke(cli, ["export", "r1", "--format", "xls", "--db", store.url])
    assert bad.exit_code != 0


def test_json_export_is_valid_json(store, tmp_path):
    [_, _, summ] = export.export(store, "r1", tmp_path, "json")
    assert isinstance(json.loads(summ.read_text()), list)


def test_static_figures_in_three_formats(store, tmp_path):
    from virtbench.report import figures, static

    specs, _ = figures.for_reports([builder.build(store, "r1")])
    chosen = {s.kind: s for s in specs}  # one of each kind
    files = static.export(list(chosen.values()), tmp_path / "a")
    assert len(files) == 4 * len(chosen)  # and each figure's data as CSV beside it
    assert set(chosen) >= {"bar", "box", "trend", "sweep", "count", "latency", "stack"}
    for f in files:
        head = f.read_bytes()[:8]
        assert {"png": head.startswith(b"\x89PNG"), "pdf": head.startswith(b"%PDF"), "csv": head.startswith(b"series"),
                "svg": b"<svg" in f.read_bytes()[:400]}[f.suffix[1:]]
    again = static.export(list(chosen.values()), tmp_path / "b", formats=("svg", "pdf"))
    for f in again:
        assert f.read_bytes() == (tmp_path / "a" / f.name).read_bytes(), f"{f.name} not reproducible"


def test_report_figures_option(tmp_path):
    st = Store(f"sqlite:///{tmp_path / 'small.db'}")
    benches = [b for b in synthetic.default_benchmarks() if b.name == "sim-sockperf"]
    platforms = [p for p in synthetic.default_platforms() if p.name in ("native", "qemu")]
    synthetic.fill(st, "s", repetitions=3, benchmarks=benches, platforms=platforms)
    res = CliRunner().invoke(cli, ["report", "s", "--figures", str(tmp_path / "figs"), "--db", st.url])
    assert res.exit_code == 0, res.output
    names = {p.name for p in (tmp_path / "figs").iterdir()}
    assert {"latency-sim-sockperf.svg", "categories.pdf", "bar-sim-sockperf.png", "lifecycle.png"} <= names

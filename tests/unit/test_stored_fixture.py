"""A run stored by the code before the report model (tests/data/report/store-0003.sqlite, made by
make_store_fixture.py at schema 0003) reports the same numbers today: every statistic and
descriptive field of every cell is as it was; only what #17 and #27 changed on purpose differs
(the verdict words with their reason and the interval they are read from; `relative` became the
verdict's own estimate, the old ratio of means is `ratio_of_means`; the rank test's p-values
gave way to the p of the test that decided)."""
import json
import shutil
from pathlib import Path

import pytest

from virtbench.report import builder
from virtbench.store.db import Store

DATA = Path(__file__).parents[1] / "data" / "report"
UNCHANGED = ("benchmark", "metric", "platform", "unit", "higher_is_better", "n", "failed", "mean", "median",
             "stdev", "ci95", "mean_boot_ci95", "median_ci95", "cv")
"""Fields of each result that must not change; relative_ci95 became the verdict's interval and
verdict/verdict_reason are the new four verdicts (#17); relative is the verdict's estimate and the
old relative is ratio_of_means (#27). The quality flags may only lose drift/outlier flags within
1 % of the median (quality.MATERIAL)."""


@pytest.fixture()
def old_store(tmp_path):
    db = tmp_path / "old.sqlite"
    shutil.copy(DATA / "store-0003.sqlite", db)  # the store is migrated when opened: work on a copy
    return Store(f"sqlite:///{db}")


def kept(new, old) -> bool:
    """new says everything old said (fields added since, like a platform's kind, are allowed)."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and kept(new[k], v) for k, v in old.items())
    if isinstance(old, list):
        return isinstance(new, list) and len(new) == len(old) and all(kept(n, o) for n, o in zip(new, old))
    return new == old


def shape(v):
    """v with every float as 'float': its structure, not its numbers."""
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items()}
    if isinstance(v, list):
        return [shape(x) for x in v]
    return "float" if isinstance(v, float) else v


def test_old_run_reports_the_same_numbers(old_store):
    before = json.loads((DATA / "store-0003-report.json").read_text())
    after = json.loads(json.dumps(builder.report_json(builder.build(old_store, "fixture-0003")), default=str))
    for key in ("run", "name", "status", "baseline", "host", "image", "platforms", "benchmarks", "failures",
                "campaign", "adaptive", "tables"):
        if key == "tables":  # best/worst were named from raw ratios then; from the verdicts since (#17)
            for kind in before[key]["best"].values():
                for row in kind:
                    row.pop("best"), row.pop("worst")
            # the geometric means are of the verdicts' estimates since #27: the same tables, other ratios
            assert kept(shape(after[key]), shape(before[key])), key
            continue
        assert kept(after[key], before[key]), key
    best = {b["category"]: b for b in after["tables"]["best"]["container"]}
    # runc's cells are all inconclusive: no best or worst is named from the ratios
    assert all(b["best"] is None and b["worst"] is None and not b["decided"] for b in best.values())
    assert len(after["results"]) == len(before["results"])
    for old, new in zip(before["results"], after["results"]):
        for field in UNCHANGED:
            # numbers to 12 digits: the t quantile is computed without scipy since (analysis/special.py),
            # equal to scipy's to about 1e-15
            numeric = isinstance(old[field], float) or (isinstance(old[field], list) and old[field]
                                                        and all(isinstance(v, float) for v in old[field]))
            assert new[field] == pytest.approx(old[field], rel=1e-12) if numeric else new[field] == old[field], \
                (old["benchmark"], old["metric"], old["platform"], field)
        assert all(q in old["quality"] for q in new["quality"]), (old["benchmark"], old["platform"])
        assert all(q["check"] in ("drift", "outliers") for q in old["quality"] if q not in new["quality"])
        if old["relative"] is not None:  # the old ratio of means, under its own name
            assert new["ratio_of_means"] == pytest.approx(old["relative"], rel=1e-12)
        if new["relative_ci95"] and new["verdict"] != "baseline":  # one estimate, inside its interval
            assert new["relative_ci95"][0] <= new["relative"] <= new["relative_ci95"][1]
        assert not {"p_holm", "effect_size", "relative_boot_ci95"} & set(new)
    qemu = next(r for r in after["results"] if r["benchmark"] == "openssl" and r["platform"] == "qemu")
    assert qemu["n"] == 0 and qemu["failed"] == 3 and qemu["unit"] == "B/s", "declared metrics of a failed benchmark"
    assert after["format_version"] == 3 and "format_version" not in before


def test_old_run_is_backfilled_and_reported_without_any_plugin(old_store, monkeypatch):
    """Migration 0006 stores each metric's declaration with the old run (from its own samples);
    the report then needs no plugin at all: with the registry broken, the same rows come out."""
    from virtbench.registry import BENCHMARKS

    def gone(name):
        raise AssertionError(f"the report asked today's plugin {name!r}")

    monkeypatch.setattr(BENCHMARKS, "get", gone)
    report = builder.build(old_store, "fixture-0003")
    openssl = next(b for b in report.run.benchmarks if b.key == "openssl")
    assert openssl.metrics and {m["name"] for m in openssl.metrics} == {"throughput"}
    assert openssl.metrics[0]["unit"] == "B/s" and openssl.metrics[0]["higher_is_better"] is True
    qemu = next(r for r in report.rows if r.benchmark == "openssl" and r.platform == "qemu")
    assert qemu.n == 0 and qemu.failed == 3 and qemu.unit == "B/s"


def test_declarations_come_from_the_run_not_the_plugin(tmp_path):
    """A stored declaration wins over what a plugin of the same name declares today."""
    from virtbench.analysis import synthetic
    from virtbench.store.models import RunBenchmark

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    bench = synthetic.SimBenchmark("openssl", "openssl", {}, (synthetic.SimMetric("ops", "op/s", True, "cpu", 5.0),))
    synthetic.fill(store, "r", repetitions=2, platforms=synthetic.default_platforms()[:2], benchmarks=[bench],
                   fail={("docker", "openssl"): range(0, 3)})
    with store.session.begin() as s:
        rb = s.query(RunBenchmark).filter_by(run_id="r", key="openssl").one()
        rb.metrics = [{"name": "ops", "unit": "op/s", "higher_is_better": True, "category": "cpu", "description": ""},
                      {"name": "lost", "unit": "%", "higher_is_better": False, "category": "network",
                       "description": "declared then, never measured"}]
    rows = {(r.metric, r.platform): r for r in builder.build(store, "r").rows}
    assert rows[("lost", "docker")].unit == "%" and rows[("lost", "docker")].category == "network"
    assert ("throughput", "docker") not in rows, "today's openssl plugin declares 'throughput': not used"

"""A run stored by the code before the report model (tests/data/report/store-0003.sqlite, made by
make_store_fixture.py at schema 0003) reports the same numbers today: every statistic and
descriptive field of every cell is as it was; only what #17 changed on purpose differs (the
verdict words with their reason and the interval they are read from)."""
import json
import shutil
from pathlib import Path

import pytest

from virtbench.report import summary
from virtbench.store.db import Store

DATA = Path(__file__).parents[1] / "data" / "report"
UNCHANGED = ("benchmark", "metric", "platform", "unit", "higher_is_better", "n", "failed", "mean", "median",
             "stdev", "ci95", "mean_boot_ci95", "median_ci95", "cv", "relative", "p_value", "p_holm",
             "effect_size", "quality")
"""Fields of each result that must not change; relative_ci95 became the verdict's interval (the old
bootstrap one is relative_boot_ci95) and verdict/verdict_reason are the new four verdicts."""


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


def test_old_run_reports_the_same_numbers(old_store):
    before = json.loads((DATA / "store-0003-report.json").read_text())
    after = json.loads(json.dumps(summary.report_json(summary.build(old_store, "fixture-0003")), default=str))
    for key in ("run", "name", "status", "baseline", "host", "image", "platforms", "benchmarks", "failures",
                "campaign", "adaptive", "tables"):
        assert kept(after[key], before[key]), key
    assert len(after["results"]) == len(before["results"])
    for old, new in zip(before["results"], after["results"]):
        for field in UNCHANGED:
            assert new[field] == pytest.approx(old[field]) if isinstance(old[field], float) else new[field] == old[field], \
                (old["benchmark"], old["metric"], old["platform"], field)
        assert new["relative_boot_ci95"] == pytest.approx(old["relative_ci95"]) if old["relative_ci95"] and \
            old["verdict"] != "baseline" else True
    qemu = next(r for r in after["results"] if r["benchmark"] == "openssl" and r["platform"] == "qemu")
    assert qemu["n"] == 0 and qemu["failed"] == 3 and qemu["unit"] == "B/s", "declared metrics of a failed benchmark"
    assert after["format_version"] == 2 and "format_version" not in before

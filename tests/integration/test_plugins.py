"""#26: a third-party plugin of every kind is one module and one entry point. The throwaway
package `tests/plugins/vbtoy` holds a benchmark, a platform (written from the Platform interface
alone, #40), a probe, an experiment kind (which runs across hosts too, tests/unit/test_toy_plugins.py),
a self-test check and their report parts; the test writes a distribution's metadata for it (`vbtoy-0.dist-info` with
its `entry_points.txt`, exactly what `pip install` of a plugin leaves) and runs the CLI with both
on PYTHONPATH. Without that metadata the same campaigns are refused: the entry points, and
nothing else, make virtbench find them. integration: the campaigns run for real (native chroot)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from virtbench.store.db import Store

pytestmark = pytest.mark.integration

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"
ENTRY_POINTS = """\
[virtbench.benchmarks]
toy-words = vbtoy.bench:ToyWords

[virtbench.experiments]
toy-count = vbtoy.kind:Count

[virtbench.platforms]
toy = vbtoy.platform:Toy

[virtbench.probes]
toy-stopwatch = vbtoy.probe:Stopwatch

[virtbench.probe_reports]
toy-stopwatch = vbtoy.report:stopwatch

[virtbench.report_sections]
toy-count = vbtoy.report:count

[virtbench.selftest]
toy-five-words = vbtoy.check:FiveWords
"""


def vb(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "virtbench", *args], env=env, capture_output=True, text=True,
                          timeout=900)


@pytest.fixture
def plugged(env, tmp_path):
    """The CLI's environment with the toy distribution installed (on PYTHONPATH)."""
    site = tmp_path / "site"
    dist = site / "vbtoy-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vbtoy\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    path = os.pathsep.join(p for p in (str(site), str(PLUGINS), env.get("PYTHONPATH", "")) if p)
    return dict(env, PYTHONPATH=path)


def _campaign(tmp_path: Path, name: str, **body) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, **body}))
    return str(path)


BENCH = {"repetitions": 2, "warmups": 0, "platforms": ["native", "toy"],
         "benchmarks": [{"name": "toy-words", "words": 5}], "probes": ["toy-stopwatch"]}
KIND = {"experiment": "toy-count", "toy-count": {"upto": 3}, "platforms": ["native", "toy"]}


def test_each_plugin_is_listed(plugged):
    for what, name in (("benchmarks", "toy-words"), ("platforms", "toy"), ("probes", "toy-stopwatch"),
                       ("experiments", "toy-count")):
        res = vb(plugged, "list", what)
        assert res.returncode == 0 and name in res.stdout, f"list {what}:\n{res.stdout}{res.stderr}"


def test_without_the_entry_points_the_campaigns_are_refused(env, tmp_path):
    env = dict(env, PYTHONPATH=os.pathsep.join(p for p in (str(PLUGINS), env.get("PYTHONPATH", "")) if p))
    for name, body in (("bench", BENCH), ("kind", KIND)):
        res = vb(env, "run", _campaign(tmp_path, name, **body), "--no-report")
        assert res.returncode == 2, res.stdout + res.stderr
        assert "unknown" in res.stderr and "toy" in res.stderr, res.stderr


def test_benchmark_platform_probe_and_its_report_part_run_through_the_cli(plugged, tmp_path):
    res = vb(plugged, "run", _campaign(tmp_path, "bench", **BENCH), "--no-report")
    assert res.returncode == 0, res.stdout + res.stderr
    store = Store(plugged["VIRTBENCH_DB"])
    run = store.run()
    execs = [e for e in store.executions(run.id) if e.benchmark.startswith("toy-words")]
    assert sorted(e.platform for e in execs) == ["native", "native", "toy", "toy"]
    assert all(e.status == "ok" for e in execs), [e.error for e in execs]
    assert all(("toy platform" in e.stderr) == (e.platform == "toy") for e in execs)  # its argv ran
    assert {s.value for s in store.samples(run.id) if s.metric == "words"} == {5.0}
    atts = store.attachments(run.id, kind="probe:toy-stopwatch")
    assert {a.execution_id for a in atts} >= {e.id for e in execs}

    report = vb(plugged, "report", run.id, "--json")
    assert report.returncode == 0, report.stderr
    doc = json.loads(report.stdout)
    watch = doc["probes"]["toy-stopwatch"]
    assert watch["executions"] == len(atts) and watch["mean_seconds"] > 0
    words = [r for r in doc["results"] if r["benchmark"].startswith("toy-words") and r["platform"] == "toy"]
    assert words and words[0]["mean"] == pytest.approx(5.0) and words[0]["unit"] == "count", words
    text = vb(plugged, "report", run.id)
    assert "Toy stopwatch" in text.stdout, text.stdout


def test_experiment_kind_and_its_report_part_run_through_the_cli(plugged, tmp_path):
    res = vb(plugged, "run", _campaign(tmp_path, "kind", **KIND), "--no-report")
    assert res.returncode == 0, res.stdout + res.stderr
    run = Store(plugged["VIRTBENCH_DB"]).run()
    doc = json.loads(vb(plugged, "report", run.id, "--json").stdout)
    assert doc["toy-count"]["counted"] == {"native": 3.0, "toy": 3.0}
    text = vb(plugged, "report", run.id)
    assert "Toy counts" in text.stdout and "largest" in text.stdout, text.stdout


def test_a_plugin_selftest_check_runs_through_the_cli(plugged):
    res = vb(plugged, "selftest", "toy-five-words", "--json")
    doc = json.loads(res.stdout)
    (check,) = doc["checks"]
    assert check["name"] == "toy-five-words" and check["passed"] is True, res.stdout + res.stderr
    assert check["measured"] == "native 5, toy 5" and res.returncode == 0

"""#30, study 001's power: `study run 001 --part power --meter CMD` runs the user's meter in the
energy probe, and `study report` compares Table I's power values with the probe's `power_W`
rows. Before: the paper values looked for a metric `watts` among the results (the probe's
watts are `power_W` in the report's probes section), the TCP-server entry named a point no
preset runs (mode tcp-reverse), and `study run` had no way to take a meter."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from virtbench.config import SHIPPED, load_campaign
from virtbench.registry import BENCHMARKS
from virtbench.report.model import Section
from virtbench.studies import compare as C
from virtbench.studies import paper as P
from virtbench.studies import run as srun
from virtbench.studies import verdicts as V
from virtbench.studies.registry import STUDIES, study

METER = Path(__file__).resolve().parents[1] / "data" / "meter"
PROBE_METRICS = {"energy": {"power_W", "energy_J", "energy_above_idle_J"}}


def _points(s, part_name: str | None):
    """(campaign, point) of every paper-scale preset of the part (any part: None)."""
    parts = [s.part(part_name)] if part_name else list(s.parts)
    for part in parts:
        for stem in part.campaign_stems(s.id, "paper"):
            c = load_campaign(SHIPPED / f"{stem}.yaml")
            for b in c.benchmarks:
                yield c, b


@pytest.mark.parametrize("s", STUDIES, ids=[s.id for s in STUDIES])
def test_each_paper_value_names_a_point_and_metric_its_presets_measure(s):
    """A published value whose `yours` names a benchmark point must find it in the paper-scale
    presets, with a metric the benchmark (or a probe the preset runs) reports: otherwise the
    comparison can never happen, whatever the user runs."""
    for v in P.load(s.id).values:
        y = v.yours
        if y is None or y.benchmark is None:
            continue
        found = []
        for c, b in _points(s, y.part):
            params = {**BENCHMARKS.get(b.name).Params(**b.params).model_dump(), **b.params}
            if y.benchmark in (b.name, b.key) and all(str(params.get(k)) == str(w) for k, w in y.params.items()):
                found.append((c, b))
        assert found, f"{s.id} {v.id}: no preset of part {y.part or 'any'} runs {y.benchmark} with {y.params}"
        if y.metric is None:
            continue
        for c, b in found:
            cls = BENCHMARKS.get(b.name)
            metrics = {m.name for m in cls(cls.Params(**b.params)).metrics()}
            metrics |= {m for p in c.probes for m in PROBE_METRICS.get(p.name, ())}
            assert y.metric in metrics, f"{s.id} {v.id}: {y.metric} is not measured by {b.key} in {c.name}"
        if y.platform:
            assert all(y.platform in {p.name for p in c.platforms} for c, _ in found), v.id


def _energy_section(rows):
    return Section(key="probes", title="Probes", data={"energy": {"rows": rows}})


def test_power_values_are_read_from_the_energy_probes_rows():
    """The probe's power_W rows (report's probes section) are what Table I's watts are compared with."""
    key = "iperf3[client=host,mode=tcp,server=instance]"
    bench = SimpleNamespace(key=key, name="iperf3", params={"mode": "tcp", "client": "host", "server": "instance",
                                                            "time": 20})
    other = SimpleNamespace(key="iperf3[client=instance,mode=tcp,server=host]", name="iperf3",
                            params={"mode": "tcp", "client": "instance", "server": "host", "time": 20})
    row = {"benchmark": key, "metric": "power_W", "unit": "W", "platform": "docker", "n": 15, "mean": 2.27,
           "ci95": [2.2, 2.3], "relative": 0.952, "relative_ci95": [0.95, 0.955], "p_value": 0.01, "verdict": "slower"}
    decoy = {**row, "benchmark": other.key, "relative": 0.5, "relative_ci95": [0.49, 0.51]}
    report = SimpleNamespace(run=SimpleNamespace(benchmarks=[bench, other]), rows=[],
                             sections=[_energy_section([row, decoy])])
    m = C.Matcher([C.PartRun("power", "paper", report)])  # type: ignore[arg-type]
    values = {v.id: v for v in P.load("001").values}
    out = V.judge(values["power-tcp-server"], m, {}, {})
    assert out["yours"] == pytest.approx(0.952) and out["verdict"] == "agrees", out  # paper 2.1597 -> 2.2657 W
    assert out["ci"] == [0.95, 0.955]
    out = V.judge(values["power-tcp-client"], m, {}, {})
    assert out["yours"] == pytest.approx(0.5) and out["verdict"] == "differs"
    out = V.judge(values["power-apache-100k"], m, {}, {})
    assert out["verdict"] == "not measured here"


class MeterCapabilities(srun.Capabilities):
    def __init__(self, meter):
        from virtbench.platforms.base import Availability, Paths

        super().__init__(Paths(), meter=meter)
        self._ok = Availability(True, "test")

    def check(self, name):
        return self._ok

    def platforms(self, types):
        return {t: self._ok for t in types}


def test_the_meter_goes_into_the_power_parts_energy_probe():
    argv = [str(METER / "known_watts"), "2.5"]
    for scale in ("quick", "paper"):
        planned = srun.plan(study("001"), scale, MeterCapabilities(argv), ["power"])
        assert [(p.name, p.options) for p in planned[0].campaign.probes] == [("energy", {"meter": argv})]


def _cli(tmp_path, *args):
    env = dict(os.environ, VIRTBENCH_DB=f"sqlite:///{tmp_path / 'r.db'}", VIRTBENCH_STATE_DIR=str(tmp_path / "s"),
               VIRTBENCH_RUNTIME_DIR=str(tmp_path / "rt"))
    return subprocess.run([sys.executable, "-m", "virtbench", "study", "run", *args], env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("args, text", [
    (["001", "--part", "power", "--meter", f"{METER / 'failing'}"], "exit 3: meter unplugged"),
    (["001", "--part", "power", "--meter", f"{METER / 'garbage'}"], "a meter must print one number"),
    (["001", "--part", "power", "--meter", "'unclosed"], "No closing quotation"),
    (["001", "--part", "suite", "--meter", f"{METER / 'known_watts'}"], "no chosen part of study 001 measures power"),
    (["000", "--meter", f"{METER / 'known_watts'}"], "no part of study 000 measures power"),
])
def test_a_bad_meter_is_one_line_exit_2_before_anything_starts(tmp_path, args, text):
    r = _cli(tmp_path, *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("error: --meter") and text in r.stderr, r.stderr
    assert "(fix: " in r.stderr and not (tmp_path / "r.db").exists() and not (tmp_path / "s").exists()


def test_study_run_help_says_the_meter_is_consent(tmp_path):
    r = _cli(tmp_path, "--help")
    assert "--meter CMD" in r.stdout and "consent" in r.stdout and "--allow-meter" in r.stdout


def test_power_through_the_study_run_path_with_a_meter(tmp_path, monkeypatch):
    """The real plan and run of a tiny power preset (native beside a second native: no container
    needed) with a meter of exactly known watts: the study report's matcher finds the probe's
    power_W rows of the point the paper value names."""
    from virtbench.platforms.base import Paths
    from virtbench.report import builder
    from virtbench.store.db import Store

    (tmp_path / "study001-power-quick.yaml").write_text(
        "# Study 001 (test)\nname: study001-power-quick\nbaseline: native\nrepetitions: 2\nwarmups: 0\n"
        "probes: [energy]\nplatforms: [native, {name: other, type: native}]\n"
        "benchmarks: [{name: sysbench-cpu, threads: 1, time: 1}]\n")
    monkeypatch.setattr(srun, "SHIPPED", tmp_path)
    paths = Paths(state=tmp_path / "state", runtime=tmp_path / "run")
    caps = srun.Capabilities(paths, meter=(str(METER / "known_watts"), "3.25"))
    planned = srun.plan(study("001"), "quick", caps, ["power"])
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    done = srun.run(store, planned, paths, None, log=lambda m: None)
    assert done[0].run_id and done[0].failed == 0 and done[0].executions >= 4, done
    rep = builder.build(store, done[0].run_id)
    value = next(v for v in P.load("001").values if v.id == "power-cpu")
    assert value.yours is not None
    value = value.model_copy(update={"yours": value.yours.model_copy(update={"platform": "other"})})
    out = V.judge(value, C.Matcher([C.PartRun("power", "quick", rep)]), {}, {})
    assert out["yours"] == pytest.approx(1.0) and out["verdict"] == "agrees", out
    watts = [r for r in C.Matcher([C.PartRun("power", "quick", rep)]).rows(value.yours) if r.metric == "power_W"]
    assert [r.mean for r in watts] == [pytest.approx(3.25)]

"""#40: `run --dry-run` gives a plan and an estimate for every kind and every platform type, read
from the kind's Plan (experiments/planning.py); nothing is started. Before, it knew only the
benchmarks kind: another kind's campaign printed "one round of its benchmarks per platform",
none listed, and no duration worth the name."""
from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from virtbench.cli import cli
from virtbench.config import parse_campaign
from virtbench.experiments.planning import plan_of
from virtbench.registry import PLATFORMS

KINDS = {
    "benchmarks": ({"name": "b", "repetitions": 3, "warmups": 1, "platforms": ["native", "runc"],
                    "benchmarks": [{"name": "openssl", "seconds": 2}, {"name": "fio", "runtime": 3}],
                    "adaptive": {"max_repetitions": 6, "max_minutes": 5, "noise_check": 2}},
                   ["openssl", "fio", "rounds: 1 warm-up + 3 measured", "with adaptive rounds"]),
    "density": ({"name": "d", "experiment": "density", "platforms": ["lxc"],
                 "density": {"workload": {"name": "openssl", "seconds": 4}, "counts": [1, 2, 4]}},
                ["density[count=1]", "density[count=4]", "order: per platform, the counts in turn"]),
    "density-ramp": ({"name": "r", "experiment": "density", "platforms": ["lxc"],
                      "density": {"workload": {"name": "openssl", "seconds": 4}, "counts": {"until": "failure",
                                                                                         "max": 16}}},
                     ["density[count=16]", "ramped until one fails"]),
    "migration": ({"name": "m", "experiment": "migration", "repetitions": 2, "warmups": 0, "platforms": ["lxc"],
                   "migration": {"mode": "offline", "to": {"path": "/tmp"}, "counts": [1, 2]}},
                  ["migration[count=1,to=", "migration[count=2,to=", "rounds: 0 warm-up + 2 measured"]),
    "line": ({"name": "l", "experiment": "line", "repetitions": 1, "warmups": 0,
              "platforms": [{"name": "netns", "type": "netns"}, "lxc"], "line": {"lengths": [1, 2]}},
             ["line[length=0,pinning=none]", "line[length=2,pinning=none]", "netns", "node"]),
}


def _dry(tmp_path, campaign: dict) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(campaign))
    res = CliRunner().invoke(cli, ["run", "--dry-run", str(path), "--db", f"sqlite:///{tmp_path / 'none.db'}"],
                             env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    assert not (tmp_path / "none.db").exists()  # nothing recorded, not even a store
    return res.output


@pytest.fixture(autouse=True)
def _nothing_starts(monkeypatch):
    def never(*_a, **_k):
        raise AssertionError("a dry run started something")

    monkeypatch.setattr("virtbench.runner.execute.start", never)
    monkeypatch.setattr("virtbench.runner.hostlock.hold", never)
    monkeypatch.setattr("virtbench.images.build.build", never)
    monkeypatch.setattr("virtbench.platforms.availability.availability_of", never)
    monkeypatch.setattr("virtbench.commands.run.check_host", lambda *a, **k: None, raising=False)


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_dry_run_plans_and_estimates_every_kind(tmp_path, kind, monkeypatch):
    monkeypatch.setattr("virtbench.config.check_host", lambda *a, **k: None)
    campaign, needles = KINDS[kind]
    out = _dry(tmp_path, campaign)
    for needle in [f"campaign {campaign['name']}: valid", "estimated duration: about", *needles]:
        assert needle in out, f"{needle!r} not in:\n{out}"
    assert all(len(line) <= 100 for line in out.splitlines())
    plan = plan_of(parse_campaign(campaign))
    assert plan.round and plan.declared_s() > 0 and plan.max_s() >= plan.declared_s()
    assert plan.kind == campaign.get("experiment", "benchmarks")


OPTIONS: dict[str, dict] = {}
"""Options a platform type needs in a campaign (none of today's needs any); a new platform whose
options have no defaults (a Kubernetes pod platform's cluster, say) adds its example here."""


@pytest.mark.parametrize("ptype", PLATFORMS.names())
def test_a_dry_run_plans_a_campaign_with_every_platform_type(tmp_path, ptype, monkeypatch):
    """Every platform plugin (a Kubernetes pod platform too, once it registers) gets a line in
    the plan, its kind and an instance's cost in the estimate."""
    monkeypatch.setattr("virtbench.config.check_host", lambda *a, **k: None)
    platforms = ["native"] if ptype == "native" else ["native", {"name": "p", "type": ptype, **OPTIONS.get(ptype, {})}]
    campaign = {"name": "t", "platforms": platforms, "benchmarks": [{"name": "openssl", "seconds": 1}]}
    out = _dry(tmp_path, campaign)
    kind = PLATFORMS.get(ptype).kind
    assert f" {ptype} " in out and kind in out and "estimated duration: about" in out, out
    plan = plan_of(parse_campaign(campaign))
    assert {(n, t) for n, t, _ in plan.platforms} >= {("native", "native")}
    assert sum(1 for w in plan.round if w.lifecycle) == len(platforms)  # each instance's life is counted


def test_the_round_arithmetic_is_the_plans():
    """The budget, the progress cap and the estimate count the same rounds: warm-ups, the noise
    check (the baseline alone), and the measured rounds up to the adaptive cap."""
    from virtbench.report.progress import Cap

    c = parse_campaign(KINDS["benchmarks"][0])
    plan = plan_of(c)
    per_round = 2 * (2 + 1)  # platforms x (benchmarks + each instance's life)
    assert plan.per_round() == per_round
    assert plan.declared() == (1 + 3) * per_round + 2 * 3  # + the noise check's baseline executions
    assert plan.at_cap() == (1 + 6) * per_round + 2 * 3
    cap = Cap.of(plan, started=0.0)
    assert cap is not None and cap.executions == plan.at_cap() and cap.per_round == per_round
    assert plan.rounds.at_cap == 7 and plan.budget == (2, "benchmark executions")


@pytest.mark.parametrize("kind", ["density", "migration", "line"])
def test_a_kind_without_adaptive_rounds_refuses_the_rule(kind):
    """Before #40 `adaptive:` was accepted by every kind and ignored by all but benchmarks."""
    from virtbench.errors import InputError

    campaign = {**KINDS[kind][0], "adaptive": {"max_repetitions": 9}}
    with pytest.raises(InputError) as err:
        parse_campaign(campaign, "c.yaml")
    assert err.value.message.startswith(f"c.yaml: adaptive: experiment {kind!r}") and "\n" not in err.value.message


def test_what_a_lost_host_never_reached_is_read_from_its_plan():
    """A lost host's rest is marked from its part's plan: every scheduled execution not stored
    (the benchmarks kind, and any kind whose order is known in advance); an open-ended search
    (density ramping until a count fails) has no rest anyone knows, so nothing is marked."""
    bench = plan_of(parse_campaign(KINDS["benchmarks"][0]), seed=4)
    everything = bench.schedule() if bench.schedule else []
    assert len(everything) == bench.declared()
    done = {w.key for w in everything[:5]}
    rest = bench.unreached(done)
    assert len(rest) == bench.declared() - 5 and not {w.key for w in rest} & done
    assert plan_of(parse_campaign(KINDS["density-ramp"][0])).unreached(set()) == []
    migration = plan_of(parse_campaign(KINDS["migration"][0]))
    assert len(migration.unreached(set())) == migration.declared() == 2 * 2

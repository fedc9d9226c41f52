"""#40: third-party plugins through the same doors as the built-ins (tests/plugins/vbtoy): a
kind of a plugin runs on each of `hosts:` through the runner's one path for agents (its host
part measured by a real `virtbench agent` process that finds the kind by its entry point, its
after_parts here with each host's link), a platform written from the Platform interface alone
(no built-in to inherit from) is planned like any other, and a self-test check is judged by a
pure function. What SSH adds is tested by the integration tests (tests/integration/test_hosts_*)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from virtbench.config import parse_campaign
from virtbench.experiments.base import ExperimentContext
from virtbench.platforms.base import Paths
from virtbench.registry import EXPERIMENTS, PLATFORMS
from virtbench.runner import execute
from virtbench.runner.hosts import AcrossHosts
from virtbench.runner.parts import Part
from virtbench.store.db import Store

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"


@pytest.fixture
def vbtoy(tmp_path, monkeypatch):
    """The toy distribution installed for this process (registered) and for the processes it
    starts (its entry points on PYTHONPATH, as `pip install` leaves them)."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    from vbtoy.kind import Count
    from vbtoy.platform import Toy

    site = tmp_path / "site"
    dist = site / "vbtoy-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vbtoy\nVersion: 0\n")
    (dist / "entry_points.txt").write_text("[virtbench.experiments]\ntoy-count = vbtoy.kind:Count\n\n"
                                           "[virtbench.platforms]\ntoy = vbtoy.platform:Toy\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(site), str(PLUGINS),
                                                                  os.environ.get("PYTHONPATH", "")) if p))
    for registry, name, cls in ((EXPERIMENTS, "toy-count", Count), (PLATFORMS, "toy", Toy)):
        monkeypatch.setitem(registry._load(), name, cls)
    return Count


class Local:
    """An 'SSH connection' that runs the agent here: the part's argv, unwrapped."""

    def ssh_argv(self, argv: list[str], *, tty: bool = False) -> list[str]:  # noqa: ARG002
        return argv

    def close(self) -> None:
        pass


def test_a_plugin_kind_runs_on_each_host_through_an_agent(vbtoy, tmp_path):
    from vbtoy.kind import HOSTS_KEY

    paths = Paths(state=tmp_path / "state", runtime=tmp_path / "run")
    campaign = parse_campaign({"name": "toy-hosts", "experiment": "toy-count", "toy-count": {"upto": 2},
                               "platforms": ["native"], "hosts": ["local", {"name": "far", "address": "192.0.2.9",
                                                                            "work_dir": str(tmp_path / "far")}]})
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    kind = vbtoy(campaign, paths)
    assert kind.host_recipe() is None  # nothing to build or ship for it
    across = AcrossHosts(kind, store)
    local, far = (Part(spec=h, seed=0) for h in campaign.hosts)
    far.executor, far.agent = Local(), str(Path(sys.executable).parent / "virtbench")  # type: ignore[assignment]
    across.parts = [local, far]
    store.create_run(run_id="r", name="toy-hosts", campaign=campaign.model_dump(mode="json"), source="", seed=3,
                     host_id=None, host_facts={}, image={}, provenance={}, platforms=[], benchmarks=[])
    try:
        outcome = execute.measure(across, ExperimentContext(sink=store, run_id="r", seed=3, paths=paths))
    finally:
        for p in Path("/run/virtbench-remote").glob("*"):  # the agent's runtime directory, if it made one
            if p.is_dir() and not any(p.iterdir()):
                p.rmdir()
    assert (outcome.failed, outcome.unfinished, outcome.interrupted) == (0, "", False), outcome
    got = {(e.host, e.benchmark) for e in store.executions("r")}
    assert got >= {(h, f"toy-count[n={n}]") for h in ("local", "far") for n in (1, 2)}, got
    (hosts,) = [e for e in store.executions("r") if e.benchmark == HOSTS_KEY]
    assert hosts.host == "local" and hosts.stdout.splitlines() == ["local finished local", "far finished agent"]
    assert store.run("r").status == "finished"
    # each part's state through its sink: the far one's through its agent's stream
    assert store.state("r")["host_state"] == {"local": {"counted_to": 2}, "far": {"counted_to": 2}}


def test_a_plugin_platform_of_its_own_is_planned_like_any_other(vbtoy):
    from vbtoy.platform import Toy

    from virtbench.experiments.planning import plan_of

    assert not any(c.__module__.startswith("virtbench.platforms.") for c in Toy.__mro__[1:]
                   if c.__name__ != "Platform"), "the toy inherits only the interface"
    plan = plan_of(parse_campaign({"name": "t", "platforms": ["native", "toy"], "benchmarks": ["openssl"]}))
    assert ("toy", "toy", "sandbox") in plan.platforms
    assert Toy("toy", Toy.Options(), Paths(Path("/nonexistent"), Path("/nonexistent"))).exec_argv(
        None, ["true"])[:2] == ["env", "-i"]  # type: ignore[arg-type]


def test_a_plugin_check_is_judged_by_a_pure_function(vbtoy):
    from vbtoy.check import FiveWords, judge

    assert judge({"native": 5.0, "toy": 5.0}).passed
    bad = judge({"native": 5.0, "toy": 4.0})
    assert not bad.passed and "toy" in bad.reason
    assert not judge({}).passed
    assert FiveWords.name == "toy-five-words" and "5 words" in FiveWords().expected()

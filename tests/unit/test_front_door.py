"""#26: one front door for every run. A kind declares how it runs with `hosts:`; the runner's one
lifecycle (runner.execute) runs it that way: the benchmarks kind through an agent on each host,
migration reaching its destination hosts itself, density through an agent on each host too,
line refused when parsed.

Before: a migration campaign with `hosts: [h2]` and `to: {host: h2}` went to the several-hosts
*benchmarks* loop ("1 hosts x 1 platforms x 0 benchmarks"), measured LXC's lifecycle on h2 and
finished with no migration at all; density and line did the same."""
from __future__ import annotations

from pathlib import Path

import pytest

from virtbench.config import parse_campaign
from virtbench.errors import InputError
from virtbench.experiments.base import Experiment
from virtbench.experiments.registry import EXPERIMENTS
from virtbench.platforms.base import Paths
from virtbench.runner import execute, hosts
from virtbench.store.db import Store

H2 = {"name": "h2", "address": "192.0.2.2"}
Migration = EXPERIMENTS.get("migration")  # wherever the kind's module lives


class Reached(Exception):
    """The kind the lifecycle prepared (nothing is started)."""


def test_each_builtin_kind_declares_how_it_runs_across_hosts():
    assert {n: EXPERIMENTS.get(n).across_hosts for n in ("benchmarks", "density", "line", "migration")} == {
        "benchmarks": "agents", "density": "agents", "line": "no", "migration": "drives"}


@pytest.mark.parametrize("kind, section", [
    ("line", {"lengths": [1, 2]}),
])
def test_a_kind_that_does_not_run_across_hosts_is_refused_in_one_line_at_parse(kind, section):
    platforms = [{"name": "ns", "type": "netns"}] if kind == "line" else ["crun"]
    with pytest.raises(InputError) as err:
        parse_campaign({"name": "x", "experiment": kind, "platforms": platforms, "hosts": [H2], kind: section})
    assert err.value.message == f"<campaign>: hosts: experiment {kind!r} does not run across hosts"
    assert "without" not in err.value.message and "\n" not in str(err.value) and "virtbench run" in err.value.fix


@pytest.mark.parametrize("campaign, prepared", [
    ({"name": "m", "experiment": "migration", "platforms": ["lxc"], "hosts": [H2],
      "migration": {"counts": [1], "mode": "offline", "to": {"host": "h2"}}}, Migration),
    ({"name": "b", "platforms": ["native"], "hosts": ["local", H2],
      "benchmarks": [{"name": "sysbench-cpu", "time": 1}]}, hosts.AcrossHosts),
])
def test_start_prepares_the_kind_that_runs_the_campaign(tmp_path: Path, monkeypatch, campaign, prepared):
    """The migration campaign of the issue reaches the migration kind (which drives h2 itself),
    a benchmarks campaign with hosts the run across hosts; nothing is recorded before prepare."""
    seen: list[type] = []

    def prepare(self: Experiment, log) -> None:  # noqa: ARG001
        seen.append(type(self))
        raise Reached

    for cls in (Migration, hosts.AcrossHosts):
        monkeypatch.setattr(cls, "prepare", prepare)
    monkeypatch.setattr(execute, "check_host", lambda *a, **k: None)  # this machine's size is not the point
    store = Store(f"sqlite:///{tmp_path}/db.sqlite")
    with pytest.raises(Reached):
        execute.start(store, parse_campaign(campaign), Paths(state=tmp_path / "s", runtime=tmp_path / "r"))
    assert seen == [prepared] and store.runs() == []


def test_density_with_hosts_is_prepared_as_its_own_kind_on_each_host(tmp_path: Path, monkeypatch):
    """Another agents kind goes through the same run across hosts, prepared as itself (its own
    image recipe shipped, its own checks answered there), not as the benchmarks kind."""
    density = parse_campaign({"name": "d", "experiment": "density", "platforms": ["crun"], "hosts": [H2],
                              "density": {"workload": {"name": "openssl"}, "counts": [1, 2]}})
    seen: list[Experiment] = []

    def prepare_parts(kind: Experiment, paths, seed, log):  # noqa: ARG001
        seen.append(kind)
        raise Reached

    monkeypatch.setattr(hosts, "prepare_parts", prepare_parts)
    store = Store(f"sqlite:///{tmp_path}/db.sqlite")
    kind = EXPERIMENTS.get("density")(density, Paths(state=tmp_path / "s", runtime=tmp_path / "r"))
    across = hosts.AcrossHosts(kind, store)
    with pytest.raises(Reached):
        across.prepare(print)
    assert [type(k).name for k in seen] == ["density"]
    recipe = seen[0].host_recipe()
    assert recipe.profile == "density" and "openssl" in recipe.packages

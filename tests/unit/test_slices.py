"""Where virtbench's cgroups go on a systemd + cgroup v2 host (virtbench.slice, scopes, the
engines' --cgroup-parent per driver) and on a host without systemd (cgroupfs paths); nothing
is run: systemd's presence is set per test."""
from __future__ import annotations

from pathlib import Path

import pytest

from virtbench.errors import InputError
from virtbench.platforms import oci, slices
from virtbench.platforms.base import Paths

PATHS = Paths(state=Path("/nonexistent/state"), runtime=Path("/nonexistent/run"))


@pytest.fixture(params=[True, False], ids=["systemd-v2", "cgroupfs"])
def systemd(request, monkeypatch):
    monkeypatch.setattr(slices, "systemd_managed", lambda: request.param)
    return request.param


def test_a_confining_parent_is_a_slice_in_virtbench_slice_only_where_systemd_manages_cgroups(systemd):
    path = slices.parent_path("vb-density-1a2b3c4d-run7")
    if systemd:  # dashes in a slice name nest: the name's own become underscores
        assert path == "virtbench.slice/virtbench-vb_density_1a2b3c4d_run7.slice"
        assert slices.unit_of(path) == "virtbench-vb_density_1a2b3c4d_run7.slice"
    else:
        assert path == "vb-density-1a2b3c4d-run7" and slices.unit_of(path) is None


def test_a_cgroupfs_path_given_to_the_systemd_driver_is_refused_in_one_line():
    with pytest.raises(InputError, match="systemd cgroup driver, which takes a slice"):
        slices.engine_parent("vbst-abc", "systemd", "docker")


def test_runc_and_crun_make_systemd_scopes_where_systemd_manages_cgroups(systemd):
    rt = oci._rt("crun", PATHS)
    spec, cgroup = oci.cgroup_paths("crun", None, "vb-x")
    parented = oci.cgroup_paths("runc", slices.parent_path("p") if systemd else "p", "vb-x")
    if systemd:
        assert "--systemd-cgroup" in rt
        assert (spec, cgroup) == ("virtbench.slice:vb:vb-x", "virtbench.slice/vb-vb-x.scope")
        assert parented == ("virtbench-p.slice:vb:vb-x", "virtbench.slice/virtbench-p.slice/vb-vb-x.scope")
    else:
        assert "--systemd-cgroup" not in rt
        assert (spec, cgroup) == ("/virtbench/vb-x", "virtbench/vb-x")
        assert parented == ("/p/vb-x", "p/vb-x")
    assert "--systemd-cgroup" not in oci._rt("runsc", PATHS)  # gVisor keeps its own cgroup handling


def test_leftover_parents_are_found_in_virtbench_slice_too(tmp_path, monkeypatch):
    from virtbench.platforms import cgroups

    monkeypatch.setattr(cgroups, "root", lambda: tmp_path)
    monkeypatch.setattr(cgroups, "is_v2", lambda: True)
    (tmp_path / "vb-density-aa-r1").mkdir()
    (tmp_path / "virtbench.slice" / "virtbench-vb_density_aa_r2.slice").mkdir(parents=True)
    (tmp_path / "virtbench.slice" / "virtbench-vb_density_bb_r3.slice").mkdir()
    assert cgroups.leftover_parents("vb-density-aa-") == ["vb-density-aa-r1",
                                                          "virtbench.slice/virtbench-vb_density_aa_r2.slice"]


def test_a_v2_host_without_a_controller_the_limits_need_is_refused_naming_host_controller_and_fix():
    from virtbench.config import parse_campaign
    from virtbench.experiments.benchmarks import session as session_mod

    campaign = parse_campaign({"name": "t", "platforms": [
        "native", {"name": "one", "type": "crun", "options": {"cpus": 1}},
        {"name": "small", "type": "runc", "options": {"memory": "64M"}}], "benchmarks": ["openssl"]})
    s = session_mod.build_objects(campaign, PATHS)
    with pytest.raises(InputError) as err:  # a container whose parent delegated only some controllers
        session_mod.refuse_undelegated("box", s, "cpuset io memory pids\n")
    assert err.value.message.startswith("host box: cgroup v2 without the cpu controller delegated")
    assert "one cannot be limited" in err.value.message and "Delegate=yes" in err.value.fix
    session_mod.refuse_undelegated("box", s, "cpuset cpu io memory pids\n")  # a stock systemd host
    session_mod.refuse_undelegated("box", s, "")  # not a v2 host: nothing to check here


def test_the_selftest_ledger_holds_a_slice_path_and_cleanup_removes_that_slice(tmp_path, monkeypatch):
    from virtbench.selftest import context

    paths = Paths(state=tmp_path / "state", runtime=tmp_path / "run")
    removed: list[str] = []
    monkeypatch.setattr(context.cgroups, "remove_tree", lambda rel, timeout=10.0: removed.append(rel) or [rel])
    context.record(paths, "cgroup", "virtbench.slice/virtbench-vbst_abc.slice")
    assert context.cleanup(paths) == ["virtbench.slice/virtbench-vbst_abc.slice"]
    assert removed == ["virtbench.slice/virtbench-vbst_abc.slice"] and not list(context.ledger_dir(paths).iterdir())


def test_an_experiment_other_than_benchmarks_with_hosts_is_refused_not_run_as_an_empty_benchmark_campaign():
    """It ran as a benchmarks campaign with no benchmarks (lifecycle only), silently: seen with a
    density run pointed at the reference host. Now refused when the campaign is parsed."""
    from virtbench.config import parse_campaign

    with pytest.raises(InputError, match="hosts: experiment 'density' does not run across hosts"):
        parse_campaign({"name": "d", "experiment": "density", "hosts": [{"name": "ref", "address": "192.0.2.1"}],
                        "platforms": [{"name": "crun", "type": "crun", "options": {"memory": "64M"}}],
                        "density": {"workload": {"name": "openssl"}, "counts": [1, 2]}})


def test_the_host_kind_is_one_line_naming_cgroup_mode_systemd_and_dockers_driver(monkeypatch):
    from virtbench import services
    from virtbench.platforms import cgroups

    monkeypatch.setattr(cgroups, "cgroup_mode", lambda entries=None: "v2")
    monkeypatch.setattr(cgroups, "is_v2", lambda: True)
    monkeypatch.setattr(services, "systemd_running", lambda: True)
    monkeypatch.setattr(slices, "docker_cgroup_driver", lambda: "systemd")
    kind = slices.host_kind()
    assert kind == ("cgroup v2 (unified), systemd as PID 1, Docker cgroup driver systemd; "
                    "virtbench's cgroups in virtbench.slice") and "\n" not in kind
    monkeypatch.setattr(cgroups, "cgroup_mode", lambda entries=None: "hybrid")
    monkeypatch.setattr(cgroups, "is_v2", lambda: False)
    monkeypatch.setattr(services, "systemd_running", lambda: False)
    monkeypatch.setattr(slices, "docker_cgroup_driver", lambda: "cgroupfs")
    assert slices.host_kind().startswith("cgroup v1 hybrid (v1 controllers beside cgroup2), no systemd, "
                                         "Docker cgroup driver cgroupfs; virtbench's cgroups as cgroupfs")

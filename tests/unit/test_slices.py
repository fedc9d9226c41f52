"""Where virtbench's cgroups go on a systemd + cgroup v2 host (virtbench.slice, scopes, the
engines' --cgroup-parent per driver) and on a host without systemd (cgroupfs paths); nothing
is run: systemd's presence is set per test."""
from __future__ import annotations

from pathlib import Path

import pytest

from virtbench.errors import InputError
from virtbench.platforms import oci, slices, units
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
        assert units.unit_of(path) == "virtbench-vb_density_1a2b3c4d_run7.slice"
    else:
        assert path == "vb-density-1a2b3c4d-run7" and units.unit_of(path) is None


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


DOCKER_MOUNTINFO = (Path(__file__).parents[1] / "data" / "hostfacts" / "docker-bookworm-systemd-v2.mountinfo").read_text()
"""/proc/self/mountinfo in a default `docker run` (Debian bookworm's docker.io, systemd driver) on the
systemd + cgroup v2 reference guest, recorded there (the cgroup lines and their neighbours)."""
HYBRID_MOUNTINFO = """\
30 23 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw
32 30 0:28 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,name=systemd
35 30 0:31 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,memory
"""
"""A systemd hybrid host: its tmpfs at /sys/fs/cgroup is read-only, the controllers are not."""


def test_limits_into_a_read_only_cgroup_hierarchy_are_refused_naming_host_mount_and_fix():
    from virtbench import hostinfo
    from virtbench.config import parse_campaign
    from virtbench.experiments.benchmarks import session as session_mod

    assert hostinfo.read_only_cgroups(DOCKER_MOUNTINFO) == ["/sys/fs/cgroup"]
    assert hostinfo.read_only_cgroups(HYBRID_MOUNTINFO) == []
    assert hostinfo.read_only_cgroups(HYBRID_MOUNTINFO.replace("relatime shared:14", "relatime,ro shared:14")) == [
        "/sys/fs/cgroup/memory"]
    limited = parse_campaign({"name": "t", "platforms": ["native", {"name": "small", "type": "runc",
                                                                     "options": {"memory": "64M"}}],
                              "benchmarks": ["openssl"]})
    s = session_mod.build_objects(limited, PATHS)
    with pytest.raises(InputError) as err:
        session_mod.refuse_read_only_cgroups("box", s, DOCKER_MOUNTINFO)
    assert err.value.message == "host box: the cgroup hierarchy is mounted read-only (/sys/fs/cgroup), so small " \
                                "cannot be limited"
    assert "--cgroupns=host" in err.value.fix and "\n" not in str(err.value)
    session_mod.refuse_read_only_cgroups("box", s, HYBRID_MOUNTINFO)  # writable controllers
    free = parse_campaign({"name": "t", "platforms": ["native", "runc"], "benchmarks": ["openssl"]})
    session_mod.refuse_read_only_cgroups("box", session_mod.build_objects(free, PATHS), DOCKER_MOUNTINFO)  # no limits


def test_the_selftest_ledger_holds_a_slice_path_and_cleanup_removes_that_slice(tmp_path, monkeypatch):
    from virtbench.selftest import context

    paths = Paths(state=tmp_path / "state", runtime=tmp_path / "run")
    removed: list[str] = []
    monkeypatch.setattr(context.cgroups, "remove_tree", lambda rel, timeout=10.0: removed.append(rel) or [rel])
    context.record(paths, "cgroup", "virtbench.slice/virtbench-vbst_abc.slice")
    assert context.cleanup(paths) == ["virtbench.slice/virtbench-vbst_abc.slice"]
    assert removed == ["virtbench.slice/virtbench-vbst_abc.slice"] and not list(context.ledger_dir(paths).iterdir())


def test_density_with_hosts_parses_to_run_through_an_agent_on_each_host():
    """It ran as a benchmarks campaign with no benchmarks (lifecycle only), silently: seen with a
    density run pointed at the reference host. Now each host's agent runs the density search."""
    from virtbench.config import parse_campaign

    campaign = parse_campaign({"name": "d", "experiment": "density", "hosts": [{"name": "ref", "address": "192.0.2.1"}],
                               "platforms": [{"name": "crun", "type": "crun", "options": {"memory": "64M"}}],
                               "density": {"workload": {"name": "openssl"}, "counts": [1, 2]}})
    assert [h.name for h in campaign.hosts] == ["ref"] and campaign.experiment == "density"


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

"""LXC on both host kinds: on a systemd + cgroup v2 host its monitor runs as a delegated
transient service in virtbench.slice and LXC divides that service's cgroup (lxc.cgroup.relative);
elsewhere LXC makes its cgroups from the root (or the confining parent) as before. Nothing runs."""
from __future__ import annotations

from pathlib import Path

import pytest

from virtbench import proc
from virtbench.images.image import Image
from virtbench.platforms import lxc, lxcservice, mounts, slices
from virtbench.platforms.base import Paths, PlatformOptions


def _config(**kw) -> list[str]:
    return lxc.build_lxc_config(name="vb-x", run_id="r1", rootfs="overlay:/img:/up", options=PlatformOptions(),
                                cgroup_mode="v2", apparmor=True, **kw).splitlines()


def test_config_divides_the_services_cgroup_on_systemd_hosts_and_names_dirs_elsewhere():
    parent = "virtbench.slice/virtbench-density_r.slice"
    assert "lxc.cgroup.relative = 1" in _config(systemd=True)
    assert not [ln for ln in _config(systemd=True, cgroup_parent=parent) if ln.startswith("lxc.cgroup.dir")]
    assert "lxc.cgroup.relative = 1" not in _config()
    assert f"lxc.cgroup.dir.container = {parent}/lxc.payload.vb-x" in _config(cgroup_parent=parent)


@pytest.mark.parametrize("parent,slice_,cgroup", [
    (None, "virtbench.slice", "virtbench.slice/vb-vb-x.service"),
    ("virtbench.slice/virtbench-density_r.slice", "virtbench-density_r.slice",
     "virtbench.slice/virtbench-density_r.slice/vb-vb-x.service"),
])
def test_the_monitor_is_a_delegated_service_in_virtbench_slice(parent, slice_, cgroup, tmp_path):
    argv = lxcservice.service_start_argv(tmp_path, "vb-x", parent)
    assert argv[:argv.index("--")] == ["systemd-run", "--quiet", "--collect", "--unit=vb-vb-x.service",
                                       f"--slice={slice_}", "--property=Delegate=yes", "--property=KillMode=mixed"]
    assert argv[argv.index("--") + 1].endswith("lxc-start")
    assert argv[argv.index("--") + 2:argv.index("--") + 7] == ["-F", "-P", str(tmp_path), "-n", "vb-x"]
    assert lxcservice.systemd_meta(parent, "vb-x") == {"service": "vb-vb-x.service", "service_cgroup": cgroup,
                                                 "service_parent": parent}


@pytest.mark.parametrize("systemd", [True, False])
def test_create_and_start_on_both_host_kinds(systemd, tmp_path, monkeypatch):
    monkeypatch.setattr(slices, "systemd_managed", lambda: systemd)
    monkeypatch.setattr(lxc.cgroups, "cgroup_mode", lambda: "v2" if systemd else "hybrid")
    monkeypatch.setattr(lxc, "apparmor_usable", lambda: True)
    monkeypatch.setattr(mounts, "check_overlay_path", lambda _p: None)
    ran: list[list[str]] = []

    def run(argv, **_kw):
        ran.append(list(argv))
        return proc.Result(list(argv), 0, "active\n" if argv[:2] == ["systemctl", "is-active"] else "", "", 0.0)

    monkeypatch.setattr(proc, "run", run)
    monkeypatch.setattr(lxcservice, "state", lambda _p, _n: "RUNNING")
    (tmp_path / "img" / "rootfs").mkdir(parents=True)
    image = Image(recipe_hash="ab" * 32, root=tmp_path / "img", release="bookworm", arch="amd64",
                  profile="quick", packages=(), tar_sha256="0" * 64)
    platform = lxc.LXC("p", lxc.LXC.Options(memory="256M"), Paths(state=tmp_path / "s", runtime=tmp_path / "r"))
    inst = platform.create(image, "vb-x", "r1")
    config = (Path(inst.data["dir"]) / "config").read_text().splitlines()
    lxc._start(platform.lxcpath, inst.name)
    assert ("lxc.cgroup.relative = 1" in config) == systemd
    assert ("lxc.cgroup2.memory.max = 268435456" if systemd else "lxc.cgroup.memory.limit_in_bytes = 268435456") \
        in config
    started = ran[0]
    if systemd:
        assert started[0] == "systemd-run" and "--unit=vb-vb-x.service" in started and "-F" in started
        assert inst.data["service_cgroup"] == "virtbench.slice/vb-vb-x.service"
        monkeypatch.setattr(lxc.cgroups, "memory_dir", lambda rel: tmp_path)  # the payload's cgroup exists
        assert platform.memory_cgroup(inst) == "virtbench.slice/vb-vb-x.service/lxc.payload.vb-x"
    else:
        assert started[0] == "lxc-start" and "-d" in started and "service" not in inst.data

"""The empty cgroups runtimes leave behind (LXC's lxc.pivot, runc's and ctr's /virtbench parent):
a run removes them when its platforms close; one still in use stays."""
from __future__ import annotations

from pathlib import Path

import pytest

from virtbench.platforms import bridge, cgroups, containerd, lxc, oci
from virtbench.platforms.base import Paths
from virtbench.platforms.qemu.platform import Qemu


def test_closing_the_platform_removes_the_pivot_lxc_made_in_every_hierarchy(tmp_path, monkeypatch):
    """Seen: every run with an LXC platform left /sys/fs/cgroup/*/lxc.pivot (10 empty cgroups)
    for the next `virtbench cleanup` to find. A pivot holding a monitor (here a file: the
    kernel's rmdir refuses a cgroup with tasks as it refuses a non-empty directory) stays."""
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(bridge, "remove_bridge_if_unused", lambda: [])  # never the host's own bridge here
    for hierarchy in ("memory", "cpu", "pids"):
        (tmp_path / hierarchy / "lxc.pivot").mkdir(parents=True)
    busy = tmp_path / "freezer" / "lxc.pivot"
    busy.mkdir(parents=True)
    (busy / "cgroup.procs").write_text("4242\n")
    platform = lxc.LXC("p", lxc.LXC.Options(), Paths(state=tmp_path / "s", runtime=tmp_path / "r"))
    platform.close()
    assert sorted(p.parent.name for p in tmp_path.glob("*/lxc.pivot")) == ["freezer"]
    platform.close()  # nothing left to remove: no error
    assert busy.is_dir() and Path(busy / "cgroup.procs").read_text() == "4242\n"


@pytest.mark.parametrize("cls", [oci.Runc, oci.Crun, containerd.Containerd])
def test_closing_runc_crun_or_containerd_removes_the_empty_parent_of_their_containers(cls, tmp_path, monkeypatch):
    """Seen: after every `make run` the next `virtbench cleanup` removed /sys/fs/cgroup/*/virtbench
    (runc's cgroupsPath /virtbench/NAME, ctr's namespace cgroup), 10 empty cgroups."""
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(bridge, "remove_bridge_if_unused", lambda: [])
    for hierarchy in ("memory", "cpu"):
        (tmp_path / hierarchy / "virtbench").mkdir(parents=True)
    busy = tmp_path / "pids" / "virtbench" / "vb-still-running"
    busy.mkdir(parents=True)
    platform = cls("p", cls.Options(), Paths(state=tmp_path / "s", runtime=tmp_path / "r"))
    platform.close()
    assert sorted(p.parent.name for p in tmp_path.glob("*/virtbench")) == ["pids"] and busy.is_dir()


@pytest.mark.parametrize("cls", [lxc.LXC, oci.Runc, Qemu])
def test_the_platforms_that_bridge_their_instances_let_the_unused_bridge_go_when_they_close(cls, tmp_path,
                                                                                            monkeypatch):
    """Seen: a campaign with `network: bridge` left vbbr0 for the next `virtbench cleanup`. The
    bridge goes only when no port and no lease of any run is left (bridge.remove_bridge_if_unused)."""
    asked = []
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(bridge, "remove_bridge_if_unused", lambda: asked.append(1) or [])
    cls("p", cls.Options(), Paths(state=tmp_path / "s", runtime=tmp_path / "r")).close()
    assert asked == [1]

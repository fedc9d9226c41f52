"""LXC's lxc.pivot cgroups: a run removes them at its end, a running container keeps them."""
from __future__ import annotations

from pathlib import Path

from virtbench.platforms import cgroups, lxc
from virtbench.platforms.base import Paths


def test_closing_the_platform_removes_the_pivot_lxc_made_in_every_hierarchy(tmp_path, monkeypatch):
    """Seen: every run with an LXC platform left /sys/fs/cgroup/*/lxc.pivot (10 empty cgroups)
    for the next `virtbench cleanup` to find. A pivot holding a monitor (here a file: the
    kernel's rmdir refuses a cgroup with tasks as it refuses a non-empty directory) stays."""
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", tmp_path)
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

"""The lxc platform's `proxmox: true` (#41 item 6): Proxmox VE's defaults in the container's config
(unprivileged id map, lxcfs hooks kept, cores as a CPU set without a quota), the shifted copy of the
image, and a host without FUSE, user namespaces or a running lxcfs refused in one line."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from virtbench.errors import InputError
from virtbench.platforms import lxcproxmox
from virtbench.platforms.lxc import LXCOptions, build_lxc_config


def _config(**opts) -> str:
    return build_lxc_config(name="vb-c1", run_id="r", rootfs="overlay:/a:/b", options=LXCOptions(**opts),
                            cgroup_mode="v2", apparmor=False)


def test_proxmox_config_is_unprivileged_with_lxcfs_and_a_cpuset():
    text = _config(cpus=2, memory="512M", swap="512M", proxmox=True)
    assert "lxc.idmap = u 0 100000 65536" in text and "lxc.idmap = g 0 100000 65536" in text
    assert "lxc.hook.mount =\n" not in text  # lxcfs hooks of common.conf kept
    assert "cpu.max" not in text and "lxc.cgroup2.cpuset.cpus = " in text
    assert "lxc.cgroup2.memory.max = 536870912" in text and "lxc.cgroup2.memory.swap.max = 536870912" in text
    plain = _config(cpus=2, memory="512M")
    assert "lxc.idmap" not in plain and "lxc.hook.mount =\n" in plain and "lxc.cgroup2.cpu.max = 200000 100000" in plain


def test_cores_become_whole_cpus_spread_by_name():
    assert lxcproxmox.cpuset_for("a", 2, cpus=2) == "0-1"
    sets = {lxcproxmox.cpuset_for(f"vb-{i}", 2, cpus=8) for i in range(20)}
    assert len(sets) > 1 and all(len(s.split(",")) == 2 for s in sets)
    assert lxcproxmox.cpuset_for("x", 1.4, cpus=4).count(",") == 0


def test_a_host_without_what_proxmox_needs_is_refused_in_one_line(tmp_path):
    with pytest.raises(InputError, match="no .*fuse"):
        lxcproxmox.check_host("lxc", fuse=tmp_path / "fuse")
    (tmp_path / "fuse").touch()
    with pytest.raises(InputError, match="user namespaces"):
        lxcproxmox.check_host("lxc", fuse=tmp_path / "fuse", userns=tmp_path / "uid_map")
    with pytest.raises(InputError) as err:
        lxcproxmox.check_host("lxc", lxcfs_dir=tmp_path / "lxcfs", fuse=tmp_path / "fuse", userns=Path("/proc/self/uid_map"))
    assert "lxcfs is not running" in err.value.message and "lxcfs" in (err.value.fix or "")
    (tmp_path / "lxcfs" / "proc").mkdir(parents=True)
    (tmp_path / "lxcfs" / "proc" / "meminfo").touch()
    ok = {"lxcfs_dir": tmp_path / "lxcfs", "fuse": tmp_path / "fuse", "userns": Path("/proc/self/uid_map"),
          "subuid": tmp_path / "subuid", "subgid": tmp_path / "subgid"}
    (tmp_path / "subuid").write_text("alice:100000:65536\n")
    (tmp_path / "subgid").write_text("root:100000:65536\n")
    if lxcproxmox.shutil.which("newuidmap"):
        with pytest.raises(InputError) as err:
            lxcproxmox.check_host("lxc", **ok)
        assert "subuid" in err.value.message and "root:100000:65536" in (err.value.fix or "")
    (tmp_path / "subuid").write_text("root:100000:65536\n")
    lxcproxmox.check_host("lxc", **ok)
    assert not lxcproxmox.delegated(tmp_path / "nosuch") and not lxcproxmox.delegated(tmp_path / "fuse")


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_the_shifted_copy_is_owned_by_the_mapped_ids_once(tmp_path):
    image = tmp_path / "img" / "rootfs"
    (image / "etc").mkdir(parents=True)
    (image / "etc" / "hostname").write_text("x")
    os.symlink("hostname", image / "etc" / "link")
    os.lchown(image / "etc" / "hostname", 5, 6)
    root = lxcproxmox.shifted_rootfs(image, tmp_path / "cache")
    assert os.lstat(root).st_uid == 100000 and os.lstat(root / "etc").st_uid == 100000  # shifted once, not twice
    assert (os.lstat(root / "etc" / "hostname").st_uid, os.lstat(root / "etc" / "hostname").st_gid) == (100005, 100006)
    assert os.lstat(root / "etc" / "link").st_uid == 100000 and os.readlink(root / "etc" / "link") == "hostname"
    assert lxcproxmox.shifted_rootfs(image, tmp_path / "cache") == root  # made once, reused
    assert os.lstat(image / "etc").st_uid == 0  # the image itself untouched

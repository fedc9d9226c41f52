"""Pure builders of the mount-based platforms: OCI config.json, LXC config, mountinfo parsing."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from virtbench.errors import InputError
from virtbench.platforms.base import EXEC_ENV, LABEL, PlatformOptions
from virtbench.platforms.bridge import veth_name
from virtbench.platforms.cgroups import cgroup_mode
from virtbench.platforms.lxc import LXCOptions, build_lxc_config, lxc_cgroup_lines
from virtbench.platforms.mounts import MountEntry, instance_name, mounts_under, parse_mountinfo, unescape
from virtbench.platforms.native import NativeOptions
from virtbench.platforms.oci import build_oci_config, oci_resources

MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 27 0:40 / /var/lib/vb/instances/vb-a/root rw,relatime shared:5 master:1 - ext4 /dev/vda rw
51 50 0:41 / /var/lib/vb/instances/vb-a/root/proc rw - proc proc rw
52 27 0:42 / /var/lib/vb/instances/vb-ab/root rw - ext4 /dev/vda rw
53 27 0:43 /sub\\040dir /var/lib/vb/instances/with\\040space\\011tab\\134back rw - overlay my\\040src rw
"""


def _opts(**kw) -> PlatformOptions:
    return PlatformOptions(**kw)


def _config(**kw):
    return build_oci_config(name="vb-x", run_id="r1", rootfs="/b/rootfs", options=_opts(**kw))


def test_oci_defaults():
    c = _config()
    assert c["process"]["args"] == ["sleep", "infinity"]
    assert c["process"]["env"] == [f"{k}={v}" for k, v in EXEC_ENV.items()]
    assert c["process"]["terminal"] is False
    assert c["root"] == {"path": "/b/rootfs", "readonly": False}
    assert c["annotations"] == {LABEL: "r1"}
    assert c["linux"]["cgroupsPath"] == "/virtbench/vb-x"
    assert c["hostname"] == "vb-x"
    assert set(c["linux"]["resources"]) == {"devices"}


@pytest.mark.parametrize("network,has_netns", [("none", True), ("bridge", True), ("host", False)])
def test_oci_network_namespace(network, has_netns):
    types = [n["type"] for n in _config(network=network)["linux"]["namespaces"]]
    assert ("network" in types) is has_netns
    assert {"pid", "ipc", "uts", "mount"} <= set(types)


def test_oci_resources():
    res = oci_resources(_opts(cpus=1.5, cpuset="0-1", memory="256MiB"))
    assert res["cpu"] == {"quota": 150000, "period": 100000, "cpus": "0-1"}
    assert res["memory"] == {"limit": 256 * 1024 * 1024}
    assert oci_resources(_opts(cpuset="1"))["cpu"] == {"cpus": "1"}


def test_oci_binds_and_args():
    c = build_oci_config(name="p", run_id="probe", rootfs="/r", options=_opts(), args=["true"],
                         binds=["/usr"])
    assert c["process"]["args"] == ["true"]
    assert {"destination": "/usr", "type": "bind", "source": "/usr", "options": ["rbind", "ro"]} in c["mounts"]


def test_lxc_cgroup_v1_and_v2():
    o = _opts(cpus=0.5, cpuset="0", memory="256MiB")
    assert lxc_cgroup_lines(o, "hybrid") == [
        "lxc.cgroup.cpu.cfs_period_us = 100000", "lxc.cgroup.cpu.cfs_quota_us = 50000",
        "lxc.cgroup.cpuset.cpus = 0", "lxc.cgroup.memory.limit_in_bytes = 268435456"]
    assert lxc_cgroup_lines(o, "v2") == [
        "lxc.cgroup2.cpu.max = 50000 100000", "lxc.cgroup2.cpuset.cpus = 0",
        "lxc.cgroup2.memory.max = 268435456"]
    assert lxc_cgroup_lines(_opts(), "v1") == []


@pytest.mark.parametrize("network,expected", [
    ("none", ["lxc.net.0.type = empty"]),
    ("host", ["lxc.net.0.type = none"]),
    ("bridge", ["lxc.net.0.type = veth", "lxc.net.0.link = vbbr0", "lxc.net.0.veth.pair = vbabc",
                "lxc.net.0.ipv4.address = 10.237.0.5/24", "lxc.net.0.hwaddr = 02:76:0a:ed:00:05"]),
])
def test_lxc_network(network, expected):
    text = build_lxc_config(name="vb-x", run_id="r1", rootfs="overlay:/img:/up",
                            options=_opts(network=network), cgroup_mode="v1", apparmor=True,
                            veth="vbabc", address="10.237.0.5")
    lines = text.splitlines()
    assert all(e in lines for e in expected)


def test_lxc_config_basics():
    text = build_lxc_config(name="vb-x", run_id="r1", rootfs="overlay:/img:/up",
                            options=_opts(memory="64MiB"), cgroup_mode="v1", apparmor=False)
    lines = text.splitlines()
    assert lines[0] == f"# virtbench instance; {LABEL} = r1"
    for line in ("lxc.include = /usr/share/lxc/config/common.conf", "lxc.hook.mount =",
                 "lxc.hook.post-stop =", "lxc.uts.name = vb-x", "lxc.rootfs.path = overlay:/img:/up",
                 "lxc.init.cmd = /bin/sleep infinity", "lxc.apparmor.profile = unconfined",
                 "lxc.cgroup.memory.limit_in_bytes = 67108864"):
        assert line in lines
    # the include comes first so virtbench's keys override it
    assert lines.index("lxc.include = /usr/share/lxc/config/common.conf") < lines.index("lxc.hook.mount =")
    with_apparmor = build_lxc_config(name="x", run_id="r", rootfs="dir:/r", options=_opts(),
                                     cgroup_mode="v1", apparmor=True)
    assert "apparmor" not in with_apparmor


def test_lxc_lxcfs_option_keeps_hooks():
    text = build_lxc_config(name="x", run_id="r", rootfs="dir:/r", options=LXCOptions(lxcfs=True),
                            cgroup_mode="v2", apparmor=True)
    assert "lxc.hook.mount =" not in text.splitlines()


def test_unescape():
    assert unescape(r"a\040b\011c\012d\134e") == "a b\tc\nd\\e"
    assert unescape("plain") == "plain"


def test_parse_mountinfo():
    entries = parse_mountinfo(MOUNTINFO)
    assert [e.mount_id for e in entries] == [22, 27, 31, 41, 50, 51, 52, 53]
    root = entries[1]
    assert (root.mount_point, root.fstype, root.source, root.parent_id) == ("/", "ext4", "/dev/vda", 1)
    optional = entries[4]  # several optional fields before the separator
    assert optional.fstype == "ext4" and optional.mount_point == "/var/lib/vb/instances/vb-a/root"
    odd = entries[-1]
    assert odd.mount_point == "/var/lib/vb/instances/with space\ttab\\back"
    assert odd.root == "/sub dir" and odd.source == "my src" and odd.fstype == "overlay"


def test_mounts_under_respects_path_boundaries():
    entries = parse_mountinfo(MOUNTINFO)
    under = [e.mount_point for e in mounts_under("/var/lib/vb/instances/vb-a", entries)]
    assert under == ["/var/lib/vb/instances/vb-a/root", "/var/lib/vb/instances/vb-a/root/proc"]
    assert len(mounts_under("/var/lib/vb/instances", entries)) == 4
    assert mounts_under("/nothing/here", entries) == []


def test_cgroup_mode():
    def m(point, fstype):
        return MountEntry(1, 0, "/", point, "rw", fstype, fstype)
    assert cgroup_mode([m("/sys/fs/cgroup", "cgroup2")]) == "v2"
    assert cgroup_mode(parse_mountinfo(MOUNTINFO)) == "hybrid"
    assert cgroup_mode([m("/sys/fs/cgroup", "tmpfs"), m("/sys/fs/cgroup/cpu", "cgroup")]) == "v1"


def test_instance_name():
    assert instance_name("abc") == "vb-abc"
    assert instance_name("vb-run1-native-r0") == "vb-run1-native-r0"
    for bad in ("../x", "a b", "", "x/y", "-x"):
        with pytest.raises(InputError):
            instance_name(bad)


def test_veth_name_fits_ifnamsiz():
    name = veth_name("vb-" + "x" * 60)
    assert len(name) + 1 <= 15 and name.startswith("vb")  # +1: the 'c' peer suffix


def test_native_options_forbid_limits():
    assert NativeOptions().network == "host"
    for bad in ({"cpus": 1}, {"memory": "1G"}, {"cpuset": "0"}):
        with pytest.raises(ValidationError, match="takes no resource limits"):
            NativeOptions(**bad)
    with pytest.raises(ValidationError):
        NativeOptions(network="none")


def test_parse_cpulist():
    from virtbench.platforms.cgroups import parse_cpulist
    assert parse_cpulist("0-2,5\n") == {0, 1, 2, 5}
    assert parse_cpulist("") == set()


def test_limits_the_host_cannot_honour_fail_early(tmp_path):
    import os

    from virtbench.platforms.base import Paths
    from virtbench.platforms.lxc import LXC
    from virtbench.platforms.native import Native
    from virtbench.platforms.oci import Runc

    paths = Paths(state=tmp_path / "s", runtime=tmp_path / "r")
    n = os.cpu_count() or 1
    for cls in (Runc, LXC):
        with pytest.raises(InputError, match="CPUs"):
            cls("x", cls.Options(cpus=n + 1), paths)
        with pytest.raises(InputError, match="does not have"):
            cls("x", cls.Options(cpuset=f"0,{n + 7}"), paths)
        cls("x", cls.Options(cpus=1, cpuset="0"), paths)  # fine
    with pytest.raises(InputError, match="no resource limits"):
        Native("n", PlatformOptions(cpus=1), paths)
    with pytest.raises(InputError, match="network=none"):
        Native("n", PlatformOptions(), paths)  # the generic default is network=none


def test_bridge_mac_follows_the_address():
    """A reused address keeps its MAC, so a peer's cached ARP entry stays right."""
    from virtbench.platforms.bridge import mac_for

    assert mac_for("10.237.0.2") == "02:76:0a:ed:00:02"
    assert mac_for("10.237.0.254") == "02:76:0a:ed:00:fe"
    assert int(mac_for("10.237.0.9").split(":")[0], 16) & 0b11 == 0b10  # unicast, locally administered

"""The lxc platform's `proxmox: true` on this host (#41 item 6), as study 000's authors ran their
containers: unprivileged (the container's root is host uid 100000), lxcfs (its /proc/meminfo shows
the limit), `cpus: N` as a set of N CPUs. Where the host cannot (no FUSE, no lxcfs, root without
subordinate ids), the platform refuses in one line before anything starts, and that is tested."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from virtbench.errors import InputError
from virtbench.platforms import lxcproxmox
from virtbench.platforms.lxc import LXC

pytestmark = pytest.mark.integration


@pytest.fixture
def lxcfs():
    """lxcfs at its usual place: the one running, or one this test starts and stops."""
    if (lxcproxmox.LXCFS / "proc" / "meminfo").exists():
        yield None
        return
    if shutil.which("lxcfs") is None or not Path("/dev/fuse").exists():
        yield None
        return
    lxcproxmox.LXCFS.mkdir(parents=True, exist_ok=True)
    daemon = subprocess.Popen(["lxcfs", str(lxcproxmox.LXCFS)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not (lxcproxmox.LXCFS / "proc" / "meminfo").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    yield daemon
    daemon.terminate()
    daemon.wait(timeout=30)
    subprocess.run(["umount", "-l", str(lxcproxmox.LXCFS)], capture_output=True, timeout=30)


def _can() -> str | None:
    try:
        lxcproxmox.check_host("lxc")
    except InputError as exc:
        return exc.message
    return None


def test_a_proxmox_container_is_unprivileged_with_lxcfs_and_its_cores(lxcfs, paths, image, run_id):
    why = _can()
    if why is not None:  # this host cannot: the refusal is one line, before anything starts
        with pytest.raises(InputError) as err:
            LXC("lxc", LXC.Options(proxmox=True, cpus=1, memory="256M"), paths)
        assert "\n" not in err.value.message and "proxmox" in err.value.message and err.value.fix
        pytest.skip(f"refused as it should be: {why}")
    plat = LXC("lxc", LXC.Options(proxmox=True, cpus=1, memory="256M", swap="256M"), paths)
    inst = plat.create(image, f"vb-pmx-{run_id[-6:]}", run_id)
    try:
        plat.start(inst)
        uid_map = plat.exec(inst, ["cat", "/proc/self/uid_map"], timeout=30).stdout.split()
        assert uid_map[:3] == ["0", "100000", "65536"]
        meminfo = plat.exec(inst, ["grep", "MemTotal", "/proc/meminfo"], timeout=30).stdout
        assert meminfo.split()[1] == str(256 * 1024), meminfo  # lxcfs: the limit, not the host's memory
        assert plat.exec(inst, ["nproc"], timeout=30).stdout.strip() == "1"  # one core, as a CPU set
        owner = plat.exec(inst, ["stat", "-c", "%u", "/etc/hostname"], timeout=30).stdout.strip()
        assert owner == "0" and os.stat(image.rootfs / "etc" / "hostname").st_uid == 0  # the image untouched
    finally:
        plat.stop(inst)
        plat.remove(inst)
    assert not (paths.state / "lxc" / inst.name).exists()

"""Real VM boots (TCG emulation on hosts where KVM does not work): few tests, each boot
costs seconds of CPU. Needs root, qemu-system, qemu-utils and e2fsprogs."""
from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from pathlib import Path

import pytest

from virtbench.errors import CommandError, VirtbenchError
from virtbench.platforms import bridge, mounts
from virtbench.platforms.qemu import guest
from virtbench.platforms.qemu.host import qemu_processes
from virtbench.platforms.qemu.options import QemuOptions
from virtbench.platforms.qemu.platform import Qemu

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def available(paths):
    verdict = Qemu.availability(paths)
    if not verdict.available:
        pytest.skip(f"qemu not available: {verdict.reason}")
    return verdict


def make(paths, image, **options) -> Qemu:
    p = Qemu("vm", QemuOptions(**options), paths)
    p.prepare(image)
    return p


def ours(paths) -> list[int]:
    return qemu_processes([f"{paths.instances}/"])


def assert_clean(paths, name):
    assert not ours(paths), "a QEMU process was left behind"
    assert not (paths.instances / name).exists()
    qdir = paths.runtime / "qemu"
    assert not [d for d in qdir.iterdir() if d.is_dir() and not d.name.startswith("probe")] \
        if qdir.is_dir() else True


def test_probe_names_the_accelerator(paths, available):
    assert "kvm" in available.reason.lower()
    t0 = time.monotonic()
    again = Qemu.availability(paths)  # the verdict is cached per host boot
    assert again.reason == available.reason and time.monotonic() - t0 < 5
    cached = json.loads((paths.runtime / "qemu" / "accel.json").read_text())
    assert cached["verdicts"]


def test_boot_exec_and_channel(paths, image, run_id, available):
    p = make(paths, image)
    assert p.label() in ("qemu(tcg,2 vcpu)", "qemu(kvm,2 vcpu)")
    desc = p.describe()
    assert desc["accel_used"] in ("kvm", "tcg") and desc["version_drift"] == {}
    inst = p.create(image, "vm-boot", run_id)
    try:
        assert not ours(paths)  # create does not boot
        t0 = time.monotonic()
        p.start(inst)
        print(f"boot-to-ready {time.monotonic() - t0:.1f} s ({desc['accel_used']})")
        release = (image.rootfs / "etc/debian_version").read_text()
        assert p.exec(inst, ["cat", "/etc/debian_version"], timeout=60).stdout == release
        r = p.exec(inst, ["openssl", "speed", "-seconds", "1", "-evp", "aes-128-cbc", "-bytes", "1024"],
                   timeout=120)
        assert "AES-128-CBC" in r.stdout.upper()

        # a failing command: its status and stderr, raised with check, returned without
        r = p.exec(inst, ["sh", "-c", "echo partial; echo 'it broke' >&2; exit 7"], timeout=60, check=False)
        assert (r.returncode, r.stdout, r.stderr) == (7, "partial\n", "it broke\n")
        with pytest.raises(CommandError) as err:
            p.exec(inst, ["ls", "/nonexistent"], timeout=60)
        assert err.value.returncode == 2 and "nonexistent" in err.value.stderr

        # a timeout kills the command in the guest; the VM answers right after
        t0 = time.monotonic()
        with pytest.raises(CommandError) as err:
            p.exec(inst, ["sh", "-c", "sleep 60; echo never"], timeout=2, check=False)
        assert err.value.timed_out and time.monotonic() - t0 < 30
        assert p.exec(inst, ["pgrep", "-x", "sleep"], timeout=30, check=False).returncode == 1
        assert p.exec(inst, ["echo", "alive"], timeout=30).stdout == "alive\n"

        # binary output, byte exact; concurrent callers are serialized, none mixed up
        p.exec(inst, ["sh", "-c", "head -c 2000000 /dev/urandom >/var/tmp/blob"], timeout=60)
        digest = p.exec(inst, ["sha256sum", "/var/tmp/blob"], timeout=60).stdout.split()[0]
        status, blob, _ = guest.call(inst.data["agent"], ["cat", "/var/tmp/blob"], timeout=120)
        assert status == 0 and hashlib.sha256(blob).hexdigest() == digest
        results: dict[int, str] = {}

        def worker(i: int) -> None:
            results[i] = p.exec(inst, ["sh", "-c", f"echo {i}; sleep 0.$((RANDOM % 3))"], timeout=60).stdout

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == {i: f"{i}\n" for i in range(6)}

        t0 = time.monotonic()
        p.stop(inst)
        assert time.monotonic() - t0 < 30 and not ours(paths)
    finally:
        p.remove(inst)
        p.remove(inst)  # safe twice
    assert_clean(paths, inst.name)


def test_fio_on_virtio_scsi_with_bridge(paths, image, run_id, available):
    p = make(paths, image, disk_bus="virtio-scsi", cache="writeback", network="bridge", vcpus=1,
             memory="768MiB")
    inst = p.create(image, "vm-fio", run_id)
    listener = None
    try:
        p.start(inst)
        r = p.exec(inst, ["fio", "--name=t", "--directory=/var/tmp", "--size=16M", "--rw=randread",
                          "--bs=4k", "--direct=1", "--runtime=1", "--time_based",
                          "--output-format=json"], timeout=300)
        job = json.loads(r.stdout)["jobs"][0]
        assert job["read"]["iops"] > 0
        assert "sda" in p.exec(inst, ["cat", "/proc/partitions"], timeout=30).stdout  # virtio-scsi disk
        assert p.exec(inst, ["nproc"], timeout=30).stdout.strip() == "1"

        # the guest's eth0 is on the host bridge: it connects to a listener on the host's end
        address = inst.data["address"]
        assert f"inet {address}/24" in p.exec(inst, ["ip", "-4", "addr", "show", "eth0"], timeout=30).stdout
        listener = socket.socket()
        listener.bind((f"{bridge.SUBNET}.1", 0))
        listener.listen(1)
        listener.settimeout(60)
        port = listener.getsockname()[1]
        p.exec(inst, ["bash", "-c", f"echo hello-from-guest >/dev/tcp/{bridge.SUBNET}.1/{port}"], timeout=60)
        conn, peer = listener.accept()
        assert peer[0] == address and conn.recv(100) == b"hello-from-guest\n"
        conn.close()
        p.stop(inst)
    finally:
        if listener:
            listener.close()
        p.remove(inst)
    assert not Path(f"/sys/class/net/{inst.data['tap']}").exists()
    assert_clean(paths, inst.name)


@pytest.mark.parametrize("options, message", [
    ({"memory": "1TiB"}, "memory"),
    ({"cpu": "no-such-cpu"}, "CPU model"),
])
def test_start_failure_is_reported_and_leaves_nothing(paths, image, run_id, available, options, message):
    p = make(paths, image, **options)
    inst = p.create(image, "vm-bad", run_id)
    try:
        with pytest.raises(VirtbenchError) as err:
            p.start(inst)
        assert message in str(err.value) and "could not start" in str(err.value)
        assert err.value.fix
        assert not ours(paths)
    finally:
        p.stop(inst)
        p.remove(inst)
    assert_clean(paths, inst.name)


def test_cleanup_after_a_crash(paths, image, run_id, available):
    p = make(paths, image, vcpus=1, cpus=1.5)
    inst = p.create(image, "vm-crash", run_id)
    p.start(inst)
    pid = ours(paths)[0]
    cgroups = [c for c in Path("/sys/fs/cgroup").glob(f"**/virtbench/{inst.name}")]
    assert cgroups and all(str(pid) in (c / "cgroup.procs").read_text() for c in cgroups)
    other = Qemu.cleanup(paths, "t-some-other-run")  # another run's cleanup leaves this VM alone
    assert not other and ours(paths)
    # a command running when the VM dies returns at once, saying so
    running: dict = {}
    t = threading.Thread(target=lambda: running.update(
        r=p.exec(inst, ["sleep", "120"], timeout=300, check=False)))
    t.start()
    time.sleep(2)
    removed = Qemu.cleanup(paths, run_id)
    t.join(30)
    assert not t.is_alive()
    assert running["r"].returncode == guest.CLIENT_ERROR and "closed" in running["r"].stderr
    assert any("qemu process" in r for r in removed)
    assert not ours(paths)
    assert not any(c.exists() for c in cgroups)
    assert not (paths.instances / inst.name).exists()
    assert not Path(inst.data["sockdir"]).exists()
    assert Qemu.cleanup(paths, run_id) == []


def test_orphaned_qemu_is_found_by_its_label(paths, image, run_id, available):
    """A VM whose instance directory vanished (a crash mid-remove) is still found and killed."""
    p = make(paths, image, vcpus=1)
    inst = p.create(image, "vm-orphan", run_id)
    r = p.host.run(inst.data["argv"], timeout=120, detached_children=True)  # launched, not waited for
    assert r.ok and ours(paths)
    (paths.instances / inst.name / mounts.META).unlink()  # no longer recognisable by its files
    removed = Qemu.cleanup(paths, run_id)
    assert any("qemu process" in r for r in removed) and not ours(paths)
    p.remove(inst)
    assert_clean(paths, inst.name)

"""A reference host like the ones users have: an x86_64 QEMU guest booting **systemd as PID 1**
with the **unified cgroup v2** hierarchy, Docker on its default systemd cgroup driver, Podman
with the systemd cgroup manager, LXC, containerd, runc, crun and runsc from Debian bookworm,
and sshd. These machines are cgroup v1 hybrid without systemd and must never be converted, so
the reference host has to be a guest (REFERENCE.md section 4).

The image is built by virtbench's own builder, the disk by the QEMU platform's (vmdisk); this
module then derives a *reference disk* from it, cached next to it, that boots systemd instead
of virtbench's minimal init: a few files written with debugfs (the network unit, the sshd
drop-in with a host key made here, root's authorized key). Nothing else is changed: the units
the packages enabled (docker, containerd, ssh, lxc...) run as on a stock Debian server, and the
controllers delegated are systemd's defaults. The key pair and known_hosts line are cached with
the disk, so StrictHostKeyChecking=yes works from the first connection and a CI run builds the
whole thing once.

    with reference_host() as host:       # host.spec: a HostSpec for a campaign's `hosts:`
        host.ssh(["systemctl", "is-system-running"])
        host.boot_seconds                  # QEMU start to the first SSH answer
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hostsupport.qemu_host import HostSpec, QemuHost, _kvm_works, _stop, _tail, free_port
from virtbench import proc
from virtbench.images import vmdisk
from virtbench.images.build import BASE_PACKAGES, Recipe, build
from virtbench.platforms.qemu.argv import VMSpec, qemu_argv
from virtbench.platforms.qemu.options import QemuOptions
from virtbench.platforms.qemu.platform import QBOOT

REFERENCE_PACKAGES = (
    "systemd", "systemd-sysv", "dbus", "libpam-systemd", "apparmor", "openssh-server", "docker.io", "podman", "lxc",
    "containerd", "runc", "crun", "runsc", "uidmap", "fuse-overlayfs", "iproute2", "iptables", "kmod", "udev",
    "python3", "python3-venv", "openssl", "procps")
"""A stock Debian server with the distribution's container runtimes (runsc is gVisor's package),
plus Python with venv for virtbench's remote side. AppArmor's userspace as a stock install has it:
Debian's kernel enables AppArmor, and without apparmor_parser dockerd refuses every container."""
BOOT_TIMEOUT = 900.0
"""Seconds until sshd answers: systemd, dockerd and containerd starting under TCG on a loaded
2-core machine (docker alone can take minutes there)."""
FORMAT = 2
"""Bump when the files written into the reference disk change (2: the network unit renamed, off
virtbench's vb-* scope names)."""
OPT_OUT = "VIRTBENCH_TEST_REFHOST"

NETWORK_UNIT = """[Unit]
Description=eth0 on QEMU's user-mode network (virtbench reference host)
DefaultDependencies=no
Before=network.target network-online.target
Wants=network.target
After=sys-subsystem-net-devices-eth0.device
BindsTo=sys-subsystem-net-devices-eth0.device

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/sbin/ip link set lo up
ExecStart=/usr/sbin/ip link set eth0 up
ExecStart=/usr/sbin/ip addr replace 10.0.2.15/24 dev eth0
ExecStart=/usr/sbin/ip route replace default via 10.0.2.2

[Install]
WantedBy=network-online.target multi-user.target
"""
SSHD_DROPIN = """# virtbench reference host: a host key made by the test harness (known_hosts is exact)
HostKey /etc/ssh/vb_host_key
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
MaxSessions 64
MaxStartups 64
ClientAliveInterval 10
ClientAliveCountMax 6
"""


SSHD_STARTED = "Started ssh.service"
"""What systemd prints on the console (systemd.show_status=1) once sshd listens."""


def _until_console_says(log: Path, needle: str, until: float) -> None:
    """Wait until the guest's console log holds needle (it is read, not polled with a process),
    at most until `until`; at least half a second, so that a retry loop never spins."""
    time.sleep(0.5)
    while time.monotonic() < until and needle not in _tail(log, 10_000):
        time.sleep(0.2)


def reference_recipe() -> Recipe:
    packages = {*BASE_PACKAGES, *REFERENCE_PACKAGES, vmdisk.kernel_package("amd64")}
    return Recipe(release="bookworm", arch="amd64", profile="refhost", packages=tuple(sorted(packages)))


def skip_unless_affordable() -> None:
    """Skip (pytest) only where the guest cannot be made (no qemu-system-x86, mmdebstrap or
    e2fsprogs) or when VIRTBENCH_TEST_REFHOST=0 opts out. Otherwise it runs, in CI too: measured
    on these shared 2-core machines, the module took 8.5 and 11.4 min with the image cached (boot
    to SSH 30-68 s; shipping virtbench and the campaign's image and importing it into docker,
    podman and containerd 4-6 min, 12 min at load 6; measuring 2-4 min; the OOM campaign 1-2 min)
    and building the image adds 1-4 min: affordable, unlike an arm64 guest's 15-40 min
    cross-build."""
    import pytest

    from virtbench import proc

    if os.environ.get(OPT_OUT) == "0":
        pytest.skip(f"{OPT_OUT}=0: the reference host test is opted out")
    missing = [t for t in ("qemu-system-x86_64", "mmdebstrap", "debugfs", "qemu-img") if proc.which(t) is None]
    if missing:
        pytest.skip(f"the reference host guest needs {', '.join(missing)} (tools/install-debian-deps)")


def _debugfs_write(disk: Path, files: dict[str, tuple[bytes, int]], links: dict[str, str]) -> None:
    """Write files (guest path: (content, mode)) and symlinks (guest path: target) into an ext4
    image, root-owned, making missing directories."""
    with tempfile.TemporaryDirectory() as staging:
        commands: list[str] = []
        dirs = sorted({str(p) for g in (*files, *links) for p in Path(g).parents if str(p) != "/"})
        commands += [f"mkdir {d}" for d in dirs]  # errors for existing ones are harmless
        for i, (path, (content, mode)) in enumerate(files.items()):
            local = Path(staging) / f"f{i}"
            local.write_bytes(content)
            commands += [f"rm {path}", f"write {local} {path}", f"sif {path} mode 0{0o100000 | mode:o}",
                         f"sif {path} uid 0", f"sif {path} gid 0"]
        for path, target in links.items():
            commands += [f"rm {path}", f"symlink {path} {target}"]
        (Path(staging) / "cmds").write_text("\n".join(commands) + "\n")
        proc.run(["debugfs", "-w", "-f", str(Path(staging) / "cmds"), str(disk)], timeout=600)
    for path in files:
        out = proc.run(["debugfs", "-R", f"stat {path}", str(disk)], timeout=60).stdout
        if "Type: regular" not in out:
            raise RuntimeError(f"writing {path} into {disk} failed: {out[:200]}")


def reference_disk(log=print) -> tuple[vmdisk.VMDisk, Path]:
    """(the VM disk, the directory of the reference disk and its keys), built once and cached."""
    image = build(reference_recipe(), log=log)
    # Headroom for what the module leaves there, as a user's host keeps it: the images docker,
    # podman, containerd and lxc imported, the shipped images and their rootfs, virtbench. With 3
    # GiB (2026-11-28) the last test, the self-test, found 249 MiB free in one run and none in
    # another (its fio check failed). The disk is sparse: unused headroom costs nothing here.
    disk = vmdisk.build_disk(image, headroom=6 << 30, log=log)
    key = hashlib.sha256(json.dumps({"disk": disk.root.name, "format": FORMAT, "net": NETWORK_UNIT,
                                     "sshd": SSHD_DROPIN}).encode()).hexdigest()[:16]
    root = disk.root / f"refhost-{key}"
    if (root / "done").is_file():
        return disk, root
    with open(disk.root.parent / f".refhost-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / "done").is_file():
            return disk, root
        tmp = root.with_name(root.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        for name in ("host_key", "client_key"):
            proc.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"virtbench-refhost-{name}",
                      "-f", str(tmp / name)], timeout=30)
        proc.run(["cp", "--sparse=always", str(disk.disk), str(tmp / "disk.img")], timeout=600)
        (tmp / "disk.img").chmod(0o644)
        units = "/etc/systemd/system"
        _debugfs_write(tmp / "disk.img", {
            f"{units}/refhost-net.service": (NETWORK_UNIT.encode(), 0o644),
            "/etc/ssh/sshd_config.d/virtbench.conf": (SSHD_DROPIN.encode(), 0o644),
            "/etc/ssh/vb_host_key": ((tmp / "host_key").read_bytes(), 0o600),
            "/etc/ssh/vb_host_key.pub": ((tmp / "host_key.pub").read_bytes(), 0o644),
            "/root/.ssh/authorized_keys": ((tmp / "client_key.pub").read_bytes(), 0o600),
            "/etc/hostname": (b"vbref\n", 0o644),
            "/etc/hosts": (b"127.0.0.1\tlocalhost\n127.0.1.1\tvbref\n::1\tlocalhost ip6-localhost\n", 0o644),
        }, {
            f"{units}/multi-user.target.wants/refhost-net.service": f"{units}/refhost-net.service",
            f"{units}/network-online.target.wants/refhost-net.service": f"{units}/refhost-net.service",
        })
        proc.run(["e2fsck", "-n", "-f", str(tmp / "disk.img")], timeout=600)
        (tmp / "disk.img").chmod(0o444)
        (tmp / "done").write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ\n", time.gmtime()))
        tmp.rename(root)
        return disk, root


@contextmanager
def reference_host(*, memory: str = "3G", vcpus: int = 2, name: str = "refhost",
                   log=print) -> Iterator[QemuHost]:
    """Boot the reference host with sshd reachable on 127.0.0.1; stopped and removed on exit."""
    tag = uuid.uuid4().hex[:6]
    base = Path(f"/tmp/vb-refhost-{tag}")
    base.mkdir(parents=True)
    t0 = time.monotonic()
    disk, ref = reference_disk(log=log)
    t_disk = time.monotonic() - t0
    overlay = base / "overlay.qcow2"
    proc.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(ref / "disk.img"), str(overlay)],
             timeout=60)
    shutil.copyfile(ref / "client_key", base / "client_key")
    (base / "client_key").chmod(0o600)
    port = free_port()
    kind, pub = (ref / "host_key.pub").read_text().split()[:2]
    (base / "known_hosts").write_text(f"[127.0.0.1]:{port} {kind} {pub}\n")
    accel = "kvm" if os.access("/dev/kvm", os.R_OK | os.W_OK) and _kvm_works(disk.kernel) else "tcg"
    spec = VMSpec(name=f"vbref{tag}", run_id=f"refhost-{tag}", accel=accel,  # type: ignore[arg-type]
                  options=QemuOptions(memory=memory, vcpus=vcpus, network="user", cache="writeback"),
                  kernel=disk.kernel, initrd=disk.initrd, overlay=overlay, agent_socket=base / "agent.sock",
                  qmp_socket=base / "qmp.sock", pidfile=base / "qemu.pid", serial_log=base / "serial.log",
                  arch="x86_64", forwards=((port, 22),),
                  # the last init= wins: systemd as PID 1 instead of virtbench's minimal init
                  kernel_args=("init=/lib/systemd/systemd", "systemd.show_status=1"),
                  firmware=QBOOT if QBOOT.is_file() else None)
    host = QemuHost(arch="amd64", base=base, image=disk.image, accel=accel, agent_socket=spec.agent_socket,
                    qmp_socket=spec.qmp_socket, pidfile=spec.pidfile, serial_log=spec.serial_log,
                    spec=HostSpec(name=name, address="127.0.0.1", port=port, key=str(base / "client_key"),
                                  known_hosts=str(base / "known_hosts"), work_dir="/var/lib/virtbench-remote"))
    try:
        booted = time.monotonic()
        proc.run(qemu_argv(spec), timeout=60, detached_children=True)  # -daemonize: QEMU outlives the call
        deadline = booted + BOOT_TIMEOUT
        while host.ssh(["true"], timeout=60, check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the reference host's sshd did not answer within {BOOT_TIMEOUT:.0f} s\n"
                                   f"{_tail(spec.serial_log, 60)}")
            _until_console_says(spec.serial_log, SSHD_STARTED, min(deadline, time.monotonic() + 30))
        host.boot_seconds = time.monotonic() - booted
        host.timings = {"disk_s": round(t_disk, 1), "ssh_s": round(host.boot_seconds, 1)}
        yield host
    finally:
        _stop(host)

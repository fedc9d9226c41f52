"""A second host for tests: a QEMU guest of any architecture (x86_64, arm64, armhf) with sshd.

It is a whole other machine: its own kernel (Debian's, of that architecture), CPU (emulated
by TCG when it is not this machine's, or when KVM does not work), disk and address. The guest
is built by virtbench itself: the image builder (cross-building through qemu-user for another
architecture) and the VM disk of the QEMU platform (images/vmdisk.py), booted with the
platform's own command line (platforms/qemu/argv.py) and user-mode networking that forwards
a port on 127.0.0.1 to the guest's sshd, so traffic never leaves this machine. The guest's
host key is made here and written in through the VM's agent, so the known_hosts file is
exact (StrictHostKeyChecking=yes works from the first connection).

    with qemu_host("arm64") as host:      # host.spec is a HostSpec for a campaign's hosts:
        host.ssh(["uname", "-m"])         # -> aarch64
        host.boot_seconds                 # measured from QEMU's start to the first SSH answer
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from virtbench import proc
from virtbench.images import vmdisk
from virtbench.images.arch import host_arch
from virtbench.images.build import BASE_PACKAGES, DEFAULT_CACHE, Recipe, build
from virtbench.images.image import Image
from virtbench.images.profiles import profile_packages
from virtbench.platforms.qemu import guest
from virtbench.platforms.qemu.argv import DEB_TO_MACHINE, VMSpec, qemu_argv
from virtbench.platforms.qemu.options import QemuOptions
from virtbench.platforms.qemu.platform import QBOOT

try:  # the hosts engineer's model (#15); the same fields until it is on main
    from virtbench.remote.inventory import HostSpec
except ImportError:  # pragma: no cover - only before #15 landed
    @dataclass(frozen=True)
    class HostSpec:  # type: ignore[no-redef]
        name: str
        address: str = ""
        port: int = 22
        user: str = "root"
        key: str | None = None
        work_dir: str = "/var/lib/virtbench-remote"
        known_hosts: str | None = None

GUEST_PACKAGES = ("openssh-server", "python3", "python3-venv", "runc", "iproute2", "kmod", "udev")
"""What makes the guest a host virtbench can run on: sshd, Python with venv for virtbench's
remote side (installed into a virtual environment), runc as a container platform, and what
the guest's init uses."""
RECORD_TOOLS = ("p7zip", "botan", "mbw")
"""The studies' board tools beyond the quick suite (7-zip, Botan, mbw), so the outputs recorded
from this image under qemu-user cover them (tests/data/README.md)."""
GUEST_HEADROOM = 2 << 30
"""Free space on a test guest's disk (the VM disk is cached per image and headroom)."""
BOOT_TIMEOUT = {"amd64": 300.0, "arm64": 600.0, "armhf": 600.0}
"""Seconds until the agent answers: a TCG arm guest on a loaded 2-core host needs minutes."""


MIRRORS = {"armhf": ("deb http://deb.debian.org/debian {r} main", "deb http://deb.debian.org/debian {r}-updates main")}
"""Sources per architecture where the default fails: since 2026-11-23 the registry serves a
bookworm-security armhf Packages.xz of another size than its InRelease says ("Mirror sync in
progress?"), so the armhf test guest is built from the release and -updates only."""


def guest_recipe(arch: str, release: str = "bookworm", extra: Sequence[str] = ()) -> Recipe:
    """The test host's image: the quick suite's tools, RECORD_TOOLS, the kernel and GUEST_PACKAGES."""
    packages = {*BASE_PACKAGES, *profile_packages("quick"), *GUEST_PACKAGES, *RECORD_TOOLS,
                vmdisk.kernel_package(arch), *extra}
    return Recipe(release=release, arch=arch, profile="testhost", packages=tuple(sorted(packages)),
                  mirrors=tuple(m.format(r=release) for m in MIRRORS.get(arch, ())))


BOARD_PACKAGES = ("openssh-server", "openssl", "kmod", "udev")
"""The least a board needs to run one benchmark over SSH: sshd, openssl (the benchmark's tool),
and what the kernel's initrd uses to find the root disk (kmod, udev). No Python, no runc: the
smallest image a fresh machine cross-builds within CI's budget (test_arm_fresh.py)."""
BOARD_WITHOUT = ("ca-certificates",)
"""BASE_PACKAGES the board leaves out: nothing on it speaks TLS, and its maintainer scripts
(the trust store built twice, the postinst's per-certificate shell loops) were 160 s of the
emulated build (issue #39)."""


def board_recipe(arch: str, release: str = "bookworm") -> Recipe:
    """The minimal board image: BASE_PACKAGES but BOARD_WITHOUT, BOARD_PACKAGES and the kernel,
    whose initrd holds only what mounts the QEMU guest's root disk (vmdisk.VIRTIO_INITRD_MODULES:
    MODULES=most, 220 modules, was over a third of the emulated build)."""
    packages = {*BASE_PACKAGES, *BOARD_PACKAGES, vmdisk.kernel_package(arch)} - set(BOARD_WITHOUT)
    return Recipe(release=release, arch=arch, profile="board", packages=tuple(sorted(packages)),
                  mirrors=tuple(m.format(r=release) for m in MIRRORS.get(arch, ())),
                  initrd_modules=vmdisk.VIRTIO_INITRD_MODULES)


OPT_IN = "VIRTBENCH_TEST_ARM"


def skip_unless_affordable(arch: str, extra: Sequence[str] = ()) -> None:
    """Skip (pytest) a test that would first cross-build its guest image: under qemu-user that
    takes 15-40 minutes on 2 cores, beyond CI's budget. It runs when the image is cached
    already, or when VIRTBENCH_TEST_ARM=1 asks for the build. What a fresh machine runs
    instead, always: test_arm_fresh.py, on the smaller board_recipe image."""
    import pytest

    from virtbench.images.build import cached

    if arch != host_arch() and not os.environ.get(OPT_IN) and cached(guest_recipe(arch, extra=extra)) is None:
        pytest.skip(f"the {arch} test guest image is not built yet (a cross-build takes 15-40 min on 2 cores): "
                    f"set {OPT_IN}=1 to build it and run this test (test_arm_fresh.py checks a fresh arm64 board instead)")


def cli(env: dict[str, str], *args: str, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    """virtbench's CLI as a user runs it, in the test's isolated state (the `env` fixture)."""
    return subprocess.run([sys.executable, "-m", "virtbench", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


@dataclass
class CampaignRun:
    seconds: float
    stdout: str
    report: dict
    text: str


def run_campaign(env: dict[str, str], directory: Path, campaign: dict) -> CampaignRun:
    """`virtbench run` of this campaign (asserted to succeed), then its report as JSON and as text."""
    import json

    import yaml

    path = directory / "campaign.yaml"
    path.write_text(yaml.safe_dump(campaign))
    t0 = time.monotonic()
    res = cli(env, "run", str(path), "--no-report")
    seconds = time.monotonic() - t0
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return CampaignRun(seconds, res.stdout, json.loads(cli(env, "report", "latest", "--json").stdout),
                       cli(env, "report", "latest").stdout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class QemuHost:
    arch: str
    base: Path
    image: Image
    spec: HostSpec
    accel: str
    agent_socket: Path
    qmp_socket: Path
    pidfile: Path
    serial_log: Path
    boot_seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)

    def agent(self, argv: Sequence[str], stdin: bytes | None = None, timeout: float = 120.0) -> str:
        """A command in the guest through the VM's agent (root, no network needed)."""
        status, out, err = guest.call(str(self.agent_socket), list(argv), timeout=timeout, stdin=stdin)
        if status != 0:
            raise RuntimeError(f"guest command {list(argv)} exited {status}: {err.decode(errors='replace')}")
        return out.decode(errors="replace")

    def ssh_argv(self, argv: Sequence[str]) -> list[str]:
        s = self.spec
        return ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
                "-o", f"UserKnownHostsFile={s.known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
                "-o", "ConnectTimeout=20", "-o", "LogLevel=ERROR", "-i", str(s.key), "-o", "IdentitiesOnly=yes",
                "-p", str(s.port), "-l", s.user, s.address, "--", *argv]

    def ssh(self, argv: Sequence[str], timeout: float = 300.0, check: bool = True) -> proc.Result:
        """A command over real SSH (what virtbench's transport does, without its ControlMaster)."""
        return proc.run(self.ssh_argv(argv), timeout=timeout, check=check)


def _start_sshd(host: QemuHost) -> None:
    """Keys and sshd through the agent: the guest's own host key (made here, so known_hosts is
    exact), the client's public key as root's authorized key, and sshd on port 22."""
    b = host.base
    for key in ("host_key", "client_key"):
        proc.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"virtbench-qemu-{key}",
                  "-f", str(b / key)], timeout=30)
    # what a systemd host has mounted and the guest's minimal init does not: cgroups (runc), a hostname file
    host.agent(["sh", "-c", "mountpoint -q /sys/fs/cgroup || mount -t cgroup2 cgroup2 /sys/fs/cgroup; "
                "hostname > /etc/hostname"])
    host.agent(["mkdir", "-p", "-m", "700", "/root/.ssh"])
    host.agent(["mkdir", "-p", "/run/sshd"])
    host.agent(["dd", "of=/root/.ssh/authorized_keys", "status=none"], stdin=(b / "client_key.pub").read_bytes())
    host.agent(["dd", "of=/etc/ssh/vb_host_key", "status=none"], stdin=(b / "host_key").read_bytes())
    host.agent(["chmod", "600", "/etc/ssh/vb_host_key", "/root/.ssh/authorized_keys"])
    config = "\n".join(["Port 22", "HostKey /etc/ssh/vb_host_key", "PermitRootLogin prohibit-password",
                        "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
                        "MaxSessions 64", "MaxStartups 64", "ClientAliveInterval 10", "ClientAliveCountMax 6",
                        "Subsystem sftp internal-sftp", ""])
    host.agent(["dd", "of=/etc/ssh/vb_sshd_config", "status=none"], stdin=config.encode())
    host.agent(["/usr/sbin/sshd", "-f", "/etc/ssh/vb_sshd_config"])  # daemonizes: outlives the agent call
    kind, pub = (b / "host_key.pub").read_text().split()[:2]
    (b / "known_hosts").write_text(f"[127.0.0.1]:{host.spec.port} {kind} {pub}\n")


@contextmanager
def qemu_host(arch: str = "arm64", *, name: str | None = None, base: Path | None = None,
              memory: str = "1G", vcpus: int = 2, release: str = "bookworm",
              extra_packages: Sequence[str] = (), kernel_args: Sequence[str] = (),
              recipe: Recipe | None = None, cache: Path = DEFAULT_CACHE,
              log=print) -> Iterator[QemuHost]:
    """Boot a guest of `arch` with sshd reachable on 127.0.0.1; stopped and removed on exit.
    kernel_args: e.g. `cgroup_disable=memory`, to boot as Raspberry Pi OS boots a board.
    recipe: another image than guest_recipe's (board_recipe); cache: where it is built and kept."""
    tag = uuid.uuid4().hex[:6]
    base = base or Path(f"/tmp/vb-qemuhost-{tag}")
    base.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    image = build(recipe or guest_recipe(arch, release, extra_packages), cache, log=log)
    t_image = time.monotonic() - t0
    disk = vmdisk.build_disk(image, headroom=GUEST_HEADROOM, log=log)
    t_disk = time.monotonic() - t0 - t_image
    overlay = base / "overlay.qcow2"
    proc.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(disk.disk), str(overlay)], timeout=60)
    port = free_port()
    accel = "kvm" if arch == host_arch() and os.access("/dev/kvm", os.R_OK | os.W_OK) and _kvm_works(disk.kernel) \
        else "tcg"
    spec = VMSpec(name=name or f"vb{arch}{tag}", run_id=f"qemuhost-{tag}", accel=accel,  # type: ignore[arg-type]
                  options=QemuOptions(memory=memory, vcpus=vcpus, network="user", cache="writeback"),
                  kernel=disk.kernel, initrd=disk.initrd, overlay=overlay, agent_socket=base / "agent.sock",
                  qmp_socket=base / "qmp.sock", pidfile=base / "qemu.pid", serial_log=base / "serial.log",
                  arch=DEB_TO_MACHINE[arch], forwards=((port, 22),), kernel_args=tuple(kernel_args),
                  firmware=QBOOT if arch == "amd64" and QBOOT.is_file() else None)
    host = QemuHost(arch=arch, base=base, image=image, accel=accel, agent_socket=spec.agent_socket,
                    qmp_socket=spec.qmp_socket, pidfile=spec.pidfile, serial_log=spec.serial_log,
                    spec=HostSpec(name=name or f"qemu-{arch}", address="127.0.0.1", port=port,
                                  key=str(base / "client_key"), known_hosts=str(base / "known_hosts"),
                                  work_dir="/var/lib/virtbench-remote"))
    try:
        booted = time.monotonic()
        proc.run(qemu_argv(spec), timeout=60, detached_children=True)  # -daemonize: QEMU outlives the call
        try:
            host.agent(["true"], timeout=BOOT_TIMEOUT[arch])
        except Exception as exc:
            raise RuntimeError(f"the {arch} guest did not boot: {exc}\n{_tail(spec.serial_log)}") from exc
        t_agent = time.monotonic() - booted
        _start_sshd(host)
        deadline = time.monotonic() + 120
        while host.ssh(["true"], timeout=60, check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"sshd in the {arch} guest does not answer on 127.0.0.1:{port}")
            time.sleep(1)
        host.boot_seconds = time.monotonic() - booted
        host.timings = {"image_s": round(t_image, 1), "disk_s": round(t_disk, 1), "agent_s": round(t_agent, 1),
                        "ssh_s": round(host.boot_seconds, 1)}
        yield host
    finally:
        _stop(host)


def _kvm_works(kernel: Path) -> bool:
    """KVM boots this kernel here (the product's check): a firmware stub alone is not enough, a
    fresh machine of this workplace ran the stub under KVM while the guest's Linux hung silently."""
    from virtbench.platforms.base import Paths
    from virtbench.platforms.qemu.accel import accel_verdict

    return accel_verdict(Paths.from_env(), kernel).kvm


def _tail(path: Path, lines: int = 30) -> str:
    with suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


def _stop(host: QemuHost) -> None:
    """Power off (QMP quit), then make sure the QEMU process is gone, then remove the files."""
    with suppress(Exception):
        guest.qmp(str(host.qmp_socket), "quit", timeout=10)
    with suppress(OSError, ValueError):
        pid = int(host.pidfile.read_text().strip())
        for _ in range(50):
            os.kill(pid, 0)
            time.sleep(0.1)
        os.kill(pid, 9)
    proc.run(["rm", "-rf", str(host.base)], timeout=60, check=False)

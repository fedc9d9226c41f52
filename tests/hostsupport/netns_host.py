"""A second host for tests: a network namespace with its own address and its own sshd.

It shares this machine's filesystem, kernel and Docker daemon, so what makes it a separate
host for virtbench is what the SSH transport gives any host: its own address (a veth link),
its own host key (verified against a known_hosts file made here), its own login key, and its
own work directory (state, runtime dir, labels), so cleanup on one host never touches the
other's instances. Traffic stays between this machine and the namespace.

    with netns_host("a") as host:     # host.spec is a HostSpec for a campaign's hosts:
        ...
        host.kill_sshd()              # the host "dies": every SSH session to it breaks
        host.start_sshd()             # and comes back
"""
from __future__ import annotations

import os
import shutil
import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from virtbench import proc
from virtbench.remote.inventory import HostSpec

SSHD = "/usr/sbin/sshd"


class NetnsHost:
    """One namespace host; build it with the `netns_host` context manager."""

    def __init__(self, tag: str, base: Path, index: int) -> None:
        self.tag = tag
        self.ns = f"vbhosts{tag}"
        self.veth_host, self.veth_ns = f"vbhosts{tag}a", f"vbhosts{tag}b"
        self.host_ip, self.ns_ip = f"10.231.{index}.1", f"10.231.{index}.2"
        self.base = base
        self.sshd: proc.Background | None = None
        self.spec = HostSpec(name=f"ns{tag}", address=self.ns_ip, key=str(base / "client_key"),
                             known_hosts=str(base / "known_hosts"), work_dir=str(base / "work"))

    def build(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        (self.base / "work").mkdir(exist_ok=True)
        for argv in (["ip", "netns", "add", self.ns],
                     ["ip", "link", "add", self.veth_host, "type", "veth", "peer", "name", self.veth_ns],
                     ["ip", "link", "set", self.veth_ns, "netns", self.ns],
                     ["ip", "addr", "add", f"{self.host_ip}/24", "dev", self.veth_host],
                     ["ip", "link", "set", self.veth_host, "up"],
                     ["ip", "-n", self.ns, "addr", "add", f"{self.ns_ip}/24", "dev", self.veth_ns],
                     ["ip", "-n", self.ns, "link", "set", self.veth_ns, "up"],
                     ["ip", "-n", self.ns, "link", "set", "lo", "up"]):
            proc.run(argv, timeout=30)
        for key in ("host_key", "client_key"):
            for old in (self.base / key, self.base / f"{key}.pub"):  # a previous test's keys
                old.unlink(missing_ok=True)
            proc.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"virtbench-test-{key}",
                      "-f", str(self.base / key)], timeout=30)
        (self.base / "authorized_keys").write_text((self.base / "client_key.pub").read_text())
        host_pub = (self.base / "host_key.pub").read_text().split()
        (self.base / "known_hosts").write_text(f"{self.ns_ip} {host_pub[0]} {host_pub[1]}\n")
        (self.base / "sshd_config").write_text("\n".join([
            f"ListenAddress {self.ns_ip}", "Port 22", f"HostKey {self.base / 'host_key'}",
            f"PidFile {self.base / 'sshd.pid'}", f"AuthorizedKeysFile {self.base / 'authorized_keys'}",
            "PermitRootLogin prohibit-password", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "UsePAM no", "StrictModes no", "MaxSessions 64", "MaxStartups 64", "ClientAliveInterval 5",
            "ClientAliveCountMax 3", "Subsystem sftp /usr/lib/openssh/sftp-server", "", ""]))
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
        self.start_sshd()

    def start_sshd(self) -> None:
        # nsenter --net (not `ip netns exec`, which remounts /sys and hides the cgroup mounts that
        # runtimes need): only the network is the namespace's, the rest is this machine's.
        self.sshd = proc.spawn(["nsenter", f"--net=/run/netns/{self.ns}", SSHD, "-D", "-e",
                                "-f", str(self.base / "sshd_config")])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            res = proc.run(["ip", "netns", "exec", self.ns, "ss", "-H", "-l", "-n", "-t", "sport", "=", ":22"],
                           timeout=10, check=False)
            if res.stdout.strip():
                return
            if not self.sshd.alive():
                break
            time.sleep(0.05)
        out = self.sshd.stop()
        raise RuntimeError(f"sshd in {self.ns} did not start: {out.stdout}{out.stderr}")

    def kill_sshd(self) -> None:
        """The host dies for SSH: the listening sshd and every session's sshd are killed."""
        for pid in self.pids("sshd"):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.sshd is not None:
            self.sshd.stop()
            self.sshd = None

    def pids(self, name: str | None = None) -> list[int]:
        """Processes in the namespace (optionally only those of one program)."""
        res = proc.run(["ip", "netns", "pids", self.ns], timeout=10, check=False)
        out = []
        for word in res.stdout.split():
            try:
                comm = Path(f"/proc/{word}/comm").read_text().strip()
            except OSError:
                continue
            if name is None or comm == name:
                out.append(int(word))
        return out

    def destroy(self) -> None:
        self.kill_sshd()
        for pid in self.pids():  # anything the remote side left (there should be nothing)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.run(["ip", "netns", "delete", self.ns], timeout=30, check=False)
        proc.run(["ip", "link", "delete", self.veth_host], timeout=30, check=False)


SUBNET_LOCKS = Path("/run/virtbench-test/netns-subnets")
"""One lock file per 10.231.N.0/24 in use: tests on several workers (and other engineers' runs)
build namespace hosts at once, and two on one subnet would take each other's routes."""


@contextmanager
def _subnet(index: int | None) -> Iterator[int]:
    """A subnet index (1-250) no other namespace host of this machine holds, held until exit."""
    import fcntl

    SUBNET_LOCKS.mkdir(parents=True, exist_ok=True)
    start = int(uuid.uuid4().hex[:4], 16) % 250
    for i in [index] if index is not None else [1 + (start + k) % 250 for k in range(250)]:
        fd = os.open(SUBNET_LOCKS / str(i), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if index is not None else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield i
        finally:
            os.close(fd)
        return
    raise RuntimeError(f"every namespace host subnet 10.231.1-250.0/24 is in use ({SUBNET_LOCKS})")


@contextmanager
def netns_host(tag: str | None = None, base: Path | None = None, index: int | None = None) -> Iterator[NetnsHost]:
    """A namespace host named `vbhosts<tag>` (unique per call by default), removed afterwards."""
    tag = tag or uuid.uuid4().hex[:4]
    owned = base is None  # a directory made here goes with the host (its work dir holds ~1 GB once supplied)
    base = base or Path("/var/lib/virtbench-test") / f"hosts-{tag}"
    with _subnet(index) as i:
        host = NetnsHost(tag, base, i)
        try:
            host.build()
            yield host
        finally:
            host.destroy()
            if owned:
                from virtbench.images.build import mounts_using

                if not mounts_using(base):
                    shutil.rmtree(base, ignore_errors=True)

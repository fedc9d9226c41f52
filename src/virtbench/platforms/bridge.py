"""The vbbr0 bridge the chroot/OCI/LXC/QEMU instances share, and its address leases.

Host-wide (not per run): runs with different state dirs share one bridge and one lease
directory, so two runs never hand out the same address. A lease keeps the bridge: it is
removed only when no address is leased and nothing is attached, and claiming a lease (which
makes sure the bridge is there) and removing the bridge hold one host-wide lock, so one run's
cleanup never deletes the bridge another run is attaching an instance to.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .. import proc
from ..errors import VirtbenchError
from . import iptables
from .iptables import BRIDGE

SUBNET = "10.237.0"
"""Host end .1 (the instances' default route, so they reach the host); instances .2-.254.
No NAT: traffic stays on this host."""
GATEWAY = f"{SUBNET}.1"


def mac_for(address: str) -> str:
    """The instance's MAC on vbbr0, derived from its address (locally administered, 02:76 = "v").

    Addresses are reused as soon as an instance is removed, and a peer keeps its ARP entry
    for the old holder for a while: with a random MAC per instance, the next server on the
    same address never sees the client's SYNs (sent to the gone instance's MAC) and the
    benchmark hangs. Docker derives its MACs from the IP for the same reason."""
    return "02:76:" + ":".join(f"{int(octet):02x}" for octet in address.split("."))


def veth_name(instance: str) -> str:
    """Interface names are at most 15 bytes, so hash the instance name."""
    return "vb" + hashlib.sha1(instance.encode()).hexdigest()[:10]


def ensure_bridge() -> None:
    if Path(f"/sys/class/net/{BRIDGE}").exists():
        return
    r = proc.run(["ip", "link", "add", BRIDGE, "type", "bridge"], timeout=30, check=False)
    if not r.ok and "exists" not in r.stderr:
        raise VirtbenchError(f"cannot create bridge {BRIDGE}: {r.stderr.strip()}")
    proc.run(["ip", "addr", "replace", f"{SUBNET}.1/24", "dev", BRIDGE], timeout=30)
    proc.run(["ip", "link", "set", BRIDGE, "up"], timeout=30)
    iptables.allow_forwarding()


LEASES = Path("/run/virtbench-net/leases")
"""Host-wide like the bridge itself: runs with different state dirs must not share an address."""
LOCK = Path("/run/virtbench-net.lock")
"""Held while a lease is claimed (and the bridge made sure of) or the bridge removed."""


@contextmanager
def _locked() -> Iterator[None]:
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _owner(runtime: Path, instance: str) -> str:
    return f"{runtime}\n{instance}"


def allocate_address(runtime: Path, instance: str) -> str:
    """Claim a free address atomically (one file per address, O_EXCL), with the bridge there:
    from here on the lease keeps it (remove_bridge_if_unused)."""
    with _locked():
        for host in range(2, 255):
            try:
                LEASES.mkdir(parents=True, exist_ok=True)
                fd = os.open(LEASES / f"{SUBNET}.{host}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue
            with os.fdopen(fd, "w") as f:
                f.write(_owner(runtime, instance))
            ensure_bridge()  # a cleanup may have removed it since the caller made sure of it
            return f"{SUBNET}.{host}"
    raise VirtbenchError(f"no free address left on {BRIDGE} ({SUBNET}.0/24)", "run virtbench cleanup")


def release_addresses(runtime: Path, instance: str) -> list[str]:
    released = []
    for lease in sorted(LEASES.iterdir()) if LEASES.is_dir() else []:
        try:
            if lease.read_text() == _owner(runtime, instance):
                lease.unlink()
                released.append(lease.name)
        except OSError:
            pass
    return released


def remove_bridge_if_unused() -> list[str]:
    """Delete vbbr0 once no interface is attached and no address is leased by any run."""
    brif = Path(f"/sys/class/net/{BRIDGE}/brif")
    if not brif.is_dir():
        return []
    with _locked():  # no lease claimed between the look and the delete
        if not brif.is_dir() or any(brif.iterdir()) or (LEASES.is_dir() and any(LEASES.iterdir())):
            return []
        if not delete_link(BRIDGE):
            return []
        iptables.drop_forwarding()
        for d in (LEASES, LEASES.parent):
            try:
                d.rmdir()
            except OSError:
                pass
    return [f"bridge {BRIDGE}"]


def delete_link(name: str) -> bool:
    if not Path(f"/sys/class/net/{name}").exists():
        return False
    return proc.run(["ip", "link", "del", name], timeout=30, check=False).ok

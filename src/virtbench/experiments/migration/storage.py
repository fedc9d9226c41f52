"""What storage is under a path, and how fast it is raw: named with every migration result.

The study (seeds/000) found storage and network bandwidth to bound migration time; a user
can only tell which bounded a result when both ends' storage is named (filesystem, block
device, rotational or not, a loop device's backing file) and its raw sequential throughput
is measured with the same dd the `dd` benchmark runs (O_DIRECT, so the page cache does not
flatter it).
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ... import proc
from ...benchmarks.dd import Dd, DdParams
from ...errors import InputError
from ...hostinfo import free_bytes


@dataclass(frozen=True)
class StorageFacts:
    """One end of a migration: the filesystem and device under a path."""

    path: str
    mountpoint: str
    filesystem: str
    device: str
    rotational: bool | None
    backing: str = ""
    """For a loop device: its backing file (and that file's own device in `backing_device`)."""
    backing_device: str = ""
    free_bytes: int = 0
    write_MBps: float | None = None
    read_MBps: float | None = None
    throughput_error: str = ""
    transport: str = ""
    """How the disk is attached (lsblk's TRAN: usb, nvme, sata, ...; '' when the kernel does not say):
    study 000 compared SATA over USB 2.0 and 3.0 with NVMe on PCIe."""

    @property
    def kind(self) -> str:
        """Short name for figure series and table columns, e.g. 'xfs on loop0 (ssd)', 'ext4 on sda (ssd, usb)'."""
        medium = {True: "rot", False: "ssd", None: "?"}[self.rotational]
        dev = Path(self.device).name if self.device.startswith("/dev/") else self.device
        return f"{self.filesystem} on {dev} ({medium}{', ' + self.transport if self.transport else ''})"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kind": self.kind}


def _sys_block(device: str) -> Path | None:
    """/sys/block/<disk> of a device node (partitions map to their disk)."""
    name = Path(os.path.realpath(device)).name
    if (Path("/sys/block") / name).is_dir():
        return Path("/sys/block") / name
    part = Path("/sys/class/block") / name
    if part.exists() and (part / "partition").exists():
        return Path(os.path.realpath(part)).parent
    return None


def rotational(device: str) -> bool | None:
    block = _sys_block(device)
    try:
        return (block / "queue" / "rotational").read_text().strip() == "1" if block else None
    except OSError:
        return None


def loop_backing(device: str) -> str:
    block = _sys_block(device)
    try:
        return (block / "loop" / "backing_file").read_text().strip() if block else ""
    except OSError:
        return ""


def transport(device: str) -> str:
    """lsblk's transport of the disk under a device node (a partition's disk's), '' if unknown."""
    block = _sys_block(device)
    if block is None:
        return ""
    r = proc.run(["lsblk", "-dno", "TRAN", f"/dev/{block.name}"], timeout=30, check=False)
    return r.stdout.strip() if r.ok else ""


def mount_of(path: Path) -> tuple[str, str, str]:
    """(source device, filesystem type, mount point) of the filesystem holding path."""
    r = proc.run(["findmnt", "-n", "-o", "SOURCE,FSTYPE,TARGET", "-T", str(path)], timeout=30)
    fields = r.stdout.split()
    if len(fields) < 3:
        raise InputError(f"cannot tell the filesystem under {path}: findmnt said {r.stdout.strip()!r}")
    return fields[0], fields[1], " ".join(fields[2:])


def facts(path: Path) -> StorageFacts:
    """Name the storage under an existing directory (no measurement)."""
    device, fstype, mountpoint = mount_of(path)
    backing = loop_backing(device) if "/loop" in device else ""
    backing_device = ""
    rota = rotational(device)
    if backing:
        bdev, _, _ = mount_of(Path(backing))
        backing_device = bdev
        rota = rotational(bdev)  # a loop device reports 0; its backing disk is what spins
    return StorageFacts(path=str(path), mountpoint=mountpoint, filesystem=fstype, device=device,
                        rotational=rota, backing=backing, backing_device=backing_device,
                        free_bytes=free_bytes(path), transport=transport(backing_device or device))


def measure(path: Path, size_mib: int = 64) -> StorageFacts:
    """facts() plus raw sequential O_DIRECT write and read throughput (dd, bs=1M) in path.

    A failing dd (no O_DIRECT on tmpfs, no space) is kept as its error text, never a zero."""
    found = facts(path)
    bench = Dd(DdParams(bs="1M", count=size_mib))
    with tempfile.TemporaryDirectory(prefix=".vb-dd-", dir=path) as work:
        r = proc.run(bench.command(work), timeout=bench.execution_timeout(), check=False)
    try:
        if not r.ok:
            raise RuntimeError(f"dd exit {r.returncode}: {(r.stdout + r.stderr).strip()[-300:]}")
        rates = bench.parse(r.stdout, r.stderr, source=f"dd in {path}")
    except Exception as exc:  # noqa: BLE001 - recorded with the facts, the migration still runs
        return StorageFacts(**{**asdict(found), "throughput_error": str(exc)})
    return StorageFacts(**{**asdict(found), "write_MBps": rates["write_MBps"], "read_MBps": rates["read_MBps"]})


def tree_bytes(path: Path) -> int:
    """Size of every regular file under path (what a copy moves), links not followed: a sparse
    file's allocated blocks only (a container's 2 GB volume holding 300 MB), as cp and tar
    --sparse copy it."""
    total = 0
    if path.is_file() and not path.is_symlink():
        st = path.stat()
        return min(st.st_size, st.st_blocks * 512)
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(root, f))
            except OSError:
                continue
            if not os.path.islink(os.path.join(root, f)):
                total += min(st.st_size, st.st_blocks * 512)
    return total

"""Offline migration of N instances at once, as the study (seeds/000) timed it on Proxmox:
stop them all, move each one's storage to the destination, start them all there.

Phases are timed over all instances (until the last one is done): `stop`, `transfer` (copy
made durable, and the instance pointed at its copy), `start` (until every instance runs a
command), and `total`; offline, the instances are down from the first stop to the last start,
so `downtime` equals `total`. The source copies are deleted after the start (a move), and the
destination copies are recorded before they are written, so nothing outlives the experiment,
a failure or a crash (`Leftovers`, `virtbench cleanup`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from ...platforms import mounts
from ...platforms.base import Instance, Platform
from . import fleet
from .transport import Leftovers, Transport

PAYLOAD_PATH = "/var/tmp/virtbench/vb-migration-payload"
"""Where an instance's payload is written: in its own storage on every platform (the
writable layer, native's scratch directory, a VM's disk)."""


@dataclass
class Migration:
    """One migration of `count` instances: phase times in seconds, bytes moved."""

    count: int
    phases: dict[str, float]
    bytes_moved: int
    each: dict[str, list[float]] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    @property
    def throughput_MBps(self) -> float:
        """Bytes moved over the transfer phase, MB = 10^6 bytes (as dd and the study)."""
        seconds = self.phases.get("transfer", 0.0)
        return self.bytes_moved / seconds / 1e6 if seconds > 0 else 0.0


def write_payload(platform: Platform, instance: Instance, mib: int) -> None:
    """Give the instance `mib` MiB of its own data (random, so nothing compresses it away)."""
    if mib <= 0:
        return
    platform.exec(instance, ["mkdir", "-p", str(Path(PAYLOAD_PATH).parent)], timeout=60)
    # oflag=nocache drops the written pages from the page cache (this file only), so the move
    # reads the payload from storage, as it would after the instance ran for a while
    platform.exec(instance, ["dd", "if=/dev/urandom", f"of={PAYLOAD_PATH}", "bs=1M", f"count={mib}",
                             "conv=fsync", "oflag=nocache", "status=none"], timeout=60 + mib)


def migrate(platform: Platform, instances: list[Instance], transport: Transport, leftovers: Leftovers,
            *, image_rootfs: Path | None = None) -> Migration:
    """Stop, move, start `instances` (all running, all of `platform`); see the module doc.

    image_rootfs: also copy the image per instance, as moving a full container volume does
    (Proxmox migrates the whole rootfs); None moves only what the instance itself wrote."""
    log: list[str] = []
    t0 = time.perf_counter()
    stop = fleet.at_once("stop", instances, platform.stop)

    def move(instance: Instance) -> tuple[int, dict[str, Path]]:
        sources = platform.storage(instance)
        dest = transport.root / instance.name
        leftovers.add(dest)
        moved, size = {}, 0
        for role, src in sources.items():
            size += transport.copy(src, dest / role)
            moved[role] = dest / role
        if image_rootfs is not None:
            size += transport.copy(image_rootfs, dest / "lower")
            moved["lower"] = dest / "lower"
        platform.relocate(instance, moved)
        return size, sources

    transfer = fleet.at_once("transfer", instances, move)
    start = fleet.at_once("start", instances, platform.start)
    total = time.perf_counter() - t0
    moved_bytes = 0
    for instance, result in zip(instances, transfer.results):
        size, sources = cast(tuple[int, dict[str, Path]], result)
        moved_bytes += size
        for role, src in sources.items():
            if src.is_file():  # the move's second half: the source copy goes
                src.unlink()
            else:
                mounts.safe_rmtree(src)
            log.append(f"{instance.name}: {role} {src} -> {transport.root / instance.name / role} ({size} B)")
    phases = {"stop": stop.seconds, "transfer": transfer.seconds, "start": start.seconds,
              "total": total, "downtime": total}
    return Migration(count=len(instances), phases=phases, bytes_moved=moved_bytes,
                     each={"stop": stop.each, "transfer": transfer.each, "start": start.each}, log=log)

"""The block device an I/O throttle applies to: the whole disk under a directory.

cgroup I/O throttles (v1 `blkio.throttle.*_device`, v2 `io.max`) are set per block device by
major:minor, and the kernel takes them only for a whole disk (or a device-mapper/md device),
not for a partition. A directory's st_dev names the filesystem's device, which may be a
partition (map it to its disk through sysfs) or an anonymous device (btrfs subvolumes,
overlayfs, tmpfs: major 0), which no throttle can name.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import UnavailableError

SYS_DEV_BLOCK = Path("/sys/dev/block")


def whole_disk(path: Path, sys_dev_block: Path = SYS_DEV_BLOCK) -> tuple[int, int]:
    """(major, minor) of the disk holding `path` (its nearest existing parent if it is not there yet)."""
    here = Path(path)
    while not here.exists() and here != here.parent:
        here = here.parent
    dev = os.stat(here).st_dev
    major, minor = os.major(dev), os.minor(dev)
    node = sys_dev_block / f"{major}:{minor}"
    if major == 0 or not node.exists():
        raise UnavailableError(f"{path} is on a filesystem without a block device of its own "
                               f"(device {major}:{minor}: tmpfs, overlayfs or btrfs); no I/O throttle can name it",
                               "put the state directory (VIRTBENCH_STATE_DIR) on a disk filesystem such as ext4 or xfs")
    if (node / "partition").exists():  # a partition: the throttle goes on its disk
        disk = Path(os.path.realpath(node)).parent
        major, minor = (int(x) for x in (disk / "dev").read_text().split(":"))
    return major, minor

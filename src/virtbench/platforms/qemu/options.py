"""A QEMU VM's options: its own module so argv building and the platform both import it
(argv.py used to import it back from the platform module, an import cycle)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from ..base import PlatformOptions, Size

MiB = 1 << 20


class QemuOptions(PlatformOptions):
    """A VM's shape. cpus/cpuset limit the QEMU process on the host (all vCPU threads)."""

    memory: Size = Field(1 << 30, description="guest RAM (default 1G)")
    network: Literal["none", "user", "bridge"] = Field(  # type: ignore[assignment]  # a VM has no "host" mode
        "none", description="none: no NIC (the agent uses virtio-serial); user: QEMU user-mode "
                            "NAT, restricted to the host; bridge: tap on the host bridge vbbr0")
    vcpus: int = Field(2, ge=1, le=512, description="virtual CPUs")
    cpu: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.,=+-]*$",
                            description="CPU model (default: host under KVM, max under TCG)")
    accel: Literal["auto", "kvm", "tcg"] = Field(
        "auto", description="auto: KVM if a test guest boots under it, else TCG emulation")
    cache: Literal["none", "writeback", "writethrough", "unsafe", "directsync"] = Field(
        "none", description="host page cache for the disk; none and directsync use O_DIRECT "
                            "(the host filesystem must support it, tmpfs does not)")
    aio: Literal["threads", "native", "io_uring"] = Field(
        "threads", description="QEMU's disk I/O backend (native needs cache none or directsync)")
    disk_bus: Literal["virtio-blk", "virtio-scsi"] = "virtio-blk"
    machine: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.=-]*$",
                                description="machine type (default q35 on x86, virt on arm64)")
    disk_headroom: Size = Field(4 << 30,
                                    description="free space on the guest's root disk (sparse)")
    boot_timeout: float = Field(300.0, gt=0, le=3600, description="seconds until the agent answers")

    @field_validator("memory")
    @classmethod
    def _vm_memory(cls, v: int) -> int:
        if v < 128 * MiB:
            raise ValueError("a VM needs at least 128M of memory to boot the Debian kernel")
        return v

    @model_validator(mode="after")
    def _aio(self) -> QemuOptions:
        if self.aio == "native" and self.cache not in ("none", "directsync"):
            raise ValueError("aio=native needs cache=none or cache=directsync (O_DIRECT)")
        return self

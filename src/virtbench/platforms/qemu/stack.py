"""What a qemu VM needs to host other platforms (a stack: docker inside the VM).

The VM image then also holds the inner runtimes' Debian packages, and the VM disk carries the
shared image's archive at vmdisk.GUEST_IMAGE_DIR, so the inner runtime imports the very
bytes every other platform runs (see images/vmdisk.py). Until the runner gives an inner
platform an executor inside a VM, its commands have nowhere to run: executor.Outside refuses them,
so nothing (a provenance query, say) silently asks the host's runtime instead.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import InputError
from ...images import vmdisk
from ...images.image import Image
from ...registry import PLATFORMS

if TYPE_CHECKING:
    from ..base import Platform

def supported() -> list[str]:
    """Platform types a qemu VM can host (Platform.runs_inside): their packages are installed in
    the VM image and their engine is started in each VM (ensure_engine_in)."""
    return sorted(name for name, cls in PLATFORMS.items() if cls.runs_inside)


def check_inner(outer_name: str, inner: Platform) -> None:
    if not inner.runs_inside:
        names = ", ".join(supported())
        raise InputError(f"{outer_name} (qemu) cannot host {inner.name} ({inner.type}): inside a VM "
                         f"virtbench runs {names}",
                         f"use one of {names} with `inside: {outer_name}`, or run {inner.name} on the host")
    if not inner.packages:
        raise InputError(f"{inner.name} ({inner.type}) names no Debian packages to install in the VM image")


def inner_packages(inner: dict[str, Platform]) -> tuple[str, ...]:
    """The Debian packages the VM image needs for these inner platforms."""
    return tuple(sorted({p for platform in inner.values() for p in platform.packages}))


def guest_image(image: Image) -> Image:
    """The shared image as a VM hosting inner platforms carries it (same bytes, guest path)."""
    return replace(image, root=Path(vmdisk.GUEST_IMAGE_DIR))

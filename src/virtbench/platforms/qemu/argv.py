"""The QEMU command line, kept apart from the platform as pure functions of a VMSpec.

Nothing here touches the host: the exact argv a VM starts with is decided (and tested, see
tests/unit/test_qemu_argv.py) without QEMU, KVM or a disk, and the accelerator check
(accel.py) shares the architecture table without importing the platform.
"""
from __future__ import annotations

import hashlib
import platform as pyplatform
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ...errors import InputError
from ...images import vmdisk
from .. import bridge
from ..base import LABEL
from . import guest
from .options import MiB, QemuOptions

ARCHES = {
    # machine: (QEMU binary, Debian package, console, default machine type)
    "x86_64": ("qemu-system-x86_64", "qemu-system-x86", "ttyS0", "q35"),
    "aarch64": ("qemu-system-aarch64", "qemu-system-arm", "ttyAMA0", "virt"),
    "armv7l": ("qemu-system-arm", "qemu-system-arm", "ttyAMA0", "virt"),
}
DEB_TO_MACHINE = {"amd64": "x86_64", "arm64": "aarch64", "armhf": "armv7l"}
"""Debian architecture of an image -> the machine (ARCHES key) that boots it."""
HOST_ARCH = pyplatform.machine()
FW_CFG_LABEL = "opt/" + LABEL


@dataclass(frozen=True)
class VMSpec:
    name: str
    run_id: str
    accel: Literal["kvm", "tcg"]
    options: QemuOptions
    kernel: Path
    initrd: Path
    overlay: Path
    agent_socket: Path
    qmp_socket: Path
    pidfile: Path
    serial_log: Path
    arch: str = HOST_ARCH
    tap: str | None = None
    address: str | None = None
    """ADDRESS/PREFIX of the guest on the host bridge (network=bridge)."""
    firmware: Path | None = None
    kernel_args: tuple[str, ...] = ()
    """Appended to the kernel command line (a test host booted as a board boots: cgroup_disable=memory)."""
    forwards: tuple[tuple[int, int], ...] = ()
    """(host port on 127.0.0.1, guest port) TCP forwards of user networking (a test host's sshd)."""


def cpu_model(options: QemuOptions, accel: str) -> str:
    return options.cpu or ("host" if accel == "kvm" else "max")


def mac_address(name: str) -> str:
    h = hashlib.sha1(name.encode()).digest()
    return "52:54:00:" + ":".join(f"{b:02x}" for b in h[:3])


def kernel_cmdline(spec: VMSpec) -> str:
    console = ARCHES[spec.arch][2]
    net = {"none": "none", "user": "user"}.get(spec.options.network, spec.address or "none")
    return (f"console={console} root=LABEL={vmdisk.DISK_LABEL} rootfstype=ext4 rw "
            f"init={vmdisk.INIT_PATH} panic=-1 quiet fsck.mode=skip net.ifnames=0 "
            f"vb.hostname={spec.name} vb.net={net} vb.port={guest.PORT_NAME} vb.accel={spec.accel}"
            + "".join(f" {a}" for a in spec.kernel_args))


def qemu_argv(spec: VMSpec) -> list[str]:
    """The full command that starts (and daemonizes) the VM."""
    o = spec.options
    binary, _pkg, _console, default_machine = ARCHES[spec.arch]
    for p in (spec.overlay, spec.agent_socket, spec.qmp_socket, spec.pidfile, spec.serial_log,
              spec.kernel, spec.initrd):
        if "," in str(p):
            raise InputError(f"path {p} contains ',', which QEMU options cannot hold",
                             "use state, runtime and cache directories without commas")
    machine = o.machine or default_machine
    if spec.arch == "aarch64" and machine == "virt":
        machine += ",gic-version=" + ("host" if spec.accel == "kvm" else "max")
    accel = "kvm" if spec.accel == "kvm" else "tcg,thread=multi"
    argv = []
    if o.cpuset is not None:
        argv += ["taskset", "-c", o.cpuset]
    argv += [binary, "-name", spec.name, "-machine", machine, "-accel", accel,
             "-cpu", cpu_model(o, spec.accel), "-smp", str(o.vcpus), "-m", f"{int(o.memory) // MiB}M",
             "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot"]
    if spec.firmware is not None:
        argv += ["-bios", str(spec.firmware)]
    argv += ["-kernel", str(spec.kernel), "-initrd", str(spec.initrd), "-append", kernel_cmdline(spec)]
    argv += ["-drive", f"file={spec.overlay},format=qcow2,if=none,id=vbdisk,cache={o.cache},aio={o.aio}"]
    if o.disk_bus == "virtio-blk":
        argv += ["-device", "virtio-blk-pci,drive=vbdisk"]
    else:
        argv += ["-device", "virtio-scsi-pci,id=vbscsi", "-device", "scsi-hd,drive=vbdisk,bus=vbscsi.0"]
    argv += ["-device", "virtio-serial-pci,id=vbserial",
             "-chardev", f"socket,id=vbagent,path={spec.agent_socket},server=on,wait=off",
             "-device", f"virtserialport,bus=vbserial.0,chardev=vbagent,name={guest.PORT_NAME}",
             "-device", "virtio-rng-pci"]
    # on the shared bridge the MAC follows the (reused) address, see bridge.mac_for
    mac = bridge.mac_for(spec.address.split("/")[0]) if spec.address else mac_address(spec.name)
    if o.network == "user":
        fwd = "".join(f",hostfwd=tcp:127.0.0.1:{h}-:{g}" for h, g in spec.forwards)
        argv += ["-netdev", f"user,id=vbnet,restrict=on{fwd}", "-device", f"virtio-net-pci,netdev=vbnet,mac={mac}"]
    elif o.network == "bridge":
        if not spec.tap:
            raise ValueError("network=bridge needs a tap device")
        argv += ["-netdev", f"tap,id=vbnet,ifname={spec.tap},script=no,downscript=no",
                 "-device", f"virtio-net-pci,netdev=vbnet,mac={mac}"]
    argv += ["-qmp", f"unix:{spec.qmp_socket},server=on,wait=off",
             "-serial", f"file:{spec.serial_log}",
             "-fw_cfg", f"name={FW_CFG_LABEL},string={spec.run_id}",
             "-pidfile", str(spec.pidfile), "-daemonize"]
    return argv

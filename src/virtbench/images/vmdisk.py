"""Turn the guest image into what a VM boots: a kernel, its initrd and an ext4 disk.

The shared image has no kernel, and nothing is installed into it. The VM instead boots the
*VM image*: the same recipe plus Debian's kernel package (and iproute2, with which the
guest's init brings up lo and eth0), built by the same builder into its own cache entry.
It is a strict superset of the shared image: the same benchmark binaries from the same
mirror, and `version_drift` checks that every package both hold has the same version (a
mirror update between the two builds would show there, and is recorded with the results).

From the VM image's root filesystem `build_disk` makes, once per image and disk size:

    <vm image>/vm/<key>/disk.img      ext4 (mkfs.ext4 -d rootfs -L vbroot), raw, sparse, read-only
                        vmlinuz       /boot/vmlinuz-<version> of the image
                        initrd.img    /boot/initrd.img-<version> (initramfs-tools, MODULES=most)
                        disk.json     what went in, for provenance

The disk also carries the guest's init (/usr/local/sbin/vb-init, PID 1, below) and the
agent of the control channel (/usr/local/sbin/vb-agent, see platforms/guest.py), written
with debugfs so the image's rootfs directory stays untouched. Instances boot from a qcow2
copy-on-write overlay of disk.img, so the cached disk stays pristine.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

from .. import proc
from ..errors import UnavailableError, VirtbenchError
from .build import Recipe, build
from .image import Image

KERNEL_PACKAGES = {"amd64": "linux-image-cloud-amd64", "arm64": "linux-image-cloud-arm64"}
"""Debian's kernel for virtual machines (virtio, no hardware drivers) per architecture."""
GUEST_PACKAGES = ("iproute2",)
"""Besides the kernel: what the guest's own init needs (minbase cannot bring up lo)."""
DISK_LABEL = "vbroot"
INIT_PATH = "/usr/local/sbin/vb-init"
FORMAT = 1
"""Bump when the disk layout or the init changes in a way the key does not capture."""
MiB = 1 << 20

INIT_SCRIPT = r"""#!/bin/bash
# virtbench VM init (PID 1), written into the VM disk by virtbench/images/vmdisk.py.
# Mounts the API filesystems, sets the hostname and the network from the kernel command
# line (vb.hostname=NAME, vb.net=none | user | ADDRESS/PREFIX, vb.port=NAME), then keeps the
# guest agent (vb-agent, virtbench/platforms/guest.py) running on that virtio-serial port.
# No other service runs in the guest. As PID 1, bash also reaps orphaned processes.
# Builtins where possible: every fork costs ~0.1 s under TCG emulation.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C
exec </dev/null >/dev/console 2>&1
log() { echo "vb-init: $*"; }
mounted() { # mount point [option]
    local dev mp fs opts rest
    while read -r dev mp fs opts rest; do
        [ "$mp" = "$1" ] && [[ ",$opts," == *",${2:-},"* || -z "${2:-}" ]] && return 0
    done </proc/mounts
    return 1
}
mnt() { mounted "$3" || mount -t "$1" -o "$4" "$2" "$3" || log "cannot mount $3"; }
pause() { read -r -t "$1" -u 9 _ || true; }
mnt proc proc /proc nosuid,nodev,noexec
mnt sysfs sysfs /sys nosuid,nodev,noexec
mnt devtmpfs devtmpfs /dev mode=755
[ -d /dev/pts ] || mkdir /dev/pts
mnt devpts devpts /dev/pts gid=5,mode=620,ptmxmode=666
[ -d /dev/shm ] || mkdir /dev/shm
mnt tmpfs shm /dev/shm nosuid,nodev,mode=1777
mnt tmpfs tmpfs /run nosuid,nodev,mode=755
mounted / rw || mount -o remount,rw / || log "cannot remount / read-write"
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
for i in 0:stdin 1:stdout 2:stderr; do
    [ -e "/dev/${i#*:}" ] || ln -s "/proc/self/fd/${i%%:*}" "/dev/${i#*:}"
done
exec 9<> <(:)
read -r -a words </proc/cmdline
host=vm net=none port=org.virtbench.agent
for w in "${words[@]}"; do
    case $w in
        vb.hostname=*) host=${w#*=} ;;
        vb.net=*) net=${w#*=} ;;
        vb.port=*) port=${w#*=} ;;
    esac
done
echo "$host" >/proc/sys/kernel/hostname
printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$host" >/etc/hosts
ip link set lo up
if [ "$net" != none ]; then
    [ -d /sys/module/virtio_net ] || modprobe -q virtio_net
    nic=
    for ((i = 0; i < 100; i++)); do
        for d in /sys/class/net/*; do [ -e "$d/device" ] && nic=${d##*/} && break; done
        [ -n "$nic" ] && break
        pause 0.05
    done
    # the same name as in the containers (udev in the initrd may have renamed it)
    [ -n "$nic" ] && [ "$nic" != eth0 ] && ip link set "$nic" name eth0
    ip link set eth0 up || log "no network interface"
    case $net in
        user) ip addr add 10.0.2.15/24 dev eth0 && ip route add default via 10.0.2.2 ;;
        *) ip addr add "$net" dev eth0 ;;
    esac
fi
[ -d /sys/module/virtio_console ] || modprobe -q virtio_console
dev=
for ((i = 0; i < 200; i++)); do
    for d in /sys/class/virtio-ports/*; do
        name=
        [ -r "$d/name" ] && read -r name <"$d/name"
        [ "$name" = "$port" ] && [ -c "/dev/${d##*/}" ] && dev=/dev/${d##*/}
    done
    [ -n "$dev" ] && break
    pause 0.05
done
if [ -z "$dev" ]; then
    log "virtio-serial port $port not found; powering off"
    echo o >/proc/sysrq-trigger
fi
mkdir -p /run/vb-agent && mount -t tmpfs -o size=50%,mode=700 vb-agent /run/vb-agent
log "agent on $dev"
while :; do
    (exec -c /usr/local/sbin/vb-agent "$dev")   # empty environment: the agent sets its own
    log "agent exited with status $?; restarting"
    pause 1
done
"""


def kernel_package(arch: str) -> str:
    try:
        return KERNEL_PACKAGES[arch]
    except KeyError:
        raise UnavailableError(f"no Debian VM kernel known for architecture {arch!r}",
                               f"VMs are supported on {', '.join(KERNEL_PACKAGES)}") from None


def vm_recipe(image: Image) -> Recipe:
    """The image's recipe plus a kernel: a separate cache entry, a strict superset."""
    packages = set(image.packages) | {kernel_package(image.arch), *GUEST_PACKAGES}
    return Recipe(release=image.release, arch=image.arch, profile=image.profile,
                  packages=tuple(sorted(packages)),
                  variant=image.manifest.get("variant", "minbase"))


def has_kernel(image: Image) -> bool:
    return kernel_package(image.arch) in image.packages and set(GUEST_PACKAGES) <= set(image.packages)


def vm_image(image: Image, *, log: Callable[[str], None] = print) -> Image:
    """The VM variant of image (the image itself if it already has a kernel), built if needed."""
    if has_kernel(image):
        return image
    return build(vm_recipe(image), image.root.parent, log=log)


def version_drift(base: Image, vm: Image) -> dict[str, list[str]]:
    """Packages both images hold with different versions: {package: [base, vm]}. Empty when
    the VM runs exactly the binaries the other platforms run."""
    a, b = base.manifest.get("installed", {}), vm.manifest.get("installed", {})
    return {p: [a[p], b[p]] for p in sorted(set(a) & set(b)) if a[p] != b[p]}


@dataclass(frozen=True)
class VMDisk:
    root: Path
    image: Image
    """The VM image the disk was made from."""
    kernel_version: str
    size: int
    """Disk size in bytes (the guest's root filesystem)."""

    @property
    def disk(self) -> Path:
        return self.root / "disk.img"

    @property
    def kernel(self) -> Path:
        return self.root / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.root / "initrd.img"

    def provenance(self) -> dict[str, Any]:
        meta = json.loads((self.root / "disk.json").read_text())
        return {k: meta[k] for k in ("vm_image", "kernel_version", "kernel_package", "size",
                                     "init_sha256", "agent_sha256", "key")}


def find_kernel(rootfs: Path) -> tuple[str, Path, Path]:
    """(version, vmlinuz, initrd) of the newest kernel in rootfs/boot."""
    found = []
    for vmlinuz in (rootfs / "boot").glob("vmlinuz-*"):
        version = vmlinuz.name[len("vmlinuz-"):]
        initrd = rootfs / "boot" / f"initrd.img-{version}"
        if initrd.is_file():
            found.append((_version_key(version), version, vmlinuz, initrd))
    if not found:
        raise VirtbenchError(f"no kernel with an initrd in {rootfs / 'boot'}",
                             "rebuild the VM image (virtbench image build --force)")
    _, version, vmlinuz, initrd = max(found)
    return version, vmlinuz, initrd


def _version_key(version: str) -> tuple:
    return tuple(int(x) if x.isdigit() else x for x in re.split(r"[.-]", version))


def check_boot_support(rootfs: Path, version: str) -> list[str]:
    """Problems that would stop this kernel from mounting an ext4 root on virtio-blk/-scsi
    and from opening the agent's virtio-serial port; empty when all is in place.

    Built-in (=y) is enough; a module (=m) must exist in the image, and for the root-disk
    drivers also be in the initrd (initramfs-tools MODULES=most puts all of these there)."""
    config = rootfs / "boot" / f"config-{version}"
    if not config.is_file():
        return [f"no kernel config {config}"]
    options = dict(line.split("=", 1) for line in config.read_text().splitlines() if line.startswith("CONFIG_"))
    modules = rootfs / "lib/modules" / version
    problems = []
    needed = {"EXT4_FS": "fs/ext4/ext4.ko", "VIRTIO_PCI": "drivers/virtio/virtio_pci.ko",
              "VIRTIO_BLK": "drivers/block/virtio_blk.ko", "SCSI_VIRTIO": "drivers/scsi/virtio_scsi.ko",
              "VIRTIO_CONSOLE": "drivers/char/virtio_console.ko", "VIRTIO_NET": "drivers/net/virtio_net.ko",
              "DEVTMPFS": None, "BLK_DEV_INITRD": None}
    for opt, module in needed.items():
        value = options.get(f"CONFIG_{opt}")
        if value == "y":
            continue
        if value == "m" and module and list((modules / "kernel").glob(module + "*")):
            continue
        problems.append(f"kernel {version}: CONFIG_{opt}={value or 'unset'}"
                        + (f" and {module} missing" if value == "m" else ""))
    conf = rootfs / "etc/initramfs-tools/initramfs.conf"
    if conf.is_file() and not re.search(r"^MODULES=(most|netboot)\s*$", conf.read_text(), re.MULTILINE):
        problems.append(f"{conf}: MODULES is not 'most'; the initrd may lack virtio_blk")
    initrd = rootfs / "boot" / f"initrd.img-{version}"
    wanted = [m for opt, m in (("VIRTIO_PCI", "virtio_pci.ko"), ("VIRTIO_BLK", "virtio_blk.ko"),
                               ("SCSI_VIRTIO", "virtio_scsi.ko"), ("EXT4_FS", "ext4.ko"))
              if options.get(f"CONFIG_{opt}") == "m"]
    if wanted and proc.which("lsinitramfs"):  # initramfs-tools on the host: look inside
        listing = proc.run(["lsinitramfs", str(initrd)], timeout=120, check=False)
        if listing.ok:
            names = {Path(line).name for line in listing.stdout.splitlines()}
            problems += [f"{initrd.name} lacks {m}" for m in wanted
                         if m not in names and m + ".xz" not in names and m + ".zst" not in names]
    return problems


def disk_key(vm: Image, size: int) -> str:
    from ..platforms.guest import AGENT_SCRIPT

    doc = json.dumps({"image": vm.tar_sha256, "size": size, "format": FORMAT,
                      "init": _sha(INIT_SCRIPT), "agent": _sha(AGENT_SCRIPT)}, sort_keys=True)
    return hashlib.sha256(doc.encode()).hexdigest()[:16]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def rootfs_bytes(rootfs: Path) -> int:
    out = proc.run(["du", "-s", "--block-size=1", str(rootfs)], timeout=300).stdout
    return int(out.split()[0])


def disk_size(used: int, headroom: int) -> int:
    """Room for the files, ext4's own metadata (~5 %), and headroom for the benchmarks."""
    size = int(used * 1.10) + 128 * MiB + headroom
    return -(-size // MiB) * MiB


def build_disk(vm: Image, headroom: int, *, log: Callable[[str], None] = print) -> VMDisk:
    """The cached boot files of the VM image (built on first use; safe against a concurrent
    virtbench building the same disk)."""
    from ..platforms.guest import AGENT_PATH, AGENT_SCRIPT

    for tool in ("mkfs.ext4", "debugfs"):
        if not proc.which(tool):
            raise UnavailableError(f"{tool} is not installed", "apt-get install e2fsprogs")
    size = disk_size(rootfs_bytes(vm.rootfs), headroom)
    key = disk_key(vm, size)
    parent = vm.root / "vm"
    root = parent / key
    if (root / "disk.json").is_file():
        return _load(root, vm)
    parent.mkdir(parents=True, exist_ok=True)
    with open(parent / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / "disk.json").is_file():
            return _load(root, vm)
        started = time.monotonic()
        version, vmlinuz, initrd = find_kernel(vm.rootfs)
        problems = check_boot_support(vm.rootfs, version)
        if problems:
            raise VirtbenchError("the VM image's kernel cannot boot this disk: " + "; ".join(problems),
                                 "use an image with Debian's cloud kernel")
        log(f"making VM disk {key} from image {vm.short} ({size // MiB} MiB, kernel {version})")
        tmp = parent / f".{key}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        proc.run(["mkfs.ext4", "-q", "-F", "-L", DISK_LABEL, "-d", str(vm.rootfs), "-m", "0",
                  "-E", "lazy_itable_init=0,lazy_journal_init=0", str(tmp / "disk.img"),
                  f"{size // 1024}k"], timeout=1800)
        with tempfile.TemporaryDirectory() as staging:
            files = {INIT_PATH: INIT_SCRIPT, AGENT_PATH: AGENT_SCRIPT}
            commands = []
            for i, (path, text) in enumerate(files.items()):
                local = Path(staging) / f"f{i}"
                local.write_text(text)
                commands += [f"rm {path}", f"write {local} {path}", f"sif {path} mode 0100755",
                             f"sif {path} uid 0", f"sif {path} gid 0"]
            (Path(staging) / "cmds").write_text("\n".join(commands) + "\n")
            proc.run(["debugfs", "-w", "-f", str(Path(staging) / "cmds"), str(tmp / "disk.img")],
                     timeout=300)
        for path in files:
            out = proc.run(["debugfs", "-R", f"stat {path}", str(tmp / "disk.img")], timeout=60).stdout
            if "Mode:  0755" not in out:
                raise VirtbenchError(f"writing {path} into the VM disk failed: {out[:200]}")
        proc.run(["e2fsck", "-n", "-f", str(tmp / "disk.img")], timeout=600)
        shutil.copyfile(vmlinuz, tmp / "vmlinuz")
        shutil.copyfile(initrd, tmp / "initrd.img")
        (tmp / "disk.img").chmod(0o444)  # instances only ever read it (as a qcow2 backing file)
        meta = {"key": key, "vm_image": vm.recipe_hash, "vm_image_tar_sha256": vm.tar_sha256,
                "kernel_version": version,
                "kernel_package": f"linux-image-{version} "
                                  f"{vm.manifest.get('installed', {}).get(f'linux-image-{version}', '?')}",
                "size": size, "init_sha256": _sha(INIT_SCRIPT), "agent_sha256": _sha(AGENT_SCRIPT),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "build_seconds": round(time.monotonic() - started, 1)}
        (tmp / "disk.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
        if root.exists():
            shutil.rmtree(root)
        tmp.rename(root)
        log(f"VM disk {key} made in {meta['build_seconds']} s")
        return _load(root, vm)


def _load(root: Path, vm: Image) -> VMDisk:
    meta = json.loads((root / "disk.json").read_text())
    return VMDisk(root=root, image=vm, kernel_version=meta["kernel_version"], size=meta["size"])


def prepare(image: Image, headroom: int, *, log: Callable[[str], None] = print) -> VMDisk:
    """Everything a VM of this (shared) image boots: the VM image and its disk."""
    return build_disk(vm_image(image, log=log), headroom, log=log)

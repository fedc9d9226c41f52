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
                        initrd.img    /boot/initrd.img-<version> (initramfs-tools, MODULES=most or a list)
                        disk.json     what went in, for provenance

The disk also carries the guest's init (/usr/local/sbin/vb-init, PID 1, below) and the
agent of the control channel (/usr/local/sbin/vb-agent, see images/agent.py), written
with debugfs so the image's rootfs directory stays untouched. Instances boot from a qcow2
copy-on-write overlay of disk.img, so the cached disk stays pristine.

A VM that hosts other platforms (a stack: docker inside the VM) boots a VM image that also
holds those runtimes' packages, and a disk that also carries the shared image's archive at
GUEST_IMAGE_DIR (rootfs.tar, manifest.json), so the inner runtime imports the very bytes
every other platform runs; its init also mounts what container engines need (STACK_INIT).
Such a disk has its own key; the plain VM's disk and its key are unchanged.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import proc
from ..errors import UnavailableError, VirtbenchError
from .agent import AGENT_PATH, AGENT_SCRIPT
from .build import Recipe, build
from .image import Image

KERNEL_PACKAGES = {"amd64": "linux-image-cloud-amd64", "arm64": "linux-image-cloud-arm64",
                   "armhf": "linux-image-armmp-lpae"}
"""Debian's kernel for virtual machines (virtio, no hardware drivers) per architecture; armhf
has no cloud flavour: armmp-lpae boots QEMU's `virt` machine (virtio as modules in the initrd)."""
GUEST_PACKAGES = ("iproute2",)
"""Besides the kernel: what the guest's own init needs (minbase cannot bring up lo)."""
VIRTIO_INITRD_MODULES = ("virtio_pci", "virtio_mmio", "virtio_blk", "virtio_scsi", "sd_mod", "ext4")
"""All a VM's initrd needs to mount its root disk (ext4 on virtio-blk or virtio-scsi, PCI or
MMIO): the initrd_modules of an image that boots only as virtbench's QEMU guest (the arm64
board of the tests), instead of initramfs-tools' MODULES=most. The guest's init loads the
others (virtio_net, virtio_console) from the root disk."""
INITRD_DISK_MODULES = {"VIRTIO_PCI": "virtio_pci", "VIRTIO_BLK": "virtio_blk", "SCSI_VIRTIO": "virtio_scsi",
                       "BLK_DEV_SD": "sd_mod", "EXT4_FS": "ext4"}
"""Kernel option -> module: the root disk's drivers, which the initrd must hold when modules."""
DISK_LABEL = "vbroot"
INIT_PATH = "/usr/local/sbin/vb-init"
FORMAT = 1
"""Bump when the disk layout or the init changes in a way the key does not capture."""
GUEST_IMAGE_DIR = "/var/lib/virtbench/image"
"""Where a stack's VM disk carries the shared image (rootfs.tar, manifest.json)."""
MiB = 1 << 20

INIT_SCRIPT = r"""#!/bin/bash
# virtbench VM init (PID 1), written into the VM disk by virtbench/images/vmdisk.py.
# Mounts the API filesystems, sets the hostname and the network from the kernel command
# line (vb.hostname=NAME, vb.net=none | user | ADDRESS/PREFIX, vb.port=NAME), then keeps the
# guest agent (vb-agent, virtbench/images/agent.py) running on that virtio-serial port.
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


STACK_INIT = r"""# Container engines run in this guest (a VM hosting inner platforms): the unified cgroup
# hierarchy (runc and dockerd with the cgroupfs driver, as there is no systemd), POSIX
# message queues, and the kernel modules of overlay2 and of docker's bridge loaded up front.
mnt cgroup2 cgroup2 /sys/fs/cgroup nosuid,nodev,noexec
[ -d /dev/mqueue ] || mkdir /dev/mqueue
mnt mqueue mqueue /dev/mqueue nosuid,nodev,noexec
modprobe -q -a overlay bridge veth br_netfilter || log "cannot load overlay/bridge modules"
"""
STACK_ANCHOR = "exec 9<> <(:)\n"


def init_script(stack: bool = False) -> str:
    """The guest's init: INIT_SCRIPT, plus STACK_INIT on the disks of VMs hosting containers."""
    if not stack:
        return INIT_SCRIPT
    assert INIT_SCRIPT.count(STACK_ANCHOR) == 1
    return INIT_SCRIPT.replace(STACK_ANCHOR, STACK_INIT + STACK_ANCHOR)


def kernel_package(arch: str) -> str:
    try:
        return KERNEL_PACKAGES[arch]
    except KeyError:
        raise UnavailableError(f"no Debian VM kernel known for architecture {arch!r}",
                               f"VMs are supported on {', '.join(KERNEL_PACKAGES)}") from None


def vm_recipe(image: Image, inner_packages: Sequence[str] = ()) -> Recipe:
    """The image's recipe plus a kernel (and the runtimes of platforms stacked inside the VM):
    a separate cache entry, a strict superset."""
    packages = set(image.packages) | {kernel_package(image.arch), *GUEST_PACKAGES, *inner_packages}
    return Recipe(release=image.release, arch=image.arch, profile=image.profile,
                  packages=tuple(sorted(packages)),
                  variant=image.manifest.get("variant", "minbase"),
                  mirrors=tuple(m) if isinstance(m := image.manifest.get("mirrors"), list) else ())


def has_kernel(image: Image, inner_packages: Sequence[str] = ()) -> bool:
    return {kernel_package(image.arch), *GUEST_PACKAGES, *inner_packages} <= set(image.packages)


def vm_image(image: Image, inner_packages: Sequence[str] = (), *,
             log: Callable[[str], None] = print) -> Image:
    """The VM variant of image (the image itself if it already has a kernel), built if needed."""
    if has_kernel(image, inner_packages):
        return image
    return build(vm_recipe(image, inner_packages), image.root.parent, log=log)


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
                                     "init_sha256", "agent_sha256", "key", "guest_image")
                if k in meta}


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
    drivers also be in the initrd (initramfs-tools MODULES=most puts all of these there; with
    MODULES=list, /etc/initramfs-tools/modules must name them)."""
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
    setting, where = initrd_modules_setting(rootfs)
    if setting == "list":  # only what /etc/initramfs-tools/modules names (Recipe.initrd_modules)
        listed = initrd_listed_modules(rootfs)
        problems += [f"{where}: MODULES=list, and {name} (CONFIG_{opt}=m) is not in etc/initramfs-tools/modules"
                     for opt, name in INITRD_DISK_MODULES.items()
                     if options.get(f"CONFIG_{opt}") == "m" and name not in listed]
    elif setting not in (None, "most", "netboot"):
        problems.append(f"{where}: MODULES is {setting!r}, not 'most'; the initrd may lack virtio_blk")
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


def initrd_modules_setting(rootfs: Path) -> tuple[str | None, Path | None]:
    """initramfs-tools' MODULES in this root filesystem, and the file that set it: initramfs.conf,
    then conf.d/* in name order, the last assignment winning (as mkinitramfs reads them)."""
    etc = rootfs / "etc/initramfs-tools"
    conf_d = sorted(p for p in (etc / "conf.d").glob("*") if p.is_file()) if (etc / "conf.d").is_dir() else []
    setting: tuple[str | None, Path | None] = (None, None)
    for path in [etc / "initramfs.conf", *conf_d]:
        if path.is_file():
            for m in re.finditer(r"^MODULES=\"?([A-Za-z]*)\"?\s*$", path.read_text(errors="replace"), re.MULTILINE):
                setting = (m.group(1), path)
    return setting


def initrd_listed_modules(rootfs: Path) -> set[str]:
    """The modules /etc/initramfs-tools/modules names (a name, then options, per line; # comments)."""
    path = rootfs / "etc/initramfs-tools/modules"
    lines = path.read_text(errors="replace").splitlines() if path.is_file() else []
    return {line.split()[0].replace("-", "_") for line in lines if line.strip() and not line.lstrip().startswith("#")}


def disk_key(vm: Image, size: int, carry: Image | None = None) -> str:
    """The disk's cache key: what went in. carry: the shared image a stack's disk holds."""

    doc: dict[str, Any] = {"image": vm.tar_sha256, "size": size, "format": FORMAT,
                           "init": _sha(init_script(carry is not None)), "agent": _sha(AGENT_SCRIPT)}
    if carry is not None:  # only then: the plain VM's key stays what it always was
        doc["guest_image"] = {"dir": GUEST_IMAGE_DIR, "tar_sha256": carry.tar_sha256,
                              "manifest_sha256": _file_sha(carry.root / "manifest.json")}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def _file_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def rootfs_bytes(rootfs: Path) -> int:
    out = proc.run(["du", "-s", "--block-size=1", str(rootfs)], timeout=300).stdout
    return int(out.split()[0])


def disk_size(used: int, headroom: int) -> int:
    """Room for the files, ext4's own metadata (~5 %), and headroom for the benchmarks."""
    size = int(used * 1.10) + 128 * MiB + headroom
    return -(-size // MiB) * MiB


def carried_files(carry: Image | None) -> dict[str, Path]:
    """Guest path -> host file: what a stack's disk carries besides the VM image."""
    if carry is None:
        return {}
    return {f"{GUEST_IMAGE_DIR}/rootfs.tar": carry.tarball,
            f"{GUEST_IMAGE_DIR}/manifest.json": carry.root / "manifest.json"}


def build_disk(vm: Image, headroom: int, *, carry: Image | None = None,
               log: Callable[[str], None] = print) -> VMDisk:
    """The cached boot files of the VM image (built on first use; safe against a concurrent
    virtbench building the same disk). carry: the shared image, for platforms stacked inside
    (its archive goes to GUEST_IMAGE_DIR, and the init mounts what container engines need)."""

    for tool in ("mkfs.ext4", "debugfs"):
        if not proc.which(tool):
            raise UnavailableError(f"{tool} is not installed", "apt-get install e2fsprogs")
    carried = carried_files(carry)
    # A carried archive is on the disk once, and unpacked once more by the inner runtime.
    extra = 2 * sum(f.stat().st_size for f in carried.values())
    size = disk_size(rootfs_bytes(vm.rootfs) + extra, headroom)
    key = disk_key(vm, size, carry)
    init = init_script(carry is not None)
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
            files = {INIT_PATH: init, AGENT_PATH: AGENT_SCRIPT}
            commands = []
            for i, (path, text) in enumerate(files.items()):
                local = Path(staging) / f"f{i}"
                local.write_text(text)
                commands += [f"rm {path}", f"write {local} {path}", f"sif {path} mode 0100755",
                             f"sif {path} uid 0", f"sif {path} gid 0"]
            commands += _carry_commands(carried, vm.rootfs)
            (Path(staging) / "cmds").write_text("\n".join(commands) + "\n")
            proc.run(["debugfs", "-w", "-f", str(Path(staging) / "cmds"), str(tmp / "disk.img")],
                     timeout=1800)
        for path in files:
            out = proc.run(["debugfs", "-R", f"stat {path}", str(tmp / "disk.img")], timeout=60).stdout
            if "Mode:  0755" not in out:
                raise VirtbenchError(f"writing {path} into the VM disk failed: {out[:200]}")
        for path, local in carried.items():
            out = proc.run(["debugfs", "-R", f"stat {path}", str(tmp / "disk.img")], timeout=60).stdout
            if not re.search(rf"Size: {local.stat().st_size}\b", out) or "Mode:  0644" not in out:
                raise VirtbenchError(f"writing {path} into the VM disk failed: {out[:200]}")
        proc.run(["e2fsck", "-n", "-f", str(tmp / "disk.img")], timeout=600)
        shutil.copyfile(vmlinuz, tmp / "vmlinuz")
        shutil.copyfile(initrd, tmp / "initrd.img")
        (tmp / "disk.img").chmod(0o444)  # instances only ever read it (as a qcow2 backing file)
        meta = {"key": key, "vm_image": vm.recipe_hash, "vm_image_tar_sha256": vm.tar_sha256,
                "kernel_version": version,
                "kernel_package": f"linux-image-{version} "
                                  f"{vm.manifest.get('installed', {}).get(f'linux-image-{version}', '?')}",
                "size": size, "init_sha256": _sha(init), "agent_sha256": _sha(AGENT_SCRIPT),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "build_seconds": round(time.monotonic() - started, 1)}
        if carry is not None:
            meta["guest_image"] = {"dir": GUEST_IMAGE_DIR, "recipe_hash": carry.recipe_hash,
                                   "tar_sha256": carry.tar_sha256}
        (tmp / "disk.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
        if root.exists():
            shutil.rmtree(root)
        tmp.rename(root)
        log(f"VM disk {key} made in {meta['build_seconds']} s")
        return _load(root, vm)


def _load(root: Path, vm: Image) -> VMDisk:
    meta = json.loads((root / "disk.json").read_text())
    return VMDisk(root=root, image=vm, kernel_version=meta["kernel_version"], size=meta["size"])


def _carry_commands(carried: dict[str, Path], rootfs: Path) -> list[str]:
    """debugfs commands that write the carried files (root-owned, 0644), making the
    directories the rootfs lacks (root-owned, 0755)."""
    commands: list[str] = []
    dirs = sorted({str(p) for guest in carried for p in Path(guest).parents
                   if str(p) != "/" and not (rootfs / str(p).lstrip("/")).exists()})
    for d in dirs:  # sorted: parents first
        commands += [f"mkdir {d}", f"sif {d} mode 040755", f"sif {d} uid 0", f"sif {d} gid 0"]
    for guest, local in carried.items():
        if any(c.isspace() for c in f"{guest}{local}"):
            raise VirtbenchError(f"debugfs cannot write {local} to {guest}: the path contains a space",
                                 "use an image cache directory without spaces")
        commands += [f"rm {guest}", f"write {local} {guest}", f"sif {guest} mode 0100644",
                     f"sif {guest} uid 0", f"sif {guest} gid 0"]
    return commands


def prepare(image: Image, headroom: int, *, inner_packages: Sequence[str] = (), stack: bool = False,
            log: Callable[[str], None] = print) -> VMDisk:
    """Everything a VM of this (shared) image boots: the VM image and its disk. stack: the
    VM hosts inner platforms, whose runtimes are inner_packages: the disk carries the image."""
    vm = vm_image(image, inner_packages, log=log)
    return build_disk(vm, headroom, carry=image if stack else None, log=log)

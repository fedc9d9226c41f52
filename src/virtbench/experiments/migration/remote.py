"""Offline migration of LXC containers to another host over SSH, as the study (seeds/000)
moved Proxmox containers between two boards: stop on this host, send the container (its
directory: config and writable layer, or its whole volume) to the destination, start it there.

The connection is the multi-host runner's own (hosts/ssh.py: OpenSSH, host keys verified,
argv lists quoted word by word); the container travels as one tar stream into the host's
tar (owners, modes, xattrs and overlayfs whiteouts kept, sparse files stay sparse), then
`sync -f` there, so the transfer phase ends when the copy is durable on the destination's
storage. The destination runs the container from the same config with its paths rewritten;
the image's layer below it is sent once before anything is timed (ship.ensure_image, the
same cache the runner's agents use) unless the volume moves whole (`with_image`).

Why a path measurement beside the move: the study's main finding is that on the RPi 5 the
1 Gbit/s network, not storage, bounds the move. `path_throughput` pushes zeros through the
same SSH connection (cipher included) into /dev/null there, and the destination's storage is
measured with the same dd as this host's, so the report can say which one the move reached.

Every destination container is written down here before it exists (`RemoteLeftovers`), so
the experiment, a failure, an interrupt and `virtbench cleanup` after a crash remove it.
"""
from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

from ... import proc
from ...benchmarks.dd import Dd, DdParams
from ...errors import VirtbenchError
from ...images.image import Image
from ...platforms import naming
from ...platforms.base import Instance, Paths, Platform
from ...remote import ship
from ...remote.inventory import HostSpec
from ...remote.ssh import SSHExecutor
from . import fleet, storage, transport
from .offline import Migration

PATH_PROBE_MIB = 64
"""Zeros pushed through the SSH connection to measure the path (0.5 s at 1 Gbit/s)."""
SUFFIX = "-m"
"""The destination container's name: the source's plus this. Two hosts that share a kernel
(a test's namespace host) share cgroup names, and the source's teardown must never reach
the running copy's lxc.payload.NAME."""
TAR = ["tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "--sparse"]


def dest_name(name: str) -> str:
    return naming.derived(name, SUFFIX)


class RemoteHost:
    """The destination host of one migration campaign: its connection and its directories."""

    def __init__(self, spec: HostSpec, paths: Paths) -> None:
        self.spec = spec
        self.ex = SSHExecutor(spec, paths.runtime)
        work = spec.work_dir.rstrip("/")
        self.state = f"{work}/state"
        self.lxcpath = f"{self.state}/lxc"
        self.images = f"{work}/images"
        self.local_paths = paths

    def open(self) -> None:
        """Connect (host key, reachability, root: InputError naming the host and the fix)."""
        self.ex.open()

    def close(self) -> None:
        self.ex.close()

    def image_rootfs(self, image: Image, log: Any) -> str:
        """The image's root filesystem on the destination, sent there once (cached by hash)."""
        machine = self.ex.run(["uname", "-m"], timeout=30).stdout.strip()
        from ...images.arch import MACHINE_TO_DEB

        arch = MACHINE_TO_DEB.get(machine, machine)
        if arch != image.arch:
            raise VirtbenchError(f"host {self.spec.name} is {machine}, the image is {image.arch}: a container "
                                 "cannot move between architectures", "migrate between hosts of one architecture")
        ship.ensure_image(self.ex, image.root, self.images, ship.Shipment(), log)
        return f"{self.images}/{image.root.name}/rootfs"

    def free_bytes(self) -> int:
        self.ex.run(["mkdir", "-p", "--", self.lxcpath], timeout=60)
        out = self.ex.run(["df", "-B1", "--output=avail", "--", self.lxcpath], timeout=60).stdout.split()
        return int(out[-1]) if out and out[-1].isdigit() else 0

    def path_throughput(self, mib: int = PATH_PROBE_MIB) -> dict[str, Any]:
        """Zeros through the SSH connection into /dev/null there: the network path's own rate
        (and the cipher's), MB = 10^6 bytes as every migration rate."""
        t0 = time.perf_counter()
        try:
            proc.pipe(["dd", "if=/dev/zero", "bs=1M", f"count={mib}", "status=none"],
                      self.ex.ssh_argv(["dd", "of=/dev/null", "bs=1M", "status=none"]), timeout=300)
        except VirtbenchError as exc:
            return {"what": f"ssh to {self.spec.name}", "bytes": mib << 20, "MBps": None, "error": str(exc)[-300:]}
        seconds = time.perf_counter() - t0
        return {"what": f"ssh to {self.spec.name} ({self.spec.address})", "bytes": mib << 20,
                "seconds": seconds, "MBps": (mib << 20) / seconds / 1e6}

    def storage_facts(self, measure: bool = True) -> dict[str, Any]:
        """The destination's storage under its lxcpath, raw throughput by the same dd as here."""
        found = self.ex.run(["findmnt", "-n", "-o", "SOURCE,FSTYPE,TARGET", "-T", self.lxcpath], timeout=30,
                            check=False).stdout.split()
        device, fstype, mountpoint = (found + ["?", "?", "?"])[:3]
        # the disk under it: how it is attached (usb, nvme, sata) and whether it spins
        tree = self.ex.run(["lsblk", "-nro", "TYPE,TRAN,ROTA", "-s", device], timeout=30, check=False).stdout
        disk = next((line.split() for line in tree.splitlines() if line.startswith("disk")), [])
        facts = storage.StorageFacts(path=self.lxcpath, mountpoint=mountpoint, filesystem=fstype, device=device,
                                     rotational=disk[-1] == "1" if disk else None, free_bytes=self.free_bytes(),
                                     transport=disk[1] if len(disk) == 3 else "")
        if measure:
            bench = Dd(DdParams(bs="1M", count=PATH_PROBE_MIB))
            work = self.ex.run(["mktemp", "-d", "-p", self.lxcpath, ".vb-dd-XXXXXX"], timeout=30).stdout.strip()
            try:
                r = self.ex.run(bench.command(work), timeout=bench.execution_timeout(), check=False)
            finally:
                self.ex.run(["rm", "-rf", "--", work], timeout=120, check=False)
            try:
                if not r.ok:
                    raise RuntimeError(f"dd exit {r.returncode}: {(r.stdout + r.stderr).strip()[-300:]}")
                rates = bench.parse(r.stdout, r.stderr, source=f"dd on {self.spec.name}")
                facts = storage.StorageFacts(**{**asdict(facts), "write_MBps": rates["write_MBps"],
                                                "read_MBps": rates["read_MBps"]})
            except Exception as exc:  # noqa: BLE001 - recorded with the facts, the migration still runs
                facts = storage.StorageFacts(**{**asdict(facts), "throughput_error": str(exc)})
        return {**facts.as_dict(), "host": self.spec.name}

    # -- one container ----------------------------------------------------------------------
    def dir_of(self, name: str) -> str:
        return f"{self.lxcpath}/{dest_name(name)}"

    def send(self, src: Path, dest: str) -> int:
        """The tree src into dest there, durable on return; returns its bytes (apparent sizes)."""
        moved = storage.tree_bytes(src)
        self.ex.run(["mkdir", "-p", "--", dest], timeout=60)
        proc.pipe([*TAR, "-C", str(src), "-cf", "-", "--", "."],
                  self.ex.ssh_argv([*TAR, "-C", dest, "-xpf", "-"]), timeout=3600)
        self.ex.run(["sync", "-f", dest], timeout=600)
        return moved

    def write(self, path: str, text: str) -> None:
        self.ex.run(["dd", f"of={path}", "status=none"], input=text, timeout=60)

    def start(self, platform: Platform, instance: Instance) -> Instance:
        """Start the moved container there; returns once a command runs inside (and, for a
        system container, once systemd has booted), as the platform's own start() does."""
        name = dest_name(instance.name)
        d = self.dir_of(instance.name)
        res = self.ex.run(["sh", "-c", '"$@" </dev/null >/dev/null 2>&1', "sh", "lxc-start", "-P", self.lxcpath,
                           "-n", name, "-d", "-o", f"{d}/lxc.log", "-l", "ERROR"], timeout=120, check=False)
        there = self.platform(platform)
        moved = Instance(name, platform.name, instance.run_id, {"dir": d})
        if not res.ok:
            log = self.ex.run(["tail", "-n", "10", "--", f"{d}/lxc.log"], timeout=30, check=False).stdout
            raise VirtbenchError(f"lxc-start {name} on {self.spec.name} failed (exit {res.returncode}): "
                                 + " | ".join(log.strip().splitlines()[-5:]),
                                 f"lxc-checkconfig on {self.spec.name} shows missing kernel features")
        there.wait_ready(moved)
        if getattr(platform.options, "init", "none") == "systemd":
            there._wait_booted(moved)  # type: ignore[attr-defined]
        return moved

    def platform(self, platform: Platform) -> Platform:
        """The same platform with its commands run there and its state under the host's work_dir:
        what exec (readiness, the test's checks) needs."""
        return type(platform)(platform.name, platform.options,
                              Paths(state=Path(self.state), runtime=Path(f"/run/virtbench-remote/{self.spec.name}")),
                              self.ex)

    def remove(self, name: str) -> None:
        """Stop and delete a destination container (name: the source's); safe to call twice."""
        there, d = dest_name(name), self.dir_of(name)
        self.ex.run(["lxc-stop", "-P", self.lxcpath, "-n", there, "-k"], timeout=60, check=False)
        self.ex.run(["rm", "-rf", "--", d], timeout=600)
        lock = "/run/lxc/lock/" + self.lxcpath.lstrip("/")
        self.ex.run(["rm", "-f", "--", f"{lock}/.{there}"], timeout=30, check=False)


def config_for(text: str, src_dir: Path, dest_dir: str, lower: str) -> str:
    """The source's LXC config for its copy there: its own directory and the image's layer
    below it (sent ahead, or moved with it) replaced; everything else as it ran here."""
    current = re.search(r"^lxc\.rootfs\.path = overlay:([^:\n]+):([^\n]+)$", text, re.M)
    if current is not None:
        text = text.replace(current.group(0), f"lxc.rootfs.path = overlay:{lower}:{current.group(2)}")
    return text.replace(str(src_dir), dest_dir)


def migrate(platform: Platform, instances: list[Instance], host: RemoteHost, leftovers: RemoteLeftovers,
            *, lower: str, image_rootfs: Path | None = None) -> Migration:
    """Stop here, send, start there; the source containers are removed once their copies run.

    lower: the image's root filesystem there (sent in prepare); image_rootfs: also send the
    image with each container (its whole volume, as Proxmox moves it), used as its lower layer."""
    log: list[str] = []
    t0 = time.perf_counter()
    stop = fleet.at_once("stop", instances, platform.stop)

    def move(instance: Instance) -> int:
        src = Path(instance.data["dir"])
        dest = host.dir_of(instance.name)
        leftovers.add(host.spec, host.lxcpath, instance.name)
        size = host.send(src, dest)
        below = lower
        if image_rootfs is not None:
            size += host.send(image_rootfs, f"{dest}/lower")
            below = f"{dest}/lower"
        host.write(f"{dest}/config", config_for((src / "config").read_text(), src, dest, below))
        return size

    transfer = fleet.at_once("transfer", instances, move)
    start = fleet.at_once("start", instances, lambda i: host.start(platform, i))
    total = time.perf_counter() - t0
    sizes = [cast(int, s) for s in transfer.results]
    for instance, size in zip(instances, sizes):
        log.append(f"{instance.name}: {instance.data['dir']} -> {host.spec.name}:{host.dir_of(instance.name)} "
                   f"({size} B)")
    removed = fleet.discard(platform, instances)  # the move's second half: the source goes
    log += [f"source not removed: {p}" for p in removed]
    phases = {"stop": stop.seconds, "transfer": transfer.seconds, "start": start.seconds,
              "total": total, "downtime": total}
    return Migration(count=len(instances), phases=phases, bytes_moved=sum(sizes),
                     each={"stop": stop.each, "transfer": transfer.each, "start": start.each}, log=log)


class RemoteLeftovers:
    """The destination containers of one run, written down here before they exist (crash-safe)."""

    def __init__(self, paths: Paths, run_id: str) -> None:
        self.paths = paths
        self.file = paths.state / "migration-remote" / f"{run_id}.json"
        self._lock = threading.Lock()  # containers move in parallel threads

    def _read(self) -> list[dict[str, Any]]:
        try:
            return [e for e in json.loads(self.file.read_text()) if isinstance(e, dict)]
        except (OSError, ValueError):
            return []

    def add(self, spec: HostSpec, lxcpath: str, name: str) -> None:
        with self._lock:
            entries = self._read()
            entry = {"host": spec.model_dump(mode="json"), "lxcpath": lxcpath, "name": name}
            if entry not in entries:
                self.file.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.file.with_suffix(".tmp")
                tmp.write_text(json.dumps([*entries, entry]))
                tmp.replace(self.file)

    def remove_all(self, host: RemoteHost | None = None) -> list[str]:
        """Stop and delete every recorded container on its host, then the record; an
        unreachable host keeps its entries (the next cleanup tries again)."""
        removed, kept = [], []
        for entry in self._read():
            spec = HostSpec.model_validate(entry["host"])
            there = host if host is not None and host.spec == spec else RemoteHost(spec, self.paths)
            try:
                if there is not host:
                    there.open()
                there.remove(entry["name"])
                removed.append(f"migration copy {spec.name}:{there.dir_of(entry['name'])}")
            except Exception as exc:  # noqa: BLE001 - kept for the next cleanup, said why
                kept.append(entry)
                removed.append(f"could not remove {entry['name']} on {spec.name}: {exc}")
            finally:
                if there is not host:
                    there.close()
        if kept:
            self.file.write_text(json.dumps(kept))
        else:
            self.file.unlink(missing_ok=True)
        return removed


def cleanup(paths: Paths, run_id: str | None = None) -> list[str]:
    """Remove the destination containers of one run (or of every run) left by a failure or crash."""
    return transport.cleanup_records(paths.state / "migration-remote", run_id,
                                     lambda rid: RemoteLeftovers(paths, rid).remove_all())

"""Live migration: a running QEMU guest moved to a second QEMU process through QMP, and
containers through CRIU where the kernel lets CRIU work.

QEMU: the destination is the same VM command line with its own sockets, pid file and serial
log plus `-incoming tcp:ADDRESS:PORT`; the source gets `migrate` and is polled with
`query-migrate` until `completed`, whose `total-time`, `downtime`, `setup-time` and
`ram.transferred` are QEMU's own accounting of the migration. On one host the disk is shared
(the destination opens the same qcow2 overlay through a hard link in its own directory, as
shared storage between two hosts would be), so only memory and device state move. The
migration uri is the seam for another host: there, the destination QEMU starts over SSH.

Containers: CRIU (checkpoint/restore in user space) must pass `criu check` first; when it
does not (on these VMs it fails on the vDSO), the user gets its output, never a silent
fallback to an offline migration.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any, cast

from ... import proc
from ...errors import ParseError, UnavailableError, VirtbenchError
from ...platforms import mounts, naming
from ...platforms.base import Instance, Platform
from . import fleet
from .offline import Migration
from .transport import Leftovers, Transport

POLL_S = 0.05
MAX_BANDWIDTH = 1 << 40
"""bytes/s; QEMU's default max-bandwidth (32 MiB/s) would measure the limit, not the migration."""


@dataclass
class LiveMigration(Migration):
    qemu: list[dict[str, Any]] = field(default_factory=list)
    """Each VM's final query-migrate reply, as QEMU gave it (provenance)."""


def qmp(socket_path: str, command: str, arguments: dict[str, Any] | None = None,
        timeout: float = 30.0) -> dict[str, Any]:
    """One QMP command through the guest module's client, as every other QMP call runs."""
    argv = [sys.executable, "-m", "virtbench.platforms.qemu.guest", "qmp", "--socket", socket_path, command]
    if arguments:
        argv.append(json.dumps(arguments))
    r = proc.run(argv, timeout=timeout)
    return json.loads(r.stdout or "{}")


def free_port(address: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def incoming_argv(argv: list[str], replace: dict[str, str], uri: str) -> list[str]:
    """The source VM's argv with its own files swapped for the destination's, plus -incoming.

    Paths are replaced wherever they occur inside option strings (path=..., file=...)."""
    out = []
    for arg in argv:
        for old, new in replace.items():
            arg = arg.replace(old, new)
        out.append(arg)
    return [*out, "-incoming", uri]


def supports_live(platform: Platform) -> tuple[bool, str]:
    """Whether `platform` can be migrated live here, and why not (one line for the user)."""
    if platform.live_migration == "qmp":
        return True, "QEMU migrates a running guest through QMP (KVM or TCG)"
    if platform.live_migration != "criu":
        from ...registry import PLATFORMS

        criu = sorted(name for name, cls in PLATFORMS.items() if cls.live_migration == "criu")
        return False, (f"{platform.type} has no live migration in virtbench (QEMU through QMP; "
                       f"containers through CRIU on {', '.join(criu)})")
    ok, output = criu_check()
    if ok:
        return True, "criu check passed"
    last = " | ".join(output.strip().splitlines()[-3:]) or "no output"
    return False, f"CRIU cannot checkpoint on this host: `criu check` failed: {last}"


def criu_check() -> tuple[bool, str]:
    if proc.which("criu") is None:
        return False, "criu is not installed (apt-get install criu)"
    r = proc.run(["criu", "check"], timeout=60, check=False)
    return r.ok, (r.stdout + r.stderr)


def _destination(platform: Platform, source: Instance) -> Instance:
    """Create the destination VM's directory (found by qemu cleanup) and its argv."""
    name = naming.derived(source.name, "-in")
    d = platform.paths.instances / name
    if d.exists():
        raise VirtbenchError(f"instance directory {d} already exists", "run virtbench cleanup")
    sockdir = platform.paths.runtime / "qemu" / f"mig-{os.urandom(4).hex()}"
    meta = {"platform": platform.type, "run_id": source.run_id, "name": name, "sockdir": str(sockdir),
            "migrated_from": source.name}
    mounts.write_meta(d, meta)
    sockdir.mkdir(parents=True, exist_ok=True)
    disk = platform.storage(source)["disk"]
    os.link(disk, d / "disk.qcow2")  # shared storage: the same inode, owned by each directory
    port = free_port()
    files = {"agent": str(sockdir / "agent.sock"), "qmp": str(sockdir / "qmp.sock"),
             "pidfile": str(d / "qemu.pid"), "serial": str(d / "serial.log")}
    replace = {str(disk): str(d / "disk.qcow2"), **{source.data[k]: v for k, v in files.items()}}
    argv = incoming_argv(source.data["argv"], replace, f"tcp:127.0.0.1:{port}")
    (d / "qemu.argv.json").write_text(json.dumps(argv, indent=1))
    return Instance(name, source.platform, source.run_id,
                    {**source.data, **files, **meta, "dir": str(d), "argv": argv, "port": port})


def migrate_qemu(platform: Platform, instances: list[Instance], *, timeout: float = 600.0
                 ) -> tuple[LiveMigration, list[Instance]]:
    """Migrate every running VM in `instances` at once; returns the result and the VMs as they
    now run (the destinations). The sources are quit and removed once their guest moved."""
    if platform.live_migration != "qmp":
        raise UnavailableError(f"{platform.name}: live migration through QMP needs a qemu platform")
    dests: list[Instance] = []
    try:
        for source in instances:
            dests.append(_destination(platform, source))
        fleet.at_once("prepare", dests, lambda d: proc.run(d.data["argv"], timeout=120, detached_children=True))
        for source in instances:
            qmp(source.data["qmp"], "migrate-set-parameters", {"max-bandwidth": MAX_BANDWIDTH})
        t0 = time.perf_counter()
        pairs = {s.name: d for s, d in zip(instances, dests)}
        moved = fleet.at_once("transfer", instances, lambda s: _migrate_one(s, pairs[s.name], timeout))
        ready = fleet.at_once("start", dests, lambda d: platform.wait_ready(d, timeout=timeout))
        total = time.perf_counter() - t0
    except BaseException:
        for d in dests:
            try:
                platform.remove(d)
            except Exception:  # noqa: BLE001 - cleanup is the backstop
                pass
        raise
    replies = [cast(dict[str, Any], r) for r in moved.results]
    for source in instances:  # paused in postmigrate; its guest lives on at the destination
        qmp(source.data["qmp"], "quit", timeout=30)
        platform.remove(source)
    result = from_replies(replies, start_s=ready.seconds, total_s=total)
    result.each |= {"transfer": moved.each, "start": ready.each}
    return result, dests


def check_reply(info: dict[str, Any], source: str = "query-migrate") -> dict[str, Any]:
    """A completed migration's reply, or ParseError naming what is missing; a failed one raises
    with QEMU's own error-desc."""
    status = info.get("status")
    if status in ("failed", "cancelled"):
        raise VirtbenchError(f"live migration {status}: {info.get('error-desc', info)}")
    if status != "completed":
        raise ParseError("query-migrate", "status 'completed'", f"{source} (status {status!r})")
    for key in ("total-time", "downtime", "setup-time"):
        if not isinstance(info.get(key), (int, float)):
            raise ParseError("query-migrate", f"a number in {key!r}", source)
    if not isinstance((info.get("ram") or {}).get("transferred"), int):
        raise ParseError("query-migrate", "ram.transferred (bytes)", source)
    return info


def from_replies(replies: list[dict[str, Any]], *, start_s: float, total_s: float) -> LiveMigration:
    """Phases from QEMU's own accounting (milliseconds in query-migrate), over all VMs moved at
    once: the longest setup, transfer (total-time) and downtime; bytes summed."""
    for r in replies:
        check_reply(r)
    ms = {k: max(r[k] for r in replies) / 1000.0 for k in ("setup-time", "total-time", "downtime")}
    return LiveMigration(count=len(replies), bytes_moved=sum(r["ram"]["transferred"] for r in replies),
                         phases={"setup": ms["setup-time"], "transfer": ms["total-time"], "start": start_s,
                                 "total": total_s, "downtime": ms["downtime"]},
                         each={"downtime": [r["downtime"] / 1000.0 for r in replies]}, qemu=replies)


def _migrate_one(source: Instance, dest: Instance, timeout: float) -> dict[str, Any]:
    qmp(source.data["qmp"], "migrate", {"uri": f"tcp:127.0.0.1:{dest.data['port']}"})
    deadline = time.monotonic() + timeout
    while True:
        info = qmp(source.data["qmp"], "query-migrate")
        if info.get("status") in ("completed", "failed", "cancelled"):
            return check_reply(info, f"query-migrate of {source.name}")
        if time.monotonic() > deadline:
            qmp(source.data["qmp"], "migrate_cancel")
            raise VirtbenchError(f"live migration of {source.name} not done after {timeout:g} s: {info}")
        time.sleep(POLL_S)


def migrate_criu(platform: Platform, instances: list[Instance], transport: Transport,
                 leftovers: Leftovers) -> LiveMigration:
    """LXC containers through CRIU: checkpoint each (its processes dumped, then stopped), move
    the dump and the writable layer, restore at the destination. Only called once `criu
    check` passed (supports_live); a failing dump raises with CRIU's own log lines."""
    if platform.live_migration != "criu":
        raise UnavailableError(f"{platform.name}: no CRIU path for {platform.type}")
    lxcpath = str(platform.lxcpath)  # type: ignore[attr-defined]  # LXC, the one CRIU kind
    dumps = {i.name: platform.paths.runtime / "criu" / i.name for i in instances}

    def checkpoint(instance: Instance) -> None:
        d = dumps[instance.name]
        d.mkdir(parents=True, exist_ok=True)
        r = proc.run(["lxc-checkpoint", "-P", lxcpath, "-n", instance.name, "-D", str(d), "-s", "-v"],
                     timeout=300, check=False)
        if not r.ok:
            logs = sorted(d.glob("*.log"))
            said = " | ".join(ln for f in logs for ln in f.read_text(errors="replace").splitlines() if "Error" in ln)
            raise VirtbenchError(f"CRIU could not checkpoint {instance.name} (lxc-checkpoint exit {r.returncode}): "
                                 f"{said or (r.stderr or r.stdout).strip()[-500:]}",
                                 "run `criu check` as root; it must pass for live container migration")

    def move(instance: Instance) -> int:
        dest = transport.root / instance.name
        leftovers.add(dest)
        size = transport.copy(dumps[instance.name], dest / "criu")
        moved = {}
        for role, src in platform.storage(instance).items():
            size += transport.copy(src, dest / role)
            moved[role] = dest / role
        platform.relocate(instance, moved)
        return size

    def restore(instance: Instance) -> None:
        dump = transport.root / instance.name / "criu"
        proc.run(["lxc-checkpoint", "-P", lxcpath, "-n", instance.name, "-D", str(dump), "-r"], timeout=300,
                 detached_children=True)
        platform.wait_ready(instance)

    try:
        t0 = time.perf_counter()
        stop = fleet.at_once("checkpoint", instances, checkpoint)
        moved = fleet.at_once("transfer", instances, move)
        start = fleet.at_once("restore", instances, restore)
        total = time.perf_counter() - t0
    finally:
        for d in dumps.values():
            mounts.safe_rmtree(d)
    return LiveMigration(count=len(instances), bytes_moved=sum(int(cast(int, b)) for b in moved.results),
                         phases={"stop": stop.seconds, "transfer": moved.seconds, "start": start.seconds,
                                 "total": total, "downtime": total},
                         each={"stop": stop.each, "transfer": moved.each, "start": start.each})

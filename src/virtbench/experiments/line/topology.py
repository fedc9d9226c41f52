"""The line: source, N forwarding nodes and sink, joined by veth pairs, built and torn down fast.

Every node is a network namespace: a bare one (`netns`, the baseline) or the one of a real
instance of a platform (an LXC or Docker container started with `network: none`), which is
given a name with `ip netns attach` so all nodes are configured the same way. Link j joins
node j and node j+1 (node 0 is the source, node N+1 the sink) with the /30 10.223.x.y:
.1 on the left, .2 on the right. Each node forwards in the kernel (ip_forward) and routes the
sink's address to its right neighbour and everything else to its left one (iperf's closing
handshake goes back), so the flow crosses every node. Source and sink send with TTL 255.

Everything is named `vbl<tag>...` (tag: 6 hex digits per line) and written to a record under
the runtime directory *before* it is created: `cleanup` (after a crash too) kills what runs
in the recorded namespaces and deletes them; the containers go with their platform's cleanup.
"""
from __future__ import annotations

import ipaddress
import json
import os
import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ... import proc
from ...errors import VirtbenchError
from ...images.image import Image
from ...platforms import naming
from ...platforms.base import Instance, Paths, Platform
from ...platforms.naming import INSTANCE_PREFIX

NETWORK = ipaddress.ip_network("10.223.0.0/16")
TTL = 255
MAX_LENGTH = TTL - 1
"""Each node decrements the IPv4 TTL; the source and sink send with TTL 255 (their
namespaces' ip_default_ttl), so at most 254 nodes forward a packet (the /16 holds 16383 links)."""
PREFIX = "vbl"
WORKERS = 8
"""Nodes created at once (container engines serialize some of it anyway)."""


def address(link: int, side: int) -> str:
    """side 1: the link's left end, 2: its right end."""
    return str(NETWORK.network_address + 4 * link + side)


def records_dir(paths: Paths) -> Path:
    return paths.runtime / "line"


@dataclass
class Line:
    tag: str
    run_id: str
    length: int
    platform: str
    namespaces: list[str]
    """Source, the N nodes, sink."""
    instances: list[Instance] = field(default_factory=list)
    pids: dict[str, int] = field(default_factory=dict)
    """Node namespace -> the instance's main process (for pinning it)."""
    build_s: float = 0.0

    @property
    def source(self) -> str:
        return self.namespaces[0]

    @property
    def sink(self) -> str:
        return self.namespaces[-1]

    @property
    def nodes(self) -> list[str]:
        return self.namespaces[1:-1]

    @property
    def sink_address(self) -> str:
        return address(self.length, 2)

    def ifname(self, link: int, side: int) -> str:
        return f"{PREFIX}{self.tag}{link}{'ab'[side - 1]}"

    def ingress(self, hop: int) -> str:
        """The interface where packets enter namespace `hop` (1..N+1)."""
        return self.ifname(hop - 1, 2)

    def egress(self, hop: int) -> str:
        return self.ifname(hop, 1)

    def record(self, paths: Paths) -> Path:
        return records_dir(paths) / f"{self.tag}.json"


def plan(run_id: str, length: int, platform: str) -> Line:
    tag = secrets.token_hex(3)
    names = [f"{PREFIX}-{tag}-src", *(f"{PREFIX}-{tag}-{i}" for i in range(1, length + 1)), f"{PREFIX}-{tag}-snk"]
    return Line(tag=tag, run_id=run_id, length=length, platform=platform, namespaces=names)


def build(line: Line, paths: Paths, platform: Platform | None, image: Image | None,
          log: Callable[[str], None] = lambda _m: None) -> Line:
    """Create the namespaces (or containers), the links, addresses, routes and forwarding."""
    t0 = time.perf_counter()
    rec = line.record(paths)
    rec.parent.mkdir(parents=True, exist_ok=True)
    rec.write_text(json.dumps({"run_id": line.run_id, "namespaces": line.namespaces, "platform": line.platform}))
    ends = [line.source, line.sink]
    if platform is None:
        ends = line.namespaces
    else:
        assert image is not None
        line.instances = _start_instances(line, platform, image)
        pids = _main_pids(platform, line.instances)
        line.pids = dict(zip(line.nodes, pids))
    batch = [f"netns add {ns}" for ns in ends]
    batch += [f"netns attach {ns} {pid}" for ns, pid in line.pids.items()]
    for j in range(line.length + 1):
        batch.append(f"link add {line.ifname(j, 1)} netns {line.namespaces[j]} type veth "
                     f"peer name {line.ifname(j, 2)} netns {line.namespaces[j + 1]}")
    batch += [f"netns exec {ns} sysctl -q -w net.ipv4.ip_forward=1" for ns in line.nodes]
    # A container mounted its namespace's sysfs read-only first, and sysfs keeps one superblock
    # per namespace: make that superblock writable so the host can set RPS/XPS masks (the
    # container's own mount stays read-only).
    batch += [f"netns exec {ns} mount -o remount,rw /sys" for ns in line.pids]
    batch += [f"netns exec {ns} sysctl -q -w net.ipv4.ip_default_ttl={TTL}" for ns in (line.source, line.sink)]
    proc.run(["ip", "-batch", "-"], input="\n".join(batch) + "\n", timeout=120 + 2 * line.length)
    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(lambda hop: _configure(line, hop), range(len(line.namespaces))))
    line.build_s = time.perf_counter() - t0
    log(f"line of {line.length} {line.platform} nodes built in {line.build_s:.2f} s")
    return line


def _configure(line: Line, hop: int) -> None:
    n = line.length
    cmds = ["link set lo up"]
    if hop > 0:
        cmds += [f"addr add {address(hop - 1, 2)}/30 dev {line.ingress(hop)}", f"link set {line.ingress(hop)} up"]
    if hop <= n:
        cmds += [f"addr add {address(hop, 1)}/30 dev {line.egress(hop)}", f"link set {line.egress(hop)} up"]
    if hop == 0:
        cmds.append(f"route add default via {address(0, 2)}")
    elif hop == n + 1:
        cmds.append(f"route add default via {address(n, 1)}")
    else:
        cmds.append(f"route add default via {address(hop - 1, 1)}")
        if hop < n:
            cmds.append(f"route add {line.sink_address}/32 via {address(hop, 2)}")
    proc.run(["ip", "-n", line.namespaces[hop], "-batch", "-"], input="\n".join(cmds) + "\n", timeout=60)


def instance_names(line: Line) -> list[str]:
    """The names of the instances on the line's hops (naming keeps them valid and unique)."""
    return [naming.fit(f"{INSTANCE_PREFIX}{line.run_id}-{PREFIX}{line.tag}", f"-{i}") for i in range(1, line.length + 1)]


def _start_instances(line: Line, platform: Platform, image: Image) -> list[Instance]:
    names = instance_names(line)
    made: list[Instance] = []

    def one(name: str) -> Instance:
        inst = platform.create(image, name, line.run_id)
        made.append(inst)
        platform.start(inst)
        return inst

    pool = ThreadPoolExecutor(WORKERS)
    try:
        return list(pool.map(one, names))
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)  # nothing new starts; what runs finishes
        line.instances = list(made)
        raise
    finally:
        pool.shutdown(wait=True)


def _main_pids(platform: Platform, instances: list[Instance]) -> list[int]:
    """A host PID in each instance's network namespace, found by the namespace's inode: works
    the same for every platform, with nothing runtime-specific."""
    def inode(inst: Instance) -> int:
        out = platform.exec(inst, ["stat", "-L", "-c", "%i", "/proc/self/ns/net"], timeout=60).stdout
        return int(out.strip())

    with ThreadPoolExecutor(WORKERS) as pool:
        wanted = list(pool.map(inode, instances))
    found: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                ino = os.stat(f"/proc/{entry.name}/ns/net").st_ino
            except OSError:
                continue
            if ino in wanted and (ino not in found or int(entry.name) < found[ino]):
                found[ino] = int(entry.name)
    missing = [inst.name for inst, ino in zip(instances, wanted) if ino not in found]
    if missing:
        raise VirtbenchError(f"no host process found in the network namespace of {', '.join(missing[:3])}")
    return [found[ino] for ino in wanted]


def delay(line: Line, hop: int, ms: float) -> None:
    """A known delay on node `hop`'s way out (tc netem): how the tests check that latency is
    measured end to end."""
    proc.run(["tc", "-n", line.namespaces[hop], "qdisc", "replace", "dev", line.egress(hop), "root", "netem",
              "delay", f"{ms:g}ms"], timeout=30)


def teardown(line: Line, paths: Paths, platform: Platform | None) -> float:
    """Remove the line; returns the seconds it took. Best effort per object, record last."""
    t0 = time.perf_counter()
    errors = _delete_namespaces(line.namespaces, kill_all=platform is None)
    if platform is not None and line.instances:
        def drop(inst: Instance) -> None:
            errors.extend(platform.discard(inst))

        with ThreadPoolExecutor(WORKERS) as pool:
            list(pool.map(drop, line.instances))
    if errors:
        raise VirtbenchError(f"line {line.tag} not fully removed: {errors[0]}", "run `virtbench cleanup`")
    line.record(paths).unlink(missing_ok=True)
    return time.perf_counter() - t0


def _delete_namespaces(names: list[str], kill_all: bool) -> list[str]:
    """Kill what runs in the source and sink (and bare nodes: a container's own processes go
    with the container), then delete the names (their veths go along)."""
    existing = set(proc.run(["ip", "netns", "list"], timeout=30).stdout.split())
    names = [n for n in names if n in existing]
    errors: list[str] = []
    for ns in names:
        if not kill_all and not ns.endswith(("-src", "-snk")):
            continue
        for pid in proc.run(["ip", "netns", "pids", ns], timeout=30, check=False).stdout.split():
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass
    if names:
        r = proc.run(["ip", "-force", "-batch", "-"], input="".join(f"netns del {n}\n" for n in names),
                     timeout=120, check=False)
        if not r.ok:
            errors.append(r.stderr.strip()[:300])
    return errors


def cleanup(paths: Paths, run_id: str | None = None) -> list[str]:
    """Remove every recorded line (of one run, or all) under this runtime directory."""
    removed: list[str] = []
    d = records_dir(paths)
    if not d.is_dir():
        return removed
    for rec in sorted(d.glob("*.json")):
        try:
            meta = json.loads(rec.read_text())
        except (OSError, ValueError):
            meta = {}
        if run_id is not None and meta.get("run_id") != run_id:
            continue
        names = list(meta.get("namespaces", []))
        errors = _delete_namespaces(names, kill_all=meta.get("platform") == "netns")
        if errors:
            removed.append(f"line {rec.stem}: could not remove all namespaces: {errors[0]}")
            continue
        rec.unlink(missing_ok=True)
        removed.append(f"line {rec.stem} ({len(names)} namespaces of run {meta.get('run_id', '?')})")
    return removed

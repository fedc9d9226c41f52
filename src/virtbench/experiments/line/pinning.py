"""Where the forwarding work runs: pinning modes `none`, `node` and `core`.

On veth there are no hardware interrupts: a packet sent into a veth is queued to the
receiving side's backlog and processed in a softirq, by default on the CPU that sent it, so
a whole line runs on the generator's CPU. What can be pinned is Receive Packet Steering
(`rps_cpus` of each veth's receive queue: which CPUs process what arrives there), Transmit
Packet Steering (`xps_cpus`), and the processes (generator, sink, each container's main
process, with `taskset`). On a physical NIC the IRQ affinity would be pinned too.

- none: the scheduler decides (RPS and XPS off, no affinity);
- node: everything on the CPUs of one NUMA node (node 0);
- core: each hop's receive work on its own CPU, round robin over the CPUs when the line is
  longer than the host has CPUs; the generator on the first CPU, the sink on the last.
A mode the host cannot honour is skipped with the reason (`unavailable`).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ... import proc
from .topology import WORKERS, Line

MODES = ("none", "node", "core")
NODE_SYS = Path("/sys/devices/system/node")


def parse_cpulist(text: str) -> list[int]:
    cpus: list[int] = []
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            cpus += range(int(a), int(b) + 1)
        elif part:
            cpus.append(int(part))
    return cpus


def host_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def numa_nodes() -> dict[int, list[int]]:
    out = {}
    for d in sorted(NODE_SYS.glob("node[0-9]*")):
        try:
            out[int(d.name[4:])] = parse_cpulist((d / "cpulist").read_text())
        except (OSError, ValueError):
            continue
    return out


def unavailable(mode: str) -> str | None:
    """Why this host cannot honour the mode, or None."""
    if mode == "node" and not numa_nodes():
        return f"no NUMA topology in {NODE_SYS}"
    if mode == "core" and len(host_cpus()) < 2:
        return "one CPU: nothing to spread the hops over"
    return None


def mask(cpus: list[int]) -> str:
    value = sum(1 << c for c in cpus)
    return f"{value:x}"


@dataclass(frozen=True)
class Placement:
    """CPUs of the generator, the sink, and each hop's receive work (hop 1..N+1)."""

    generator: list[int]
    sink: list[int]
    hops: list[list[int]]
    """Empty lists: no steering (the scheduler decides)."""


def placement(mode: str, length: int) -> Placement:
    cpus = host_cpus()
    if mode == "none":
        return Placement([], [], [[] for _ in range(length + 1)])
    if mode == "node":
        node = numa_nodes()[min(numa_nodes())]
        return Placement(node, node, [node for _ in range(length + 1)])
    return Placement([cpus[0]], [cpus[-1]], [[cpus[hop % len(cpus)]] for hop in range(1, length + 2)])


def apply(line: Line, where: Placement) -> None:
    """Write RPS/XPS masks in every namespace and pin the nodes' processes ('0': steering off)."""
    def one(hop: int) -> None:
        ns = line.namespaces[hop]
        files: dict[str, list[int]] = {}
        if hop > 0:
            files[f"/sys/class/net/{line.ingress(hop)}/queues/rx-0/rps_cpus"] = where.hops[hop - 1]
        if hop <= line.length:
            nxt = where.hops[hop] if hop < len(where.hops) else []
            files[f"/sys/class/net/{line.egress(hop)}/queues/tx-0/xps_cpus"] = nxt
        for value in {mask(c) if c else "0" for c in files.values()}:
            targets = [f for f, c in files.items() if (mask(c) if c else "0") == value]
            proc.run(["ip", "netns", "exec", ns, "tee", *targets], input=value + "\n", timeout=60)

    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(one, range(len(line.namespaces))))
    for hop, pid in enumerate(line.pids.values(), start=1):
        cpus = where.hops[hop - 1] or host_cpus()
        proc.run(["taskset", "-a", "-p", "-c", ",".join(map(str, cpus)), str(pid)], timeout=30, check=False)


def pinned(argv: list[str], cpus: list[int]) -> list[str]:
    return ["taskset", "-c", ",".join(map(str, cpus)), *argv] if cpus else argv

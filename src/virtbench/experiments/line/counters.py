"""Counters while a trial runs: `perf stat` system-wide, softirq counts from /proc/softirqs and
rescheduling interrupts per CPU from /proc/interrupts.

The study read dTLB misses with perf and gave them as a share of dTLB loads (about 13 % on
64 nodes, Fig. 4): both events are counted so the share can be computed. In a VM without a
virtual PMU (like the development machine) hardware events print `<not supported>`: they
are kept as null with that reason, the share is null with it, and only the software events
(context switches, CPU migrations), the softirq and the interrupt counts remain.
The study blamed its latency spikes on rescheduling interrupts (IPIs that make another CPU
run its scheduler): /proc/interrupts' `RES` line counts them per CPU, read before and after.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import proc
from ...probes.perf import HARDWARE, NO_PMU, SOFTWARE, parse_interrupts, parse_perf_csv

DTLB_LOADS, DTLB_MISSES = "dTLB-loads", "dTLB-load-misses"
EVENTS = (*HARDWARE[:2], DTLB_LOADS, DTLB_MISSES, *SOFTWARE)
SOFTIRQS = "/proc/softirqs"
INTERRUPTS = "/proc/interrupts"
RESCHED = "RES"


def softirqs() -> dict[str, int]:
    """NET_RX and NET_TX summed over CPUs (the probes' reader of /proc/softirqs)."""
    try:
        counts = parse_interrupts(Path(SOFTIRQS).read_text())
    except OSError:
        return {}
    return {k.lower(): v for k, v in counts.items() if k in ("NET_RX", "NET_TX")}


def per_cpu(text: str, name: str = RESCHED) -> list[int]:
    """One /proc/interrupts line's counts per CPU (in the header's CPU order); [] without it.
    Per CPU, because the study's point is where they land: a CPU forwarding the line's packets."""
    lines = text.splitlines()
    if not lines:
        return []
    ncpu = len(lines[0].split())
    for line in lines[1:]:
        label, _, rest = line.partition(":")
        if label.strip() == name:
            fields = rest.split()[:ncpu]
            return [int(f) for f in fields if f.isdigit()]
    return []


def resched() -> list[int]:
    try:
        return per_cpu(Path(INTERRUPTS).read_text())
    except OSError:
        return []


def delta(before: list[int], after: list[int]) -> list[int]:
    """After minus before per CPU; [] when either is missing or the CPU count changed (hotplug)."""
    return [a - b for a, b in zip(after, before, strict=True)] if before and len(before) == len(after) else []


def dtlb_share(values: dict[str, float | None]) -> float | None:
    """dTLB load misses as a percentage of dTLB loads, the paper's measure; None where either
    count is missing (no PMU) or nothing was loaded."""
    loads, misses = values.get(DTLB_LOADS), values.get(DTLB_MISSES)
    if loads is None or misses is None or loads <= 0:
        return None
    return 100.0 * misses / loads


@dataclass
class Probe:
    perf: proc.Background | None
    before: dict[str, int]
    note: str = ""
    res_before: list[int] = field(default_factory=list)


def start(seconds: float) -> Probe:
    before, res = softirqs(), resched()
    if proc.which("perf") is None:
        return Probe(None, before, "perf is not installed (apt-get install linux-perf)", res)
    argv = ["perf", "stat", "-a", "-x,", "-e", ",".join(EVENTS), "--", "sleep", f"{seconds:g}"]
    return Probe(proc.spawn(argv), before, res_before=res)


def read(perf_stderr: str, softirq: dict[str, int], res: list[int], notes: list[str]) -> dict[str, Any]:
    """The counters of one trial from perf's CSV and the differences of the kernel's counts:
    `values` (event -> count or None), `dtlb_miss_pct`, `res_per_cpu`, `notes` (why one is null)."""
    parsed = parse_perf_csv(perf_stderr) if perf_stderr else {}
    values: dict[str, float | None] = {event: v["value"] for event, v in parsed.items()}
    unsupported = [f"{event}: {v['reason']}" for event, v in parsed.items() if v["value"] is None]
    if unsupported:
        notes = [*notes, f"{NO_PMU}: " + ", ".join(unsupported)]
    for k, v in softirq.items():
        values[f"softirq_{k}"] = float(v)
    values["res_interrupts"] = float(sum(res)) if res else None
    share = dtlb_share(values)
    if share is None and parsed:
        notes = [*notes, "dTLB misses as a share of loads: not available here (needs both dTLB counters of a PMU)"]
    return {"values": values, "dtlb_miss_pct": share, "res_per_cpu": res, "notes": notes}


def finish(probe: Probe, timeout: float = 10.0) -> dict[str, Any]:
    stderr = ""
    if probe.perf is not None:
        deadline = time.monotonic() + timeout
        while probe.perf.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        stderr = probe.perf.stop().stderr
    after = softirqs()
    soft = {k: v - probe.before.get(k, 0) for k, v in after.items()}
    return read(stderr, soft, delta(probe.res_before, resched()), [probe.note] if probe.note else [])

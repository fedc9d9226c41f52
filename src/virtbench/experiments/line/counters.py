"""Counters while a trial runs: `perf stat` system-wide, and softirq counts from /proc/softirqs.

The study read dTLB misses with perf. In a VM without a virtual PMU (like the development
machine) hardware events print `<not supported>`: they are kept as null with that reason and
only the software events (context switches, CPU migrations) and the softirq counts remain.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ... import proc
from ...probes.perf import HARDWARE, NO_PMU, SOFTWARE, parse_interrupts, parse_perf_csv

EVENTS = (*HARDWARE[:3], *SOFTWARE)
SOFTIRQS = "/proc/softirqs"


def softirqs() -> dict[str, int]:
    """NET_RX and NET_TX summed over CPUs (the probes' reader of /proc/softirqs)."""
    try:
        counts = parse_interrupts(Path(SOFTIRQS).read_text())
    except OSError:
        return {}
    return {k.lower(): v for k, v in counts.items() if k in ("NET_RX", "NET_TX")}


@dataclass
class Probe:
    perf: proc.Background | None
    before: dict[str, int]
    note: str = ""


def start(seconds: float) -> Probe:
    before = softirqs()
    if proc.which("perf") is None:
        return Probe(None, before, "perf is not installed (apt-get install linux-perf)")
    argv = ["perf", "stat", "-a", "-x,", "-e", ",".join(EVENTS), "--", "sleep", f"{seconds:g}"]
    return Probe(proc.spawn(argv), before)


def finish(probe: Probe, timeout: float = 10.0) -> dict:
    import time

    values: dict[str, float | None] = {}
    notes = [probe.note] if probe.note else []
    if probe.perf is not None:
        deadline = time.monotonic() + timeout
        while probe.perf.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        result = probe.perf.stop()
        parsed = parse_perf_csv(result.stderr)
        values = {event: v["value"] for event, v in parsed.items()}
        unsupported = [f"{event}: {v['reason']}" for event, v in parsed.items() if v["value"] is None]
        if unsupported:
            notes.append(f"{NO_PMU}: " + ", ".join(unsupported))
    after = softirqs()
    for k, v in after.items():
        values[f"softirq_{k}"] = float(v - probe.before.get(k, 0))
    return {"values": values, "notes": notes}

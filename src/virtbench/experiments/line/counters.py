"""Counters while a trial runs: `perf stat` system-wide, and softirq counts from /proc/softirqs.

The study read dTLB misses with perf. In a VM without a virtual PMU (like the development
machine) hardware events print `<not supported>`: they are kept as null with that reason and
only the software events (context switches, CPU migrations) and the softirq counts remain.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ... import proc

EVENTS = ("dTLB-load-misses", "cycles", "instructions", "context-switches", "cpu-migrations")
SOFTIRQS = Path("/proc/softirqs")


def softirqs(text: str | None = None) -> dict[str, int]:
    """NET_RX and NET_TX summed over CPUs."""
    if text is None:
        try:
            text = SOFTIRQS.read_text()
        except OSError:
            return {}
    out = {}
    for line in text.splitlines():
        name, _, rest = line.strip().partition(":")
        if name in ("NET_RX", "NET_TX"):
            out[name.lower()] = sum(int(x) for x in rest.split())
    return out


def parse_perf(stderr: str) -> tuple[dict[str, float | None], list[str]]:
    """perf stat -x, lines: value,unit,event,...; '<not supported>' / '<not counted>' -> None."""
    values: dict[str, float | None] = {}
    notes: list[str] = []
    for line in stderr.splitlines():
        parts = line.split(",")
        if len(parts) < 3 or parts[2] not in EVENTS:
            continue
        try:
            values[parts[2]] = float(parts[0])
        except ValueError:
            values[parts[2]] = None
            notes.append(f"{parts[2]}: {parts[0]}")
    return values, notes


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
        values, unsupported = parse_perf(result.stderr)
        if unsupported:
            notes.append("hardware events not supported here (no PMU, e.g. in a VM): " + ", ".join(unsupported))
    after = softirqs()
    for k, v in after.items():
        values[f"softirq_{k}"] = float(v - probe.before.get(k, 0))
    return {"values": values, "notes": notes}

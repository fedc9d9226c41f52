"""perf: `perf stat` counters around each execution, plus /proc/interrupts and
/proc/softirqs deltas (the latency study explains its results with dTLB misses and
interrupt counts).

Counted system-wide (`-a`) by default, or for the instance's cgroup (`scope: instance`,
`perf stat -G`), which needs the perf_event cgroup controller. In a VM without a virtual
PMU (this project's CI machines) the hardware events read `<not supported>`: they are
stored as null with that reason, and the software events (context switches, CPU
migrations) still count.
"""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from .. import proc
from ..errors import InputError
from .base import Availability, Probe, ProbeData, ProbeOptions, Target

HARDWARE = ("cycles", "instructions", "dTLB-load-misses", "cache-misses")
SOFTWARE = ("context-switches", "cpu-migrations")
EVENTS = HARDWARE + SOFTWARE
NO_PMU = ("no PMU: the hardware counters read <not supported> (a VM whose hypervisor exposes no "
          "virtual PMU, or a CPU perf does not know)")


class PerfOptions(ProbeOptions):
    scope: Literal["system", "instance"] = Field(
        "system", description="system: every CPU (-a); instance: the instance's cgroup (-G, needs perf_event cgroups)")
    events: tuple[str, ...] = Field(EVENTS, description="perf event names")


def parse_perf_csv(text: str) -> dict[str, dict[str, Any]]:
    """`perf stat -x,` output: event -> {value, unit, reason}. `<not supported>` and
    `<not counted>` become value None with that reason; other lines are ignored."""
    out: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) < 3 or line.startswith("#"):
            continue
        raw, unit, event = parts[0].strip(), parts[1].strip(), parts[2].strip()
        if not event:
            continue
        event = event.split(":")[0] if event.endswith((":u", ":k")) else event
        if raw.startswith("<"):
            out[event] = {"value": None, "unit": unit, "reason": raw.strip("<>")}
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        out[event] = {"value": int(value) if value.is_integer() else value, "unit": unit, "reason": ""}
    return out


def parse_interrupts(text: str) -> dict[str, int]:
    """/proc/interrupts or /proc/softirqs: name -> count summed over CPUs."""
    lines = text.splitlines()
    if not lines:
        return {}
    ncpu = len(lines[0].split())
    out: dict[str, int] = {}
    for line in lines[1:]:
        name, _, rest = line.partition(":")
        fields = rest.split()
        counts = [int(f) for f in fields[:ncpu] if f.isdigit()]
        if not counts:
            continue
        label = " ".join(fields[len(counts):])
        key = name.strip() + (f" {label}" if label and not name.strip().isalpha() else "")
        out[key] = sum(counts)
    return out


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0)}


class Perf(Probe):
    name = "perf"
    description = "perf stat counters (cycles, instructions, dTLB misses, cache misses, context switches, migrations)"
    stores = "per execution: each event's count (null with the reason where unsupported), interrupt and softirq deltas"
    Options = PerfOptions

    @classmethod
    def available(cls) -> Availability:
        if not proc.which("perf"):
            return Availability(False, "perf is not installed", "apt-get install linux-perf")
        result = proc.run(["perf", "stat", "-x,", "-e", ",".join(EVENTS), "--", "true"], check=False, timeout=30)
        counts = parse_perf_csv(result.stderr)
        soft = [e for e in SOFTWARE if counts.get(e, {}).get("value") is not None]
        hard = [e for e in HARDWARE if counts.get(e, {}).get("value") is not None]
        if not soft and not hard:
            return Availability(False, f"perf stat counts nothing: {result.stderr.strip()[-200:]}",
                         "check /proc/sys/kernel/perf_event_paranoid or run as root")
        if not hard:
            return Availability(True, f"software counters only; {NO_PMU}")
        return Availability(True, "hardware and software counters")

    def check(self) -> None:
        scope = self.options.scope  # type: ignore[attr-defined]
        if scope == "instance" and not Path("/sys/fs/cgroup/perf_event").is_dir() \
                and not Path("/sys/fs/cgroup/cgroup.controllers").exists():
            raise InputError("probes: perf scope 'instance' needs the perf_event cgroup controller, "
                             "which is not mounted here", "use scope: system")
        if not proc.which("perf"):
            raise InputError("probes: perf is not installed", "apt-get install linux-perf")
        events = ",".join(self.options.events)  # type: ignore[attr-defined]
        result = proc.run(["perf", "stat", "-x,", "-e", events, "--", "true"], check=False, timeout=30)
        if result.returncode != 0:
            first = (result.stderr.strip().splitlines() or ["?"])[0]
            raise InputError(f"probes: perf does not accept events {events!r}: {first}",
                             "see `perf list` for event names")

    def start(self, target: Target) -> None:
        self.target = target
        self.reason = ""
        argv = ["perf", "stat", "-x,", "-e", ",".join(self.options.events)]  # type: ignore[attr-defined]
        if self.options.scope == "instance":  # type: ignore[attr-defined]
            cgroup = self._cgroup(target)
            if cgroup is None:
                self.reason = "the instance's perf_event cgroup is unknown (no host pid): counted system-wide"
                argv.append("-a")
            else:
                argv += ["-a", "-G", cgroup]
        else:
            argv.append("-a")
        self.irq0, self.soft0 = parse_interrupts(_read("/proc/interrupts")), parse_interrupts(_read("/proc/softirqs"))
        self.bg = proc.spawn(argv)

    def _cgroup(self, target: Target) -> str | None:
        from .hostpressure import PressureReader

        for pid in target.pids[:1]:
            paths = PressureReader().cgroup_of(pid)
            path = paths.get("perf_event") or paths.get("")
            if path and path != "/":
                return path.lstrip("/")
        return None

    def stop(self) -> ProbeData:
        result = self.bg.stop(grace=5.0, sig=signal.SIGINT)
        irq = _delta(self.irq0, parse_interrupts(_read("/proc/interrupts")))
        soft = _delta(self.soft0, parse_interrupts(_read("/proc/softirqs")))
        counts = parse_perf_csv(result.stderr)
        data: dict[str, Any] = {
            "argv": result.argv, "scope": self.options.scope, "note": self.reason,  # type: ignore[attr-defined]
            "events": {e: counts.get(e, {"value": None, "unit": "", "reason": "not in perf's output"})
                       for e in self.options.events},  # type: ignore[attr-defined]
            "interrupts": irq, "interrupts_total": sum(irq.values()),
            "softirqs": soft, "softirqs_total": sum(soft.values()),
            "seconds": result.seconds,
        }
        if all(v["value"] is None for v in data["events"].values()):
            return ProbeData.failed(f"perf stat counted nothing (exit {result.returncode}): "
                                    f"{result.stderr.strip()[-300:]}", **data)
        if any(counts.get(e, {}).get("reason") == "not supported" for e in HARDWARE):
            data["hardware_reason"] = NO_PMU
        return ProbeData("ok", data)

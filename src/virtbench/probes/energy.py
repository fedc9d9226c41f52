"""energy: joules and mean watts of every execution, from the sources this host has.

Sources, each labelled with what it measures:
- `meter`: an external meter the user has (study 001 used one): a command of theirs, an
  argv list, that prints the current watts on one line each time it runs; whole machine
  (or whatever the meter is wired to).
- `rapl`: Intel/AMD RAPL through /sys/class/powercap: CPU packages plus DRAM (rapl.py).
- `ipmi`: the BMC's whole-machine power, `ipmitool dcmi power reading` (updates ~1/s).
- none: stored as `unavailable` with the reason; never a zero.

Power readings (meter, ipmi) are integrated with the trapezoid rule over the execution,
from a reading taken right before the benchmark starts to one taken right after it ends;
RAPL counters are differenced (wraps corrected). With `idle: true` the probe measures the
host's power for `idle_seconds` before the run's first execution (nothing started yet) and
also stores joules above idle = joules - idle watts x duration.
"""
from __future__ import annotations

import re
import time
from typing import Any, Literal

from pydantic import Field, field_validator

from .. import proc
from ..errors import InputError
from . import rapl
from .base import Availability, ProbeData, ProbeOptions, SamplingProbe, Target

MIN_INTERVAL = {"rapl": 0.01, "ipmi": 1.0, "meter": 0.1}
"""Shortest sampling interval each source supports: IPMI DCMI updates about once a second;
a meter command is a process start per reading."""
WHAT = {"rapl": "CPU packages + DRAM (RAPL)", "ipmi": "whole machine (BMC, IPMI DCMI)",
        "meter": "external meter (what it is wired to)"}
IPMI_ARGV = ["ipmitool", "dcmi", "power", "reading"]
_NUMBER = re.compile(r"^[+]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


class EnergyOptions(ProbeOptions):
    source: Literal["auto", "meter", "rapl", "ipmi"] = Field(
        "auto", description="auto: the meter if given, else RAPL, else IPMI; none works: stored as unavailable")
    meter: list[str] | None = Field(None, description="argv of a command printing the current watts on one line")
    interval: float | None = Field(None, gt=0, le=3600,
                                    description="seconds between readings (default: 1 for meter/ipmi, 0.1 rapl)")
    idle: bool = Field(False, description="measure idle power before the run and store joules above idle")
    idle_seconds: float = Field(5.0, ge=1, le=600, description="how long idle power is measured")
    timeout: float = Field(5.0, gt=0, le=60, description="seconds a meter command may take")

    @field_validator("meter")
    @classmethod
    def _argv(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and (not v or not all(isinstance(a, str) and a for a in v)):
            raise ValueError("meter must be an argv list of non-empty strings, e.g. [/usr/local/bin/my-meter, --port, "
                             "/dev/ttyUSB0]")
        return v


def parse_watts(stdout: str) -> float:
    """The meter's one line of watts; ValueError naming what it printed otherwise."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    if len(lines) != 1 or not _NUMBER.match(lines[0]):
        raise ValueError(f"a meter must print one number of watts per run, it printed {stdout[:80]!r}")
    return float(lines[0])


def parse_ipmi_dcmi(stdout: str) -> float:
    """Watts from `ipmitool dcmi power reading` (format of ipmitool's lib/ipmi_dcmi.c,
    ipmi_dcmi_pwr_rd); a deactivated reading state means the value is not a measurement."""
    match = re.search(r"Instantaneous power reading:\s+(\d+)\s+Watts", stdout)
    if not match:
        raise ValueError(f"no 'Instantaneous power reading' in ipmitool output {stdout.strip()[:120]!r}")
    state = re.search(r"Power reading state is:\s+(\w+)", stdout)
    if state and state.group(1) != "activated":
        raise ValueError(f"the BMC's power reading state is {state.group(1)!r}: no measurement")
    return float(match.group(1))


def ipmi_works() -> Availability:
    if not proc.which("ipmitool"):
        return Availability(False, "ipmitool is not installed", "apt-get install ipmitool")
    result = proc.run(IPMI_ARGV, check=False, timeout=15)
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines() or [f"exit {result.returncode}"]
        return Availability(False, f"no BMC answers `ipmitool dcmi power reading`: {lines[-1].strip()[:200]}")
    try:
        parse_ipmi_dcmi(result.stdout)
    except ValueError as exc:
        return Availability(False, str(exc))
    return Availability(True, "IPMI DCMI power reading works")


def rapl_works(root: str = "/") -> Availability:
    try:
        rapl.read(rapl.zones(root))
    except rapl.RaplError as exc:
        return Availability(False, str(exc))
    return Availability(True, "RAPL readable")


class Energy(SamplingProbe):
    name = "energy"
    description = "energy per execution from an external meter, RAPL or IPMI DCMI (joules, mean watts)"
    stores = ("per execution: source, joules, mean watts, the readings, idle watts where asked, and a quality "
              "record (wraps corrected, gaps, interval, domains summed)")
    Options = EnergyOptions
    root: str = "/"
    """Where /sys is looked for (tests point it at a recorded powercap tree)."""

    def __init__(self, options: EnergyOptions | None = None) -> None:
        super().__init__(options)
        self.opts: EnergyOptions = self.options  # type: ignore[assignment]
        self.source: str | None = None
        self.why_none = ""
        self.idle_watts: float | None = None
        self.idle_how = ""

    @classmethod
    def available(cls) -> Availability:
        r, i = rapl_works(), ipmi_works()
        reason = f"RAPL: {r.reason}; IPMI: {i.reason}; meter: works wherever you give one"
        works = r.available or i.available
        return Availability(works, reason, "" if works else "give a meter command: {name: energy, meter: [...]}")

    # -- before the run -------------------------------------------------------------
    def commands(self) -> list[list[str]]:
        return [list(self.opts.meter)] if self.opts.meter else []

    def check(self) -> None:
        """Choose the source and try it once: a meter that fails or prints garbage, a
        source asked for that does not work here, or an interval below what the source
        supports stops the campaign before anything starts."""
        o = self.opts
        if o.meter and o.source not in ("auto", "meter"):
            raise InputError(f"probes: energy has a meter but source: {o.source}", "drop meter or set source: meter")
        wanted = "meter" if o.meter else o.source
        if wanted == "meter" and not o.meter:
            raise InputError("probes: energy source meter needs `meter: [command, args...]`")
        if wanted == "meter":
            try:
                self._meter()
            except ValueError as exc:
                raise InputError(f"probes: energy meter {o.meter!r}: {exc}",
                                 "the meter command must exit 0 and print one number (watts)") from None
            self.source = "meter"
        elif wanted == "auto":
            r = rapl_works(self.root)
            i = ipmi_works() if not r.available else Availability(False, "not tried")
            self.source = "rapl" if r.available else "ipmi" if i.available else None
            self.why_none = "" if self.source else f"no energy source here: RAPL: {r.reason}; IPMI: {i.reason}"
        else:
            works = rapl_works(self.root) if wanted == "rapl" else ipmi_works()
            if not works.available:
                raise InputError(f"probes: energy source {wanted} does not work here: {works.reason}",
                                 works.fix or "use source: auto, or a meter")
            self.source = wanted
        if self.source:
            self.interval = o.interval if o.interval is not None else (0.1 if self.source == "rapl" else 1.0)
            if self.interval < MIN_INTERVAL[self.source]:
                raise InputError(f"probes: energy interval {self.interval} s is below what {self.source} supports "
                                 f"({MIN_INTERVAL[self.source]} s)", f"set interval: {MIN_INTERVAL[self.source]} or more")
            if o.idle:
                self._measure_idle()

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "source": self.source, "measures": WHAT.get(self.source or "", ""),
                "reason": self.why_none, "idle_watts": self.idle_watts}

    def _meter(self) -> float:
        assert self.opts.meter
        try:
            result = proc.run(self.opts.meter, check=False, timeout=self.opts.timeout)
        except Exception as exc:  # noqa: BLE001 - not found, timed out: the meter's failure
            raise ValueError(str(exc)) from None
        if result.returncode != 0:
            raise ValueError(f"exit {result.returncode}: {(result.stderr or result.stdout).strip()[:200]}")
        return parse_watts(result.stdout)

    def _power(self) -> float:
        if self.source == "meter":
            return self._meter()
        result = proc.run(IPMI_ARGV, check=False, timeout=15)
        if result.returncode != 0:
            raise ValueError(f"ipmitool exit {result.returncode}: {result.stderr.strip()[:200]}")
        return parse_ipmi_dcmi(result.stdout)

    def _measure_idle(self) -> None:
        self.start(Target("", "", "", "idle", -1, ""))
        time.sleep(self.opts.idle_seconds)
        data = self.stop()
        if data.status != "ok":
            raise InputError(f"probes: energy could not measure idle power: {data.error}")
        self.idle_watts = data.data["watts_mean"]
        self.idle_how = (f"mean {self.source} power over {data.data['seconds']:.1f} s before the run's first "
                         "execution, no instance running; joules_above_idle = joules - idle_watts x duration")

    # -- around each execution --------------------------------------------------------
    def start(self, target: Target) -> None:
        self.readings: list[tuple[float, float]] = []  # (t, watts) or (t, joules so far) for rapl
        self.wraps = 0
        self.read_errors = 0
        if self.source == "rapl":
            self.zones = rapl.zones(self.root)
            self.domains = [z.name for z in self.zones if z.summed]
        super().start(target)

    def begin(self, target: Target) -> None:
        if self.source == "rapl":
            self.last = rapl.read(self.zones)
            self.totals = {z.id: 0 for z in self.zones}
        self.sample()  # the reading at t = 0, before the benchmark starts

    def sample(self) -> None:
        if self.source is None:
            return
        try:
            if self.source == "rapl":
                now = rapl.read(self.zones)
                for z in self.zones:
                    d, wrapped = rapl.delta_uj(self.last[z.id], now[z.id], z.max_range_uj)
                    self.totals[z.id] += d
                    self.wraps += wrapped
                self.last = now
                joules = sum(self.totals[z.id] for z in self.zones if z.summed) / 1e6
                self.readings.append((self.now(), joules))
            else:
                t0 = self.now()
                watts = self._power()
                self.readings.append(((t0 + self.now()) / 2, watts))
        except (ValueError, rapl.RaplError, OSError) as exc:
            self.read_errors += 1
            if len(self.errors) < 20:
                self.errors.append(str(exc))

    def finish(self) -> ProbeData:
        if self.source is None:
            return ProbeData("unavailable", {"source": None, "reason": self.why_none}, self.why_none)
        end = self.t_end
        self.sample()  # the reading right after the benchmark ended
        return integrate(self.source, self.readings, end, self.interval, start=self.t_begin, quality={
            "wraps_corrected": self.wraps, "read_errors": self.read_errors, "errors": self.errors,
            "domains_summed": self.domains if self.source == "rapl" else [WHAT[self.source]],
        }, idle_watts=self.idle_watts, idle_how=self.idle_how)


def integrate(source: str, readings: list[tuple[float, float]], end: float, interval: float, *,
              quality: dict[str, Any], start: float = 0.0, idle_watts: float | None = None,
              idle_how: str = "") -> ProbeData:
    """Joules and mean watts over the window [start, end] (start() returned .. stop() was
    called) from power readings (trapezoid, the power at the window's edges interpolated
    from the readings around them, held flat beyond the first and last) or from cumulative
    RAPL joules (the difference between the readings that bracket the window)."""
    quality = {**quality, "interval": interval, "readings": len(readings)}
    base = {"source": source, "measures": WHAT[source], "quality": quality}
    if len(readings) < 2 if source == "rapl" else not readings:
        return ProbeData.failed(f"{source}: too few readings ({len(readings)})"
                                + (f": {quality['errors'][0]}" if quality.get("errors") else ""), **base)
    gaps = [round(b[0] - a[0], 3) for a, b in zip(readings, readings[1:]) if b[0] - a[0] > 2 * interval]
    quality["gaps"] = gaps
    if source == "rapl":
        joules = readings[-1][1] - readings[0][1]
        seconds = readings[-1][0] - readings[0][0]
    else:
        seconds = end - start
        points = [(start, _power_at(readings, start)), *[p for p in readings if start < p[0] < end],
                  (end, _power_at(readings, end))]
        joules = sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in zip(points, points[1:]))
    if seconds <= 0:
        return ProbeData.failed(f"{source}: zero-length window", **base)
    data: dict[str, Any] = {**base, "joules": joules, "seconds": seconds, "watts_mean": joules / seconds,
                            "series": [[round(t, 4), round(v, 6)] for t, v in readings]}
    if idle_watts is not None:
        data.update(idle_watts=idle_watts, idle_how=idle_how, joules_above_idle=joules - idle_watts * seconds)
    return ProbeData("ok", data)


def _power_at(readings: list[tuple[float, float]], t: float) -> float:
    """Power at time t, linear between the readings around it, held flat beyond the ends."""
    if t <= readings[0][0]:
        return readings[0][1]
    for a, b in zip(readings, readings[1:]):
        if a[0] <= t <= b[0]:
            return a[1] + (b[1] - a[1]) * (t - a[0]) / (b[0] - a[0]) if b[0] > a[0] else b[1]
    return readings[-1][1]

"""sockperf ping-pong: request-response latency between two endpoints, the one-way delay of
the Raspberry Pi study (seeds/000: TCP, `-t 20 -m SIZE`) and the latency distribution up to
the 99.999th percentile of the line-of-containers study (seeds/004).

The client sends one message, waits for the echo, sends the next (closed loop). By default
sockperf reports half the round-trip time ("one-way" latency, RTT/2), which is what the
study quotes; `full_rtt: true` adds --full-rtt and reports whole round trips (sockperf then
prints "avg-rtt=" instead of "avg-latency="; the parser insists on the one that matches). The first
400 ms of a run are warm-up and the last 50 ms cool-down, both dropped by sockperf itself
("[Valid Duration] RunTime=1.550 sec" of a 2 s run); there is nothing to discard here.

Metric names p50 … p99_999 follow the report's percentile convention (HDR plot). p99.999
needs well over 10^5 round trips: at ~30 µs per round trip a 20 s run gives ~6*10^5.

Quirks of sockperf 3.7 (Debian 12): it exits 0 when it cannot connect
("sockperf: ERROR: Can`t connect socket (errno=111 Connection refused)") and when a UDP
server never answers ("sockperf: No messages were received from the server. Is the server
down?"), so the parser looks for those; statistics lines carry ANSI colour codes
(ESC[2;35m), stripped before matching; MAX and MIN are printed as `<MAX>`/`<MIN>`, some
versions print them without the angle brackets (both accepted). sockperf 3.8 and 3.10 (newer
upstream releases than any Debian ships) extend the mean line: `avg-latency=X (std-dev=Y, mean-ad=..., median-ad=..., siqr=...,
cv=..., std-error=..., 99.0% ci=[...])`; only X and Y are read (recorded: tests/data/sockperf/upstream-*).
"""
from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field

from ..errors import ParseError
from .base import Metric, PairBenchmark, PairParams, Params, search

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NUM = r"([0-9]+(?:\.[0-9]+)?)"
# what: "latency" (RTT/2) or "rtt" (--full-rtt); 3.8+ add ", mean-ad=..., 99.0% ci=[...]" after std-dev
_AVG = rf"====> avg-{{what}}={_NUM} \(std-dev={_NUM}[,)]"
_PERCENTILE = rf"^sockperf: ---> percentile {_NUM} =\s*{_NUM}\s*$"
_MAX = rf"^sockperf: ---> <?MAX>? observation =\s*{_NUM}\s*$"
_MIN = rf"^sockperf: ---> <?MIN>? observation =\s*{_NUM}\s*$"
_VALID = rf"^sockperf: \[Valid Duration\] RunTime={_NUM} sec; SentMessages=([0-9]+); ReceivedMessages=([0-9]+)"
_DROPPED = r"^sockperf: # dropped messages = ([0-9]+);"
_FAILURES = (
    r"sockperf: ERROR:.*$",  # not anchored: it can follow "IP = ... # TCP " on one line
    r"^sockperf: No messages were received from the server.*$",
)

# sockperf prints these percentiles; metric name -> printed value.
PERCENTILES: dict[str, str] = {
    "p25": "25.000", "p50": "50.000", "p75": "75.000", "p90": "90.000", "p99": "99.000",
    "p99_9": "99.900", "p99_99": "99.990", "p99_999": "99.999",
}


class SockperfParams(PairParams):
    protocol: Literal["tcp", "udp"] = Field("tcp", description="transport (--tcp or sockperf's default UDP)")
    time: int = Field(5, ge=1, le=3600, description="run time in seconds (-t), 400 ms warm-up included; study: 20")
    msg_size: int = Field(
        64, ge=14, le=65507,
        description="message size in bytes (-m; sockperf accepts 14..65507)",
    )
    full_rtt: bool = Field(False, description="report whole round trips (--full-rtt) instead of RTT/2")
    port: int = Field(11111, ge=1, le=65535, description="server port")


class Sockperf(PairBenchmark):
    """Ping-pong latency distribution (µs) and round-trip rate."""

    name: ClassVar[str] = "sockperf"
    tool: ClassVar[str] = "sockperf"
    packages: ClassVar[tuple[str, ...]] = ("sockperf",)
    Params: ClassVar[type[Params]] = SockperfParams
    description: ClassVar[str] = "sockperf ping-pong: latency percentiles up to p99.999 (RTT/2 by default)"
    study: ClassVar[dict[str, Any]] = {"time": 20}
    """The `full` profile: density and line-of-containers studies: `-t 20`."""

    params: SockperfParams

    def __init__(self, params: SockperfParams) -> None:
        super().__init__(params)
        # The runner polls `ss -t` or `ss -u` by bench.protocol; here it depends on the params.
        self.protocol = self.params.protocol  # type: ignore[misc]

    def metrics(self) -> list[Metric]:
        p = self.params
        what = "round-trip time" if p.full_rtt else "one-way latency (RTT/2)"
        ctx = f"{p.protocol.upper()}, {p.msg_size} B messages, {p.time} s"

        def lat(name: str, label: str) -> Metric:
            return Metric(name, "us", False, "network", f"{label} {what}, {ctx}")

        out = [lat("avg", "mean")]
        out += [lat(name, f"{float(printed):g}th percentile") for name, printed in PERCENTILES.items()]
        out += [
            lat("max", "largest"), lat("min", "smallest"), lat("std_dev", "standard deviation of"),
            Metric("roundtrip_rate", "1/s", True, "network",
                   f"round trips per second in the valid duration (ReceivedMessages / RunTime), {ctx}"),
            Metric("dropped", "count", False, "network", f"messages sockperf counted as dropped, {ctx}"),
        ]
        return out

    def port(self) -> int:
        return self.params.port

    def _tcp(self) -> list[str]:
        return ["--tcp"] if self.params.protocol == "tcp" else []

    def server_command(self, workdir: str) -> list[str]:
        return ["sockperf", "server", "-p", str(self.params.port), *self._tcp(), "-i", "0.0.0.0"]

    def client_command(self, workdir: str, server: str) -> list[str]:
        p = self.params
        argv = ["sockperf", "ping-pong", "-i", server, "-p", str(p.port), *self._tcp(),
                "-t", str(p.time), "-m", str(p.msg_size)]
        if p.full_rtt:
            argv.append("--full-rtt")
        return argv

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        text = _ANSI.sub("", stdout + "\n" + stderr)
        for pattern in _FAILURES:
            bad = re.search(pattern, text, re.M)
            if bad:
                raise ParseError(self.tool, f"no line like {pattern!r} (found {bad.group(0)!r})", source)
        valid = search(_VALID, text, self.tool, source, re.M)
        avg = search(_AVG.format(what="rtt" if self.params.full_rtt else "latency"), text, self.tool, source)
        found = {float(p): float(v) for p, v in re.findall(_PERCENTILE, text, re.M)}
        values: dict[str, float] = {"avg": float(avg.group(1)), "std_dev": float(avg.group(2))}
        for name, printed in PERCENTILES.items():
            if float(printed) not in found:
                raise ParseError(self.tool, f"{_PERCENTILE!r} for percentile {printed}", source)
            values[name] = found[float(printed)]
        values["max"] = float(search(_MAX, text, self.tool, source, re.M).group(1))
        values["min"] = float(search(_MIN, text, self.tool, source, re.M).group(1))
        runtime, received = float(valid.group(1)), int(valid.group(3))
        if runtime <= 0 or received <= 0:
            raise ParseError(self.tool, f"messages received in a positive run time ({valid.group(0)!r})", source)
        values["roundtrip_rate"] = received / runtime
        values["dropped"] = float(search(_DROPPED, text, self.tool, source, re.M).group(1))
        return values

    def version_command(self) -> list[str]:
        return ["sockperf", "--version"]

    def execution_timeout(self) -> float:
        return 2.0 * self.params.time + 60.0

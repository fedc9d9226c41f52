"""ping: ICMP echo round-trip time to the other endpoint (the LSBS ping component, seeds/003).

There is no server program: the peer's kernel answers. The runner still places a "server"
end (a peer instance, the host, or the instance itself) and starts its server command, so
the server is a placeholder process that only keeps the far end's session alive
(`sleep infinity`, stopped by the runner like any server). port() is None: there is no port
to wait for. This needs the runner to skip its `ss` listening check when port() is None.

Packets go out every `interval` seconds (-i; iputils lets non-root users go down to 2 ms,
root below that) and -q prints only the summary. Without -w a partial loss still exits 0
and is reported as packet_loss; a run with no reply at all exits 1 and has no rtt line.
ping needs CAP_NET_RAW or a ping_group_range that includes the user (Debian ships
/usr/bin/ping with cap_net_raw=ep); container runtimes grant NET_RAW by default.
"""
from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field

from ..errors import ParseError
from .base import Metric, PairBenchmark, PairParams, Params, search

_NUM = r"([0-9]+(?:\.[0-9]+)?)"
# iputils may append ", pipe N" and ", ipg/ewma A/B ms" to this line.
_RTT = rf"^rtt min/avg/max/mdev = {_NUM}/{_NUM}/{_NUM}/{_NUM} ms"
_SUMMARY = (
    r"^([0-9]+) packets transmitted, ([0-9]+) received(?:, \+[0-9]+ duplicates)?"
    r"(?:, \+[0-9]+ corrupted)?(?:, \+([0-9]+) errors)?, ([0-9.]+(?:e-?[0-9]+)?)% packet loss"  # printf %g
)


class PingParams(PairParams):
    count: int = Field(25, ge=1, le=1_000_000, description="echo requests sent (-c)")
    interval: float = Field(
        0.2, ge=0.002, le=60.0,
        description="seconds between requests (-i; iputils allows non-root users down to 2 ms)",
    )
    size: int = Field(56, ge=0, le=65507, description="ICMP payload bytes (-s); 56 gives 84-byte IP packets")


class Ping(PairBenchmark):
    """Round-trip time min/avg/max/mdev and packet loss of `ping -q`."""

    name: ClassVar[str] = "ping"
    tool: ClassVar[str] = "ping"
    packages: ClassVar[tuple[str, ...]] = ("iputils-ping",)
    Params: ClassVar[type[Params]] = PingParams
    description: ClassVar[str] = "ping (ICMP echo): round-trip time and packet loss"
    study: ClassVar[dict[str, Any]] = {"count": 100}
    """The `full` profile: LSBS ping component."""

    params: PingParams

    def metrics(self) -> list[Metric]:
        p = self.params
        ctx = f"{p.count} x {p.size} B payload every {p.interval:g} s"
        return [
            Metric("rtt_min", "ms", False, "network", f"smallest round-trip time, {ctx}"),
            Metric("rtt_avg", "ms", False, "network", f"mean round-trip time, {ctx}"),
            Metric("rtt_max", "ms", False, "network", f"largest round-trip time, {ctx}"),
            Metric("rtt_mdev", "ms", False, "network", f"mean deviation of the round-trip time, {ctx}"),
            Metric("packet_loss", "%", False, "network", f"requests without reply, {ctx}"),
        ]

    def port(self) -> int | None:
        return None

    def server_command(self, workdir: str) -> list[str]:
        return ["sleep", "infinity"]

    def client_command(self, workdir: str, server: str) -> list[str]:
        p = self.params
        return ["ping", "-n", "-q", "-c", str(p.count), "-i", f"{p.interval:g}", "-s", str(p.size), server]

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        summary = search(_SUMMARY, stdout, self.tool, source, re.M)
        sent, received = int(summary.group(1)), int(summary.group(2))
        if received == 0:
            raise ParseError(self.tool, f"at least one reply (got {summary.group(0)!r})", source)
        rtt = search(_RTT, stdout, self.tool, source, re.M)
        if sent != self.params.count:
            raise ParseError(self.tool, f"{self.params.count} packets transmitted (got {sent})", source)
        return {
            "rtt_min": float(rtt.group(1)),
            "rtt_avg": float(rtt.group(2)),
            "rtt_max": float(rtt.group(3)),
            "rtt_mdev": float(rtt.group(4)),
            "packet_loss": float(summary.group(4)),
        }

    def version_command(self) -> list[str]:
        return ["ping", "-V"]

    def execution_timeout(self) -> float:
        return self.params.count * self.params.interval * 1.5 + 60.0

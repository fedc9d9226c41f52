"""iperf3: TCP, reverse TCP and UDP throughput between two endpoints (LSBS seeds/003, the Pi
studies seeds/000 and seeds/001).

One server per client, never shared: the server runs `iperf3 -s -1` (--one-off), serves this
one test and exits. The client runs with -J; its JSON holds both ends' view.

`length` is iperf3's -l: the size of each write() (TCP) or datagram payload (UDP) handed to
the socket, and the receiver reads with the same block size. For TCP it is NOT a packet size:
the kernel merges and splits the stream into segments (MSS, GSO/GRO), so a sweep over
8..65000 B (the density study) measures per-syscall and copy cost, not per-packet cost. For
UDP it is the datagram payload (16..65507 B), and large datagrams are IP-fragmented.

Quirks of iperf 3.12 (Debian 12):
- with -J a failed test exits 0 and prints a JSON object with an "error" key, e.g.
  {"error": "unable to connect to server: Connection refused"}: the parser checks for it;
- for UDP, `end.sum.bits_per_second` is the *sender's* rate (jitter and loss in the same
  object come from the receiver); the received rate is `end.sum_received.bits_per_second`,
  which is what "throughput" reports. iperf3 before 3.10 (Debian 11's 3.9, 3.1.3 of older
  distributions) has no `sum_received`: there the received rate is the datagrams the receiver
  counted times their size over the sender's duration (`_received_rate_from_mixed_sum`);
  loss and jitter are the receiver's in every version (datagrams lost after the last one
  that arrived are invisible to the receiver, in every version);
- with -R the server may still be finishing when the runner stops it: it then exits 1 with
  "iperf3: interrupt - the server has terminated", harmless, the client already has its JSON.
cpu_client / cpu_server are iperf3's cpu_utilization_percent host_total / remote_total
(user + system time of that iperf3 process over wall time).
"""
from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from ..errors import ParseError
from .base import Metric, PairBenchmark, PairParams, Params

Mode = Literal["tcp", "tcp-reverse", "udp"]

_RATE = r"^[0-9]+(?:\.[0-9]+)?[KMGkmg]?$"
UDP_MAX_LENGTH = 65507
UDP_MIN_LENGTH = 16
UDP_LENGTH = 1448
"""UDP datagrams' payload where `length` is not given. iperf3 sizes them by its control
connection's MSS: 32 KiB over loopback (native's path to the host), 1448 B over a bridge (a
container's; recorded in tests/data/iperf3/udp_lo_* and udp_netns_*), so native and containers
sent different packets at one rate. An Ethernet MSS for all."""
TCP_MAX_LENGTH = 1024 * 1024


class Iperf3Params(PairParams):
    mode: Mode = Field(
        "tcp",
        description="tcp: client sends; tcp-reverse: server sends (-R); udp: client sends UDP at udp_rate",
    )
    time: int = Field(5, ge=1, le=3600, description="measuring time in seconds (-t); the studies use 20")
    length: int | None = Field(
        None, ge=1, le=TCP_MAX_LENGTH,
        description="-l: bytes per write() (TCP; not a packet size) or UDP payload (16..65507); "
                    f"None = 128 KiB TCP (iperf3's default), {UDP_LENGTH} B UDP on every platform",
    )
    udp_rate: str | None = Field(
        None, pattern=_RATE,
        description="udp only: target rate for -b, bits/s with optional K/M/G suffix; None = 1G",
    )
    parallel: int = Field(1, ge=1, le=128, description="parallel streams (-P) of the one client")
    port: int = Field(5201, ge=1, le=65535, description="server control/data port")

    @model_validator(mode="after")
    def _check(self) -> Iperf3Params:
        if self.mode != "udp" and self.udp_rate is not None:
            raise ValueError("udp_rate applies to mode=udp only")
        if self.mode == "udp" and self.length is not None and not (
            UDP_MIN_LENGTH <= self.length <= UDP_MAX_LENGTH
        ):
            raise ValueError(f"udp length must be {UDP_MIN_LENGTH}..{UDP_MAX_LENGTH} bytes (iperf3 limit)")
        return self


class Iperf3(PairBenchmark):
    """Throughput (and retransmits or loss/jitter) of one iperf3 test."""

    name: ClassVar[str] = "iperf3"
    tool: ClassVar[str] = "iperf3"
    packages: ClassVar[tuple[str, ...]] = ("iperf3",)
    Params: ClassVar[type[Params]] = Iperf3Params
    description: ClassVar[str] = "iperf3 -J: TCP / reverse TCP / UDP throughput, one server per client"
    study: ClassVar[dict[str, Any]] = {"time": 20}
    """The `full` profile: the studies: `iperf3 -t 20`."""
    protocol: ClassVar[Literal["tcp", "udp"]] = "tcp"  # the control connection, also for UDP tests

    params: Iperf3Params

    def _context(self) -> str:
        p = self.params
        length = f"-l {self.length} B" if self.length else "default -l"
        rate = f", target {self.udp_rate}bit/s" if p.mode == "udp" else ""
        return f"{p.mode}, {p.parallel} stream(s), {length}{rate}, {p.time} s"

    @property
    def length(self) -> int | None:
        return self.params.length or (UDP_LENGTH if self.params.mode == "udp" else None)

    @property
    def udp_rate(self) -> str:
        return self.params.udp_rate or "1G"

    def metrics(self) -> list[Metric]:
        ctx = self._context()
        out = [Metric("throughput", "Mbit/s", True, "network", f"received rate (receiver's view), {ctx}")]
        if self.params.mode == "udp":
            out += [
                Metric("loss", "%", False, "network", f"datagrams lost (receiver's count), {ctx}"),
                Metric("jitter", "ms", False, "network", f"receiver's RFC 3550 jitter, {ctx}"),
            ]
        else:
            out.append(Metric("retransmits", "count", False, "network", f"TCP retransmits of the sender, {ctx}"))
        out += [
            Metric("cpu_client", "%", False, "network", f"iperf3 client CPU (user+system / wall), {ctx}"),
            Metric("cpu_server", "%", False, "network", f"iperf3 server CPU (user+system / wall), {ctx}"),
        ]
        return out

    def port(self) -> int:
        return self.params.port

    def server_command(self, workdir: str) -> list[str]:
        return ["iperf3", "-s", "-1", "-p", str(self.params.port)]

    def client_command(self, workdir: str, server: str) -> list[str]:
        p = self.params
        argv = ["iperf3", "-c", server, "-p", str(p.port), "-J", "-t", str(p.time)]
        if p.parallel > 1:
            argv += ["-P", str(p.parallel)]
        if self.length is not None:
            argv += ["-l", str(self.length)]
        if p.mode == "tcp-reverse":
            argv.append("-R")
        elif p.mode == "udp":
            argv += ["-u", "-b", self.udp_rate]
        return argv

    def parse(self, stdout: str, stderr: str = "", source: str = "<output>") -> dict[str, float]:
        try:
            data = json.loads(stdout)
        except json.JSONDecodeError:
            detail = stderr.strip().splitlines()[-1:] or ["empty stdout"]
            raise ParseError(self.tool, f"a JSON document (-J); got {detail[0]!r}", source) from None
        if not isinstance(data, dict):
            raise ParseError(self.tool, "a JSON object", source)
        if data.get("error"):
            raise ParseError(self.tool, f"no \"error\" key (found {data['error']!r})", source)
        want = "UDP" if self.params.mode == "udp" else "TCP"
        got = _get(data, ("start", "test_start", "protocol"), self.tool, source)
        if got != want:
            raise ParseError(self.tool, f"start.test_start.protocol == {want!r} (got {got!r})", source)
        reverse = _get(data, ("start", "test_start", "reverse"), self.tool, source)
        if bool(reverse) != (self.params.mode == "tcp-reverse"):
            raise ParseError(self.tool, f"start.test_start.reverse matching mode {self.params.mode}", source)

        if self.params.mode == "udp":
            # Not end.sum: there bits_per_second is the sender's rate (loss/jitter are the receiver's).
            if "sum_received" in (data.get("end") or {}):
                summary = _get(data, ("end", "sum_received"), self.tool, source)
                rate = _num(summary, "bits_per_second", "end.sum_received", self.tool, source)
                where = "end.sum_received"
            else:  # iperf3 < 3.10 (3.1.3, bullseye's 3.9): only end.sum, which mixes both ends
                summary = _get(data, ("end", "sum"), self.tool, source)
                rate = _received_rate_from_mixed_sum(data, summary, self.tool, source)
                where = "end.sum"
            values = {
                "throughput": rate / 1e6,
                "loss": _num(summary, "lost_percent", where, self.tool, source),
                "jitter": _num(summary, "jitter_ms", where, self.tool, source),
            }
        else:
            received = _get(data, ("end", "sum_received"), self.tool, source)
            sent = _get(data, ("end", "sum_sent"), self.tool, source)
            values = {
                "throughput": _num(received, "bits_per_second", "end.sum_received", self.tool, source) / 1e6,
                "retransmits": _num(sent, "retransmits", "end.sum_sent", self.tool, source),
            }
        if values["throughput"] <= 0:
            raise ParseError(self.tool, "a positive received bits_per_second", source)
        cpu = _get(data, ("end", "cpu_utilization_percent"), self.tool, source)
        values["cpu_client"] = _num(cpu, "host_total", "end.cpu_utilization_percent", self.tool, source)
        values["cpu_server"] = _num(cpu, "remote_total", "end.cpu_utilization_percent", self.tool, source)
        return values

    def version_command(self) -> list[str]:
        return ["iperf3", "--version"]

    def execution_timeout(self) -> float:
        return 2.0 * self.params.time + 60.0


def _received_rate_from_mixed_sum(data: Any, summary: Any, tool: str, source: str) -> float:
    """The receiver's rate (bit/s) from an iperf3 < 3.10 UDP `end.sum`.

    There `bytes` and `bits_per_second` are the sender's, while `packets` (the highest sequence
    number that arrived) and `lost_packets` (the gaps below it) are the receiver's counts. The
    datagrams that arrived, `packets - lost_packets`, times the datagram size
    (`start.test_start.blksize`, every datagram is that long) are the bytes received; they are
    timed over the sender's duration (`bytes * 8 / bits_per_second`). Scaling the sender's rate
    by `(packets - lost) / packets` instead counts datagrams lost after the last one that arrived
    as received (tests/data/iperf3/upstream-iperf3.1.3_*_udp_rate5G: 838 of 62936).
    """
    sent_bytes = _num(summary, "bytes", "end.sum", tool, source)
    sent_rate = _num(summary, "bits_per_second", "end.sum", tool, source)
    packets = _num(summary, "packets", "end.sum", tool, source)
    lost = _num(summary, "lost_packets", "end.sum", tool, source)
    size = _num(_get(data, ("start", "test_start"), tool, source), "blksize", "start.test_start", tool, source)
    if sent_bytes <= 0 or packets <= 0 or size <= 0:
        raise ParseError(tool, "end.sum.bytes, end.sum.packets and start.test_start.blksize > 0", source)
    received_bytes = (packets - lost) * size
    if received_bytes > sent_bytes:
        raise ParseError(tool, f"no more bytes received ({received_bytes:g}) than sent ({sent_bytes:g})", source)
    return sent_rate * received_bytes / sent_bytes


def _get(data: Any, path: tuple[str, ...], tool: str, source: str) -> Any:
    node = data
    for key in path:
        if not isinstance(node, dict) or key not in node:
            raise ParseError(tool, "JSON key " + ".".join(path), source)
        node = node[key]
    return node


def _num(obj: Any, key: str, where: str, tool: str, source: str) -> float:
    value = obj.get(key) if isinstance(obj, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParseError(tool, f"a number at {where}.{key}", source)
    return float(value)



"""iperf 2 (2.1.x) as the line's traffic generator and sink: argv and a parser of its output.

Why iperf 2: measured on the development machine between two namespaces (64 B UDP payload,
README, line experiment), it sends about 120 kpps and its sink receives about 100 kpps, with every
packet's one-way latency (send timestamp in the packet, receive time at the sink, one clock)
binned in 1 us bins (`--histograms=1u,N`) and the exact maximum per reporting interval
(`-i 0.1`: worst case per 100 ms). sockperf 3.7 reaches 37 kpps and measures round trips
(RTT/2), irtt 0.9 about 5 kpps (timer-bound), trafgen about 190 kpps but without receiving
or timestamps. So no small generator of our own was needed.

Each packet carries iperf's 16 B header (sequence number, send time): the smallest payload.
The sink's histogram bin `k` holds latencies in [(k-1) us, k us) (iperf's histograms.c).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...errors import ParseError

MIN_PAYLOAD = 16
"""iperf 2's per-datagram header (sequence number and send time) must fit in the payload."""
MAX_PAYLOAD = 1472
"""An Ethernet MTU of 1500 minus the IPv4 and UDP headers: larger payloads would fragment."""
BIN_US = 1
"""Width of a histogram bin (iperf's finest: whole microseconds)."""
BINS = 1_000_000
"""1 s of 1 us bins; slower packets are counted as out of bounds (obu) and recorded at 1 s."""
PORT = 5001

_SERVER_ROW = re.compile(
    r"^\[\s*\d+\]\s+(?P<start>[\d.]+)-(?P<end>[\d.]+) sec\s+\S+ \S*Bytes\s+\S+ \S*bits/sec\s+\S+ ms\s+"
    r"(?P<lost>-?\d+)/(?P<total>\d+)\s+\([^)]*\)\s+(?P<avg>[\d.]+)/(?P<min>[\d.]+)/(?P<max>[\d.]+)/(?P<std>[\d.]+) ms")
_PDF = re.compile(r"^\[\s*\d+\]\s+(?P<start>[\d.]+)-(?P<end>[\d.]+) sec T8(?P<final>\(f\))?-PDF: "
                  r"bin\(w=(?P<w>\d+)us\):cnt\((?P<cnt>\d+)\)=(?P<bins>[\d:,]*)"
                  r"(?: \(.*obl/obu=(?P<obl>\d+)/(?P<obu>\d+)\))?")
_SENT = re.compile(r"^\[\s*\d+\] Sent (?P<sent>\d+) datagrams")


def server_argv(address: str, seconds: float) -> list[str]:
    """The sink: one test (-P 1), 100 ms reports, 1 us latency bins."""
    return ["iperf", "-s", "-u", "-e", "-i", "0.1", "-P", "1", "-B", address, "-p", str(PORT),
            f"--histograms={BIN_US}u,{BINS}", "-t", f"{seconds + 30:g}"]


def client_argv(address: str, rate_pps: float, seconds: float, payload: int) -> list[str]:
    return ["iperf", "-c", address, "-p", str(PORT), "-u", "-l", str(payload), "-b", f"{int(rate_pps)}pps",
            "-t", f"{seconds:g}", "--trip-times", "-e"]


@dataclass
class Trial:
    """One trial: what the source sent, what the sink received, and the latencies."""

    rate_pps: float
    seconds: float
    sent: int
    received: int
    bins: dict[int, int] = field(default_factory=dict)
    """Histogram of one-way latency: bin index (upper edge in us) -> packets."""
    above: int = 0
    """Packets slower than the histogram's range (1 s)."""
    worst_ms: list[tuple[float, float]] = field(default_factory=list)
    """(end of interval in s, largest one-way latency in ms) per 100 ms interval."""
    max_ms: float | None = None
    intervals: list[tuple[float, dict[int, int]]] = field(default_factory=list)
    """(end of interval in s, histogram bins) per 100 ms: when each latency happened, to 100 ms,
    from which the worst N latencies over time are selected (the paper's Fig. 8)."""

    @property
    def loss(self) -> float:
        """Share of the sent packets that did not arrive (0 when the sink saw them all)."""
        return max(0, self.sent - self.received) / self.sent if self.sent else 1.0

    @property
    def sustained(self) -> bool:
        """Whether the source really sent the asked rate (within 1 %). On veth the forwarding
        work of the line can run in the sender's own context and slow it down: such a trial
        did not offer the load, so it cannot pass a goal at that rate, whatever its loss."""
        return self.sent >= 0.99 * self.rate_pps * self.seconds

    @property
    def offered_pps(self) -> float:
        """The rate the source really sent, which can fall short of the one asked for."""
        return self.sent / self.seconds if self.seconds else 0.0


def parse(rate_pps: float, seconds: float, client_out: str, server_out: str, *, source: str = "iperf") -> Trial:
    """Read a trial; a run without the client's count or the sink's final report is an error."""
    sent = next((int(m["sent"]) for line in client_out.splitlines() if (m := _SENT.match(line))), None)
    if sent is None:
        raise ParseError("iperf client", "Sent N datagrams", source)
    rows = [m for line in server_out.splitlines() if (m := _SERVER_ROW.match(line))]
    finals = [m for m in rows if float(m["start"]) == 0.0 and float(m["end"]) >= 0.5 * seconds]
    pdfs = [m for line in server_out.splitlines() if (m := _PDF.match(line))]
    pdf = [m for m in pdfs if m["final"]]
    if not finals or not pdf:
        raise ParseError("iperf sink", "the final report and T8(f)-PDF histogram (did the packets arrive?)", source)
    final = finals[-1]
    received = int(final["total"]) - max(0, int(final["lost"]))
    bins = _bins(pdf[-1])  # its packets beyond the range are `above`, recorded at 1 s by hdr.from_bins
    intervals = [(float(m["end"]), _bins(m, obu=True)) for m in pdfs if not m["final"]]
    rest = _bins(pdf[-1], obu=True)  # the final report's packets no 100 ms interval holds (its last ms)
    for _, b in intervals:
        for k, c in b.items():
            rest[k] = rest.get(k, 0) - c
    if any(c > 0 for c in rest.values()):
        intervals.append((float(pdf[-1]["end"]), {k: c for k, c in rest.items() if c > 0}))
    worst = [(float(m["end"]), float(m["max"])) for m in rows if m is not final and float(m["end"]) - float(m["start"]) < 0.2]
    # iperf counts its closing datagram in "Sent": the data datagrams are one fewer.
    return Trial(rate_pps=rate_pps, seconds=seconds, sent=max(0, sent - 1), received=received, bins=bins,
                 above=int(pdf[-1]["obu"] or 0), worst_ms=worst, max_ms=float(final["max"]), intervals=intervals)


def _bins(m: re.Match[str], obu: bool = False) -> dict[int, int]:
    """A PDF line's bins; with `obu`, its packets beyond the range in bin BINS + 1 (about 1 s)."""
    bins = {int(k): int(v) for k, v in (pair.split(":") for pair in m["bins"].split(",") if pair)}
    if obu and m["obu"] and int(m["obu"]):
        bins[BINS + 1] = bins.get(BINS + 1, 0) + int(m["obu"])
    return bins


def worst(intervals: list[tuple[float, dict[int, int]]], n: int) -> list[list[float]]:
    """The n largest latencies of a trial as [end of their 100 ms interval in s, latency in us (the
    bin's middle), packets], largest first; a bin straddling the n-th is cut to fill n exactly.
    iperf 2 keeps no per-packet log, so the time is known to the 100 ms interval."""
    cells = sorted(((k, end, c) for end, bins in intervals for k, c in bins.items() if c > 0),
                   key=lambda x: (-x[0], x[1]))
    out: list[list[float]] = []
    left = n
    for k, end, c in cells:
        if left <= 0:
            break
        take = min(c, left)
        out.append([end, (k - 0.5) * BIN_US, take])
        left -= take
    return out

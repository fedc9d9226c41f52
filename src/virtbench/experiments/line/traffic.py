"""One trial on a built line: the iperf 2 sink in the sink's namespace, the source in the
source's, each pinned as the mode says; the trial's packets, loss and latencies."""
from __future__ import annotations

import time
from dataclasses import dataclass

from ... import proc
from ...errors import CommandError, ParseError
from . import iperf2
from .pinning import Placement, pinned
from .topology import Line


@dataclass
class Raw:
    """The tools' own output of a trial, kept for the store (a failed trial keeps it too)."""

    argv: list[str]
    client: str
    server: str


class TrialFailed(Exception):
    def __init__(self, message: str, raw: Raw) -> None:
        super().__init__(message)
        self.raw = raw


def _listening(line: Line, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = proc.run(["ip", "netns", "exec", line.sink, "ss", "-Hlun", "sport", "=", f":{iperf2.PORT}"],
                       timeout=10, check=False).stdout
        if out.strip():
            return
        time.sleep(0.02)


def run_trial(line: Line, rate_pps: float, seconds: float, payload: int, where: Placement) -> tuple[iperf2.Trial, Raw]:
    server_argv = ["ip", "netns", "exec", line.sink, *pinned(iperf2.server_argv(line.sink_address, seconds), where.sink)]
    client_argv = ["ip", "netns", "exec", line.source,
                   *pinned(iperf2.client_argv(line.sink_address, rate_pps, seconds, payload), where.generator)]
    server = proc.spawn(server_argv)
    client_out = ""
    try:
        _listening(line)
        try:
            res = proc.run(client_argv, timeout=seconds + 30, check=False)
            client_out = res.stdout + res.stderr
        except CommandError as exc:
            client_out = exc.stdout + exc.stderr + f"\n(timed out after {seconds + 30:g} s)"
        deadline = time.monotonic() + 5
        while server.alive() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        result = server.stop(grace=1.0)
    raw = Raw(client_argv, client_out, result.stdout + result.stderr)
    try:
        return iperf2.parse(rate_pps, seconds, client_out, raw.server, source=f"trial at {rate_pps:.0f} pps"), raw
    except ParseError as exc:
        raise TrialFailed(str(exc), raw) from None


def warm(line: Line, payload: int) -> None:
    """A short slow trial right after building: every hop resolves its neighbour (ARP) now, not
    during the first measured trial (where it showed as 10-20 ms in the first 100 ms)."""
    try:
        run_trial(line, 1000, 0.3, payload, Placement([], [], []))
    except TrialFailed:
        pass  # the measured trials report what is wrong, with the tools' output

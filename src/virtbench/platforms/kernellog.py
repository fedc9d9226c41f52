"""The kernel's log, read for OOM evidence: what it logged after a mark.

The mark is a record's sequence number from `/dev/kmsg`, never a line count: the ring buffer
is a fixed size, so on a host that has run for a while (many OOM reports, network devices
coming and going) each new line pushes an old one out, the count stays the same, and "the
lines after line N" is empty however much was logged. Sequence numbers only grow.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

KMSG = "/dev/kmsg"
OOM = re.compile(r"(out of memory|oom-kill|Killed process|oom_reaper)", re.IGNORECASE)
KERNEL_FACILITY = 0


@dataclass(frozen=True)
class Record:
    """One record of /dev/kmsg: `PRIORITY,SEQUENCE,MICROSECONDS,FLAGS;MESSAGE` (Documentation/ABI/testing/dev-kmsg)."""

    facility: int
    sequence: int
    message: str
    microseconds: int = 0

    @property
    def line(self) -> str:
        """As `dmesg` prints it, with the seconds since boot in front."""
        seconds, micro = divmod(self.microseconds, 1_000_000)
        return f"[{seconds:5d}.{micro:06d}] {self.message}"


def parse_record(text: str) -> Record | None:
    """A record as one read of /dev/kmsg returns it; its continuation lines (` KEY=VALUE`) are dropped."""
    head, sep, rest = text.partition(";")
    fields = head.split(",")
    if not sep or len(fields) < 4 or not all(f.isdigit() for f in fields[:3]):
        return None
    return Record(facility=int(fields[0]) >> 3, sequence=int(fields[1]), message=rest.split("\n", 1)[0],
                  microseconds=int(fields[2]))


def records() -> list[Record]:
    """The kernel's records still in its ring buffer; none where the log cannot be read (no
    CAP_SYSLOG in a container), which leaves the cgroup counters as the only evidence."""
    try:
        fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return []
    found: list[Record] = []
    try:
        while True:
            try:
                chunk = os.read(fd, 16384)
            except BlockingIOError:
                break  # read up to the newest record
            except BrokenPipeError:
                continue  # records overwritten under the reader: it goes on from the oldest left
            except OSError:
                break
            if not chunk:
                break
            record = parse_record(chunk.decode(errors="replace"))
            if record is not None and record.facility == KERNEL_FACILITY:
                found.append(record)
    finally:
        os.close(fd)
    return found


def mark() -> int:
    """The sequence number of the kernel's newest record (-1 if none could be read)."""
    found = records()
    return found[-1].sequence if found else -1


def oom_lines_since(after: int, found: list[Record] | None = None) -> list[str]:
    """The OOM lines the kernel logged after the record `mark()` returned (at most the last 20),
    as `dmesg` prints them."""
    found = records() if found is None else found
    return [r.line for r in found if r.sequence > after and OOM.search(r.message)][-20:]

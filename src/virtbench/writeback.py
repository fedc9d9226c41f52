"""Writing back what the preparation left dirty before anything is measured.

A first run on a machine builds its image and imports it into each engine (Docker, Podman,
containerd) during the warm-up round: hundreds of MiB of dirty page cache that the kernel
writes back over the next tens of seconds, while the noise check's rounds already run. fio's
random reads then queue behind that writeback: on a fresh machine the noise check read fio's
noise as +-12 to +-19 % a pair where quiet reruns read +-2 to +-6 %, and the adaptive rule
gave up on cells it judged out of reach at that noise. Flushing once, after the warm-up and
before the first round that counts, takes the preparation's writes out of the measurement.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

from . import hostinfo

DEFAULT_TIMEOUT = 120.0
"""A disk that cannot write back in two minutes is reported, not waited for."""
WORTH_SAYING = 16 * 2**20
"""Less dirty page cache than this is the usual background of a host: flushed without a word."""


@dataclass(frozen=True)
class Flush:
    dirty_bytes: int
    """Dirty and under-writeback page cache when the flush began."""
    seconds: float
    done: bool
    """False when the timeout ended the wait (the writeback goes on in the background)."""

    def line(self) -> str:
        mib = self.dirty_bytes / 2**20
        if not self.done:
            return (f"writeback of {mib:.0f} MiB left dirty by the preparation not finished after "
                    f"{self.seconds:.0f} s: the first rounds may read the disk slower")
        return f"flushed {mib:.0f} MiB the preparation left dirty in {self.seconds:.1f} s before measuring"


def dirty_bytes(meminfo_text: str | None = None) -> int:
    """Page cache waiting to be written or being written now (/proc/meminfo Dirty + Writeback)."""
    m = hostinfo.meminfo(meminfo_text)
    return m.get("Dirty", 0) + m.get("Writeback", 0)


def flush(timeout: float = DEFAULT_TIMEOUT) -> Flush:
    """sync(2), bounded: it runs in a thread so that a stuck disk costs at most `timeout`."""
    before, t0 = dirty_bytes(), time.monotonic()
    worker = threading.Thread(target=os.sync, name="virtbench-sync", daemon=True)
    worker.start()
    worker.join(timeout)
    return Flush(before, time.monotonic() - t0, not worker.is_alive())

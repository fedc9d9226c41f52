"""The flush between the warm-up and the first counted round (virtbench.writeback)."""
from __future__ import annotations

import os
import time

from virtbench import writeback

MEMINFO = "MemTotal:       24576000 kB\nDirty:             81920 kB\nWriteback:          2048 kB\n"


def test_dirty_bytes_counts_dirty_and_writeback_pages():
    assert writeback.dirty_bytes(MEMINFO) == (81920 + 2048) * 1024
    assert writeback.dirty_bytes("MemTotal: 1 kB\n") == 0


def test_flush_writes_back_what_a_write_left_dirty(tmp_path):
    f = tmp_path / "dirty"
    f.write_bytes(os.urandom(4 * 2**20))
    result = writeback.flush()
    assert result.done and result.seconds < writeback.DEFAULT_TIMEOUT
    assert "flushed" in result.line()


def test_a_flush_past_its_timeout_says_the_writeback_goes_on(monkeypatch):
    monkeypatch.setattr(writeback.os, "sync", lambda: time.sleep(1.0))
    result = writeback.flush(timeout=0.05)
    assert not result.done
    assert "not finished after" in result.line()

"""The kernel log's OOM lines after a mark, on records recorded from /dev/kmsg."""
from __future__ import annotations

from pathlib import Path

import pytest

from virtbench.platforms import cgroups, kernellog
from virtbench.platforms.kernellog import Record, parse_record

DATA = Path(__file__).parent.parent / "data" / "kmsg"


def recorded() -> list[Record]:
    """The recorded records, split where a read of /dev/kmsg would have split them."""
    text = (DATA / "memcg-oom-v1.records").read_text()
    records = [parse_record(line + "\n") for line in text.splitlines() if not line.startswith(" ")]
    assert all(records)
    return [r for r in records if r is not None]


def test_a_record_is_parsed_with_its_sequence_number_and_facility():
    first = recorded()[0]
    assert (first.facility, first.sequence) == (0, 345)
    assert first.message.startswith("tail invoked oom-killer: gfp_mask=")
    assert first.line.startswith("[  143.161199] tail invoked oom-killer")
    assert parse_record("12,7,100,-;from user space\n SUBSYSTEM=x\n") == Record(1, 7, "from user space", 100)
    assert parse_record("not a record") is None


def test_the_oom_lines_after_a_mark_name_the_killed_process():
    found = recorded()
    lines = kernellog.oom_lines_since(found[0].sequence - 1, found)
    assert any("Killed process" in line and "(tail)" in line for line in lines)
    assert any("] oom-kill:" in line and "task=tail" in line for line in lines)
    assert cgroups.log_oom_kills(lines, "vbrec") and not cgroups.log_oom_kills(lines, "other")
    assert kernellog.oom_lines_since(found[-1].sequence, found) == []


def test_a_full_ring_buffer_still_shows_what_came_after_the_mark(monkeypatch):
    """The CI failure: the 128 KiB buffer was full, each new record pushed an old one out, and a
    mark taken as a line count found nothing after it. Sequence numbers keep growing."""
    oom = recorded()
    before = [Record(0, n, f"veth{n}: entered promiscuous mode") for n in range(200, 345)]
    buffer_at_mark = before
    buffer_after = (before + oom)[len(oom):]  # as many pushed out as came in
    assert len(buffer_after) == len(buffer_at_mark)
    monkeypatch.setattr(kernellog, "records", lambda: buffer_at_mark)
    mark = kernellog.mark()
    monkeypatch.setattr(kernellog, "records", lambda: buffer_after)
    assert any("(tail)" in line for line in kernellog.oom_lines_since(mark))


@pytest.mark.skipif(not Path(kernellog.KMSG).exists(), reason="no /dev/kmsg")
def test_the_live_log_reads_in_order_with_growing_sequence_numbers():
    found = kernellog.records()
    if not found:
        pytest.skip("the kernel log is not readable here (no CAP_SYSLOG)")
    numbers = [r.sequence for r in found]
    assert numbers == sorted(numbers) and kernellog.mark() >= numbers[-1]
    assert all(r.facility == 0 for r in found)

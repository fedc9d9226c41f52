"""sysbench cpu parser and command, against outputs recorded from sysbench 1.0.20 (Debian 12)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.sysbench_cpu import SysbenchCpu, SysbenchCpuParams
from virtbench.errors import ParseError

DATA = Path(__file__).resolve().parent.parent / "data" / "sysbench"


def bench(**kw: object) -> SysbenchCpu:
    return SysbenchCpu(SysbenchCpuParams(**kw))


def value(text: str, label: str) -> float:
    """The number after 'label:' in the recorded text, read independently of the parser."""
    (line,) = [ln for ln in text.splitlines() if ln.strip().startswith(label + ":")]
    return float(line.split(":", 1)[1].strip().rstrip("s"))


@pytest.mark.parametrize("name", ["cpu_prime20000_t1_2s", "cpu_prime20000_t2_2s"])
def test_parse_recorded(name: str) -> None:
    text = (DATA / f"{name}.txt").read_text()
    b = bench(time=2)
    result = b.parse(text, "", name)
    assert set(result) == {m.name for m in b.metrics()}
    assert result["events_per_second"] == value(text, "events per second")
    assert result["latency_p95"] == value(text, "95th percentile")
    events = value(text, "total number of events")
    assert result["latency_avg"] == value(text, "sum") / events
    # the more precise mean agrees with sysbench's two-decimal "avg:"
    assert result["latency_avg"] == pytest.approx(value(text, "avg"), abs=0.005)


def test_concrete_values() -> None:
    result = bench().parse((DATA / "cpu_prime20000_t1_2s.txt").read_text())
    assert result["events_per_second"] == 1842.57
    assert result["latency_p95"] == 0.57
    assert result["latency_avg"] == 1998.39 / 3688  # latency sum / total number of events


def test_fatal_error() -> None:
    text = (DATA / "fail_max_prime0.txt").read_text()
    assert "FATAL" in text
    with pytest.raises(ParseError, match=r"total time.*fail_max_prime0"):
        bench().parse(text, "", "fail_max_prime0")


def test_truncated_and_empty() -> None:
    text = (DATA / "cpu_prime20000_t1_2s.txt").read_text()
    # killed (e.g. by the timeout) before the summary
    with pytest.raises(ParseError, match="total time"):
        bench().parse(text[: text.index("General statistics")])
    # summary cut after the totals: no latency section
    with pytest.raises(ParseError, match="sum"):
        bench().parse(text[: text.index("Latency (ms)")])
    with pytest.raises(ParseError, match="empty"):
        bench().parse("", "", "empty")


def test_zero_events_is_an_error() -> None:
    text = (DATA / "cpu_prime20000_t1_2s.txt").read_text()
    zero = re.sub(r"(total number of events:\s+)3688", r"\g<1>0", text)
    assert zero != text
    with pytest.raises(ParseError, match="at least one event"):
        bench().parse(zero)


def test_params() -> None:
    p = SysbenchCpuParams()
    assert (p.max_prime, p.threads, p.time) == (20000, 1, 10)
    for bad in (dict(nosuch=1), dict(threads=0), dict(time=0), dict(max_prime=0), dict(max_prime="x")):
        with pytest.raises(ValidationError):
            SysbenchCpuParams(**bad)


def test_command() -> None:
    argv = bench(max_prime=10000, threads=2, time=7).command("/scratch")
    assert argv[:2] == ["sysbench", "cpu"] and argv[-1] == "run"
    for opt in ("--cpu-max-prime=10000", "--threads=2", "--time=7", "--percentile=95"):
        assert opt in argv


def test_metadata() -> None:
    b = bench()
    m = {x.name: x for x in b.metrics()}
    assert (m["events_per_second"].unit, m["events_per_second"].higher_is_better) == ("events/s", True)
    assert (m["latency_avg"].unit, m["latency_avg"].higher_is_better) == ("ms", False)
    assert (m["latency_p95"].unit, m["latency_p95"].higher_is_better) == ("ms", False)
    assert all(x.category == "cpu" for x in m.values())
    assert SysbenchCpu.name == "sysbench-cpu" and SysbenchCpu.packages == ("sysbench",)
    assert b.version_command() == ["sysbench", "--version"]
    assert b.execution_timeout() == 4 * 10 + 60

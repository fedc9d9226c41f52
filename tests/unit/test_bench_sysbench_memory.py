"""sysbench memory parser and command, against outputs recorded from sysbench 1.0.20 (Debian 12)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.sysbench_memory import SysbenchMemory, SysbenchMemoryParams
from virtbench.errors import ParseError

DATA = Path(__file__).resolve().parent.parent / "data" / "sysbench"


def bench(**kw: object) -> SysbenchMemory:
    return SysbenchMemory(SysbenchMemoryParams(**kw))


def rate(text: str, prefix: str) -> float:
    """The rate in parentheses on the line holding prefix, read independently of the parser."""
    (line,) = [ln for ln in text.splitlines() if prefix in ln]
    return float(line.split("(")[1].split()[0])


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("memory_write_1M_5s", {}),
        ("memory_read_rnd_64M_t2_2s",
         dict(oper="read", access_mode="rnd", block_size="64M", threads=2, time=2)),
    ],
)
def test_parse_recorded(name: str, params: dict) -> None:
    text = (DATA / f"{name}.txt").read_text()
    b = bench(**params)
    result = b.parse(text, "", name)
    assert list(result) == [m.name for m in b.metrics()]
    assert result["mib_per_second"] == rate(text, "MiB transferred")
    assert result["ops_per_second"] == rate(text, "Total operations:")


def test_concrete_values() -> None:
    result = bench().parse((DATA / "memory_write_1M_5s.txt").read_text())
    assert result == {"mib_per_second": 16462.53, "ops_per_second": 16462.53}
    # 64 MiB blocks: 9 operations in 2.155 s, the rate is padded: "(    4.17 per second)"
    text = (DATA / "memory_read_rnd_64M_t2_2s.txt").read_text()
    assert "(    4.17 per second)" in text
    result = bench(oper="read", access_mode="rnd", block_size="64M", threads=2, time=2).parse(text)
    assert result == {"mib_per_second": 267.14, "ops_per_second": 4.17}


def test_fatal_error() -> None:
    text = (DATA / "fail_memory_oper_foo.txt").read_text()
    assert "FATAL: Invalid value for memory-oper: foo" in text
    with pytest.raises(ParseError, match=r"total time.*oper_foo"):
        bench().parse(text, "", "oper_foo")


def test_wrong_operation() -> None:
    text = (DATA / "memory_write_1M_5s.txt").read_text()
    with pytest.raises(ParseError, match=r"operation: read \(got write\)"):
        bench(oper="read").parse(text)


def test_truncated_empty_zero() -> None:
    text = (DATA / "memory_write_1M_5s.txt").read_text()
    with pytest.raises(ParseError, match="total time"):
        bench().parse(text[: text.index("General statistics")])
    with pytest.raises(ParseError, match="MiB transferred"):
        bench().parse(re.sub(r"^.*MiB transferred.*$", "", text, flags=re.M))
    with pytest.raises(ParseError, match="empty"):
        bench().parse("", "", "empty")
    zero = text.replace("Total operations: 82380 (", "Total operations: 0 (")
    assert zero != text
    with pytest.raises(ParseError, match="at least one operation"):
        bench().parse(zero)


def test_params() -> None:
    p = SysbenchMemoryParams()
    assert (p.block_size, p.total_size, p.oper, p.access_mode, p.scope, p.threads, p.time) == (
        "1M", "0", "write", "seq", "global", 1, 5,
    )
    SysbenchMemoryParams(block_size="4K", total_size="10G")
    for bad in (dict(nosuch=1), dict(block_size="0"), dict(block_size="1 M"), dict(block_size="1MB"),
                dict(total_size="-1"), dict(oper="none"), dict(access_mode="random"),
                dict(threads=0), dict(time=0), dict(block_size="1M --threads=9")):
        with pytest.raises(ValidationError):
            SysbenchMemoryParams(**bad)


def test_command() -> None:
    assert bench().command("/scratch") == [
        "sysbench", "memory", "--memory-block-size=1M", "--memory-total-size=0", "--memory-oper=write",
        "--memory-access-mode=seq", "--memory-scope=global", "--threads=1", "--time=5", "--events=0", "run",
    ]
    argv = bench(oper="read", access_mode="rnd", scope="local", threads=4, time=9).command("/s")
    for opt in ("--memory-oper=read", "--memory-access-mode=rnd", "--memory-scope=local",
                "--threads=4", "--time=9"):
        assert opt in argv


def test_metadata() -> None:
    b = bench()
    m = {x.name: x for x in b.metrics()}
    assert (m["mib_per_second"].unit, m["ops_per_second"].unit) == ("MiB/s", "ops/s")
    assert all(x.higher_is_better and x.category == "memory" for x in m.values())
    assert SysbenchMemory.name == "sysbench-memory" and SysbenchMemory.packages == ("sysbench",)
    assert b.version_command() == ["sysbench", "--version"]
    assert b.execution_timeout() == 4 * 5 + 60

"""mbw parser and command, against outputs recorded from mbw 1.2.2 (Debian 12)."""
from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.mbw import Mbw, MbwParams
from virtbench.errors import ParseError

DATA = Path(__file__).resolve().parent.parent / "data" / "mbw"
METHODS = {"memcpy": "MEMCPY", "dumb": "DUMB", "mcblock": "MCBLOCK"}


def bench(**kw: object) -> Mbw:
    return Mbw(MbwParams(**kw))


def read(name: str) -> tuple[str, str]:
    stderr = DATA / f"{name}.stderr.txt"
    return (DATA / f"{name}.txt").read_text(), stderr.read_text() if stderr.exists() else ""


def fields(line: str) -> dict[str, str]:
    """'AVG<TAB>Method: MEMCPY<TAB>Elapsed: ...' -> {'Method': 'MEMCPY', 'Elapsed': ..., ...}"""
    return dict(f.split(": ", 1) for f in line.split("\t")[1:])


@pytest.mark.parametrize(
    ("name", "params"),
    [("size256_n10", {}), ("size64_n3_b4096", dict(size_mib=64, runs=3, block_size=4096))],
)
def test_parse_recorded(name: str, params: dict) -> None:
    text, stderr = read(name)
    b = bench(**params)
    result = b.parse(text, stderr, name)
    assert list(result) == [m.name for m in b.metrics()] == list(METHODS)
    lines = [ln for ln in text.splitlines() if "\tMethod: " in ln]
    assert len(lines) == 3 * (b.params.runs + 1)
    for name_, method in METHODS.items():
        (avg,) = [fields(ln) for ln in lines if ln.startswith("AVG") and fields(ln)["Method"] == method]
        assert result[name_] == float(avg["Copy"].split()[0])
        runs = [fields(ln) for ln in lines if not ln.startswith("AVG") and fields(ln)["Method"] == method]
        # AVG is the MiB over the mean elapsed time (not the mean of the per-run rates)
        mean = sum(float(r["Elapsed"]) for r in runs) / len(runs)
        assert result[name_] == pytest.approx(b.params.size_mib / mean, rel=2e-3)


def test_concrete_values() -> None:
    text, _ = read("size256_n10")
    assert bench().parse(text) == {"memcpy": 10247.87, "dumb": 8140.94, "mcblock": 11635.094}


def test_allocation_failure() -> None:
    text, stderr = read("fail_nomem_size1048576")
    assert stderr.strip() == "Error allocating memory: Cannot allocate memory"
    with pytest.raises(ParseError, match=r"Getting down to business.*nomem"):
        bench(size_mib=1048576).parse(text, stderr, "nomem")


def test_truncated_and_empty() -> None:
    text, _ = read("size256_n10")
    with pytest.raises(ParseError, match=r"10 x .*MCBLOCK.*\(got 0\)"):
        bench().parse(text[: text.index("0\tMethod: MCBLOCK")])
    with pytest.raises(ParseError, match="AVG.*MCBLOCK"):
        bench().parse(text[: text.index("AVG\tMethod: MCBLOCK")])
    with pytest.raises(ParseError, match="empty"):
        bench().parse("", "", "empty")


def test_output_of_other_parameters_is_rejected() -> None:
    text, _ = read("size64_n3_b4096")
    with pytest.raises(ParseError, match=r"block size 262144 and 3 runs \(got 4096 and 3\)"):
        bench(size_mib=64, runs=3).parse(text)
    with pytest.raises(ParseError, match=r"MiB: 128 on the AVG MEMCPY line \(got 64.00000\)"):
        bench(size_mib=128, runs=3, block_size=4096).parse(text)


def test_params() -> None:
    p = MbwParams()
    assert (p.size_mib, p.runs, p.block_size) == (256, 10, 262144)
    for bad in (dict(nosuch=1), dict(size_mib=0), dict(runs=0), dict(block_size=0),
                dict(size_mib=1, block_size=2 * 2**20), dict(size_mib="1G")):
        with pytest.raises(ValidationError):
            MbwParams(**bad)


def test_command() -> None:
    assert bench().command("/scratch") == ["mbw", "-n", "10", "-b", "262144", "256"]
    assert bench(size_mib=64, runs=3, block_size=4096).command("/s") == ["mbw", "-n", "3", "-b", "4096", "64"]


def test_metadata() -> None:
    b = bench()
    assert all(m.unit == "MiB/s" and m.higher_is_better and m.category == "memory" for m in b.metrics())
    assert Mbw.name == "mbw" and Mbw.packages == ("mbw",)
    assert b.version_command() == ["dpkg-query", "-W", "-f", "${Package} ${Version}\n", "mbw"]
    assert b.execution_timeout() == pytest.approx(3 * 10 * 256 / 100 + 60)

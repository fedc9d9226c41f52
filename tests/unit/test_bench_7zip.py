"""7zr b parser and command, against outputs recorded from 7-Zip 26.02 (Debian 12 package p7zip)."""
from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.sevenzip import SevenZip, SevenZipParams
from virtbench.errors import ParseError

DATA = Path(__file__).resolve().parent.parent / "data" / "7zip"


def bench(**kw: object) -> SevenZip:
    return SevenZip(SevenZipParams(**kw))


def read(name: str) -> tuple[str, str]:
    stderr = DATA / f"{name}.stderr.txt"
    return (DATA / f"{name}.txt").read_text(), stderr.read_text() if stderr.exists() else ""


def columns(text: str, label: str) -> list[int]:
    """The numbers of the 'Avr:' or 'Tot:' line, read independently of the parser."""
    (line,) = [ln for ln in text.splitlines() if ln.startswith(label)]
    return [int(x) for x in line[len(label):].replace("|", " ").split()]


@pytest.mark.parametrize(
    ("name", "params", "sizes"),
    [
        ("b1_mmt1_md22", {}, 1),
        ("b1_mmt2_md22", dict(threads=2), 1),
        ("b_mmt1_study", dict(passes=None, dictionary=None), 4),
    ],
)
def test_parse_recorded(name: str, params: dict, sizes: int) -> None:
    text, stderr = read(name)
    b = bench(**params)
    result = b.parse(text, stderr, name)
    assert list(result) == [m.name for m in b.metrics()]
    avr, tot = columns(text, "Avr:"), columns(text, "Tot:")
    assert result["compress_rating"] == avr[3]
    assert result["decompress_rating"] == avr[7]
    assert result["total_rating"] == tot[2]
    # one table row per dictionary size: -md22 gives one, the study's default 22..25
    rows = [ln for ln in text.splitlines() if ln[:3] in {f"{d}:" for d in range(16, 31)}]
    assert len(rows) == sizes


def test_concrete_values() -> None:
    text, _ = read("b_mmt1_study")
    assert bench(passes=None, dictionary=None).parse(text) == {
        "compress_rating": 1908.0, "decompress_rating": 2490.0, "total_rating": 2199.0,
    }
    text, _ = read("b1_mmt2_md22")
    assert bench(threads=2).parse(text)["compress_rating"] == 4024.0


def test_wrong_thread_count() -> None:
    text, _ = read("b1_mmt2_md22")
    with pytest.raises(ParseError, match=r"Benchmark threads: 1' \(got 2\)"):
        bench(threads=1).parse(text)


def test_out_of_memory() -> None:
    # 437 MB needed for -md25, 300 MB address space allowed: the table stops at "25:",
    # 7zr exits 8 with "ERROR: Can't allocate required memory!" on stderr.
    text, stderr = read("fail_aslimit_b1_mmt1_md25")
    assert "Can't allocate required memory" in stderr
    assert "22:" in text
    with pytest.raises(ParseError, match=r"Avr.*aslimit"):
        bench(dictionary=25).parse(text, stderr, "aslimit")


def test_bad_argument() -> None:
    text, stderr = read("fail_md99")
    assert "E_INVALIDARG" in stderr
    with pytest.raises(ParseError, match="Benchmark threads"):
        bench().parse(text, stderr, "md99")


def test_truncated_and_empty() -> None:
    text, _ = read("b1_mmt1_md22")
    with pytest.raises(ParseError, match="Avr"):
        bench().parse(text[: text.index("Avr:")])
    with pytest.raises(ParseError, match="Tot"):
        bench().parse(text[: text.index("Tot:")])
    with pytest.raises(ParseError, match="empty"):
        bench().parse("", "", "empty")


def test_zero_rating_is_an_error() -> None:
    text, _ = read("b1_mmt1_md22")
    avr = next(ln for ln in text.splitlines() if ln.startswith("Avr:"))
    zero = text.replace(avr, avr[: avr.rindex(" ") + 1] + "0")
    assert zero != text
    with pytest.raises(ParseError, match="decompress_rating"):
        bench().parse(zero)


def test_params() -> None:
    p = SevenZipParams()
    assert (p.threads, p.dictionary, p.passes) == (1, 22, 1)
    SevenZipParams(dictionary=None, passes=None)
    for bad in (dict(nosuch=1), dict(threads=0), dict(dictionary=99), dict(dictionary=8),
                dict(passes=0), dict(threads="two")):
        with pytest.raises(ValidationError):
            SevenZipParams(**bad)


def test_command() -> None:
    assert bench().command("/scratch") == ["7zr", "b", "1", "-mmt1", "-md22"]
    assert bench(threads=2, passes=None, dictionary=None).command("/s") == ["7zr", "b", "-mmt2"]
    assert bench(threads=4, passes=3, dictionary=24).command("/s") == ["7zr", "b", "3", "-mmt4", "-md24"]


def test_metadata() -> None:
    b = bench()
    assert [m.name for m in b.metrics()] == ["compress_rating", "decompress_rating", "total_rating"]
    assert all(m.unit == "MIPS" and m.higher_is_better and m.category == "cpu" for m in b.metrics())
    assert SevenZip.name == "7zip" and SevenZip.tool == "7zr" and SevenZip.packages == ("p7zip",)
    assert b.version_command() == ["7zr", "--help"]
    assert b.execution_timeout() == 240
    assert bench(passes=None, dictionary=None).execution_timeout() == 600

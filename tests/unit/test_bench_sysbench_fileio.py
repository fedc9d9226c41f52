"""sysbench fileio parser, command and script, against outputs recorded from sysbench 1.0.20 (Debian 12)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.sysbench_fileio import SysbenchFileio, SysbenchFileioParams
from virtbench.errors import ParseError

DATA = Path(__file__).resolve().parent.parent / "data" / "sysbench"
LABELS = {
    "reads_per_s": "reads/s", "writes_per_s": "writes/s",
    "read_mib_per_s": "read, MiB/s", "written_mib_per_s": "written, MiB/s",
}
SEQ = dict(file_total_size="64M", file_num=4, block_size="1M", time=2)


def bench(**kw: object) -> SysbenchFileio:
    return SysbenchFileio(SysbenchFileioParams(**kw))


def read(name: str) -> tuple[str, str]:
    stderr = DATA / f"{name}.stderr.txt"
    return (DATA / f"{name}.txt").read_text(), stderr.read_text() if stderr.exists() else ""


def value(text: str, label: str) -> float:
    """The number after 'label:' in the recorded text, read independently of the parser."""
    (line,) = [ln for ln in text.splitlines() if ln.strip().startswith(label + ":")]
    return float(line.split(":", 1)[1].strip().rstrip("s"))


@pytest.mark.parametrize(
    ("name", "params", "names"),
    [
        ("fileio_rndrw_256M_5s", {}, ["reads_per_s", "writes_per_s", "read_mib_per_s", "written_mib_per_s"]),
        ("fileio_seqrd_64M_2s", dict(test_mode="seqrd", **SEQ), ["reads_per_s", "read_mib_per_s"]),
        ("fileio_seqwr_64M_2s_noflags", dict(test_mode="seqwr", extra_flags="none", **SEQ),
         ["writes_per_s", "written_mib_per_s"]),
    ],
)
def test_parse_recorded(name: str, params: dict, names: list[str]) -> None:
    text, stderr = read(name)
    b = bench(**params)
    result = b.parse(text, stderr, name)
    assert list(result) == [m.name for m in b.metrics()] == names + ["latency_avg", "latency_p95"]
    for n in names:
        assert result[n] == value(text, LABELS[n]) > 0
    assert result["latency_p95"] == value(text, "95th percentile")
    assert result["latency_avg"] == value(text, "sum") / value(text, "total number of events")
    assert result["latency_avg"] == pytest.approx(value(text, "avg"), abs=0.005)


def test_concrete_values() -> None:
    text, _ = read("fileio_rndrw_256M_5s")
    assert "Extra file open flags: directio" in text
    result = bench().parse(text)
    assert result["reads_per_s"] == 231.06 and result["written_mib_per_s"] == 2.41
    assert result["latency_p95"] == 4.03
    assert result["latency_avg"] == 4997.66 / 4521  # events count fsyncs too


def test_prepare_fails() -> None:
    # a 4 MiB tmpfs: prepare fails writing test_file.3; its log goes to stderr, nothing on stdout
    text, stderr = read("fail_fileio_enospc")
    assert text == "" and "errno = 28 (No space left on device)" in stderr
    with pytest.raises(ParseError, match=r"total time.*enospc"):
        bench().parse(text, stderr, "enospc")


def test_no_workdir() -> None:
    text, stderr = read("fail_fileio_nodir")
    assert text == "" and "can't cd to /var/tmp/no-such-dir" in stderr
    with pytest.raises(ParseError, match="nodir"):
        bench().parse(text, stderr, "nodir")


def test_wrong_mode_truncated_empty() -> None:
    text, _ = read("fileio_rndrw_256M_5s")
    with pytest.raises(ParseError, match="Doing random read test"):
        bench(test_mode="rndrd").parse(text)
    with pytest.raises(ParseError, match="total time"):
        bench().parse(text[: text.index("General statistics")])
    with pytest.raises(ParseError, match="empty"):
        bench().parse("", "", "empty")
    idle = text.replace("reads/s:                      231.06", "reads/s:                      0.00")
    assert idle != text
    with pytest.raises(ParseError, match="reads/s.*above 0"):
        bench().parse(idle)


def test_params() -> None:
    p = SysbenchFileioParams()
    assert (p.file_total_size, p.file_num, p.test_mode, p.block_size, p.extra_flags, p.threads, p.time) == (
        "256M", 128, "rndrw", "16K", "direct", 1, 5,
    )
    for bad in (dict(nosuch=1), dict(file_total_size="1.5G"), dict(file_total_size="0"),
                dict(test_mode="randrw"), dict(block_size="16 K"), dict(extra_flags="direct,sync"),
                dict(threads=0), dict(time=0), dict(file_num=0), dict(file_total_size="1G; rm -rf /")):
        with pytest.raises(ValidationError):
            SysbenchFileioParams(**bad)


def test_command() -> None:
    argv = bench().command("/scratch/f")
    assert argv[:2] == ["sh", "-c"] and argv[2] == SysbenchFileio.script and argv[3:5] == ["sh", "/scratch/f"]
    assert argv[5:] == [
        "--file-total-size=256M", "--file-num=128", "--file-test-mode=rndrw", "--file-block-size=16K",
        "--file-extra-flags=direct", "--threads=1", "--time=5", "--events=0", "--percentile=95",
    ]
    none = bench(extra_flags="none", test_mode="seqwr").command("/s")
    assert not any(a.startswith("--file-extra-flags") for a in none)
    assert none[2] == SysbenchFileio.script  # one constant script for every parameter set


def test_metadata() -> None:
    b = bench()
    m = {x.name: x for x in b.metrics()}
    assert m["reads_per_s"].unit == "IOPS" and m["read_mib_per_s"].unit == "MiB/s"
    assert (m["latency_p95"].unit, m["latency_p95"].higher_is_better) == ("ms", False)
    assert all(x.category == "storage" for x in m.values())
    assert [x.name for x in bench(test_mode="rndwr").metrics()][:2] == ["writes_per_s", "written_mib_per_s"]
    assert SysbenchFileio.name == "sysbench-fileio" and SysbenchFileio.packages == ("sysbench",)
    assert b.version_command() == ["sysbench", "--version"]
    assert b.execution_timeout() == pytest.approx(2 * 5 + 256 * 2**20 / 20e6 + 120)


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("sysbench") is None, reason="sysbench not installed")
def test_real_run(tmp_path: Path) -> None:
    """The script for real: prepare, run, cleanup, in the workdir, with cwd elsewhere."""
    b = bench(file_total_size="8M", file_num=2, test_mode="rndrd", time=1, extra_flags="none")
    proc = subprocess.run(b.command(str(tmp_path)), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120, cwd="/", check=True)
    result = b.parse(proc.stdout, proc.stderr, "real run")
    assert set(result) == {m.name for m in b.metrics()}
    assert "Creating file" not in proc.stdout  # prepare's log stays out of stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vb-prepare.log"]  # cleanup removed the files

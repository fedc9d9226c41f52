"""dd parser, command and script, against outputs recorded from GNU coreutils 9.1 dd (Debian 12)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.dd import Dd, DdParams
from virtbench.errors import ParseError

DATA = Path(__file__).resolve().parent.parent / "data" / "dd"


def bench(**kw: object) -> Dd:
    return Dd(DdParams(**kw))


def read(name: str) -> str:
    return (DATA / f"{name}.txt").read_text()


def copied(text: str) -> list[tuple[int, float, str]]:
    """(bytes, seconds, printed rate) of each 'copied' line, read independently of the parser."""
    out = []
    for line in text.splitlines():
        if " copied, " in line:
            size = int(line.split()[0])
            _, seconds, rate = line.rsplit(", ", 2)
            out.append((size, float(seconds.removesuffix(" s")), rate))
    return out


@pytest.mark.parametrize(
    ("name", "params", "units"),
    [
        ("bs8M_count32", {}, ["MB/s", "MB/s"]),
        ("bs1M_count64", dict(bs="1M", count=64), ["MB/s", "MB/s"]),
        ("bs4K_count16", dict(bs="4K", count=16), ["MB/s", "MB/s"]),
        ("tmpfs_bs1M_count2", dict(bs="1M", count=2), ["GB/s", "GB/s"]),
    ],
)
def test_parse_recorded(name: str, params: dict, units: list[str]) -> None:
    text = read(name)
    b = bench(**params)
    result = b.parse(text, "", name)
    assert list(result) == [m.name for m in b.metrics()] == ["write_MBps", "read_MBps"]
    (wbytes, wsec, wrate), (rbytes, rsec, rrate) = copied(text)
    assert wbytes == rbytes == b.size
    assert result["write_MBps"] == wbytes / wsec / 1e6
    assert result["read_MBps"] == rbytes / rsec / 1e6
    assert [wrate.split()[1], rrate.split()[1]] == units


def test_concrete_values() -> None:
    result = bench().parse(read("bs8M_count32"))
    assert result["write_MBps"] == 268435456 / 1.33599 / 1e6  # dd printed "201 MB/s"
    assert result["read_MBps"] == 268435456 / 0.405073 / 1e6  # dd printed "663 MB/s"
    result = bench(bs="1M", count=2).parse(read("tmpfs_bs1M_count2"))
    assert result["read_MBps"] == pytest.approx(2430.06, abs=0.01)  # dd printed "2.4 GB/s"


def test_no_space_left() -> None:
    # 16 x 1M into a 4 MiB tmpfs: dd stops after 4 blocks ("5+0 records in, 4+0 records out"), exit 1
    text = read("fail_enospc_bs1M_count16")
    assert "No space left on device" in text and "vb:read" not in text
    with pytest.raises(ParseError, match=r"'16\+0 records' \(got 5\+0\).*enospc, write"):
        bench(bs="1M", count=16).parse(text, "", "enospc")


def test_no_workdir() -> None:
    text = read("fail_nodir")
    assert "failed to open" in text
    with pytest.raises(ParseError, match="2 x .*records.*nodir, write"):
        bench().parse(text, "", "nodir")


def test_zero_bytes_and_kb_unit() -> None:
    # count=0 (by hand): "0 bytes copied, 3.4612e-05 s, 0.0 kB/s" - no size in parentheses,
    # an exponent in the time, kB/s. The line parses, the record count does not match.
    text = read("fail_count0")
    assert "0 bytes copied, 3.4612e-05 s, 0.0 kB/s" in text
    with pytest.raises(ParseError, match=r"'1\+0 records' \(got 0\+0\)"):
        bench(bs="1M", count=1).parse(text)
    with pytest.raises(ParseError, match="1048576 bytes copied \\(got 0\\)"):
        bench(bs="1M", count=1).parse(text.replace("0+0 records", "1+0 records"))


def test_truncated_empty_and_inconsistent() -> None:
    text = read("bs8M_count32")
    with pytest.raises(ParseError, match="vb:done"):
        bench().parse(text[: text.index("vb:done")])
    cut = text[: text.rindex("268435456 bytes")] + "vb:done\n"
    with pytest.raises(ParseError, match="copied.*read"):
        bench().parse(cut)
    with pytest.raises(ParseError, match="vb:write.*empty"):
        bench().parse("", "", "empty")
    misread = text.replace("1.33599 s, 201 MB/s", "1.33599 s, 201 GB/s")
    with pytest.raises(ParseError, match="printed rate near 200.9 MB/s"):
        bench().parse(misread)
    partial = text.replace("32+0 records out", "31+1 records out", 1)
    with pytest.raises(ParseError, match=r"got 31\+1"):
        bench().parse(partial)


def test_params() -> None:
    p = DdParams()
    assert (p.bs, p.count) == ("8M", 32)
    assert bench(bs="8M", count=256).size == 2 * 2**30  # the KVM study's 2 GiB
    for bad in (dict(nosuch=1), dict(bs="8MB"), dict(bs="8m"), dict(bs="1000"), dict(bs="2G"),
                dict(bs="0"), dict(count=0), dict(bs="8M count=1")):
        with pytest.raises(ValidationError):
            DdParams(**bad)


def test_command() -> None:
    argv = bench().command("/scratch/d")
    assert argv[:2] == ["sh", "-c"] and argv[2] == Dd.script
    assert argv[3:] == ["sh", "/scratch/d", "8M", "32", "written"]
    assert bench(bs="4K", count=7).command("/x")[2:] == [Dd.script, "sh", "/x", "4K", "7", "written"]
    assert "oflag=direct" in Dd.script and "iflag=direct" in Dd.script


def test_script(tmp_path: Path) -> None:
    """The real script with dd: both phases, the file removed, cwd elsewhere."""
    b = bench(bs="64K", count=4)
    proc = subprocess.run(b.command(str(tmp_path)), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60, cwd="/")
    if proc.returncode != 0 and "Invalid argument" in proc.stdout:
        pytest.skip(f"no O_DIRECT on the file system of {tmp_path}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = b.parse(proc.stdout, proc.stderr, "real run")
    assert result["write_MBps"] > 0 and result["read_MBps"] > 0
    assert list(tmp_path.iterdir()) == []


def test_script_reads_a_file_it_did_not_just_write(tmp_path: Path) -> None:
    """read_file: other (the KVM study read an existing file): a file written before the measured
    write is read, its cache dropped; the prepared file's dd lines do not count as a phase."""
    b = bench(bs="64K", count=4, read_file="other")
    assert b.params.scratch_bytes() == 2 * 4 * 64 * 1024
    proc = subprocess.run(b.command(str(tmp_path)), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60, cwd="/")
    if proc.returncode != 0 and "Invalid argument" in proc.stdout:
        pytest.skip(f"no O_DIRECT on the file system of {tmp_path}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.index("vb:prepare") < proc.stdout.index("vb:write") < proc.stdout.index("vb:read")
    assert b.parse(proc.stdout, proc.stderr, "real run")["read_MBps"] > 0
    assert list(tmp_path.iterdir()) == []


def test_phases_are_the_scripts_dd_lines() -> None:
    """The argv lists a paper's dd lines are held against are the script's, values filled in."""
    assert "\n" + Dd.script.split("echo vb:write\n")[1].split(" 2>&1")[0] == "\n" + \
        'dd if=/dev/zero of="$f" bs="$2" count="$3" oflag=direct'
    other = bench(bs="8M", count=256, read_file="other").phases("/w")
    assert other["write"] == ["dd", "if=/dev/zero", "of=/w/vb.dd", "bs=8M", "count=256", "oflag=direct"]
    assert other["read"] == ["dd", "if=/w/vb.dd.read", "of=/dev/null", "bs=8M", "count=256", "iflag=direct"]
    assert bench().phases("/w")["read"][1] == "if=/w/vb.dd"


def test_metadata() -> None:
    b = bench()
    assert all(m.unit == "MB/s" and m.higher_is_better and m.category == "storage" for m in b.metrics())
    assert Dd.name == "dd" and Dd.packages == ("coreutils",)
    assert b.version_command() == ["dd", "--version"]
    assert b.execution_timeout() == pytest.approx(2 * 256 * 2**20 / 10e6 + 60)

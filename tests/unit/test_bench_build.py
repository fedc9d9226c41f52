"""build parser, command and script, against outputs recorded with gcc 12.2 and make 4.3 (Debian 12)."""
from __future__ import annotations

import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.build import Build, BuildParams
from virtbench.errors import ParseError

DATA = Path(__file__).resolve().parent.parent / "data" / "build"


def bench(**kw: object) -> Build:
    return Build(BuildParams(**kw))


def read(name: str) -> tuple[str, str]:
    stderr = DATA / f"{name}.stderr.txt"
    return (DATA / f"{name}.txt").read_text(), stderr.read_text() if stderr.exists() else ""


def elapsed(text: str) -> float:
    """end - start of the vb:build line, read independently of the parser."""
    (line,) = [ln for ln in text.splitlines() if ln.startswith("vb:build ")]
    fields = dict(f.split("=") for f in line.split()[1:])
    return float(Decimal(fields["end"]) - Decimal(fields["start"]))


@pytest.mark.parametrize(
    ("name", "params", "objects"),
    [
        ("generated_100files_j2", {}, 101),
        ("generated_20files_j1", dict(files=20, jobs=1), 21),
        ("uclibc-ng_j2", dict(codebase="uclibc-ng"), 824),
    ],
)
def test_parse_recorded(name: str, params: dict, objects: int) -> None:
    text, stderr = read(name)
    b = bench(**params)
    result = b.parse(text, stderr, name)
    assert list(result) == [m.name for m in b.metrics()] == ["build_s"]
    assert result["build_s"] == elapsed(text) > 0
    assert f"vb:objects {objects}\n" in text


def test_concrete_values() -> None:
    text, _ = read("generated_20files_j1")
    # 1795268460.511839099 - 1795268458.987088676, kept to the nanosecond
    assert bench(files=20, jobs=1).parse(text) == {"build_s": 1.524750423}
    text, _ = read("uclibc-ng_j2")
    assert bench(codebase="uclibc-ng").parse(text)["build_s"] == pytest.approx(69.724171011, abs=1e-9)


def test_compile_error() -> None:
    # 512 KiB tmpfs: the assembler cannot write mod3.o; make exits 2, the log tail goes to stderr
    text, stderr = read("fail_enospc_generated")
    assert text == ""
    assert stderr.startswith("vb: exit status 2, end of ../vb-build.log:")
    assert "No space left on device" in stderr
    with pytest.raises(ParseError, match=r"vb:done.*enospc"):
        bench().parse(text, stderr, "enospc")


def test_no_workdir() -> None:
    text, stderr = read("fail_nodir")
    assert "can't cd to /var/tmp/no-such-dir" in stderr
    with pytest.raises(ParseError, match="nodir"):
        bench().parse(text, stderr, "nodir")
    with pytest.raises(ParseError, match="empty"):
        bench().parse("", "", "empty")


def test_inconsistent_output() -> None:
    text, _ = read("generated_100files_j2")
    with pytest.raises(ParseError, match=r"vb:objects 21 \(got 101\)"):
        bench(files=20).parse(text)
    with pytest.raises(ParseError, match=r"jobs=4 \(got 2\)"):
        bench(jobs=4).parse(text)
    with pytest.raises(ParseError, match="vb:check"):
        bench().parse(text.replace("vb:check 14100044251117998672\n", ""))
    with pytest.raises(ParseError, match="vb:build"):
        bench().parse(text.replace("end=1795268458.776919181", "end=1795268458"))
    backwards = text.replace("end=1795268458.776919181", "end=1795268445.000000000")
    with pytest.raises(ParseError, match="end after start"):
        bench().parse(backwards)


def test_params() -> None:
    p = BuildParams()
    assert (p.codebase, p.jobs, p.files) == ("generated", 2, 100)
    BuildParams(codebase="uclibc-ng", jobs=4)
    for bad in (dict(nosuch=1), dict(jobs=0), dict(files=0), dict(codebase="httpd"),
                dict(codebase="uclibc-ng", files=10), dict(jobs="2; reboot")):
        with pytest.raises(ValidationError):
            BuildParams(**bad)


def test_command() -> None:
    argv = bench().command("/scratch/b")
    assert argv[:2] == ["sh", "-c"] and argv[2] == Build.script
    assert argv[3:] == ["sh", "/scratch/b", "generated", "2", "100"]
    assert bench(codebase="uclibc-ng", jobs=8).command("/s")[3:] == ["sh", "/s", "uclibc-ng", "8", "0"]
    # the Makefile recipe lines in the constant script start with a real tab
    assert "\n\t$(CC) -o $@ $(OBJS)\n" in Build.script
    assert "@TAB@" not in Build.script and "@TEMPLATE@" not in Build.script


def test_metadata() -> None:
    b = bench()
    (m,) = b.metrics()
    assert (m.name, m.unit, m.higher_is_better, m.category) == ("build_s", "s", False, "application")
    assert Build.name == "build"
    assert set(Build.packages) == {"gcc", "make", "libc6-dev", "xz-utils", "uclibc-source"}
    assert b.version_command() == ["gcc", "--version"]
    assert b.execution_timeout() == pytest.approx(2 * 100 / 2 + 5 + 300)
    assert bench(codebase="uclibc-ng").execution_timeout() == 7200


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("make") is None,
                    reason="gcc / make not installed")
def test_real_run_is_deterministic(tmp_path: Path) -> None:
    """The generated code base for real: same program as recorded, so the same vb:check."""
    b = bench(files=20, jobs=2)
    proc = subprocess.run(b.command(str(tmp_path)), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=300, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert b.parse(proc.stdout, proc.stderr, "real run")["build_s"] > 0
    recorded, _ = read("generated_20files_j1")
    assert "vb:check 17665893757547342043\n" in recorded
    assert "vb:check 17665893757547342043\n" in proc.stdout
    assert "vb:objects 21\n" in proc.stdout

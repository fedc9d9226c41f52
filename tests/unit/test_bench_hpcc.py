"""hpcc parser, command and sizing script, against outputs recorded from hpcc 1.5.0 (Debian 12)."""
from __future__ import annotations

import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.hpcc import Hpcc, HpccParams
from virtbench.errors import ParseError

DATA = Path(__file__).resolve().parent.parent / "data" / "hpcc"
KEYS = {
    "hpl_gflops": "HPL_Tflops",
    "star_dgemm_gflops": "StarDGEMM_Gflops",
    "single_dgemm_gflops": "SingleDGEMM_Gflops",
    "star_stream_triad": "StarSTREAM_Triad",
    "single_stream_triad": "SingleSTREAM_Triad",
    "star_random_access_gups": "StarRandomAccess_GUPs",
    "single_random_access_gups": "SingleRandomAccess_GUPs",
}


def bench(**kw: object) -> Hpcc:
    return Hpcc(HpccParams(**kw))


def read(name: str) -> str:
    return (DATA / f"{name}.txt").read_text()


def summary(text: str) -> dict[str, str]:
    """key=value lines of the recorded text, read independently of the parser."""
    return dict(ln.split("=", 1) for ln in text.splitlines() if "=" in ln and not ln.startswith("vb:"))


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("n2000_np2", {}),
        ("n1000_np1", dict(n=1000, processes=1)),
        ("memfrac0.5_max3000", dict(memory_fraction=0.5, max_n=3000)),
    ],
)
def test_parse_recorded(name: str, params: dict) -> None:
    text = read(name)
    b = bench(**params)
    result = b.parse(text, "", name)
    assert list(result) == [m.name for m in b.metrics()] == list(KEYS)
    s = summary(text)
    assert s["Success"] == "1"
    for metric, key in KEYS.items():
        factor = 1000 if metric == "hpl_gflops" else 1
        assert result[metric] == pytest.approx(float(s[key]) * factor, rel=1e-12)
        assert result[metric] > 0


def test_concrete_values() -> None:
    result = bench().parse(read("n2000_np2"))
    assert result["hpl_gflops"] == 20.5583  # HPL_Tflops=0.0205583, exactly x 1000
    assert result["star_dgemm_gflops"] == 24.4821
    assert result["single_stream_triad"] == 70.844
    assert result["single_random_access_gups"] == 0.17125


def test_setup_line_matches_the_summary() -> None:
    text = read("n2000_np2")
    assert "vb:hpcc n=2000 nb=192 p=1 q=2 processes=2" in text
    s = summary(text)
    assert (s["HPL_N"], s["HPL_NB"], s["HPL_nprow"], s["HPL_npcol"], s["CommWorldProcs"]) == (
        "2000", "192", "1", "2", "2",
    )


def test_derived_n() -> None:
    # N = isqrt(0.5 x 25276510208 / 8) = 39746, capped at max_n 3000, rounded down to 15 x 192
    text = read("memfrac0.5_max3000")
    assert "vb:memory bytes=25276510208 fraction_permille=500" in text
    assert summary(text)["HPL_N"] == "2880"
    bench(memory_fraction=0.5, max_n=3000).parse(text)


def test_failed_verification_with_exit_0() -> None:
    # n=12000 under a 800 MB address-space limit: allocations fail, hpcc still exits 0 and
    # prints a summary with Success=0, zero rates and garbage (uninitialised) values.
    text = read("fail_aslimit_n12000")
    assert "\x00" in text and summary(text)["HPL_N"] == "-1274343248"
    with pytest.raises(ParseError, match=r"Success=1 \(got Success=0\).*aslimit"):
        bench(n=12000).parse(text, "", "aslimit")


def test_truncated_and_empty() -> None:
    text = read("n2000_np2")
    with pytest.raises(ParseError, match="End of HPC Challenge tests"):
        bench().parse(text[: text.index("End of HPC Challenge tests")])
    with pytest.raises(ParseError, match="Begin of Summary"):
        bench().parse(text[: text.index("Begin of Summary")] + "End of HPC Challenge tests.\n")
    with pytest.raises(ParseError, match="vb:hpcc.*empty"):
        bench().parse("", "", "empty")


def test_missing_or_bad_values() -> None:
    text = read("n2000_np2")
    dropped = text.replace("StarDGEMM_Gflops=24.4821\n", "")
    assert dropped != text
    with pytest.raises(ParseError, match="StarDGEMM_Gflops"):
        bench().parse(dropped)
    not_run = text.replace("SingleRandomAccess_GUPs=0.17125", "SingleRandomAccess_GUPs=-1")
    with pytest.raises(ParseError, match="SingleRandomAccess_GUPs=<positive number> \\(got -1\\)"):
        bench().parse(not_run)
    garbage = text.replace("StarSTREAM_Triad=52.3305", "StarSTREAM_Triad=nan")
    with pytest.raises(ParseError, match="StarSTREAM_Triad=<number>"):
        bench().parse(garbage)


def test_output_of_other_parameters_is_rejected() -> None:
    text = read("n2000_np2")
    with pytest.raises(ParseError, match="n=3000"):
        bench(n=3000).parse(text)
    with pytest.raises(ParseError, match="processes=4"):
        bench(processes=4).parse(text)
    with pytest.raises(ParseError, match="nb=256"):
        bench(nb=256).parse(text)
    with pytest.raises(ParseError, match="CommWorldProcs=2"):
        bench().parse(text.replace("CommWorldProcs=2", "CommWorldProcs=1"))


def test_params() -> None:
    p = HpccParams()
    assert (p.n, p.memory_fraction, p.max_n, p.nb, p.processes) == (2000, None, 20000, 192, None)
    for bad in (
        dict(nosuch=1), dict(n=0), dict(n="big"), dict(nb=0), dict(processes=0),
        dict(memory_fraction=0), dict(memory_fraction=1.5), dict(n=3000, memory_fraction=0.5),
        dict(n=100, nb=192), dict(memory_fraction=0.5, max_n=100, nb=192),
    ):
        with pytest.raises(ValidationError):
            HpccParams(**bad)


def test_command() -> None:
    argv = bench().command("/scratch/x")
    assert argv[:2] == ["sh", "-c"] and argv[3] == "sh"
    assert argv[4:] == ["/scratch/x", "2000", "192", "0", "0", "20000"]
    assert bench(n=4000, nb=256, processes=4).command("/s")[4:] == ["/s", "4000", "256", "4", "0", "20000"]
    assert bench(memory_fraction=0.8, max_n=30000).command("/s")[4:] == ["/s", "0", "192", "0", "800", "30000"]
    # the script is one constant: values never become shell text
    scripts = {bench(**kw).command("/s")[2] for kw in ({}, dict(n=4000), dict(memory_fraction=0.8))}
    assert scripts == {Hpcc.script}
    for flag in ("--allow-run-as-root", "--mca pml ob1", "btl_vader_single_copy_mechanism none"):
        assert flag in Hpcc.script


FAKE_MPIRUN = """#!/bin/sh
echo "$@" > mpirun.args
printf '%s\\n' 'Begin of Summary section.' 'Success=1' 'End of Summary section.' \
  'End of HPC Challenge tests.' > hpccoutf.txt
"""


def run_script(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real script with a fake mpirun in front on PATH: tests the shell part alone."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "mpirun").write_text(FAKE_MPIRUN)
    (fake / "mpirun").chmod(0o755)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "LC_ALL": "C"}
    return subprocess.run(["sh", "-c", Hpcc.script, "sh", str(work), *args], env=env, cwd="/",
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)


def test_script_writes_input_and_launches(tmp_path: Path) -> None:
    proc = run_script(tmp_path, "3000", "128", "6", "0", "20000")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "vb:hpcc n=3000 nb=128 p=2 q=3 processes=6"
    assert "Begin of Summary section." in proc.stdout and "Success=1" in proc.stdout
    inf = (tmp_path / "work" / "hpccinf.txt").read_text().splitlines()
    assert len(inf) == 36
    assert [inf[i].split()[0] for i in (5, 7, 10, 11)] == ["3000", "128", "2", "3"]
    args = (tmp_path / "work" / "mpirun.args").read_text().split()
    assert args[-3:] == ["-np", "6", "hpcc"]
    assert "--oversubscribe" in args


@pytest.mark.parametrize(("np", "p", "q"), [(1, 1, 1), (2, 1, 2), (4, 2, 2), (7, 1, 7), (12, 3, 4)])
def test_script_grid(tmp_path: Path, np: int, p: int, q: int) -> None:
    proc = run_script(tmp_path, "1000", "100", str(np), "0", "20000")
    assert f"p={p} q={q} processes={np}" in proc.stdout


def test_script_derives_n_and_processes(tmp_path: Path) -> None:
    proc = run_script(tmp_path, "0", "192", "0", "100", "1000000")
    assert proc.returncode == 0, proc.stderr
    mem = int(proc.stdout.split("vb:memory bytes=")[1].split()[0])
    kib = int(next(ln for ln in Path("/proc/meminfo").read_text().splitlines()
                   if ln.startswith("MemTotal:")).split()[1])
    assert 0 < mem <= kib * 1024
    n = math.isqrt(mem // 8 // 1000 * 100) // 192 * 192
    assert f"vb:hpcc n={n} nb=192 p=" in proc.stdout
    assert f"processes={len(os.sched_getaffinity(0))}" in proc.stdout
    capped = run_script(tmp_path, "0", "192", "0", "100", "1000")
    assert "vb:hpcc n=960 nb=192" in capped.stdout  # min(N, 1000) rounded down to NB


def test_script_shows_why_hpcc_stopped(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "mpirun").write_text("#!/bin/sh\necho 'HPL ERROR: out of memory' > hpccoutf.txt\nexit 3\n")
    (fake / "mpirun").chmod(0o755)
    (tmp_path / "work").mkdir()
    proc = subprocess.run(["sh", "-c", Hpcc.script, "sh", str(tmp_path / "work"), "1000", "100", "1", "0", "9"],
                          env={"PATH": f"{fake}:/usr/bin:/bin"}, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 3
    assert "HPL ERROR: out of memory" in proc.stderr
    assert "Summary" not in proc.stdout


def test_metadata() -> None:
    b = bench()
    m = {x.name: x for x in b.metrics()}
    assert m["hpl_gflops"].unit == "GFLOP/s" and m["hpl_gflops"].category == "cpu"
    assert m["star_stream_triad"].unit == "GB/s" and m["star_stream_triad"].category == "memory"
    assert m["single_random_access_gups"].unit == "GUP/s"
    assert all(x.higher_is_better for x in m.values())
    assert Hpcc.name == "hpcc" and Hpcc.packages == ("hpcc", "libopenblas0-serial")
    assert b.version_command()[:2] == ["dpkg-query", "-W"]
    assert 600 < b.execution_timeout() < 1000
    assert bench(memory_fraction=0.8).execution_timeout() > bench(n=2000).execution_timeout()


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("hpcc") is None or shutil.which("mpirun") is None,
                    reason="hpcc / mpirun not installed")
def test_real_run(tmp_path: Path) -> None:
    b = bench(n=500, nb=100, processes=1)
    proc = subprocess.run(b.command(str(tmp_path)), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=300, check=True)
    result = b.parse(proc.stdout, proc.stderr, "real run")
    assert set(result) == set(KEYS)

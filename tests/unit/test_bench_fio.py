"""fio parser and command, against JSON recorded from fio 3.33 (Debian 12) on ext4."""
from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.fio import Fio, FioParams, fio_json_all, size_bytes
from virtbench.errors import ParseError

DATA = Path(__file__).resolve().parent.parent / "data" / "fio"
NAMES = [
    "seq_read_bw", "seq_write_bw", "rand_read_bw", "rand_write_bw",
    "seq_read_iops", "seq_write_iops", "rand_read_iops", "rand_write_iops",
]


def bench(**kw: object) -> Fio:
    return Fio(FioParams(**kw))


@pytest.fixture
def ok() -> str:
    return (DATA / "ext4_64M_runtime1.json").read_text()


def test_parse_recorded(ok: str) -> None:
    b = bench(size="64M", runtime=1, ramp_time=0)
    result = b.parse(ok, "", "ext4.json")
    assert list(result) == NAMES == [m.name for m in b.metrics()]
    jobs = {j["jobname"]: j for j in json.loads(ok)["jobs"]}
    for name in NAMES:
        direction = "read" if "_read_" in name else "write"
        stats = jobs[name][direction]
        if name.endswith("_bw"):
            assert result[name] == stats["bw_bytes"] / 2**20
            assert result[name] == pytest.approx(stats["bw"] / 1024, rel=1e-3)
        else:
            assert result[name] == stats["iops"]
        assert result[name] > 0


def test_concrete_values(ok: str) -> None:
    result = bench().parse(ok)
    assert result["seq_read_iops"] == 70965.034965
    assert result["rand_write_iops"] == 91199.8002
    assert '"bw_bytes" : 1656521450' in ok
    assert result["seq_read_bw"] == 1656521450 / 2**20


def test_jobs_ran_one_after_another(ok: str) -> None:
    # stonewall puts every job in its own group; groups run in order.
    jobs = json.loads(ok)["jobs"]
    assert [j["jobname"] for j in jobs] == NAMES
    assert [j["groupid"] for j in jobs] == list(range(8))


def test_leading_warnings_are_skipped(ok: str) -> None:
    noisy = "fio: some warning on stdout\n" + ok + "fio: a warning after the JSON\n"
    assert bench().parse(noisy) == bench().parse(ok)


def test_job_error_fails_whole_run() -> None:
    # ENOSPC while laying out the shared file: the JSON follows warning lines; several read
    # jobs report error 0 and IOPS > 0, the write jobs error 28. No partial result.
    stdout = (DATA / "fail_enospc.txt").read_text()
    assert stdout.startswith("fio: ENOSPC")
    with pytest.raises(ParseError, match=r"error == 0 \(got 28\).*enospc"):
        bench().parse(stdout, (DATA / "fail_enospc.stderr.txt").read_text(), "enospc")


def test_no_json() -> None:
    stdout = (DATA / "fail_nodir.txt").read_text()
    assert stdout == ""
    with pytest.raises(ParseError, match="nodir"):
        bench().parse(stdout, (DATA / "fail_nodir.stderr.txt").read_text(), "nodir")
    with pytest.raises(ParseError):
        bench().parse("", "", "empty")


def test_truncated_json(ok: str) -> None:
    with pytest.raises(ParseError, match="valid JSON"):
        bench().parse(ok[: len(ok) // 2])


def test_missing_job_or_idle_job(ok: str) -> None:
    doc = json.loads(ok)
    doc["jobs"] = doc["jobs"][:-1]
    with pytest.raises(ParseError, match="rand_write_iops"):
        bench().parse(json.dumps(doc))
    doc = json.loads(ok)
    doc["jobs"][0]["read"]["bw_bytes"] = 0
    with pytest.raises(ParseError, match="seq_read_bw"):
        bench().parse(json.dumps(doc))


def test_params() -> None:
    p = FioParams()
    assert (p.size, p.bs_bandwidth, p.bs_iops, p.iodepth, p.runtime, p.direct) == (
        "256M", "1M", "4k", 16, 5, True,
    )
    for bad in (
        dict(nosuch=1), dict(size="abc"), dict(size="0M"), dict(size="1M --rw=trim"),
        dict(bs_iops="4 k"), dict(iodepth=0), dict(runtime=0), dict(ramp_time=-1),
        dict(ioengine="posixaio"),
    ):
        with pytest.raises(ValidationError):
            FioParams(**bad)


def test_size_bytes() -> None:
    assert size_bytes("256M") == 256 * 2**20
    assert size_bytes("4k") == 4096
    assert size_bytes("512") == 512
    with pytest.raises(ValueError):
        size_bytes("1.5G")


def test_command() -> None:
    argv = bench().command("/scratch")
    assert argv[0] == "fio"
    first_job = argv.index("--name=seq_read_bw")
    glob = argv[:first_job]
    for opt in ("--output-format=json", "--direct=1", "--ioengine=libaio", "--directory=/scratch",
                "--size=256M", "--iodepth=16", "--time_based=1", "--runtime=5"):
        assert opt in glob
    assert [a[7:] for a in argv if a.startswith("--name=")] == NAMES
    assert argv.count("--stonewall") == 8
    assert argv[argv.index("--name=rand_read_bw") + 1 : argv.index("--name=rand_read_bw") + 3] == [
        "--rw=randread", "--bs=1M",
    ]
    assert argv[argv.index("--name=rand_write_iops") + 1 : argv.index("--name=rand_write_iops") + 3] == [
        "--rw=randwrite", "--bs=4k",
    ]
    assert "--direct=0" in bench(direct=False).command("/scratch")


def test_metadata() -> None:
    b = bench()
    units = {m.name: m.unit for m in b.metrics()}
    assert all(units[n] == "MiB/s" for n in NAMES if n.endswith("_bw"))
    assert all(units[n] == "IOPS" for n in NAMES if n.endswith("_iops"))
    assert all(m.higher_is_better and m.category == "storage" for m in b.metrics())
    assert Fio.name == "fio" and Fio.packages == ("fio",)
    assert b.version_command() == ["fio", "--version"]
    assert b.execution_timeout() >= 4 * 8 * 6 + 60


def test_a_subset_of_jobs_runs_and_parses_only_those():
    from virtbench.benchmarks.fio import Fio, FioParams

    b = Fio(FioParams(jobs=["rand_read_iops", "seq_read_bw"]))
    assert [m.name for m in b.metrics()] == ["seq_read_bw", "rand_read_iops"]
    argv = b.command("/w")
    assert [a for a in argv if a.startswith("--name=")] == ["--name=seq_read_bw", "--name=rand_read_iops"]
    assert set(b.parse((DATA / "ext4_64M_runtime1.json").read_text())) == {"seq_read_bw", "rand_read_iops"}
    with pytest.raises(ValueError):
        FioParams(jobs=["seq_read_bw", "seq_read_bw"])
    with pytest.raises(ValueError):
        FioParams(jobs=[])


@pytest.mark.parametrize("recording", ["ext4_64M_runtime1.json", "bullseye_fio_size64M_runtime1_ramp_time0.txt",
                                       "trixie_fio_size64M_runtime1_ramp_time0.txt"])
def test_cpu_per_io_from_every_release(recording: str) -> None:
    """measure: cpu (the quick campaign): (usr_cpu + sys_cpu) % x job_runtime ms / I/Os, in us."""
    text = (DATA / recording).read_text()
    b = bench(size="64M", runtime=1, ramp_time=0, jobs=["rand_read_iops"], measure="cpu")
    result = b.parse(text)
    assert list(result) == ["rand_read_iops_cpu"] == [m.name for m in b.metrics()]
    job = next(j for j in json.loads(text[text.index("{"):])["jobs"] if j["jobname"] == "rand_read_iops")
    expected = (job["usr_cpu"] + job["sys_cpu"]) / 100 * job["job_runtime"] * 1000 / job["read"]["total_ios"]
    assert result["rand_read_iops_cpu"] == pytest.approx(expected) and 0.1 < expected < 1000
    both = bench(size="64M", runtime=1, ramp_time=0, jobs=["rand_read_iops"], measure="both").parse(text)
    assert both == {"rand_read_iops": job["read"]["iops"], "rand_read_iops_cpu": result["rand_read_iops_cpu"]}


def test_cpu_per_io_without_cpu_time_fails(ok: str) -> None:
    doc = json.loads(ok)
    for j in doc["jobs"]:
        j["usr_cpu"] = j["sys_cpu"] = 0.0
    with pytest.raises(ParseError, match="with CPU time"):
        bench(jobs=["rand_read_iops"], measure="cpu").parse(json.dumps(doc))


QUICK_PASSES = dict(size="64M", runtime=2, ramp_time=0, jobs=["rand_read_iops"], passes=20)


def _intervals(text: str, job: str, direction: str = "read") -> list[tuple[float, float, float]]:
    """(ms, I/Os, CPU us) of each status report of one job, from its restart on (the test's own reading)."""
    docs, pos = [], 0
    for line_start in [m.start() for m in re.finditer(r"^\{", text, re.M)]:
        if line_start >= pos:
            doc, pos = json.JSONDecoder().raw_decode(text, line_start)
            docs.append(doc)
    pts = []
    for doc in docs:
        j = next(j for j in doc["jobs"] if j["jobname"] == job)
        pts.append((j["job_runtime"], j[direction]["total_ios"],
                    (j["usr_cpu"] + j["sys_cpu"]) / 100 * j["job_runtime"] * 1000))
    last = max(i for i in range(len(pts)) if i == 0 or pts[i][0] < pts[i - 1][0])
    return pts[last:]


def test_passes_read_one_job_at_status_intervals() -> None:
    argv = bench(**QUICK_PASSES, measure="cpu").command("/w")
    assert "--runtime=2" in argv and "--status-interval=100ms" in argv
    assert [a for a in argv if a.startswith("--name=")] == ["--name=rand_read_iops"]  # one job, no restarts
    assert not any(a.startswith("--status-interval") for a in bench(runtime=2).command("/w"))  # one pass
    with pytest.raises(ValidationError, match="under 100 ms"):
        FioParams(runtime=1, passes=20)


def test_passes_report_the_best_or_the_median_interval_of_a_recorded_run() -> None:
    text = (DATA / "ext4_64M_runtime2_20passes_randread.json").read_text()
    pts = _intervals(text, "rand_read_iops")
    cpus = [(c1 - c0) / (n1 - n0) for (t0, n0, c0), (t1, n1, c1) in zip(pts, pts[1:]) if t1 - t0 >= 50]
    assert 18 <= len(cpus) <= 21 and len(set(cpus)) == len(cpus)
    whole = bench(**{**QUICK_PASSES, "passes": 1}, measure="cpu").parse(text)["rand_read_iops_cpu"]
    best = bench(**QUICK_PASSES, measure="cpu", pass_estimate="best").parse(text)["rand_read_iops_cpu"]
    median = bench(**QUICK_PASSES, measure="cpu").parse(text)["rand_read_iops_cpu"]
    assert best == pytest.approx(min(cpus)) and median == pytest.approx(statistics.median(cpus))
    assert best < whole < max(cpus)  # the whole run's value is the intervals' weighted mean


def test_passes_of_two_jobs_in_turn_are_read_per_job() -> None:
    text = (DATA / "ext4_64M_runtime1_10passes_randread_seqread.json").read_text()
    kw = dict(size="64M", runtime=1, ramp_time=0, jobs=["seq_read_bw", "rand_read_iops"], passes=10)
    out = bench(**kw, measure="both", pass_estimate="best").parse(text)
    assert out["seq_read_bw"] > 100 and 1 < out["rand_read_iops_cpu"] < 50 and out["rand_read_iops"] > 1000
    pts = _intervals(text, "rand_read_iops")
    rates = [(n1 - n0) / ((t1 - t0) / 1000) for (t0, n0, _), (t1, n1, _) in zip(pts, pts[1:]) if t1 - t0 >= 50]
    assert out["rand_read_iops"] == pytest.approx(max(rates))


def test_passes_without_interval_reports_fail() -> None:
    text = (DATA / "ext4_64M_runtime1.json").read_text()  # one report: fio without --status-interval
    with pytest.raises(ParseError, match="interval reports"):
        bench(size="64M", runtime=1, ramp_time=0, jobs=["rand_read_iops"], passes=10, measure="cpu").parse(text)


def test_an_interval_whose_cpu_time_came_late_is_merged_with_the_next() -> None:
    """Under load fio's job can answer the request for its CPU time after the report is written
    (seen in a quick run: an execution failed on an interval without CPU time). Made here from
    the recording: the 5th report repeats the 4th's CPU time, as a late answer does."""
    text = (DATA / "ext4_64M_runtime2_20passes_randread.json").read_text()
    docs = fio_json_all(text, "x")
    late, before = docs[6]["jobs"][0], docs[5]["jobs"][0]
    cpu_before = (before["usr_cpu"] + before["sys_cpu"]) * before["job_runtime"]
    late["usr_cpu"], late["sys_cpu"] = 0.0, cpu_before / late["job_runtime"]
    stale = "\n".join(json.dumps(d) for d in docs)
    kw = dict(QUICK_PASSES, measure="cpu")
    pts = _intervals(text, "rand_read_iops")
    n_ok = len([1 for (t0, _, _), (t1, _, _) in zip(pts, pts[1:]) if t1 - t0 >= 50])
    b = bench(**kw)
    assert len(b._passes(fio_json_all(stale, "x"), "rand_read_iops", "iops", "read", "x")[1]) == n_ok - 1
    merged = (pts[5][2] - pts[3][2]) / (pts[5][1] - pts[3][1])  # reports 6 and 7 of the file, one interval
    got = b._passes(fio_json_all(stale, "x"), "rand_read_iops", "iops", "read", "x")[1]
    assert any(x == pytest.approx(merged) for x in got) and min(got) > 5  # no interval without its CPU time

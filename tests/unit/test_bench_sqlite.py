"""sqlite phone-call workload: parser and command, against outputs of sqlite3 3.40.1 (Debian 12)."""
from __future__ import annotations

import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.sqlite import SQLiteCalls, SQLiteParams
from virtbench.errors import ParseError

DATA = Path(__file__).resolve().parent.parent / "data" / "sqlite"
PHASES = ("generate", "index", "query", "update", "delete")
SMALL = dict(rows=20000, subscribers=1000, repeats=1)


def bench(**kw: object) -> SQLiteCalls:
    return SQLiteCalls(SQLiteParams(**kw))


def phase_times(text: str) -> dict[str, list[float]]:
    """Run Time reals per phase, read from the file independently of the parser."""
    out: dict[str, list[float]] = defaultdict(list)
    phase = ""
    for line in text.splitlines():
        if line.startswith("vb:phase "):
            phase = line.split()[1]
        elif line.startswith("Run Time: real "):
            out[phase].append(float(line.split()[3]))
    return out


@pytest.mark.parametrize(
    ("name", "params"),
    [("calls_200000rows_3repeats", {}), ("calls_20000rows_1repeat", SMALL)],
)
def test_parse_recorded(name: str, params: dict) -> None:
    text = (DATA / f"{name}.txt").read_text()
    b = bench(**params)
    result = b.parse(text, "", name)
    assert list(result) == [m.name for m in b.metrics()]
    times = phase_times(text)
    for ph in PHASES:
        assert result[f"{ph}_s"] == pytest.approx(sum(times[ph]), abs=1e-9)
        assert len(times[ph]) == len(b.statements()[ph])
    assert result["total_s"] == pytest.approx(sum(result[f"{ph}_s"] for ph in PHASES), abs=1e-9)
    assert result["query_s"] > 0


def test_concrete_values() -> None:
    result = bench(**SMALL).parse((DATA / "calls_20000rows_1repeat.txt").read_text())
    assert result == {
        "generate_s": 0.018,  # 0.001 + 0.017
        "index_s": 0.017,  # 0.006 + 0.006 + 0.005
        "query_s": 0.031,  # 0.005 + 0.001 + 0.021 + 0.003 + 0.001
        "update_s": 0.005,
        "delete_s": 0.008,
        "total_s": 0.079,
    }


def test_query_rows_do_not_confuse_the_parser() -> None:
    text = (DATA / "calls_200000rows_3repeats.txt").read_text()
    assert "10000|" in text  # result rows are interleaved with the timings
    assert len(phase_times(text)["query"]) == 15


def test_failed_statement() -> None:
    # Rerun in a used directory: CREATE TABLE fails, -bail stops, no vb:done.
    text = (DATA / "fail_table_exists.txt").read_text()
    stderr = (DATA / "fail_table_exists.stderr.txt").read_text()
    assert "already exists" in stderr
    with pytest.raises(ParseError, match=r"vb:done.*table_exists"):
        bench(**SMALL).parse(text, stderr, "table_exists")


def test_no_output() -> None:
    stdout = (DATA / "fail_nodir.txt").read_text()
    assert stdout == ""
    with pytest.raises(ParseError, match="nodir"):
        bench().parse(stdout, (DATA / "fail_nodir.stderr.txt").read_text(), "nodir")
    with pytest.raises(ParseError, match="empty"):
        bench().parse("", "", "empty")


def test_missing_or_misplaced_timings() -> None:
    text = (DATA / "calls_20000rows_1repeat.txt").read_text()
    lines = text.splitlines()
    missing = "\n".join(ln for ln in lines if "real 0.021" not in ln)
    with pytest.raises(ParseError, match=r"5 x .*vb:phase query.*got 4"):
        bench(**SMALL).parse(missing)
    no_markers = "\n".join(ln for ln in lines if not ln.startswith("vb:phase"))
    with pytest.raises(ParseError, match="before the first Run Time"):
        bench(**SMALL).parse(no_markers)
    # parsed with the wrong repeats: the count check notices
    with pytest.raises(ParseError, match="got 5"):
        bench(rows=20000, subscribers=1000, repeats=2).parse(text)


def test_params() -> None:
    p = SQLiteParams()
    assert (p.rows, p.subscribers, p.repeats) == (200000, 10000, 3)
    for bad in (dict(nosuch=1), dict(rows=0), dict(rows=10**8), dict(repeats=0),
                dict(subscribers=1), dict(cost_threshold=-1)):
        with pytest.raises(ValidationError):
            SQLiteParams(**bad)


def test_command() -> None:
    b = bench()
    argv = b.command("/scratch/")
    assert argv[:3] == ["sqlite3", "-batch", "-bail"]
    assert argv[-2:] == ["/scratch/calls.db", ".print vb:done"]
    cmds = [argv[i + 1] for i, a in enumerate(argv) if a == "-cmd"]
    assert cmds[0] == ".output '/scratch/virtbench.sql'"
    assert cmds[-3:] == [".output stdout", ".timer on", ".read '/scratch/virtbench.sql'"]
    printed = [c[len(".print '"):-1] for c in cmds[1:-3]]
    assert all(c.startswith(".print '") and c.endswith("'") for c in cmds[1:-3])
    assert all("'" not in line for line in printed)
    assert printed.count(".print vb:phase query") == 1
    assert sum(line.startswith("SELECT ") for line in printed) == 15
    assert any(line.startswith("WITH RECURSIVE") and "200000" in line for line in printed)
    with pytest.raises(ValueError):
        b.command("/it's")


def test_metadata() -> None:
    b = bench()
    names = [m.name for m in b.metrics()]
    assert names == ["generate_s", "index_s", "query_s", "update_s", "delete_s", "total_s"]
    assert all(m.unit == "s" and not m.higher_is_better and m.category == "application" for m in b.metrics())
    assert SQLiteCalls.name == "sqlite" and SQLiteCalls.packages == ("sqlite3",)
    assert b.version_command() == ["sqlite3", "-version"]
    assert b.execution_timeout() > 60


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="sqlite3 not installed")
def test_real_run(tmp_path: Path) -> None:
    """The trickiest part is the argv itself; run it once for real, as the runner would."""
    b = bench(rows=2000, subscribers=100, repeats=1)
    proc = subprocess.run(b.command(str(tmp_path)), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, check=True)
    result = b.parse(proc.stdout, proc.stderr, "real run")
    assert set(result) == {m.name for m in b.metrics()}
    assert (tmp_path / "calls.db").exists()


def test_phases_off_declares_and_parses_the_total_only() -> None:
    """The quick campaign's form: one cell per platform instead of six."""
    b = bench(**SMALL, phases=False)
    assert [m.name for m in b.metrics()] == ["total_s"]
    text = (DATA / "calls_20000rows_1repeat.txt").read_text()
    full = bench(**SMALL).parse(text)
    assert b.parse(text) == {"total_s": full["total_s"]}


def test_clock_cpu_sums_user_and_sys_in_microseconds() -> None:
    text = (DATA / "calls_20000rows_1repeat.txt").read_text()
    cpu = bench(**SMALL, clock="cpu", phases=False)
    assert [m.name for m in cpu.metrics()] == ["total_cpu_s"]
    expected = sum(float(u) + float(s) for u, s in re.findall(r"user ([0-9.]+) sys ([0-9.]+)", text))
    assert cpu.parse(text)["total_cpu_s"] == pytest.approx(expected, abs=1e-6)
    detail = bench(**SMALL, clock="cpu").parse(text)
    assert set(detail) == {f"{ph}_cpu_s" for ph in PHASES} | {"total_cpu_s"}
    assert detail["update_cpu_s"] == pytest.approx(0.003457)  # sub-millisecond: 'real 0.005', user 0, sys 0.003457


def _pass_totals(text: str) -> list[float]:
    """Each pass's CPU total (user + sys of its five phases), read independently of the parser."""
    totals: list[float] = []
    phase = ""
    for line in text.splitlines():
        if line.startswith("vb:pass "):
            totals.append(0.0)
        elif line.startswith("vb:phase "):
            phase = line.split()[1]
        elif line.startswith("Run Time: real ") and phase in PHASES:
            parts = line.split()
            totals[-1] += float(parts[5]) + float(parts[7])
    return totals


def test_passes_report_the_median_pass() -> None:
    text = (DATA / "calls_20000rows_3passes_cpu.txt").read_text()
    b = bench(**SMALL, passes=3, clock="cpu")
    result = b.parse(text, "", "passes")
    totals = _pass_totals(text)
    assert len(totals) == 3 and len(set(totals)) == 3
    assert result["total_cpu_s"] == pytest.approx(sorted(totals)[1], abs=1e-6)
    assert min(totals) < result["total_cpu_s"] < max(totals)
    # The DROP TABLE between passes is timed but belongs to no phase.
    assert text.count("Run Time:") == 3 * sum(len(s) for s in b.statements().values()) + 2


def test_best_pass_reports_the_fastest_pass_and_says_so() -> None:
    text = (DATA / "calls_20000rows_3passes_cpu.txt").read_text()
    b = bench(**SMALL, passes=3, clock="cpu", pass_estimate="best")
    totals = _pass_totals(text)
    assert b.parse(text, "", "passes")["total_cpu_s"] == pytest.approx(min(totals), abs=1e-6)
    assert "fastest of 3 passes" in next(m.description for m in b.metrics() if m.name == "total_cpu_s")
    assert "median of 3 passes" in next(m.description for m in bench(**SMALL, passes=3).metrics()
                                        if m.name == "total_s")


def test_passes_command_drops_the_table_between_passes() -> None:
    argv = bench(**SMALL, passes=3).command("/s")
    assert argv.count(".print 'DROP TABLE calls;'") == 2
    assert [a for a in argv if "vb:pass" in a] == [f".print '.print vb:pass {n}'" for n in range(3)]
    assert "vb:pass" not in " ".join(bench(**SMALL).command("/s"))
    assert bench(**SMALL, passes=3).execution_timeout() > bench(**SMALL).execution_timeout()


def test_passes_missing_is_a_parse_error() -> None:
    text = (DATA / "calls_20000rows_3passes_cpu.txt").read_text()
    with pytest.raises(ParseError, match="5 x 'vb:pass N' \\(got 3\\)"):
        bench(**SMALL, passes=5, clock="cpu").parse(text, "", "passes")
    with pytest.raises(ParseError, match="1 x 'vb:pass N' \\(got 3\\)"):
        bench(**SMALL, clock="cpu").parse(text, "", "passes")

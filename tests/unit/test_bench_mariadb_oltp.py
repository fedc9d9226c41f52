"""MariaDB + sysbench oltp_read_write: parser, scripts and argv, against outputs recorded from
sysbench 1.0.20 and MariaDB 10.11.19 (Debian 12)."""
from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.mariadb_oltp import CLIENT_SCRIPT, SERVER_SCRIPT, MariadbOltp, MariadbOltpParams
from virtbench.errors import ParseError

DATA = Path(__file__).resolve().parent.parent / "data" / "sysbench"


def read(name: str) -> tuple[str, str]:
    stderr = DATA / f"{name}.stderr.txt"
    return (DATA / f"{name}.txt").read_text(), stderr.read_text() if stderr.exists() else ""


def bench(**kw: object) -> MariadbOltp:
    return MariadbOltp(MariadbOltpParams(**kw))


@pytest.mark.parametrize(
    ("name", "params", "expected"),
    [
        ("oltp_lo_t2_rows10000_d3", dict(time=3), (253.45, 5069.03, 5997.99 / 762, 23.95)),
        ("oltp_netns_t4_rows10000_d3", dict(time=3, threads=4), (443.04, 8860.75, 12142.20 / 1358, 23.52)),
        ("oltp_netns_t2_tables2_rows100000_d3", dict(time=3, tables=2, table_size=100000),
         (175.68, 3513.57, 5992.43 / 528, 39.65)),
    ],
)
def test_parse_recorded(name: str, params: dict, expected: tuple[float, ...]) -> None:
    b = bench(**params)
    stdout, stderr = read(name)
    assert "Creating table 'sbtest1'..." in stderr  # prepare went to stderr, run to stdout
    result = b.parse(stdout, stderr, name)
    assert set(result) == {m.name for m in b.metrics()}
    keys = ("transactions_per_second", "queries_per_second", "latency_avg", "latency_p95")
    assert tuple(result[k] for k in keys) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("oltp_fail_refused", "unable to connect to MySQL server"),
        ("oltp_fail_tables_exist", "error 1050 .Table .*sbtest1.* already exists"),
        ("oltp_fail_server_killed", "Lost connection to server during query"),
    ],
)
def test_failures(name: str, message: str) -> None:
    with pytest.raises(ParseError, match=message) as info:
        bench().parse(*read(name), f"{name}.txt")
    assert info.value.source == f"{name}.txt"


def test_fatal_on_stdout_or_stderr_alone_fails() -> None:
    stdout, stderr = read("oltp_fail_server_killed")
    assert "FATAL:" in stdout
    with pytest.raises(ParseError, match="FATAL"):
        bench().parse(stdout, "")
    good, _ = read("oltp_lo_t2_rows10000_d3")
    with pytest.raises(ParseError, match="FATAL"):
        bench().parse(good, "FATAL: something else\n")


def test_cut_output() -> None:
    stdout, _ = read("oltp_lo_t2_rows10000_d3")
    for drop in ("total time:", "transactions:", "queries:", "sum:", "95th percentile:"):
        cut = "\n".join(ln for ln in stdout.splitlines() if drop not in ln)
        with pytest.raises(ParseError):
            bench().parse(cut, "", "cut.txt")
    zero = stdout.replace("transactions:                        762    (253.45 per sec.)",
                          "transactions:                        0      (0.00 per sec.)")
    with pytest.raises(ParseError, match="at least one transaction"):
        bench().parse(zero)


def test_argv_scripts_take_values_as_positional_arguments() -> None:
    b = bench(tables=4, table_size=1000000, threads=8, time=20, buffer_pool_mb=512, port=3307)
    assert b.server_command("/scratch/x") == ["sh", "-c", SERVER_SCRIPT, "sh", "/scratch/x", "3307", "512"]
    assert b.client_command("/scratch/x", "10.0.0.2") == [
        "sh", "-c", CLIENT_SCRIPT, "sh", "10.0.0.2", "3307", "4", "1000000", "8", "20"]
    for value in ("1000000", "3307", "10.0.0.2", "512"):
        assert value not in SERVER_SCRIPT + CLIENT_SCRIPT
    assert "--skip-grant-tables" in SERVER_SCRIPT and "--bind-address=0.0.0.0" in SERVER_SCRIPT
    assert "exec mariadbd" in SERVER_SCRIPT and "mariadb-install-db" in SERVER_SCRIPT
    assert "password" not in (SERVER_SCRIPT + CLIENT_SCRIPT).lower()
    assert " prepare " in CLIENT_SCRIPT and CLIENT_SCRIPT.rstrip().endswith("run")
    assert "*FATAL:*" in CLIENT_SCRIPT  # prepare's exit status alone is not trusted


def test_params() -> None:
    p = MariadbOltpParams()
    assert (p.client, p.server) == ("instance", "instance")
    assert (p.tables, p.table_size, p.threads, p.time, p.buffer_pool_mb, p.port) == (1, 10000, 2, 5, 128, 3306)
    for bad in (dict(tables=0), dict(table_size=0), dict(threads=0), dict(time=0), dict(buffer_pool_mb=1),
                dict(port=0), dict(nosuch=1), dict(server="cloud")):
        with pytest.raises(ValidationError):
            MariadbOltpParams(**bad)


def test_metadata() -> None:
    b = bench()
    assert MariadbOltp.name == "mariadb-oltp" and MariadbOltp.tool == "sysbench"
    assert MariadbOltp.packages == ("mariadb-server", "sysbench")
    assert b.protocol == "tcp" and b.port() == 3306
    metrics = {m.name: m for m in b.metrics()}
    assert (metrics["transactions_per_second"].unit, metrics["transactions_per_second"].higher_is_better) == (
        "transactions/s", True)
    assert metrics["queries_per_second"].higher_is_better
    assert (metrics["latency_p95"].unit, metrics["latency_p95"].higher_is_better) == ("ms", False)
    assert all(m.category == "application" for m in metrics.values())
    assert bench(table_size=2000000).execution_timeout() > bench().execution_timeout() > 5

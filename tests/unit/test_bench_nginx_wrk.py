"""nginx + wrk parser, argv and server script, against outputs recorded from wrk 4.1.0 and nginx 1.22.1
(Debian 12)."""
from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.nginx_wrk import SERVER_SCRIPT, NginxWrk, NginxWrkParams
from virtbench.errors import ParseError

DATA = Path(__file__).resolve().parent.parent / "data" / "wrk"

KEYS = ("requests_per_second", "transfer", "latency_avg", "latency_p50", "latency_p75", "latency_p90",
        "latency_p99", "latency_max", "socket_errors", "http_errors")


def read(name: str) -> tuple[str, str]:
    stderr = DATA / f"{name}.stderr.txt"
    return (DATA / f"{name}.txt").read_text(), stderr.read_text() if stderr.exists() else ""


def bench(**kw: object) -> NginxWrk:
    return NginxWrk(NginxWrkParams(**kw))


@pytest.mark.parametrize(
    ("name", "params", "expected"),
    [
        # "599.00us" -> 0.599 ms, "562.60MB" -> 562.60 MiB/s
        ("lo_64k_c10_d2", dict(duration=2),
         (8966.51, 562.60, 5.12, 0.599, 2.68, 7.62, 106.24, 162.03, 0, 0)),
        ("netns_64k_c100_d2", dict(duration=2, connections=100),
         (7246.16, 454.66, 15.21, 12.29, 17.27, 24.70, 97.24, 143.12, 0, 0)),
        ("netns_1k_c10_d2", dict(duration=2, file_size=1024),
         (17296.71, 21.08, 1.99, 0.229, 2.21, 4.75, 27.51, 53.21, 0, 0)),
        # "1.62s " (seconds, padded) -> 1620 ms; one request beyond --timeout 2s
        ("netns_70MB_c4_d3", dict(duration=3, file_size=70000000, connections=4),
         (4.86, 361.90, 637.28, 444.84, 807.17, 1420.0, 1620.0, 1620.0, 1, 0)),
        ("netns_70MB_c40_d3_timeout1", dict(duration=3, file_size=70000000, connections=40, timeout=1),
         (5.50, 841.16, 875.77, 934.35, 934.35, 934.35, 934.35, 934.35, 15, 0)),
        # by hand, URL /missing: every response a 404, wrk still exits 0
        ("http_404_byhand", dict(duration=2),
         (31329.15, 9.20, 0.71971, 0.188, 0.718, 2.43, 4.98, 8.88, 0, 62914)),
    ],
)
def test_parse_recorded(name: str, params: dict, expected: tuple[float, ...]) -> None:
    b = bench(**params)
    result = b.parse(*read(name), name)
    assert set(result) == {m.name for m in b.metrics()} == set(KEYS)
    assert tuple(result[k] for k in KEYS) == pytest.approx(expected, rel=1e-12)


def test_units() -> None:
    stdout, _ = read("lo_64k_c10_d2")
    b = bench(duration=2)
    for printed, mib in (("562.60MB", 562.60), ("1.10GB", 1.10 * 1024), ("870.00KB", 870 / 1024),
                         ("512.00B", 512 / 1024**2), ("1.00TB", 1024.0**2)):
        text = stdout.replace("Transfer/sec:    562.60MB", f"Transfer/sec: {printed:>10}")
        assert b.parse(text)["transfer"] == pytest.approx(mib)
    for printed, ms in (("599.00us", 0.599), ("2.00s", 2000.0), ("1.50m", 90000.0), ("1.00h", 3600000.0)):
        text = stdout.replace("     50%  599.00us", f"     50% {printed:>9}")
        assert b.parse(text)["latency_p50"] == pytest.approx(ms)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        # exit 1: "unable to connect to 127.0.0.1:8080 Connection refused" on stderr, nothing on stdout
        ("fail_refused", "Running"),
        ("fail_unresolvable_byhand", "Running"),
        # a listener that never answers: exit 0, "0 requests in 2.01s", no error line at all
        ("fail_zero_requests_byhand", "at least one completed request"),
    ],
)
def test_failures(name: str, message: str) -> None:
    with pytest.raises(ParseError, match=message) as info:
        bench(duration=2).parse(*read(name), f"{name}.txt")
    assert info.value.source == f"{name}.txt"


def test_cut_output() -> None:
    stdout, _ = read("lo_64k_c10_d2")
    for drop in ("Requests/sec", "Transfer/sec", "99%", "Latency  ", "requests in"):
        cut = "\n".join(ln for ln in stdout.splitlines() if drop not in ln)
        with pytest.raises(ParseError):
            bench(duration=2).parse(cut, "", "cut.txt")


def test_argv() -> None:
    b = bench()
    assert b.client_command("/w", "10.0.0.2") == [
        "wrk", "-t", "2", "-c", "10", "-d", "5s", "--timeout", "2s", "--latency", "http://10.0.0.2:8080/file-0"]
    argv = bench(connections=300, threads=4, duration=20, port=9000).client_command("/w", "fd00::2")
    assert argv[argv.index("-c") + 1] == "300" and argv[argv.index("-t") + 1] == "4"
    assert argv[argv.index("-d") + 1] == "20s" and argv[-1] == "http://[fd00::2]:9000/file-0"
    server = bench(file_size=70000000, files=3, workers=2, port=9000).server_command("/scratch/x")
    # A fixed script; every value is a positional argument, none is pasted into the script.
    assert server == ["sh", "-c", SERVER_SCRIPT, "sh", "/scratch/x", "9000", "3", "70000000", "2"]
    assert "70000000" not in SERVER_SCRIPT and "9000" not in SERVER_SCRIPT
    assert b.server_command("/w")[-1] == "auto"
    assert "daemon off;" in SERVER_SCRIPT and "exec nginx" in SERVER_SCRIPT


def test_params() -> None:
    p = NginxWrkParams()
    assert (p.client, p.server) == ("host", "instance")  # load generator outside the instance
    assert (p.connections, p.threads, p.duration, p.file_size, p.files, p.port) == (10, 2, 5, 65536, 1, 8080)
    assert NginxWrkParams(client="instance", server="peer").server == "peer"
    for bad in (dict(connections=1, threads=2), dict(connections=0), dict(threads=0), dict(duration=0),
                dict(file_size=-1), dict(files=0), dict(files=10000, file_size=10**9), dict(workers=0),
                dict(workers="many"), dict(port=0), dict(nosuch=1)):
        with pytest.raises(ValidationError):
            NginxWrkParams(**bad)


def test_metadata() -> None:
    b = bench()
    assert NginxWrk.name == "nginx-wrk" and NginxWrk.tool == "wrk" and NginxWrk.packages == ("nginx", "wrk")
    assert b.protocol == "tcp" and b.port() == 8080
    metrics = {m.name: m for m in b.metrics()}
    assert (metrics["requests_per_second"].unit, metrics["requests_per_second"].higher_is_better) == ("requests/s", True)
    assert (metrics["transfer"].unit, metrics["transfer"].higher_is_better) == ("MiB/s", True)
    for name in ("latency_avg", "latency_p50", "latency_p99", "latency_max"):
        assert (metrics[name].unit, metrics[name].higher_is_better) == ("ms", False)
    assert not metrics["socket_errors"].higher_is_better and not metrics["http_errors"].higher_is_better
    assert b.execution_timeout() >= 5 + 2

"""nginx + ab (study 001's Apache test with fixed request counts): argv and parser, against outputs
recorded from ApacheBench 2.3 (Debian 12, tests/data/ab)."""
from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.nginx_ab import NginxAb, NginxAbParams
from virtbench.benchmarks.nginx_wrk import SERVER_SCRIPT
from virtbench.errors import ParseError
from virtbench.registry import BENCHMARKS

DATA = Path(__file__).resolve().parent.parent / "data" / "ab"


def read(name: str) -> tuple[str, str]:
    stderr = DATA / f"{name}.stderr.txt"
    return (DATA / f"{name}.txt").read_text(), stderr.read_text() if stderr.exists() else ""


def bench(**kw: object) -> NginxAb:
    return NginxAb(NginxAbParams(**kw))


def test_parses_a_recorded_run():
    out = bench(requests=2000, concurrency=200).parse(*read("n2000_c200"))
    assert out["time_taken_s"] == 2.348 and out["requests_per_second"] == 851.62
    assert out["transfer"] == 8685.02 and out["failed_requests"] == 0
    assert (out["latency_p50"], out["latency_p90"], out["latency_p99"], out["latency_p100"]) == (200, 273, 379, 396)
    assert set(out) == {m.name for m in bench().metrics()}
    keep = bench(requests=1000, concurrency=100, keepalive=True).parse(*read("keepalive_n1000_c100"))
    assert keep["time_taken_s"] == 0.737


@pytest.mark.parametrize("name, params, match", [
    ("fail_404_n200_c10", {"requests": 200, "concurrency": 10}, "Non-2xx responses"),
    ("fail_timeout_n2000_c100", {"requests": 2000, "concurrency": 100}, "Complete requests"),
    ("fail_refused", {"requests": 100, "concurrency": 10}, "Complete requests"),
])
def test_failures_are_failed_samples(name, params, match):
    with pytest.raises(ParseError, match=match):
        bench(**params).parse(*read(name))


def test_a_run_short_of_its_requests_fails():
    text, err = read("n2000_c200")
    with pytest.raises(ParseError, match="Complete requests: 5000"):
        bench(requests=5000, concurrency=200).parse(text, err)


def test_argv_and_server():
    b = bench(requests=5000, concurrency=200)
    assert b.client_command("/w", "10.0.0.2") == ["ab", "-n", "5000", "-c", "200", "http://10.0.0.2:8080/file-0"]
    assert bench(keepalive=True).client_command("/w", "::1")[:2] == ["ab", "-k"]
    assert bench().client_command("/w", "::1")[-1] == "http://[::1]:8080/file-0"
    assert b.server_command("/w") == ["sh", "-c", SERVER_SCRIPT, "sh", "/w", "8080", "1", "10240", "auto"]
    assert BENCHMARKS.get("nginx-ab") is NginxAb and NginxAb.packages == ("nginx", "apache2-utils")
    time = next(m for m in b.metrics() if m.name == "time_taken_s")
    assert time.unit == "s" and not time.higher_is_better


def test_params_refused():
    for bad in ({"requests": 10, "concurrency": 20}, {"requests": 0}, {"nosuch": 1}, {"workers": 0}):
        with pytest.raises(ValidationError):
            NginxAbParams(**bad)

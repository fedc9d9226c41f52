"""sockperf ping-pong parser and argv, against outputs recorded from sockperf 3.7 (Debian 12)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.sockperf import PERCENTILES, Sockperf, SockperfParams
from virtbench.errors import ParseError
from virtbench.report.figures import percentile_of

DATA = Path(__file__).resolve().parent.parent / "data" / "sockperf"

RECORDED = {
    "tcp_lo_t2_m64": dict(time=2),
    "udp_lo_t2_m64": dict(time=2, protocol="udp"),
    "tcp_netns_t2_m64": dict(time=2),
    "udp_netns_t2_m64": dict(time=2, protocol="udp"),
    "tcp_netns_t2_m64_fullrtt": dict(time=2, full_rtt=True),
    "tcp_netns_t2_m65000": dict(time=2, msg_size=65000),
    "derived_max_without_brackets": dict(time=2),
}


def read(name: str) -> tuple[str, str]:
    stderr = DATA / f"{name}.stderr.txt"
    return (DATA / f"{name}.txt").read_text(), stderr.read_text() if stderr.exists() else ""


def bench(**kw: object) -> Sockperf:
    return Sockperf(SockperfParams(**kw))


@pytest.mark.parametrize(("name", "params"), list(RECORDED.items()))
def test_parse_recorded(name: str, params: dict) -> None:
    b = bench(**params)
    result = b.parse(*read(name), name)
    assert set(result) == {m.name for m in b.metrics()}
    assert result["min"] <= result["p25"] <= result["p50"] <= result["p90"] <= result["p99"]
    assert result["p99"] <= result["p99_9"] <= result["p99_99"] <= result["p99_999"] <= result["max"]
    assert result["roundtrip_rate"] > 0 and result["dropped"] == 0


def test_values_from_file() -> None:
    stdout, stderr = read("tcp_lo_t2_m64")
    assert "\x1b[2;35m====> avg-latency=13.542 (std-dev=100.632)\x1b[0m" in stdout  # colour codes kept in the file
    result = bench(time=2).parse(stdout, stderr)
    assert result == {
        "avg": 13.542, "std_dev": 100.632, "p25": 7.365, "p50": 7.441, "p75": 7.736, "p90": 8.337,
        "p99": 24.045, "p99_9": 1704.516, "p99_99": 2691.021, "p99_999": 6931.333,
        "max": 7373.917, "min": 7.055, "dropped": 0.0,
        # [Valid Duration] RunTime=1.550 sec; ... ReceivedMessages=57198 (the 400 ms warm-up excluded)
        "roundtrip_rate": pytest.approx(57198 / 1.550),
    }


def test_full_rtt_is_about_twice_the_one_way_figure() -> None:
    rtt = bench(full_rtt=True).parse(*read("tcp_netns_t2_m64_fullrtt"))
    assert rtt["avg"] == 33.909 and rtt["p50"] == 15.703 and rtt["max"] == 15235.441
    one_way = bench().parse(*read("tcp_netns_t2_m64"))
    assert one_way["p50"] == 7.846
    assert 1.5 < rtt["p50"] / one_way["p50"] < 2.5
    # The avg line names what it measured; a mismatch with the params is an error.
    with pytest.raises(ParseError, match="avg-latency"):
        bench().parse(*read("tcp_netns_t2_m64_fullrtt"))
    with pytest.raises(ParseError, match="avg-rtt"):
        bench(full_rtt=True).parse(*read("tcp_netns_t2_m64"))


def test_max_without_angle_brackets() -> None:
    # derived_max_without_brackets is tcp_lo_t2_m64 with only "<MAX>" changed to "MAX".
    derived, recorded = read("derived_max_without_brackets")[0], read("tcp_lo_t2_m64")[0]
    changed = [(a, b) for a, b in zip(recorded.splitlines(), derived.splitlines()) if a != b]
    assert changed == [("sockperf: ---> <MAX> observation = 7373.917", "sockperf: ---> MAX observation = 7373.917")]
    assert bench().parse(derived) == bench().parse(recorded)


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("fail_refused_tcp", dict(time=1), "Connection refused"),
        ("fail_noserver_udp", dict(time=1, protocol="udp"), "No messages were received"),
        ("fail_m65508_tcp", dict(time=1), "forcibly closed by a peer"),
    ],
)
def test_failures(name: str, params: dict, message: str) -> None:
    # The first two exited 0: only the text tells.
    with pytest.raises(ParseError, match=message) as info:
        bench(**params).parse(*read(name), f"{name}.txt")
    assert info.value.source == f"{name}.txt"


def test_truncated_and_empty() -> None:
    stdout, _ = read("udp_lo_t2_m64")
    for drop, expect in (("percentile 99.990", "99.990"), ("<MIN>", "MIN"), ("avg-latency", "avg-"),
                         ("[Valid Duration]", "Valid Duration"), ("dropped messages", "dropped")):
        cut = "\n".join(ln for ln in stdout.splitlines() if drop not in ln)
        with pytest.raises(ParseError, match=re.escape(expect)):
            bench(protocol="udp").parse(cut, "", "cut.txt")
    with pytest.raises(ParseError, match="in empty"):
        bench().parse("", "", "empty")


def test_argv() -> None:
    b = bench()
    assert b.server_command("/w") == ["sockperf", "server", "-p", "11111", "--tcp", "-i", "0.0.0.0"]
    assert b.client_command("/w", "10.0.0.2") == [
        "sockperf", "ping-pong", "-i", "10.0.0.2", "-p", "11111", "--tcp", "-t", "5", "-m", "64"]
    u = bench(protocol="udp", time=20, msg_size=1472, port=12000, full_rtt=True)
    assert "--tcp" not in u.server_command("/w") and "--tcp" not in u.client_command("/w", "h")
    argv = u.client_command("/w", "h")
    assert argv[argv.index("-t") + 1] == "20" and argv[argv.index("-m") + 1] == "1472"
    assert argv[argv.index("-p") + 1] == "12000" and argv[-1] == "--full-rtt"
    assert u.server_command("/w")[3] == "12000"


def test_protocol_is_an_instance_attribute_read_like_the_classvar() -> None:
    # pair.py reads bench.protocol to choose `ss -t` or `ss -u`.
    assert bench().protocol == "tcp"
    assert bench(protocol="udp").protocol == "udp"
    assert Sockperf.protocol == "tcp"  # the class default is untouched
    assert bench(protocol="udp").port() == 11111


def test_params() -> None:
    p = SockperfParams()
    assert (p.protocol, p.time, p.msg_size, p.full_rtt, p.port) == ("tcp", 5, 64, False, 11111)
    for bad in (dict(protocol="sctp"), dict(time=0), dict(msg_size=13), dict(msg_size=65508), dict(port=70000),
                dict(nosuch=1), dict(client="peer")):
        with pytest.raises(ValidationError):
            SockperfParams(**bad)


def test_metadata_and_percentile_names() -> None:
    b = bench()
    metrics = {m.name: m for m in b.metrics()}
    for name in ("avg", "max", "min", "std_dev", *PERCENTILES):
        assert (metrics[name].unit, metrics[name].higher_is_better, metrics[name].category) == ("us", False, "network")
    assert metrics["roundtrip_rate"].higher_is_better
    assert "RTT/2" in metrics["p50"].description and "round-trip" in bench(full_rtt=True).metrics()[0].description
    # The report's HDR plot recognizes exactly these names.
    assert {n: percentile_of(n) for n in PERCENTILES} == {
        "p25": ("|", 0.25), "p50": ("|", 0.5), "p75": ("|", 0.75), "p90": ("|", 0.9), "p99": ("|", 0.99),
        "p99_9": ("|", pytest.approx(0.999)), "p99_99": ("|", pytest.approx(0.9999)),
        "p99_999": ("|", pytest.approx(0.99999)),
    }
    assert Sockperf.name == "sockperf" and Sockperf.packages == ("sockperf",)
    assert b.version_command() == ["sockperf", "--version"]
    assert bench(time=20).execution_timeout() > 20


def test_runner_polls_ss_with_the_params_protocol() -> None:
    from virtbench.experiments.benchmarks import pair

    class Result:
        ok, stdout = True, "UNCONN 0 0 0.0.0.0:11111 0.0.0.0:*\n"

    class Platform:
        argv: list[str] = []

        def exec(self, instance: object, argv: list[str], timeout: float, check: bool) -> Result:
            Platform.argv = argv
            return Result()

    class Background:
        def alive(self) -> bool:
            return True

    for protocol, flag in (("udp", "-u"), ("tcp", "-t")):
        pair.wait_listening(Platform(), None, bench(protocol=protocol, port=12345), Background())  # type: ignore[arg-type]
        assert Platform.argv == ["ss", "-H", "-l", "-n", flag, "sport", "=", ":12345"]

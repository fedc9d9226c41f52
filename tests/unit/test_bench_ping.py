"""ping parser and argv, against outputs recorded from iputils-ping 20221126 (Debian 12)."""
from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.base import PairBenchmark
from virtbench.benchmarks.ping import Ping, PingParams
from virtbench.errors import ParseError

DATA = Path(__file__).resolve().parent.parent / "data" / "ping"


def read(name: str) -> tuple[str, str]:
    stderr = DATA / f"{name}.stderr.txt"
    return (DATA / f"{name}.txt").read_text(), stderr.read_text() if stderr.exists() else ""


def bench(**kw: object) -> Ping:
    return Ping(PingParams(**kw))


@pytest.mark.parametrize(
    ("name", "params", "expected"),
    [
        ("lo_default", dict(), (0.029, 0.050, 0.096, 0.012, 0.0)),
        ("lo_c20_i0.01", dict(count=20, interval=0.01), (0.025, 0.054, 0.088, 0.017, 0.0)),
        ("netns_c50_i0.002", dict(count=50, interval=0.002), (0.005, 0.027, 0.066, 0.014, 0.0)),
        ("netns_c10_s1472", dict(count=10, interval=0.05, size=1472), (0.033, 0.063, 0.145, 0.029, 0.0)),
        # nft dropped ~30 % of the echo requests: ping still exits 0, the loss is a metric.
        ("netns_c30_i0.1_lossy30", dict(count=30, interval=0.1), (0.041, 0.057, 0.089, 0.009, 30.0)),
        # by hand with -i 0 (root only): the rtt line ends with ", ipg/ewma 0.011/0.005 ms".
        ("netns_c50_i0_byhand", dict(count=50, interval=0.002), (0.004, 0.005, 0.058, 0.008, 0.0)),
    ],
)
def test_parse_recorded(name: str, params: dict, expected: tuple[float, ...]) -> None:
    b = bench(**params)
    result = b.parse(*read(name), name)
    assert set(result) == {m.name for m in b.metrics()}
    assert tuple(result[k] for k in ("rtt_min", "rtt_avg", "rtt_max", "rtt_mdev", "packet_loss")) == expected


def test_no_reply_and_unreachable() -> None:
    stdout, stderr = read("fail_no_reply")
    assert "+5 errors, 100% packet loss" in stdout and "pipe 5" in stdout
    with pytest.raises(ParseError, match="at least one reply") as info:
        bench(count=5).parse(stdout, stderr, "noreply.txt")
    assert info.value.source == "noreply.txt"
    stdout, stderr = read("fail_network_unreachable")
    assert stdout == "" and "Network is unreachable" in stderr
    with pytest.raises(ParseError, match="packets transmitted"):
        bench(count=5).parse(stdout, stderr)


def test_cut_and_mismatched_outputs() -> None:
    stdout, _ = read("lo_c20_i0.01")
    cut = "\n".join(ln for ln in stdout.splitlines() if not ln.startswith("rtt "))
    with pytest.raises(ParseError, match="rtt min/avg/max/mdev"):
        bench(count=20).parse(cut, "", "cut.txt")
    with pytest.raises(ParseError, match="25 packets transmitted"):
        bench().parse(stdout)  # the file is from -c 20
    # printf %g may print the loss in exponent form for tiny fractions.
    tiny = stdout.replace("0% packet loss", "1e-05% packet loss")
    assert bench(count=20).parse(tiny)["packet_loss"] == 1e-05


def test_argv_and_placeholder_server() -> None:
    b = bench()
    assert b.client_command("/w", "10.0.0.2") == ["ping", "-n", "-q", "-c", "25", "-i", "0.2", "-s", "56", "10.0.0.2"]
    argv = bench(count=1000, interval=0.002, size=1472).client_command("/w", "h")
    assert argv[argv.index("-c") + 1] == "1000" and argv[argv.index("-i") + 1] == "0.002"
    assert argv[argv.index("-s") + 1] == "1472"
    # No server program and no port: the peer's kernel answers; the runner must skip its ss wait.
    assert b.server_command("/w") == ["sleep", "infinity"]
    assert b.port() is None


def test_params() -> None:
    p = PingParams()
    assert (p.count, p.interval, p.size, p.client, p.server) == (25, 0.2, 56, "instance", "peer")
    for bad in (dict(count=0), dict(interval=0.001), dict(interval=0), dict(size=-1), dict(size=65508),
                dict(nosuch=1), dict(port=1)):
        with pytest.raises(ValidationError):
            PingParams(**bad)


def test_metadata() -> None:
    assert issubclass(Ping, PairBenchmark)
    assert Ping.name == "ping" and Ping.packages == ("iputils-ping",)
    metrics = {m.name: m for m in bench().metrics()}
    assert set(metrics) == {"rtt_min", "rtt_avg", "rtt_max", "rtt_mdev", "packet_loss"}
    assert all(not m.higher_is_better and m.category == "network" for m in metrics.values())
    assert metrics["rtt_avg"].unit == "ms" and metrics["packet_loss"].unit == "%"
    assert bench().version_command() == ["ping", "-V"]
    assert bench(count=100, interval=1).execution_timeout() >= 100

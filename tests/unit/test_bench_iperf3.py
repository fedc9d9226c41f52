"""iperf3 parser and argv, against JSON recorded from iperf 3.12 (Debian 12), loopback and a veth pair."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from virtbench.benchmarks.base import PairBenchmark
from virtbench.benchmarks.iperf3 import Iperf3, Iperf3Params
from virtbench.errors import ParseError

DATA = Path(__file__).resolve().parent.parent / "data" / "iperf3"

RECORDED = {
    "tcp_lo_t2": dict(time=2),
    "tcp-reverse_lo_t2": dict(time=2, mode="tcp-reverse"),
    "udp_lo_t2_100M": dict(time=2, mode="udp", udp_rate="100M"),
    "tcp_lo_t2_P2": dict(time=2, parallel=2),
    "tcp_netns_t2": dict(time=2),
    "tcp-reverse_netns_t2": dict(time=2, mode="tcp-reverse"),
    "tcp_netns_t2_l8": dict(time=2, length=8),
    "tcp_netns_t2_l65000": dict(time=2, length=65000),
    "udp_netns_t2_5G": dict(time=2, mode="udp", udp_rate="5G"),
}


def read(name: str) -> tuple[str, str]:
    stderr = DATA / f"{name}.stderr.txt"
    return (DATA / f"{name}.txt").read_text(), stderr.read_text() if stderr.exists() else ""


def bench(**kw: object) -> Iperf3:
    return Iperf3(Iperf3Params(**kw))


@pytest.mark.parametrize(("name", "params"), list(RECORDED.items()))
def test_parse_recorded(name: str, params: dict) -> None:
    b = bench(**params)
    stdout, stderr = read(name)
    result = b.parse(stdout, stderr, name)
    assert set(result) == {m.name for m in b.metrics()}
    end = json.loads(stdout)["end"]
    assert result["throughput"] == end["sum_received"]["bits_per_second"] / 1e6 > 0
    assert result["cpu_client"] == end["cpu_utilization_percent"]["host_total"]
    assert result["cpu_server"] == end["cpu_utilization_percent"]["remote_total"]
    if params.get("mode") == "udp":
        assert result["loss"] == end["sum_received"]["lost_percent"]
        assert result["jitter"] == end["sum_received"]["jitter_ms"]
    else:
        assert result["retransmits"] == end["sum_sent"]["retransmits"]


def test_tcp_values_from_files() -> None:
    lo = bench(time=2).parse(*read("tcp_lo_t2"))
    assert lo["throughput"] == pytest.approx(17471.2419835318)
    assert lo["retransmits"] == 0
    assert lo["cpu_client"] == pytest.approx(41.60300014659671)
    veth = bench(time=2).parse(*read("tcp_netns_t2"))
    assert veth["throughput"] == pytest.approx(5527.766146441872)
    assert veth["retransmits"] == 969
    # -l 8: 8-byte write()s, syscall-bound; the stream is not sent as 8-byte packets.
    assert bench(time=2, length=8).parse(*read("tcp_netns_t2_l8"))["throughput"] == pytest.approx(14.1746912916686)


def test_reverse_retransmits_come_from_the_server_side_sender() -> None:
    result = bench(time=2, mode="tcp-reverse").parse(*read("tcp-reverse_netns_t2"))
    assert result["retransmits"] == 271
    assert result["throughput"] == pytest.approx(9771.47434031769)


def test_udp_throughput_is_the_received_rate_not_end_sum() -> None:
    stdout, _ = read("udp_netns_t2_5G")
    end = json.loads(stdout)["end"]
    # iperf 3.12: end.sum carries the sender's rate next to the receiver's loss and jitter.
    assert end["sum"]["bits_per_second"] == end["sum_sent"]["bits_per_second"] == pytest.approx(858353181.579625)
    result = bench(time=2, mode="udp", udp_rate="5G").parse(stdout)
    assert result["throughput"] == pytest.approx(275.57038280240346)
    assert result["loss"] == pytest.approx(67.50175051168803)
    assert result["jitter"] == pytest.approx(0.003273342192631082)
    lo = bench(time=2, mode="udp", udp_rate="100M").parse(*read("udp_lo_t2_100M"))
    assert lo["loss"] == 0 and lo["throughput"] == pytest.approx(99.9971363092786)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("fail_refused", "unable to connect to server: Connection refused"),
        ("fail_busy", "the server is busy running a test"),
    ],
)
def test_error_key_fails_although_exit_status_was_0(name: str, message: str) -> None:
    with pytest.raises(ParseError, match=message) as info:
        bench(time=2).parse(*read(name), f"{name}.txt")
    assert info.value.source == f"{name}.txt"


def test_not_json() -> None:
    stdout, stderr = read("fail_udp_l8")
    assert "Usage: iperf3" in stdout
    with pytest.raises(ParseError, match="block size invalid"):
        bench(mode="udp").parse(stdout, stderr, "l8")
    with pytest.raises(ParseError, match="JSON"):
        bench().parse("", "", "empty")
    with pytest.raises(ParseError, match="JSON object"):
        bench().parse("[1, 2]", "", "list")


def test_mode_mismatch_and_missing_keys() -> None:
    tcp, _ = read("tcp_lo_t2")
    with pytest.raises(ParseError, match="protocol == 'UDP'"):
        bench(mode="udp").parse(tcp)
    with pytest.raises(ParseError, match="reverse"):
        bench(mode="tcp-reverse").parse(tcp)
    with pytest.raises(ParseError, match="reverse"):
        bench().parse(read("tcp-reverse_lo_t2")[0])
    data = json.loads(tcp)
    del data["end"]["sum_received"]
    with pytest.raises(ParseError, match=r"end\.sum_received"):
        bench().parse(json.dumps(data), "", "cut.json")
    data = json.loads(tcp)
    del data["end"]["sum_sent"]["retransmits"]
    with pytest.raises(ParseError, match="retransmits"):
        bench().parse(json.dumps(data))
    data = json.loads(read("udp_lo_t2_100M")[0])
    del data["end"]["sum_received"]  # as iperf3 3.9 prints it: end.sum holds the sender's rate
    del data["end"]["sum"]["lost_packets"]  # ... and the receiver's counts, needed to derive it
    with pytest.raises(ParseError, match="lost_packets"):
        bench(mode="udp", udp_rate="100M").parse(json.dumps(data))
    data = json.loads(tcp)
    data["end"]["sum_received"]["bits_per_second"] = 0
    with pytest.raises(ParseError, match="positive"):
        bench().parse(json.dumps(data))


def test_argv() -> None:
    assert bench().server_command("/w") == ["iperf3", "-s", "-1", "-p", "5201"]
    argv = bench().client_command("/w", "10.0.0.2")
    assert argv == ["iperf3", "-c", "10.0.0.2", "-p", "5201", "-J", "-t", "5"]
    argv = bench(mode="tcp-reverse", time=20, length=8, parallel=4, port=6000).client_command("/w", "h")
    assert argv[argv.index("-t") + 1] == "20" and argv[argv.index("-l") + 1] == "8"
    assert argv[argv.index("-P") + 1] == "4" and argv[argv.index("-p") + 1] == "6000"
    assert "-R" in argv and "-u" not in argv and "-b" not in argv
    argv = bench(mode="udp").client_command("/w", "h")
    assert argv[-3:] == ["-u", "-b", "1G"] and "-R" not in argv
    argv = bench(mode="udp", udp_rate="100M", length=1472).client_command("/w", "h")
    assert argv[argv.index("-b") + 1] == "100M" and argv[argv.index("-l") + 1] == "1472"
    for kw in (dict(), dict(mode="tcp-reverse")):
        assert "-u" not in bench(**kw).client_command("/w", "h")


def test_params() -> None:
    p = Iperf3Params()
    assert (p.mode, p.time, p.length, p.udp_rate, p.parallel, p.port) == ("tcp", 5, None, None, 1, 5201)
    assert (p.client, p.server) == ("instance", "peer")
    for bad in (
        dict(mode="sctp"), dict(time=0), dict(length=0), dict(length=2 * 1024 * 1024), dict(parallel=0),
        dict(port=0), dict(udp_rate="100M"), dict(mode="udp", udp_rate="fast"),
        dict(mode="udp", udp_rate="1G; rm -rf /"), dict(mode="udp", length=8), dict(mode="udp", length=65508),
        dict(nosuch=1), dict(server="elsewhere"),
    ):
        with pytest.raises(ValidationError):
            Iperf3Params(**bad)
    assert Iperf3Params(length=8).length == 8  # TCP: the study's sweep starts at 8 B
    assert Iperf3Params(mode="udp", length=65507, udp_rate="2.5G").udp_rate == "2.5G"


def test_metadata() -> None:
    assert issubclass(Iperf3, PairBenchmark)
    assert Iperf3.name == "iperf3" and Iperf3.packages == ("iperf3",)
    b = bench()
    assert b.protocol == "tcp" and bench(mode="udp").protocol == "tcp"  # control connection
    assert b.port() == 5201
    tcp = {m.name: m for m in b.metrics()}
    assert set(tcp) == {"throughput", "retransmits", "cpu_client", "cpu_server"}
    assert (tcp["throughput"].unit, tcp["throughput"].higher_is_better) == ("Mbit/s", True)
    assert (tcp["retransmits"].unit, tcp["retransmits"].higher_is_better) == ("count", False)
    assert all(m.category == "network" for m in tcp.values())
    udp = {m.name: m for m in bench(mode="udp").metrics()}
    assert set(udp) == {"throughput", "loss", "jitter", "cpu_client", "cpu_server"}
    assert (udp["loss"].unit, udp["jitter"].unit, udp["cpu_server"].unit) == ("%", "ms", "%")
    assert not udp["loss"].higher_is_better and not udp["jitter"].higher_is_better
    assert b.version_command() == ["iperf3", "--version"]
    assert bench(time=20).execution_timeout() >= 20 + 30


def test_udp_datagrams_are_one_size_on_every_path_unless_given() -> None:
    """iperf3 sizes UDP datagrams by its control connection's MSS: the recorded runs sent 32 KiB
    over loopback (native's path) and 1448 B through a namespace's veth (a container's), so one
    `udp_rate` meant 22 times fewer packets on native."""
    data = Path(__file__).parents[1] / "data" / "iperf3"
    sizes = {f: json.loads((data / f).read_text())["start"]["test_start"]["blksize"]
             for f in ("udp_lo_t2_100M.txt", "udp_netns_t2_5G.txt")}
    assert sizes == {"udp_lo_t2_100M.txt": 32768, "udp_netns_t2_5G.txt": 1448}
    udp = bench(mode="udp", udp_rate="100M").client_command("/tmp", "10.0.0.1")
    assert udp[udp.index("-l") + 1] == "1448"
    given = bench(mode="udp", length=1470).client_command("/tmp", "10.0.0.1")
    assert given[given.index("-l") + 1] == "1470"
    assert "-l" not in bench(mode="tcp").client_command("/tmp", "10.0.0.1")  # a write size there, not a packet

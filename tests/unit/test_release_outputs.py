"""Every parser reads the outputs of the tool versions Debian bullseye and trixie ship, and of
the older and newer versions other distributions' images bring (#30 item 6).

Recorded with the project's own image builder (one image per release) and the benchmark's own
argv in a chroot of it (the native platform); the other versions with the real binaries of
Debian's package (p7zip 16.02) or an upstream release built from source (sockperf 3.8 and 3.10,
iperf 3.1.3). Commands and versions in tests/data/README.md.
The bookworm recordings are tested by each benchmark's own test module.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from virtbench.registry import BENCHMARKS

DATA = Path(__file__).resolve().parent.parent / "data"
# (recording without .txt, benchmark, parameters it ran with)
RECORDED = [
    ('openssl/bullseye_openssl_seconds1_bytes1024', 'openssl', {'seconds': 1, 'bytes': 1024}),
    ('openssl/bullseye_openssl_seconds1_bytes64_multi2_algorithmdes-ede3',
     'openssl', {'seconds': 1, 'bytes': 64, 'multi': 2, 'algorithm': 'des-ede3'}),
    ('fio/bullseye_fio_size64M_runtime1_ramp_time0', 'fio', {'size': '64M', 'runtime': 1, 'ramp_time': 0}),
    ('sysbench/bullseye_sysbench_cpu_time1', 'sysbench-cpu', {'time': 1}),
    ('sqlite/bullseye_sqlite_rows20000_subscribers1000_repeats1',
     'sqlite', {'rows': 20000, 'subscribers': 1000, 'repeats': 1}),
    ('7zip/bullseye_7zip_defaults', '7zip', {}),
    ('botan/bullseye_botan_msec300', 'botan', {'msec': 300}),
    ('mbw/bullseye_mbw_runs3', 'mbw', {'runs': 3}),
    ('sysbench/bullseye_sysbench_memory_time1', 'sysbench-memory', {'time': 1}),
    ('sysbench/bullseye_sysbench_fileio_time1_file_total_size64M',
     'sysbench-fileio', {'time': 1, 'file_total_size': '64M'}),
    ('dd/bullseye_dd_count16', 'dd', {'count': 16}),
    ('build/bullseye_build_files20_jobs1', 'build', {'files': 20, 'jobs': 1}),
    ('iperf3/bullseye_iperf3_time1', 'iperf3', {'time': 1}),
    ('iperf3/bullseye_iperf3_time1_modeudp_udp_rate100M', 'iperf3', {'time': 1, 'mode': 'udp', 'udp_rate': '100M'}),
    ('sockperf/bullseye_sockperf_time1', 'sockperf', {'time': 1}),
    ('ping/bullseye_ping_count3', 'ping', {'count': 3}),
    ('wrk/bullseye_nginx_wrk_duration1', 'nginx-wrk', {'duration': 1}),
    ('sysbench/bullseye_mariadb_oltp_time2', 'mariadb-oltp', {'time': 2}),
    ('openssl/trixie_openssl_seconds1_bytes1024', 'openssl', {'seconds': 1, 'bytes': 1024}),
    ('openssl/trixie_openssl_seconds1_bytes64_multi2_algorithmdes-ede3',
     'openssl', {'seconds': 1, 'bytes': 64, 'multi': 2, 'algorithm': 'des-ede3'}),
    ('fio/trixie_fio_size64M_runtime1_ramp_time0', 'fio', {'size': '64M', 'runtime': 1, 'ramp_time': 0}),
    ('sysbench/trixie_sysbench_cpu_time1', 'sysbench-cpu', {'time': 1}),
    ('sqlite/trixie_sqlite_rows20000_subscribers1000_repeats1',
     'sqlite', {'rows': 20000, 'subscribers': 1000, 'repeats': 1}),
    ('hpcc/trixie_hpcc_n1000_processes1', 'hpcc', {'n': 1000, 'processes': 1}),
    ('7zip/trixie_7zip_defaults', '7zip', {}),
    ('botan/trixie_botan_msec300', 'botan', {'msec': 300}),
    ('mbw/trixie_mbw_runs3', 'mbw', {'runs': 3}),
    ('sysbench/trixie_sysbench_memory_time1', 'sysbench-memory', {'time': 1}),
    ('sysbench/trixie_sysbench_fileio_time1_file_total_size64M',
     'sysbench-fileio', {'time': 1, 'file_total_size': '64M'}),
    ('dd/trixie_dd_count16', 'dd', {'count': 16}),
    ('build/trixie_build_files20_jobs1', 'build', {'files': 20, 'jobs': 1}),
    ('iperf3/trixie_iperf3_time1', 'iperf3', {'time': 1}),
    ('iperf3/trixie_iperf3_time1_modeudp_udp_rate100M', 'iperf3', {'time': 1, 'mode': 'udp', 'udp_rate': '100M'}),
    ('sockperf/trixie_sockperf_time1', 'sockperf', {'time': 1}),
    ('ping/trixie_ping_count3', 'ping', {'count': 3}),
    ('wrk/trixie_nginx_wrk_duration1', 'nginx-wrk', {'duration': 1}),
    ('sysbench/trixie_mariadb_oltp_time2', 'mariadb-oltp', {'time': 2}),
]
# Older and newer tool versions than Debian's images have (tests/data/README.md, "Other versions").
OTHER_VERSIONS = [
    ('7zip/bullseye-p7zip16.02_7zip_defaults', '7zip', {}),
    ('7zip/bullseye-p7zip16.02_7zip_threads2', '7zip', {'threads': 2}),
    ('7zip/bullseye-p7zip16.02_7zip_passesNone_dictionaryNone', '7zip', {'passes': None, 'dictionary': None}),
    ('sockperf/upstream-sockperf3.8_sockperf_time1', 'sockperf', {'time': 1}),
    ('sockperf/upstream-sockperf3.8_sockperf_time1_protocoludp', 'sockperf', {'time': 1, 'protocol': 'udp'}),
    ('sockperf/upstream-sockperf3.10_sockperf_time1', 'sockperf', {'time': 1}),
    ('sockperf/upstream-sockperf3.10_sockperf_time1_protocoludp', 'sockperf', {'time': 1, 'protocol': 'udp'}),
    ('sockperf/upstream-sockperf3.10_sockperf_time1_full_rttTrue', 'sockperf', {'time': 1, 'full_rtt': True}),
    ('iperf3/upstream-iperf3.1.3_iperf3_time1', 'iperf3', {'time': 1}),
    ('iperf3/upstream-iperf3.1.3_iperf3_time1_modeudp_udp_rate100M',
     'iperf3', {'time': 1, 'mode': 'udp', 'udp_rate': '100M'}),
    ('iperf3/upstream-iperf3.1.3_iperf3_time1_modeudp_udp_rate5G',
     'iperf3', {'time': 1, 'mode': 'udp', 'udp_rate': '5G'}),
]
CAN_BE_ZERO = {"retransmits", "loss", "dropped", "packet_loss", "socket_errors", "http_errors"}
"""Counts of bad events: zero on a healthy run."""


def _parse(stem: str, name: str, params: dict) -> tuple[object, dict[str, float]]:
    cls = BENCHMARKS.get(name)
    bench = cls(cls.Params(**params))
    stdout = (DATA / f"{stem}.txt").read_text()
    err_file = DATA / f"{stem}.stderr.txt"
    stderr = err_file.read_text() if err_file.exists() else ""
    return bench, bench.parse(stdout, stderr, source=stem)


ALL = RECORDED + OTHER_VERSIONS


@pytest.mark.parametrize("stem, name, params", ALL, ids=[r[0] for r in ALL])
def test_release_output_parses_to_every_metric(stem: str, name: str, params: dict) -> None:
    bench, values = _parse(stem, name, params)
    assert set(values) == {m.name for m in bench.metrics()}
    for metric, value in values.items():
        assert math.isfinite(value) and (value > 0 or (metric in CAN_BE_ZERO and value == 0)), (metric, value)


@pytest.mark.parametrize("release", ["bullseye", "trixie"])
def test_every_quick_benchmark_is_recorded_for_the_release(release: str) -> None:
    recorded = {name for stem, name, _ in RECORDED if f"/{release}_" in stem}
    assert {"openssl", "fio", "sysbench-cpu", "sqlite"} <= recorded


@pytest.mark.parametrize("stem, avg, std_dev", [
    ("sockperf/upstream-sockperf3.8_sockperf_time1", 18.768, 172.123),
    ("sockperf/upstream-sockperf3.10_sockperf_time1", 19.183, 127.763),
])
def test_sockperf_3_8_and_3_10_mean_line_with_mean_ad(stem: str, avg: float, std_dev: float) -> None:
    """`avg-latency=X (std-dev=Y, mean-ad=..., ...)`: the values printed, not a rejection."""
    _, values = _parse(stem, "sockperf", {"time": 1})
    assert (values["avg"], values["std_dev"]) == (avg, std_dev)


def test_sockperf_full_rtt_of_3_10_reads_avg_rtt() -> None:
    _, values = _parse("sockperf/upstream-sockperf3.10_sockperf_time1_full_rttTrue", "sockperf",
                       {"time": 1, "full_rtt": True})
    assert (values["avg"], values["std_dev"]) == (28.172, 150.880)


@pytest.mark.parametrize("stem, params, ratings", [
    ("7zip/bullseye-p7zip16.02_7zip_defaults", {}, (560, 957, 758)),
    ("7zip/bullseye-p7zip16.02_7zip_passesNone_dictionaryNone", {"passes": None, "dictionary": None},
     (898, 1506, 1202)),
])
def test_p7zip_16_02_avr_line_without_speed(stem: str, params: dict, ratings: tuple[int, int, int]) -> None:
    """p7zip 16.02's `Avr:` has Usage, R/U and Rating only: the ratings, not Usage or R/U."""
    _, values = _parse(stem, "7zip", params)
    assert (values["compress_rating"], values["decompress_rating"], values["total_rating"]) == ratings


def test_iperf3_3_1_3_udp_throughput_is_the_receivers_count() -> None:
    """iperf 3.1.3 has no end.sum_received: the datagrams the receiver counted, not the sender's rate.

    At 5 Gbit/s the sender sent 62936 datagrams of 8192 B, the receiver's highest sequence number
    was 62098 with 49073 gaps below it: 13025 arrived. Scaling the sender's rate by
    (packets - lost) / packets would count the 838 lost at the tail as received.
    """
    stem = "iperf3/upstream-iperf3.1.3_iperf3_time1_modeudp_udp_rate5G"
    data = json.loads((DATA / f"{stem}.txt").read_text())
    summary = data["end"]["sum"]
    assert "sum_received" not in data["end"] and summary["bytes"] == 62936 * 8192
    _, values = _parse(stem, "iperf3", {"time": 1, "mode": "udp", "udp_rate": "5G"})
    seconds = summary["bytes"] * 8 / summary["bits_per_second"]
    assert values["throughput"] == pytest.approx((62098 - 49073) * 8192 * 8 / seconds / 1e6)
    assert values["throughput"] < summary["bits_per_second"] * 13025 / 62098 / 1e6 * 0.99
    assert values["loss"] == summary["lost_percent"]  # the receiver's own count

"""Every parser reads the outputs of the tool versions Debian bullseye and trixie ship.

Recorded with the project's own image builder (one image per release) and the benchmark's own
argv in a chroot of it (the native platform); commands and versions in tests/data/README.md.
The bookworm recordings are tested by each benchmark's own test module.
"""
from __future__ import annotations

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
CAN_BE_ZERO = {"retransmits", "loss", "dropped", "packet_loss", "socket_errors", "http_errors"}
"""Counts of bad events: zero on a healthy run."""


@pytest.mark.parametrize("stem, name, params", RECORDED, ids=[r[0] for r in RECORDED])
def test_release_output_parses_to_every_metric(stem: str, name: str, params: dict) -> None:
    cls = BENCHMARKS.get(name)
    bench = cls(cls.Params(**params))
    stdout = (DATA / f"{stem}.txt").read_text()
    err_file = DATA / f"{stem}.stderr.txt"
    stderr = err_file.read_text() if err_file.exists() else ""
    values = bench.parse(stdout, stderr, source=stem)
    assert set(values) == {m.name for m in bench.metrics()}
    for metric, value in values.items():
        assert math.isfinite(value) and (value > 0 or (metric in CAN_BE_ZERO and value == 0)), (metric, value)


@pytest.mark.parametrize("release", ["bullseye", "trixie"])
def test_every_quick_benchmark_is_recorded_for_the_release(release: str) -> None:
    recorded = {name for stem, name, _ in RECORDED if f"/{release}_" in stem}
    assert {"openssl", "fio", "sysbench-cpu", "sqlite"} <= recorded

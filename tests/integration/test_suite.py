"""Every registered benchmark runs for real, in a quick form, on native and on Docker.

One campaign, one image with every tool (the `full` package set), one repetition: this is the
check that each plugin's command works inside the image and its parser reads the real output
on more than one platform. Client-server benchmarks run instance-to-instance (peer) on
Docker's bridge; sockperf and iperf3 also instance-to-host.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from virtbench.registry import BENCHMARKS

pytestmark = pytest.mark.integration

QUICK = {
    "openssl": {"seconds": 1},
    "fio": {"size": "64M", "runtime": 1, "ramp_time": 0},
    "sysbench-cpu": {"time": 1},
    "sqlite": {"rows": 20000},
    "hpcc": {},
    "7zip": {},
    "botan": {"msec": 300},
    "mbw": {},
    "sysbench-memory": {"time": 1},
    "sysbench-fileio": {"time": 1},
    "dd": {},
    "build": {},
    "iperf3": {"time": 1},
    "sockperf": {"time": 1},
    "ping": {"count": 5},
    "nginx-wrk": {"duration": 1},
    "nginx-ab": {"requests": 500, "concurrency": 10},
    "mariadb-oltp": {"time": 2},
    "blender": {"width": 64, "height": 36, "samples": 4, "objects": 4},
    "gan": {"images": 64, "epochs": 1},
    "syscall": {"calls": 100000},
    "context-switch": {"loops": 5000},
    "fork-exec": {"runs": 100, "warmup": 5},
    "page-fault": {"rounds": 2},
    "file-metadata": {"files": 500, "loops": 10},
}
TO_HOST = [{"name": "iperf3", "time": 1, "server": "host"}, {"name": "sockperf", "time": 1, "server": "host"}]


def test_quick_form_parameters_are_valid_for_every_benchmark():
    assert set(QUICK) == set(BENCHMARKS.names()), "add the new benchmark's quick form here"
    for name, params in QUICK.items():
        cls = BENCHMARKS.get(name)
        cls(cls.Params(**params))


def test_every_benchmark_runs_on_native_and_docker(tmp_path):
    import yaml

    bench_list = [{"name": n, **{k: v for k, v in p.items()}} for n, p in QUICK.items()] + TO_HOST
    campaign = {"name": "suite", "repetitions": 1, "warmups": 0, "shuffle": False,
                "platforms": ["native", {"name": "docker", "type": "docker", "network": "bridge"}],
                "benchmarks": bench_list}
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(campaign))
    uniq = uuid.uuid4().hex[:8]
    env = dict(os.environ, VIRTBENCH_DB=f"sqlite:///{tmp_path / 'r.db'}",
               VIRTBENCH_STATE_DIR=f"/var/lib/virtbench-test/suite-{uniq}",
               VIRTBENCH_RUNTIME_DIR=f"/run/virtbench-test/suite-{uniq}")
    try:
        res = subprocess.run([sys.executable, "-m", "virtbench", "run", str(tmp_path / "suite.yaml"), "--no-report"],
                             env=env, capture_output=True, text=True, timeout=3000)
        shown = subprocess.run([sys.executable, "-m", "virtbench", "show", "--failed"], env=env,
                               capture_output=True, text=True, timeout=120).stdout
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:] + shown[-6000:]
        doc = json.loads(subprocess.run([sys.executable, "-m", "virtbench", "report", "--json"], env=env,
                                        capture_output=True, text=True, timeout=300, check=True).stdout)
    finally:
        subprocess.run([sys.executable, "-m", "virtbench", "cleanup"], env=env, capture_output=True, timeout=300)
    measured = {(r["benchmark"].split("[")[0], r["platform"]) for r in doc["results"] if r["n"] == 1}
    for name in QUICK:
        for platform in ("native", "docker"):
            assert (name, platform) in measured, f"{name} gave no result on {platform}"
    to_host = {r["benchmark"] for r in doc["results"] if "server=host" in r["benchmark"] and r["n"] == 1}
    assert any(b.startswith("iperf3") for b in to_host) and any(b.startswith("sockperf") for b in to_host)
    latency = [r for r in doc["results"] if r["benchmark"].startswith("sockperf") and r["metric"] == "p99_999"]
    assert latency and all(r["mean"] > 0 for r in latency)

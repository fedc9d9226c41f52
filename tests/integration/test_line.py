"""The line experiment on this host: real namespaces, containers, iperf 2 and tc.

Everything is named vbl<tag> and lives under the test session's runtime directory."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from virtbench import proc
from virtbench.errors import CommandError
from virtbench.experiments.line import hdr, pinning, topology, traffic
from virtbench.store.db import Store

pytestmark = pytest.mark.integration


def namespaces() -> set[str]:
    return set(proc.run(["ip", "netns", "list"], timeout=30).stdout.split())


def median_us(line: topology.Line, rate: float = 1000, seconds: float = 3) -> float:
    t, _ = traffic.run_trial(line, rate, seconds, 64, pinning.placement("none", line.length))
    assert t.loss == 0, t
    return hdr.summary_us(hdr.from_bins(t.bins))["p50"]


@pytest.mark.measures  # a delay in ms
def test_netem_delay_on_one_hop_shows_at_the_median(paths):
    line = topology.build(topology.plan("test", 2, "netns"), paths, None, None)
    try:
        assert line.record(paths).is_file() and set(line.namespaces) <= namespaces()
        traffic.warm(line, 64)
        before = median_us(line)
        try:
            topology.delay(line, 1, 1.0)
        except CommandError as exc:
            if "qdisc kind is unknown" in exc.stderr:
                pytest.skip("this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM unset, no sch_netem module)")
            raise
        after = median_us(line)
        assert after - before == pytest.approx(1000, abs=100), (before, after)
    finally:
        topology.teardown(line, paths, None)
    assert not set(line.namespaces) & namespaces() and not line.record(paths).exists()


@pytest.mark.measures  # built in seconds, no loss at 1000 packets/s
def test_a_line_of_64_is_built_in_seconds_and_crossed_hop_by_hop(paths):
    t0 = time.perf_counter()
    line = topology.build(topology.plan("test", 64, "netns"), paths, None, None)
    try:
        built = time.perf_counter() - t0
        assert built < 10, built
        traffic.warm(line, 64)
        t, _ = traffic.run_trial(line, 1000, 1, 64, pinning.placement("core", 64))
        assert t.received > 900 and t.loss == 0
        route = proc.run(["ip", "-n", line.namespaces[32], "route", "get", line.sink_address], timeout=30).stdout
        assert topology.address(32, 2) in route  # node 32 hands the flow to node 33
    finally:
        topology.teardown(line, paths, None)


def _campaign(tmp_path: Path, platforms: list[str], **line) -> Path:
    c = {"name": "line-test", "experiment": "line", "platforms": platforms, "repetitions": 1, "warmups": 0,
         "line": {"lengths": [1, 2], "search": {"trial_seconds": 0.3, "precision": 0.1}, "latency_rates": [0.5],
                  "latency_seconds": 1, **line}}
    path = tmp_path / "line.yaml"
    path.write_text(yaml.safe_dump(c))
    return path


def _virtbench(paths, *args: str, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "VIRTBENCH_STATE_DIR": str(paths.state), "VIRTBENCH_RUNTIME_DIR": str(paths.runtime)}
    return subprocess.run([sys.executable, "-m", "virtbench", *args], capture_output=True, text=True, env=env, **kw)


def test_a_rate_above_the_generator_limit_is_refused_before_the_run(paths, tmp_path):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    r = _virtbench(paths, "run", str(_campaign(tmp_path, ["netns"], latency_rates=[100_000_000])), "--db", db,
                   timeout=300)
    assert r.returncode == 2, r.stderr
    assert "above the generator's measured limit" in r.stderr
    assert Store(db).runs() == []  # nothing recorded
    assert not list(topology.records_dir(paths).glob("*.json"))  # the probing line is gone


def test_a_killed_run_leaves_nothing_after_cleanup(paths, tmp_path):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    env = {**os.environ, "VIRTBENCH_STATE_DIR": str(paths.state), "VIRTBENCH_RUNTIME_DIR": str(paths.runtime)}
    run = subprocess.Popen([sys.executable, "-m", "virtbench", "run", str(_campaign(tmp_path, ["netns", "docker"])),
                            "--db", db], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    records = topology.records_dir(paths)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # wait until a line of containers stands
            recs = [json.loads(p.read_text()) for p in records.glob("*.json")] if records.is_dir() else []
            if any(r["platform"] == "docker" for r in recs):
                break
            time.sleep(0.2)
        else:
            pytest.fail("no docker line was built")
        time.sleep(1)
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # a crash: no teardown of its own
        run.wait()
    left = [json.loads(p.read_text()) for p in records.glob("*.json")]
    assert left  # the crash left a line behind, recorded
    r = _virtbench(paths, "cleanup", timeout=300)
    assert r.returncode == 0 and "line " in r.stdout, r.stdout
    names = {n for rec in left for n in rec["namespaces"]}
    assert not names & namespaces()
    containers = proc.run(["docker", "ps", "-a", "--format", "{{.Names}}"], timeout=60).stdout
    assert not [c for c in containers.split() if any(f"vbl{rec['namespaces'][0].split('-')[1]}" in c for rec in left)]
    assert not list(records.glob("*.json"))


@pytest.mark.slow
def test_campaign_over_netns_lxc_docker_reports_the_line_section(paths, tmp_path):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    r = _virtbench(paths, "run", str(_campaign(tmp_path, ["netns", "lxc", "docker"])), "--db", db, "--no-report",
                   timeout=1800)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(_virtbench(paths, "report", "--json", "--db", db, timeout=300).stdout)
    rows = doc["line"]
    assert {(x["platform"], x["length"]) for x in rows} == {(p, n) for p in ("netns", "lxc", "docker") for n in (1, 2)}
    for x in rows:
        assert set(x) >= {"platform", "pinning", "length", "ndr_pps", "pdr_pps", "trials", "generator_limit_pps",
                          "latency", "implausible"}
        for flag in x["implausible"]:  # flagged here: measured once more, the report says with what result
            assert flag["recheck_pps"] is not None and flag["confirmed"] in (True, False), flag
        assert x["ndr_pps"] > 0 and x["trials"] >= 2 and x["generator_limit_pps"] > 0
        lat = x["latency"][0]
        assert set(lat) >= {"rate_pps", "p50", "p90", "p99", "p99.9", "p99.99", "p99.999", "max", "count"}
        assert lat["p99.999"] is None and lat["p50"] > 0  # far fewer than 10^6 packets
        assert lat["worst_run"]["round"] == 0 and lat["worst_run"]["max"] == lat["max"]  # one round: it is the worst
    html = tmp_path / "r.html"
    assert _virtbench(paths, "report", "--html", str(html), "--db", db, timeout=600).returncode == 0
    text = html.read_text()
    assert "Line topology" in text and "line-hdr-none-2" in text and "line-worst-none-2" in text
    tags = {e.instance for e in Store(db).executions(doc["run"]) if e.instance}
    assert len(tags) >= 6  # a line per platform and length (and the generator's)
    assert not [n for n in namespaces() if n.split("-")[1:2] and n.split("-")[1] in tags]
    assert not list(topology.records_dir(paths).glob("*.json"))

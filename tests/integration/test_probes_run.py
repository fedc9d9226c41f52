"""A campaign with `probes: [energy, perf, pressure]` on this machine (native and LXC), through the CLI:
perf software counters, pressure series and energy from a meter with exactly known watts
are stored and reported (text, JSON, HTML with the energy table and the pressure plot),
and RAPL and IPMI are said to be absent, with the reason."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from virtbench.store.db import Store

pytestmark = [pytest.mark.integration, pytest.mark.slow]

METER = Path(__file__).resolve().parents[1] / "data" / "meter" / "known_watts"
WATTS = 42.5


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("probes")
    base = f"/var/lib/virtbench-test/probes-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, VIRTBENCH_DB=f"sqlite:///{tmp / 'r.db'}", VIRTBENCH_STATE_DIR=base,
               VIRTBENCH_RUNTIME_DIR=f"/run/virtbench-test/{Path(base).name}")
    campaign = tmp / "c.yaml"
    campaign.write_text(f"""
name: probes-itest
repetitions: 2
warmups: 0
platforms: [native, lxc]
benchmarks:
  - {{name: sysbench-cpu, threads: 1, time: 1}}
  - {{name: openssl, algorithm: aes-128-cbc, bytes: 1024, multi: 1, seconds: 1}}
probes: [perf, pressure, {{name: energy, meter: [{METER}, "{WATTS}"], interval: 0.5}}]
""")
    run = vb(env, "run", str(campaign), "--no-report", "--allow-meter")
    assert run.returncode == 0, run.stdout + run.stderr
    yield env, tmp
    vb(env, "cleanup")


def vb(env, *args):
    return subprocess.run([sys.executable, "-m", "virtbench", *args], env=env, capture_output=True, text=True,
                          timeout=900)


def test_stored_per_execution(done):
    env, _ = done
    store = Store(env["VIRTBENCH_DB"])
    run = store.run()
    execs = {e.id: e for e in store.executions(run.id) if e.benchmark != "lifecycle"}
    atts = store.attachments(run.id, kind="probe:")
    assert {(a.execution_id, a.kind) for a in atts} == {(i, f"probe:{p}") for i in execs
                                                         for p in ("energy", "perf", "pressure")}
    for a in atts:
        assert a.status == "ok", a.error
        d = a.json()
        if a.kind == "probe:energy":
            assert d["watts_mean"] == pytest.approx(WATTS, rel=1e-9)
            assert d["joules"] == pytest.approx(WATTS * d["seconds"], rel=1e-9)
            # the probe watches the command alone (each runs >= 1 s); the execution's
            # duration adds the scratch directory's setup and removal
            assert 1.0 <= d["seconds"] <= execs[a.execution_id].duration_s
        elif a.kind == "probe:perf":
            assert d["events"]["context-switches"]["value"] > 0
        else:
            assert len(d["rows"]) >= 5 and d["interval"] == 0.1
            inst = d["summary"].get("inst_memory")
            if execs[a.execution_id].platform == "lxc":  # the container's own cgroup, read from the host
                assert inst and inst["max"] > 0 and d["summary"]["inst_cpu"]["mean"] > 0
            else:  # the native chroot has no cgroup of its own: said, not invented
                assert inst is None and "not available" in d["instance"]
    assert run.provenance["probes"][2]["source"] == "meter"


def test_reported_in_json_text_and_html(done):
    env, tmp = done
    doc = json.loads(vb(env, "report", "--json").stdout)
    rows = [r for r in doc["results"] if r["benchmark"] == "openssl"]
    assert rows and all(r["energy"]["source"] == "meter" and r["energy"]["watts_mean"] == pytest.approx(WATTS)
                        and len(r["energy"]["joules_ci95"]) == 2 for r in rows)
    energy_rows = doc["probes"]["energy"]["rows"]
    assert {r["metric"] for r in energy_rows} >= {"energy_J", "power_W", "J_per_throughput"}
    assert {r["verdict"] for r in energy_rows if r["platform"] == "native"} == {"baseline"}
    assert "not supported" in json.dumps(doc["probes"]["perf"]["unavailable"]) or not doc["probes"]["perf"]["unavailable"]
    text = vb(env, "report").stdout
    assert "energy relative to native" in text and "context-switches" in text
    html_file = tmp / "r.html"
    assert vb(env, "report", "--html", str(html_file), "--interactive").returncode == 0
    html = html_file.read_text()
    assert "energy relative to native" in html and "J_per_throughput" in html
    figs = json.loads(re.search(r'<script type="application/json" id="vb-figs">(.*?)</script>', html, re.S)[1])
    assert any("Host CPU and CPU stall" in json.dumps(f["layout"]) for f in figs.values())


@pytest.mark.skipif(Path("/sys/class/powercap").exists() or Path("/dev/ipmi0").exists(),
                    reason="this host has RAPL or a BMC")
def test_list_probes_says_rapl_and_ipmi_are_absent_and_why(done):
    env, _ = done
    probes = {p["name"]: p for p in json.loads(vb(env, "list", "probes", "--json").stdout)}
    assert set(probes) == {"energy", "perf", "pressure"}
    e = probes["energy"]
    assert not e["works"] and "no /sys/class/powercap" in e["reason"]
    # IPMI is judged by the tool first, then the device: each absence named as it is here
    ipmi = "/dev/ipmi0" if shutil.which("ipmitool") else "ipmitool is not installed"
    assert ipmi in e["reason"], e["reason"]
    assert probes["perf"]["works"] and probes["pressure"]["works"]


def test_bad_probe_input_exits_2_before_anything_starts(done, tmp_path):
    env, _ = done
    for probes, msg in ((["nope"], "unknown probe"),
                        ([{"name": "energy", "meter": [str(METER.parent / "garbage")]}], "one number")):
        c = tmp_path / "bad.yaml"
        c.write_text(json.dumps({"name": "bad", "platforms": ["native"], "benchmarks": ["openssl"], "probes": probes}))
        r = vb(env, "run", str(c), "--allow-meter")
        assert r.returncode == 2 and msg in r.stderr + r.stdout
    r = vb(env, "run", "--quick", "--probe", "nope")
    assert r.returncode == 2 and "unknown probe" in r.stderr + r.stdout

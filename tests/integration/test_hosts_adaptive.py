"""#40: `adaptive:` with `hosts:`. The adaptive rule's state (its log of extra rounds, the noise
check's note) goes through the sink, so each host's part keeps its own: `local` in its view of
the store, the second host (a network namespace with its own sshd) through its agent's stream to
the controller. Before, adaptive state lived only in the run's provenance, read back through
the store, and a campaign with both was refused ("adaptive: is not supported with hosts: yet")."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest
import yaml

from hostsupport.netns_host import netns_host

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_adaptive_rounds_on_two_hosts_each_decided_by_its_own_part(env, tmp_path):
    db = env["VIRTBENCH_DB"].removeprefix("sqlite:///")
    with netns_host() as second:
        name = second.spec.name
        campaign = {"name": "adaptive-hosts", "repetitions": 3, "warmups": 1, "parallel": False,
                    "hosts": ["local", second.spec.model_dump(exclude_none=True)],
                    "platforms": ["native", "runc"],
                    "benchmarks": [{"name": "openssl", "seconds": 1, "clock": "cpu"}],
                    "adaptive": {"until": "decided", "target": 0.02, "max_repetitions": 5, "max_minutes": 4,
                                 "noise_check": 2}}
        path = tmp_path / "campaign.yaml"
        path.write_text(yaml.safe_dump(campaign))
        res = subprocess.run([sys.executable, "-m", "virtbench", "run", str(path), "--no-report"], env=env,
                             capture_output=True, text=True, timeout=1500)
        assert res.returncode == 0, res.stdout + res.stderr
        con = sqlite3.connect(db)
        try:
            (provenance,) = con.execute("SELECT provenance FROM runs").fetchone()
            rounds = dict(con.execute("SELECT host, max(round) FROM executions GROUP BY host").fetchall())
            failed = con.execute("SELECT count(*) FROM executions WHERE status != 'ok'").fetchone()[0]
        finally:
            con.close()
        states = json.loads(provenance)["host_state"]
        assert set(states) == {"local", name}, states
        for host, state in states.items():
            log = state["adaptive"]
            # each part ran its own rule: extra rounds with their reasons, or a stop with why
            assert log and all("round" in e or "stop" in e for e in log), (host, log)
            assert any("stop" in e for e in log) or rounds[host] >= 1 + 2 + 3, (host, log)
            assert "noise" in state and state["noise"]["metrics"], (host, state)  # the noise check, per host
            extra = [e["round"] for e in log if "round" in e]
            assert rounds[host] == max([1 + 2 + 3 - 1, *extra]), (host, rounds, log)
        assert failed == 0
        report = subprocess.run([sys.executable, "-m", "virtbench", "report", "--json"], env=env,
                                capture_output=True, text=True, timeout=300)
        assert report.returncode == 0, report.stderr
        doc = json.loads(report.stdout)
        assert {r["host"] for r in doc["results"]} == {"local", name}
        assert {h: doc["hosts"]["hosts"][h]["state"]["adaptive"] for h in ("local", name)} == {
            h: states[h]["adaptive"] for h in ("local", name)}  # each host's log in its report

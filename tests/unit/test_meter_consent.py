"""#25: a campaign file may come from anyone, so the one program it can name (the energy
probe's meter) runs only with the operator's --allow-meter. Before: `virtbench run FILE` ran
the meter as root while checking the probes, whoever wrote the file."""
from __future__ import annotations

import json
import os
import subprocess
import sys


def _run(tmp_path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, VIRTBENCH_DB=f"sqlite:///{tmp_path / 'r.db'}", VIRTBENCH_STATE_DIR=str(tmp_path / "s"),
               VIRTBENCH_RUNTIME_DIR=str(tmp_path / "rt"))
    return subprocess.run([sys.executable, "-m", "virtbench", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_a_campaign_meter_is_refused_without_allow_meter_and_never_runs(tmp_path):
    marker = tmp_path / "meter-ran"
    campaign = tmp_path / "c.yaml"
    campaign.write_text(json.dumps({"name": "m", "platforms": ["native"], "benchmarks": ["openssl"],
                                    "probes": [{"name": "energy", "meter": ["/bin/sh", "-c", f"touch {marker}; echo 1"]}]}))
    r = _run(tmp_path, "run", str(campaign))
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith("error: the campaign's energy probe would run the command /bin/sh -c"), r.stderr
    assert "--allow-meter" in r.stderr and "Traceback" not in r.stderr
    assert not marker.exists() and not (tmp_path / "r.db").exists()  # nothing started, not even the store


def test_a_long_meter_command_is_shown_shortened(tmp_path):
    from virtbench.config import parse_campaign
    from virtbench.config.consent import require_consent
    from virtbench.errors import InputError

    c = parse_campaign({"name": "m", "platforms": ["native"], "benchmarks": ["openssl"],
                        "probes": [{"name": "energy", "meter": ["/usr/bin/meter", "x" * 500]}]})
    try:
        require_consent(c, allowed=False)
    except InputError as exc:
        assert len(exc.message) < 200 and exc.message.count("x") < 100
    else:
        raise AssertionError("refused")
    require_consent(c, allowed=True)  # the operator said so
    require_consent(parse_campaign({"name": "n", "platforms": ["native"], "benchmarks": ["openssl"],
                                    "probes": ["perf"]}), allowed=False)  # nothing to run

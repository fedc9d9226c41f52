"""The `line:` section: the issue's campaign parses; bad input is one line, exit 2, nothing started."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from virtbench.config import parse_campaign
from virtbench.errors import InputError
from virtbench.experiments.line import kind, pinning
from virtbench.experiments.line.section import rate_label

ISSUE = {
    "name": "line-lxc", "experiment": "line", "platforms": ["netns", "lxc", "docker"],
    "line": {"lengths": [1, 2, 4, 8, 16, 32, 64], "payload": 64, "link": "veth", "pinning": ["none", "node", "core"],
             "search": {"method": "ndr-pdr", "loss": [0, 0.005], "trial_seconds": 1, "precision": 0.01},
             "latency_rates": [0.1, 0.5, 0.9, "max"]},
}


def test_the_issues_campaign_parses_and_round_trips():
    c = parse_campaign(ISSUE)
    assert c.baseline == "netns" and c.section.pinning == ["none", "node", "core"]
    assert c.section.search.final_seconds == 1  # defaults to the trial duration
    assert parse_campaign(c.model_dump(mode="json")).section == c.section
    assert [rate_label(r) for r in c.section.latency_rates] == ["0.1ndr", "0.5ndr", "0.9ndr", "1ndr"]
    assert rate_label(20000) == "20000pps"
    assert (c.section.search.past_loss, c.section.worst.rate, c.section.worst.count) == (0, 17300, 5000)  # Fig. 8's


@pytest.mark.parametrize("change, words", [
    ({"pinning": ["none", "irq"]}, ["line.pinning", "unknown pinning mode 'irq'", "none, node, core"]),
    ({"payload": 8}, ["line.payload", "below the 16 B header"]),
    ({"lengths": [1, 300]}, ["line.lengths", "length 300 is outside 1..254", "TTL"]),
    ({"lenghts": [1]}, ["line.lenghts", "did you mean 'lengths'"]),
    ({"search": {"method": "binary"}}, ["line.search.method"]),
    ({"search": {"loss": [0.005, 0]}}, ["increasing order"]),
    ({"link": "bridge"}, ["line.link"]),
    ({"search": {"method": "steps", "past_loss": -1}}, ["line.search.past_loss"]),
    ({"worst": {"count": 0}}, ["line.worst.count"]),
    ({"worst": {"rate": 17300, "n": 5000}}, ["line.worst.n"]),
])
def test_bad_sections(change, words):
    with pytest.raises(InputError) as err:
        parse_campaign({**ISSUE, "line": {**ISSUE["line"], **change}})
    for w in words:
        assert w in str(err.value)


def test_vms_cannot_be_nodes_and_benchmarks_are_refused():
    with pytest.raises(InputError, match="cannot be a node of a line"):
        parse_campaign({**ISSUE, "platforms": ["netns", "qemu"]})
    with pytest.raises(InputError, match="takes no benchmarks"):
        parse_campaign({**ISSUE, "benchmarks": ["sqlite"]})


def test_a_line_longer_than_memory_allows_is_refused(monkeypatch):
    c = parse_campaign({**ISSUE, "line": {**ISSUE["line"], "lengths": [254]}})
    monkeypatch.setattr(kind, "meminfo", lambda: {"MemAvailable": 4 << 30})
    with pytest.raises(InputError, match=r"a line of 254 nodes needs about 16256 MiB.*") as err:
        kind.Line(c, None)._check_memory(c.section)
    assert "use lengths up to 32" in err.value.fix


def test_pinning_placements(monkeypatch):
    assert pinning.parse_cpulist("0-2,5") == [0, 1, 2, 5]
    assert pinning.mask([0, 2]) == "5"
    p = pinning.placement("none", 3)
    assert p.generator == [] and p.hops == [[], [], [], []]
    if len(pinning.host_cpus()) >= 2:
        cpus = pinning.host_cpus()
        p = pinning.placement("core", 3)
        assert p.generator == [cpus[0]] and p.sink == [cpus[-1]] and len(p.hops) == 4
        assert all(len(h) == 1 for h in p.hops) and p.hops[0] != p.hops[1]
    monkeypatch.setattr(pinning, "NODE_SYS", Path("/nonexistent"))
    assert "no NUMA topology" in pinning.unavailable("node")


def test_cli_refuses_bad_pinning_before_anything_starts(tmp_path: Path):
    bad = {**ISSUE, "line": {**ISSUE["line"], "pinning": ["per-irq"]}}
    (tmp_path / "line.yaml").write_text(yaml.safe_dump(bad))
    db = tmp_path / "store.db"
    r = subprocess.run([sys.executable, "-m", "virtbench", "run", str(tmp_path / "line.yaml"), "--db", f"sqlite:///{db}"],
                       capture_output=True, text=True, timeout=120,
                       env={"PATH": "/usr/bin:/bin", "VIRTBENCH_STATE_DIR": str(tmp_path / "state"),
                            "VIRTBENCH_RUNTIME_DIR": str(tmp_path / "run")})
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: ") and "unknown pinning mode 'per-irq'" in r.stderr
    assert not db.exists() and not (tmp_path / "state").exists()

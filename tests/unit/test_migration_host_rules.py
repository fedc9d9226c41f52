"""Migration to another host: what a campaign may ask (checked before anything starts), the
config the destination runs, the crash-safe record of destination containers, study 000's
`--hosts` destination, the one-host difference, and the report's network-or-storage note."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from virtbench import proc
from virtbench.config import parse_campaign
from virtbench.errors import CommandError, InputError
from virtbench.experiments.migration import remote, report
from virtbench.platforms.base import Paths
from virtbench.store.db import Store
from virtbench.studies import report as sreport
from virtbench.studies import run as srun
from virtbench.studies.registry import study

B = {"name": "b", "address": "10.231.7.2"}


def campaign(section=None, platforms=("lxc",), hosts=("local", B)):
    return parse_campaign({"name": "m", "experiment": "migration", "platforms": list(platforms),
                           "hosts": list(hosts), "migration": section or {"to": {"host": "b"}}})


def test_a_host_destination_of_the_campaigns_hosts_is_accepted():
    c = campaign()
    assert [d.host for d in c.section.to] == ["b"] and [d.label for d in c.section.to] == ["b"]
    assert parse_campaign(c.model_dump(mode="json")).section == c.section


@pytest.mark.parametrize("kwargs, words", [
    ({"hosts": ("local",)}, ["host 'b' is not one of the campaign's other hosts", "hosts: [local, b]"]),
    ({"hosts": ("local", B, {"name": "c", "address": "10.231.7.3"})}, ["'c' is no migration destination"]),
    ({"section": {"mode": "live", "to": {"host": "b"}}}, ["needs CRIU on both hosts", "mode: offline"]),
    ({"platforms": ["runc"]}, ["'runc' (runc) cannot move to another host", "lxc"]),
    ({"platforms": [{"name": "lxc", "network": "bridge"}]}, ["network: bridge", "none or host"]),
])
def test_what_a_host_destination_cannot_do_is_one_line_input_error(kwargs, words):
    with pytest.raises(InputError) as err:
        campaign(**kwargs)
    for w in words:
        assert w in str(err.value) + (err.value.fix or "")
    assert "\n" not in err.value.message


def test_live_across_hosts_exits_2_before_anything_starts(tmp_path):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    (tmp_path / "c.yaml").write_text(
        "name: m\nexperiment: migration\nplatforms: [lxc]\nhosts: [local, {name: b, address: 10.231.7.2}]\n"
        "migration: {mode: live, to: {host: b}}\n")
    env = {**os.environ, "VIRTBENCH_STATE_DIR": str(tmp_path / "s"), "VIRTBENCH_RUNTIME_DIR": str(tmp_path / "r")}
    r = proc.run([sys.executable, "-m", "virtbench", "run", str(tmp_path / "c.yaml"), "--db", db], env=env,
                 check=False, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "CRIU" in r.stderr and "mode: offline" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert Store(db).runs() == []


def test_the_destination_runs_the_sources_config_with_its_own_paths():
    src = Path("/var/lib/virtbench/lxc/vb-r1-lxc-r0-b1-0")
    text = ("lxc.uts.name = vb-r1-lxc-r0-b1-0\n"
            f"lxc.rootfs.path = overlay:/var/cache/virtbench/images/abc/rootfs:{src}/delta0\n"
            "lxc.cgroup.memory.limit_in_bytes = 67108864\n")
    out = remote.config_for(text, src, "/w/state/lxc/vb-r1-lxc-r0-b1-0-m", "/w/images/abc/rootfs")
    assert "lxc.rootfs.path = overlay:/w/images/abc/rootfs:/w/state/lxc/vb-r1-lxc-r0-b1-0-m/delta0\n" in out
    assert str(src) not in out and "limit_in_bytes = 67108864" in out
    assert remote.dest_name("vb-r1-lxc-r0-b1-0") == "vb-r1-lxc-r0-b1-0-m"


def test_destination_containers_are_recorded_before_they_exist_and_kept_while_unreachable(tmp_path):
    paths = Paths(state=tmp_path / "s", runtime=tmp_path / "r")
    record = remote.RemoteLeftovers(paths, "run1")
    # loopback, a closed port: nothing answers, no traffic leaves this machine
    spec = parse_campaign({"name": "m", "experiment": "migration", "platforms": ["lxc"], "hosts": ["local", {
        "name": "b", "address": "127.0.0.1", "port": 1, "known_hosts": str(tmp_path / "kh")}],
        "migration": {"to": {"host": "b"}}}).hosts[1]
    record.add(spec, "/w/state/lxc", "vb-run1-a")
    record.add(spec, "/w/state/lxc", "vb-run1-a")
    assert len(record._read()) == 1
    # the entry stays for the next cleanup, which says why
    said = remote.cleanup(paths, "run1")
    assert said and "could not remove vb-run1-a on b" in said[0]
    assert record._read()[0]["name"] == "vb-run1-a"


def test_pipe_streams_bytes_and_names_the_side_that_failed():
    assert proc.pipe(["printf", "a\\0b"], ["wc", "-c"]).stdout.strip() == "3"
    with pytest.raises(CommandError, match="false exited 1"):
        proc.pipe(["false"], ["cat"])


class Caps:
    def __init__(self, hosts=()):
        self.hosts, self.meter, self.paths, self.specs = hosts, (), Paths(), {}

    def check(self, name):
        return SimpleNamespace(available=True, reason="", fix="")

    def platforms(self, types):
        return {t: SimpleNamespace(available=True, reason="", fix="") for t in types}


def test_study_000_migration_moves_to_the_host_given_with_hosts(monkeypatch):
    monkeypatch.setattr(srun, "check_host", lambda *a, **k: None)
    planned = srun.plan(study("000"), "quick", Caps(("local", "pi5-b")), ["migration"])[0]
    assert [h.name for h in planned.campaign.hosts] == ["local", "pi5-b"]
    assert [d.host for d in planned.campaign.section.to] == ["pi5-b"]
    alone = srun.plan(study("000"), "quick", Caps(), ["migration"])[0]
    assert alone.campaign.hosts == [] and alone.campaign.section.to[0].path is not None


def _part_run(hosts):
    run = SimpleNamespace(campaign={"hosts": hosts, "experiment": "migration"})
    return SimpleNamespace(part="migration", base="migration", scale="quick", report=SimpleNamespace(run=run))


def test_the_one_host_difference_shows_only_when_the_move_stayed_on_this_host():
    s = study("000")
    one = [d.what for _, d in sreport.differences_by_value(s, [_part_run([])]).get("migration-claim", [])]
    assert any("another directory of this host" in w for w in one)
    two = sreport.differences_by_value(s, [_part_run([{"name": "local"}, {"name": "pi5-b"}])])
    assert not any("another directory" in d.what for _, d in two.get("migration-claim", []))
    assert not any("another directory" in n for n in sreport.command_notes(s, [_part_run([{"name": "pi5-b"}])]))


def test_the_report_names_what_bounded_a_move_to_a_host_or_that_it_stayed_here():
    facts = {"source": {"read_MBps": 400.0, "write_MBps": 300.0},
             "b": {"host": "b", "write_MBps": 250.0, "path_throughput": {"MBps": 110.0, "what": "ssh to b"}}}
    point = {"platform": "lxc", "to": "b", "count": 8, "storage": "x",
             "metrics": {"throughput_MBps": {"mean": 100.0}}}
    notes = report._notes("offline", [point], facts, [])
    assert any("the network path to b (SSH) is the slowest and bounds it (91% of it)" in n for n in notes), notes
    assert not any("stayed on this host" in n for n in notes)
    here = report._notes("offline", [{**point, "to": "d"}], {"source": {}, "d": {"write_MBps": 9.0}}, [])
    assert any("stayed on this host" in n for n in here)

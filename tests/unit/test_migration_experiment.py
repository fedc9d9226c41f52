"""The migration experiment's pure parts: its campaign section, the QEMU destination argv,
storage naming on this host, the crash-safe record of destination copies, and the report
section built from stored samples."""
from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest

from virtbench import proc
from virtbench.config import parse_campaign
from virtbench.errors import InputError, ParseError, VirtbenchError
from virtbench.experiments.migration import live, storage
from virtbench.experiments.migration.transport import Leftovers, LocalTransport, cleanup
from virtbench.platforms.base import Paths
from virtbench.store.db import Store


def campaign(section=None, platforms=("lxc",), **extra):
    return parse_campaign({"name": "m", "experiment": "migration", "platforms": list(platforms),
                           "migration": section if section is not None else {"to": {"path": "/mnt/x"}}, **extra})


def test_section_defaults_round_trip_and_a_single_destination_becomes_a_list():
    c = campaign()
    assert c.section.counts == [1, 2, 4, 8] and c.section.mode == "offline"
    assert [d.label for d in c.section.to] == ["x"] and c.baseline == "lxc"
    assert parse_campaign(c.model_dump(mode="json")).section == c.section
    two = campaign({"to": [{"path": "/mnt/a"}, {"path": "/mnt/b", "name": "usb2"}], "counts": [4, 1]})
    assert [d.label for d in two.section.to] == ["a", "usb2"] and two.section.counts == [1, 4]


@pytest.mark.parametrize("section, words", [
    ({}, ["needs a destination"]),
    ({"mode": "lifecycle", "to": {"path": "/mnt/x"}}, ["moves nothing"]),
    ({"counts": [0], "to": {"path": "/mnt/x"}}, ["from 1 to 64"]),
    ({"counts": [2, 2], "to": {"path": "/mnt/x"}}, ["listed twice"]),
    ({"to": {"path": "rel/dir"}}, ["must be absolute"]),
    ({"to": {"path": "/a", "host": "b"}}, ["exactly one of path"]),
    ({"to": [{"path": "/a/x"}, {"path": "/b/x"}]}, ["same name"]),
    ({"to": {"path": "/mnt/x"}, "cuonts": [1]}, ["migration.cuonts", "did you mean 'counts'"]),
    ({"to": {"path": "/mnt/x"}, "payload": "lots"}, ["migration.payload"]),
])
def test_bad_sections_are_one_line_input_errors(section, words):
    with pytest.raises(InputError) as err:
        campaign(section)
    for w in words:
        assert w in str(err.value)


def test_live_destination_rules_follow_the_platform():
    with pytest.raises(InputError, match="disk is shared"):
        campaign({"mode": "live", "to": {"path": "/mnt/x"}}, platforms=["qemu"])
    with pytest.raises(InputError, match="CRIU"):
        campaign({"mode": "live"}, platforms=["lxc"])
    assert campaign({"mode": "live"}, platforms=["qemu"]).section.to == []


def test_stacked_platforms_are_refused():
    with pytest.raises(InputError, match="stacked"):
        campaign({"mode": "lifecycle"}, platforms=["qemu", {"name": "d", "type": "docker", "inside": "qemu"}])


def test_bad_destination_exits_2_before_anything_starts(tmp_path):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    (tmp_path / "c.yaml").write_text(
        "name: m\nexperiment: migration\nplatforms: [lxc]\nmigration: {to: {path: /nonexistent/vb-dest}}\n")
    env = {**os.environ, "VIRTBENCH_STATE_DIR": str(tmp_path / "s"), "VIRTBENCH_RUNTIME_DIR": str(tmp_path / "r")}
    r = proc.run([sys.executable, "-m", "virtbench", "run", str(tmp_path / "c.yaml"), "--db", db], env=env,
                 check=False, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "error: migration.to: /nonexistent/vb-dest does not exist" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and " (fix: " in r.stderr  # the error and its fix, one line
    assert Store(db).runs() == []


def test_engine_platforms_cannot_migrate_offline_and_say_so(tmp_path):
    from virtbench.experiments.migration.kind import Migration

    kind = Migration(campaign(platforms=["docker"]), Paths(state=tmp_path / "s", runtime=tmp_path / "r"))
    with pytest.raises(InputError, match="docker.*cannot be migrated offline"):
        kind.prepare(lambda _m: None)


def test_live_bridged_vm_is_refused_before_anything_starts(tmp_path):
    from virtbench.experiments.migration.kind import Migration

    c = campaign({"mode": "live"}, platforms=[{"name": "vm", "type": "qemu", "network": "bridge"}])
    with pytest.raises(InputError, match="tap"):
        Migration(c, Paths(state=tmp_path / "s", runtime=tmp_path / "r")).prepare(lambda _m: None)


def test_incoming_argv_swaps_the_source_files_inside_options():
    argv = ["qemu", "-drive", "file=/i/vb-a/disk.qcow2,format=qcow2", "-chardev",
            "socket,id=vbagent,path=/r/q/agent.sock,server=on", "-qmp", "unix:/r/q/qmp.sock,server=on",
            "-pidfile", "/i/vb-a/qemu.pid", "-daemonize"]
    out = live.incoming_argv(argv, {"/i/vb-a/disk.qcow2": "/i/vb-a-in/disk.qcow2", "/r/q/agent.sock": "/r/m/agent.sock",
                                    "/r/q/qmp.sock": "/r/m/qmp.sock", "/i/vb-a/qemu.pid": "/i/vb-a-in/qemu.pid"},
                             "tcp:127.0.0.1:4444")
    assert out[-2:] == ["-incoming", "tcp:127.0.0.1:4444"]
    assert "file=/i/vb-a-in/disk.qcow2,format=qcow2" in out and "/i/vb-a-in/qemu.pid" in out
    assert not any("/r/q/" in a or "/i/vb-a/" in a for a in out)


def test_live_support_is_decided_per_platform_type():
    from virtbench.platforms.docker import Docker
    from virtbench.platforms.qemu.platform import Qemu

    assert live.supports_live(Qemu("vm", Qemu.Options(), Paths()))[0]
    ok, why = live.supports_live(Docker("d", Docker.Options(), Paths()))
    assert not ok and "no live migration" in why


def test_storage_facts_name_this_hosts_root_filesystem():
    f = storage.facts(Path("/"))
    assert f.mountpoint == "/" and f.filesystem and f.device and f.free_bytes > 0
    assert f.kind.startswith(f.filesystem + " on ")


def test_tree_bytes_counts_files_not_links(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 1000)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "b").write_bytes(b"y" * 24)
    (tmp_path / "l").symlink_to(tmp_path / "a")
    assert storage.tree_bytes(tmp_path) == 1024


def test_local_transport_copies_durably_and_counts_bytes(tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "f").write_bytes(b"z" * 4096)
    t = LocalTransport(tmp_path / "dest")
    (tmp_path / "dest").mkdir()
    assert t.copy(src, tmp_path / "dest" / "vb-x" / "upper") == 4096
    assert (tmp_path / "dest" / "vb-x" / "upper" / "sub" / "f").read_bytes() == b"z" * 4096


def test_leftovers_are_recorded_from_threads_and_removed_by_cleanup(tmp_path):
    paths = Paths(state=tmp_path / "s", runtime=tmp_path / "r")
    left = Leftovers(paths, "run1")
    dirs = [tmp_path / "dest" / f"vb-{i}" for i in range(16)]
    for d in dirs:
        d.mkdir(parents=True)
    threads = [threading.Thread(target=left.add, args=(d,)) for d in dirs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(json.loads(left.file.read_text())) == sorted(map(str, dirs))
    Leftovers(paths, "run2").add(tmp_path / "dest" / "other")  # another run's, never created
    assert len(cleanup(paths, "run1")) == 16 and not any(d.exists() for d in dirs)
    assert cleanup(paths) == [] and not (paths.state / "migration").exists()


def test_query_migrate_replies_recorded_from_qemu_7_2(data_dir):
    done = json.loads((data_dir / "qemu" / "query-migrate_completed_tcg_256M.json").read_text())
    other = {**done, "downtime": done["downtime"] + 100, "ram": {**done["ram"], "transferred": 1000}}
    m = live.from_replies([done, other], start_s=1.5, total_s=4.0)
    assert m.phases["downtime"] == (done["downtime"] + 100) / 1000 and m.phases["transfer"] == done["total-time"] / 1000
    assert m.bytes_moved == done["ram"]["transferred"] + 1000 and m.count == 2
    assert m.throughput_MBps == pytest.approx(m.bytes_moved / m.phases["transfer"] / 1e6)
    failed = json.loads((data_dir / "qemu" / "query-migrate_failed_no_listener.json").read_text())
    with pytest.raises(VirtbenchError, match="live migration failed: Failed to connect"):
        live.check_reply(failed)
    with pytest.raises(ParseError, match="ram.transferred"):
        live.check_reply({**done, "ram": {}})
    with pytest.raises(ParseError, match="status 'completed'"):
        live.check_reply({"status": "active"})


def test_criu_check_failure_is_explained_with_its_output(data_dir, monkeypatch):
    """The explanation a user gets when CRIU cannot run (recorded `criu check` of these VMs)."""
    from virtbench.platforms.lxc import LXC

    output = (data_dir / "criu" / "check_vdso_fails.txt").read_text()
    monkeypatch.setattr(live, "criu_check", lambda: (False, output))
    ok, why = live.supports_live(LXC("lxc", LXC.Options(), Paths()))
    assert not ok and "`criu check` failed" in why and "Could not initialize kernel features detection" in why

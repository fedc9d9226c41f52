"""Offline migration of LXC containers to a second host (a network namespace with its own sshd,
address, host key and work directory): the container really runs there with the source's
content and is gone here; a campaign's run stores and reports the phases and the path's
throughput; nothing is left on either host afterwards or after a crash."""
from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from hostsupport.netns_host import netns_host
from virtbench import proc
from virtbench.experiments.migration import fleet, remote
from virtbench.platforms.base import Instance, Paths
from virtbench.platforms.lxc import LXC
from virtbench.store.db import Store

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _cli(env, *args, timeout=1200):
    return subprocess.run([sys.executable, "-m", "virtbench", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def _running(host: remote.RemoteHost, name: str) -> str:
    return host.ex.run(["lxc-info", "-P", host.lxcpath, "-n", remote.dest_name(name), "-sH"], timeout=30,
                       check=False).stdout.strip()


def test_an_lxc_container_moves_to_the_second_host_with_its_content(paths, image):
    run_id = "t" + uuid.uuid4().hex[:8]
    lxc = LXC("lxc", LXC.Options(memory=64 << 20), paths)
    with netns_host() as second:
        host = remote.RemoteHost(second.spec, paths)
        host.open()
        far = remote.RemoteLeftovers(paths, run_id)
        instances: list = []
        try:
            lower = host.image_rootfs(image, print)
            fleet.create(lxc, image, [f"{run_id}-{i}" for i in range(2)], run_id, instances)
            fleet.at_once("start", instances, lxc.start)
            sums = {}
            for i in instances:  # each container's own data, written inside it before the move
                lxc.exec(i, ["sh", "-c", f"head -c 3000000 /dev/urandom > /root/data; echo {i.name} > /root/who"])
                sums[i.name] = lxc.exec(i, ["sha256sum", "/root/data"]).stdout.split()[0]
            sources = [Path(i.data["dir"]) for i in instances]
            moved = remote.migrate(lxc, instances, host, far, lower=lower)
            assert set(moved.phases) == {"stop", "transfer", "start", "total", "downtime"}
            assert moved.phases["total"] >= moved.phases["transfer"] > 0 and moved.bytes_moved >= 2 * 3000000
            there = host.platform(lxc)
            for i in instances:
                assert _running(host, i.name) == "RUNNING"
                copy = Instance(remote.dest_name(i.name), "lxc", run_id, {"dir": host.dir_of(i.name)})
                assert there.exec(copy, ["sha256sum", "/root/data"]).stdout.split()[0] == sums[i.name]
                assert there.exec(copy, ["cat", "/root/who"]).stdout.strip() == i.name
            # gone from the source: no container directory, not known to LXC here
            assert not any(s.exists() for s in sources)
            assert proc.run(["lxc-ls", "-P", str(paths.state / "lxc")], check=False).stdout.split() == []
            assert len(far._read()) == 2  # written down before they existed
        finally:
            removed = far.remove_all(host)
            fleet.discard(lxc, instances)
            host.close()
        assert len([r for r in removed if r.startswith("migration copy")]) == 2, removed
        assert not far.file.exists()
        work = Path(second.spec.work_dir) / "state" / "lxc"
        assert not work.exists() or list(work.iterdir()) == []


def test_a_campaign_to_the_second_host_reports_the_phases_and_leaves_nothing(env, tmp_path):
    with netns_host() as second:
        name = second.spec.name
        campaign = {"name": "mig-hosts", "experiment": "migration", "repetitions": 1, "warmups": 0,
                    "hosts": ["local", second.spec.model_dump(exclude_none=True)],
                    "platforms": [{"name": "lxc", "type": "lxc", "memory": "64M"}],
                    "migration": {"counts": [1, 2], "payload": "4M", "to": {"host": name}}}
        path = tmp_path / "campaign.yaml"
        path.write_text(yaml.safe_dump(campaign))
        res = _cli(env, "run", str(path), "--no-report")
        assert res.returncode == 0, res.stdout + res.stderr
        store = Store(env["VIRTBENCH_DB"])
        run = store.runs()[0]
        by = {(s.benchmark, s.metric): s.value for s in store.samples(run.id)}
        for n in (1, 2):
            key = f"migration[count={n},to={name}]"
            assert by[(key, "bytes_moved")] >= n * 4 * 2**20
            assert by[(key, "total_s")] == pytest.approx(by[(key, "stop_s")] + by[(key, "transfer_s")]
                                                         + by[(key, "start_s")], rel=0.05)
        facts = run.provenance["migration"]["storage"]
        assert facts[name]["host"] == name and facts[name]["path_throughput"]["MBps"] > 0
        assert [e.status for e in store.executions(run.id)] == ["ok", "ok"]
        rep = _cli(env, "report", run.id)
        assert rep.returncode == 0, rep.stderr
        text = rep.stdout
        print(text)
        assert f"offline to {name}" in text and "transfer" in text and "path MB/s" in text
        assert f"the network path to {name} (SSH)" in " ".join(text.split())  # notes wrap at 100 columns (#42)
        assert "stayed on this host" not in text
        # nothing left on either host: containers, copies, the record of them
        state = Path(env["VIRTBENCH_STATE_DIR"])
        assert not (state / "migration-remote").exists() or list((state / "migration-remote").iterdir()) == []
        assert proc.run(["lxc-ls", "-P", str(state / "lxc")], check=False).stdout.split() == []
        work = Path(second.spec.work_dir) / "state" / "lxc"
        assert not work.exists() or [p.name for p in work.iterdir()] == []
        assert not second.pids("lxc-start")


def test_cleanup_after_a_crash_removes_the_copy_on_the_second_host(env):
    """A record left by a run that died (kill -9) mid-move: `virtbench cleanup` reaches the host."""
    state = Path(env["VIRTBENCH_STATE_DIR"])
    p = Paths(state=state, runtime=Path(env["VIRTBENCH_RUNTIME_DIR"]))
    with netns_host() as second:
        host = remote.RemoteHost(second.spec, p)
        host.open()
        try:
            remote.RemoteLeftovers(p, "tcrash").add(second.spec, host.lxcpath, "vb-tcrash-0")
            host.ex.run(["mkdir", "-p", "--", f"{host.dir_of('vb-tcrash-0')}/delta0"])
        finally:
            host.close()
        res = _cli(env, "cleanup")
        assert res.returncode == 0, res.stdout + res.stderr
        assert "migration copy" in res.stdout + res.stderr
        assert not Path(host.dir_of("vb-tcrash-0")).exists()
        assert not (state / "migration-remote" / "tcrash.json").exists()


def test_study_000_migration_part_moves_to_the_host_given_and_says_so(env, tmp_path):
    """`study run 000 --part migration --hosts NAME --inventory FILE` (the inventory says how to
    reach NAME: the test host's own address, key and known_hosts) moves the containers there, and
    the study report no longer lists the one-host difference."""
    with netns_host() as second:
        spec = second.spec
        inventory = tmp_path / "hosts.yml"
        inventory.write_text(yaml.safe_dump({"all": {"hosts": {spec.name: {
            "ansible_host": spec.address, "ansible_port": spec.port, "ansible_user": spec.user,
            "ansible_ssh_private_key_file": spec.key, "virtbench_known_hosts": spec.known_hosts,
            "virtbench_work_dir": spec.work_dir}}}}))
        bad = _cli(env, "study", "run", "000", "--part", "migration", "--hosts", "nowhere", "--inventory", str(inventory))
        assert bad.returncode == 2 and "not a host of the inventory" in bad.stderr and spec.name in bad.stderr
        res = _cli(env, "study", "run", "000", "--part", "migration", "--hosts", spec.name, "--inventory", str(inventory))
        assert res.returncode == 0, res.stdout + res.stderr
        run = Store(env["VIRTBENCH_DB"]).runs()[0]
        assert run.campaign["migration"]["to"][0]["host"] == spec.name
        rep = _cli(env, "study", "report", "000", run.id, "--json")
        assert rep.returncode == 0, rep.stderr
        doc = json.loads(rep.stdout)
        claim = next(c for c in doc["comparisons"] if c["id"] == "migration-claim")
        assert not any("another directory" in d["what"] for d in claim["differences"]), claim
        text = _cli(env, "report", run.id).stdout
        assert f"offline to {spec.name}" in text and "stayed on this host" not in text


def test_ctrl_c_mid_move_leaves_nothing_on_either_host(env, tmp_path):
    import signal
    import time

    with netns_host() as second:
        campaign = {"name": "mig-int", "experiment": "migration", "repetitions": 3, "warmups": 0,
                    "hosts": ["local", second.spec.model_dump(exclude_none=True)],
                    "platforms": [{"name": "lxc", "type": "lxc", "memory": "64M"}],
                    "migration": {"counts": [4], "payload": "64M", "measure_storage": False,
                                  "to": {"host": second.spec.name}}}
        path = tmp_path / "campaign.yaml"
        path.write_text(yaml.safe_dump(campaign))
        record = Path(env["VIRTBENCH_STATE_DIR"]) / "migration-remote"
        # SIGINT as a terminal's Ctrl-C delivers it: a shell starts background jobs (CI launched with
        # `&`) with SIGINT ignored, and a Python started so keeps ignoring it; that, not virtbench,
        # was why some runs here finished every round after the signal.
        run = subprocess.Popen([sys.executable, "-m", "virtbench", "run", str(path), "--no-report"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and run.poll() is None and not any(record.glob("*.json")):
            time.sleep(0.05)
        assert run.poll() is None, run.communicate()
        run.send_signal(signal.SIGINT)  # the containers are on their way to the second host
        out, err = run.communicate(timeout=300)
        assert run.returncode == 130, out + err
        assert not any(record.glob("*.json")) if record.exists() else True
        work = Path(second.spec.work_dir) / "state" / "lxc"
        assert not work.exists() or [p.name for p in work.iterdir()] == []
        state = Path(env["VIRTBENCH_STATE_DIR"])
        assert proc.run(["lxc-ls", "-P", str(state / "lxc")], check=False).stdout.split() == []
        assert not second.pids("lxc-start")

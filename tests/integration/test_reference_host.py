"""#28: virtbench on a host like its users' (systemd as PID 1, unified cgroup v2, Docker on its
systemd cgroup driver, Podman with the systemd cgroup manager), end to end through the CLI.

These machines are cgroup v1 hybrid without systemd and must never be converted, so the host is
a QEMU guest (tests/hostsupport/reference_host.py; TCG here, 10-50x slower than the machine),
reached over SSH as any other host of a campaign's `hosts:`. One guest serves every test of this
module. Asserted is what happened there, not only exit codes: each platform measured, `cpus: 1`
halving `openssl -multi 2` on the guest's 2 vCPUs, containers placed in virtbench.slice by
systemd, an OOM kill read from memory.events failing its execution, and `virtbench cleanup
--host` leaving no unit, scope, slice or cgroup behind. integration + slow.
"""
from __future__ import annotations

import json
import re
import time

import pytest
import yaml

from hostsupport.qemu_host import cli
from hostsupport.reference_host import reference_host, skip_unless_affordable

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PLATFORMS = ["native", "docker", "podman", "lxc", "containerd", "runc", "crun"]
HALVED = ["docker", "crun"]
"""Platforms also run with `cpus: 1` (as NAME-1cpu): an engine through its systemd driver, and
a bare runtime making its scope through systemd."""
CAMPAIGN_TIMEOUT = 5400


@pytest.fixture(scope="module")
def ref():
    skip_unless_affordable()
    with reference_host() as host:
        print(f"reference host: {host.timings}")
        yield host


def _campaign(host, name: str, platforms: list, benchmarks: list, **extra) -> dict:
    return {"name": name, "repetitions": 1, "warmups": 0, "shuffle": False,
            "hosts": [host.spec.model_dump(exclude_none=True)], "platforms": platforms,
            "benchmarks": benchmarks, **extra}


def _run(env, tmp_path, campaign: dict, name: str):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(campaign))
    t0 = time.monotonic()
    res = cli(env, "run", str(path), "--no-report", timeout=CAMPAIGN_TIMEOUT)
    return res, time.monotonic() - t0


def _guest(host, script: str) -> str:
    return host.ssh(["sh", "-c", f"'{script}'"], timeout=300).stdout


def _leftovers(host) -> str:
    """virtbench's units, scopes, slices, cgroups and containers still in the guest ('' if none)."""
    left = _guest(host, "systemctl list-units --all --plain --no-legend virtbench* vb-*; "
                        "find /sys/fs/cgroup -mindepth 1 -type d \\( -name \"*virtbench*\" -o -name \"vb-*\" "
                        "-o -name \"lxc.payload.vb*\" \\); docker ps -aq; podman ps -aq; "
                        "ctr -n virtbench containers ls -q")
    if left.strip():
        print(f"left in the guest:\n{left}")
    return left.strip()


def test_the_guest_is_a_systemd_cgroup_v2_host_as_users_have(ref):
    facts = _guest(ref, "cat /proc/1/comm; stat -fc %T /sys/fs/cgroup; cat /sys/fs/cgroup/cgroup.subtree_control; "
                        "docker info --format {{.CgroupDriver}}/{{.CgroupVersion}}; "
                        "podman info --format {{.Host.CgroupManager}}").split("\n")
    assert facts[0] == "systemd" and facts[1] == "cgroup2fs", facts
    assert {"cpu", "memory", "io", "pids"} <= set(facts[2].split()), facts
    assert facts[3] == "systemd/2" and facts[4] == "systemd", facts


def test_every_platform_measured_with_limits_taking_effect_and_cleanup_leaving_nothing(ref, env, tmp_path):
    platforms = PLATFORMS + [{"name": f"{p}-1cpu", "type": p, "options": {"cpus": 1}} for p in HALVED]
    campaign = _campaign(ref, "refhost", platforms, [{"name": "openssl", "seconds": 3, "multi": 2}])
    res, seconds = _run(env, tmp_path, campaign, "refhost")
    print(f"campaign on the reference host: {seconds:.0f} s")
    print(res.stdout[-6000:], res.stderr[-3000:], sep="\n")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    report = json.loads(cli(env, "report", "latest", "--json").stdout)
    rows = {r["platform"]: r for r in report["results"] if r["benchmark"] == "openssl"}
    names = PLATFORMS + [f"{p}-1cpu" for p in HALVED]
    assert sorted(rows) == sorted(names), sorted(rows)
    rates = {p: rows[p]["mean"] for p in names}
    print("openssl -multi 2 on the reference host:", json.dumps(rates, indent=1))
    for p in HALVED:  # the known answer: one CPU of two halves a two-process openssl
        assert 0.35 < rates[f"{p}-1cpu"] / rates[p] < 0.65, (p, rates)
    config = {p["name"]: p["config"] for p in report["platforms"]}
    assert config["docker"]["engine"]["cgroup_driver"] == "systemd", config["docker"]
    assert config["podman"]["engine"]["cgroup_manager"] == "systemd", config["podman"]

    assert not _leftovers(ref), "the run itself left something"
    cleaned = cli(env, "cleanup", "--host", ref.spec.name, timeout=1800)
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    assert not _leftovers(ref)


def test_an_oom_kill_is_read_from_memory_events_and_fails_its_execution(ref, env, tmp_path):
    campaign = _campaign(ref, "refhost-oom",
                         [{"name": "small", "type": "crun", "options": {"memory": "96M"}}],
                         [{"name": "mbw", "size_mib": 128, "runs": 1}], baseline="small")
    res, seconds = _run(env, tmp_path, campaign, "oom")
    print(f"OOM campaign: {seconds:.0f} s", res.stdout[-3000:], res.stderr[-2000:], sep="\n")
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]
    shown = cli(env, "show", "latest", "--failed").stdout
    assert re.search(r"out of memory: the kernel's OOM killer killed \d+ process", shown), shown
    assert "virtbench.slice/vb-" in shown and "limit 96 MiB" in shown, shown
    assert not _leftovers(ref)


def test_density_confined_in_a_transient_slice_stops_with_v2_evidence(ref, env, tmp_path):
    """host_memory on a systemd host: the confining parent is virtbench-NAME.slice (made and
    removed through systemctl), crun's scopes go into it, and the stop has the v2 counters."""
    campaign = _campaign(ref, "refhost-density", [{"name": "crun", "type": "crun", "options": {"memory": "64M"}}],
                         [], experiment="density",
                         density={"workload": {"name": "openssl", "algorithm": "des-ede3", "bytes": 64, "multi": 1,
                                               "seconds": 1},
                                  "counts": {"until": "failure", "max": 8, "step": 2}, "host_memory": "40M",
                                  "guard": {"confined": False}, "settle": 0})
    del campaign["benchmarks"], campaign["shuffle"]
    res, seconds = _run(env, tmp_path, campaign, "density")
    print(f"density campaign: {seconds:.0f} s", res.stdout[-4000:], res.stderr[-2000:], sep="\n")
    assert res.returncode in (0, 1), res.stdout[-3000:] + res.stderr[-3000:]
    assert "virtbench.slice/virtbench-vb_density_" in res.stdout, res.stdout[-3000:]
    entry = json.loads(cli(env, "report", "latest", "--json").stdout)["density"][0]
    print(json.dumps(entry, indent=1, default=str)[:3000])
    assert entry["stop_reason"] in ("oom", "start_failure", "workload_failure", "memory"), entry
    assert not _leftovers(ref)

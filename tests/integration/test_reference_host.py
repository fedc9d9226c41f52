"""#28: virtbench on a host like its users' (systemd as PID 1, unified cgroup v2, Docker on its
systemd cgroup driver, Podman with the systemd cgroup manager), end to end through the CLI.

These machines are cgroup v1 hybrid without systemd and must never be converted, so the host is
a QEMU guest (tests/hostsupport/reference_host.py; TCG here, 10-50x slower than the machine),
reached over SSH as any other host of a campaign's `hosts:`. One guest serves every test of this
module and every other test that needs such a host (the `refhost` fixture of
tests/integration/conftest.py). Asserted is what happened there, not only exit codes: each
platform measured, `cpus: 1` halving what `openssl -multi 2` gets of the guest's 2 vCPUs, Docker
and Podman on systemd's driver, crun's scope in virtbench.slice with an OOM kill read from its
memory.events failing the execution, and neither a run nor `virtbench cleanup --host` leaving a
unit, scope, slice, cgroup or container behind. integration + slow.

A density run through `hosts:` (the agent runs the search there) confines docker's containers
under a parent slice of virtbench.slice (`--cgroup-parent` as the systemd driver takes it) and
is stopped by the guard judging that confined host, with the parent's own v2 counters
(memory.events, memory.pressure, memory.peak) as the evidence. The self-test runs on the guest
itself, as a user runs it on a new host: the shipped virtbench's `selftest` over SSH, with
the checks whose known answers hold on an emulated CPU: io-throttle (io.max), and on runc and
crun (`--platform`) oom (read from memory.events) and cpu-quota, whose answer is read from the
scope's cpu.stat (usage_usec, nr_throttled: the quota holds in guest CPU time under TCG too; its
throughput is not judged there, a guest CPU-second's work varies). netem skips itself under
TCG, which is checked (a 1 ms netem delay read as +2.2 ms: late timers);
harness-overhead (about 4 min under TCG) and the A/A check (17 % noise there) are left to
hosts with real CPUs.
"""
from __future__ import annotations

import json
import re
import time

import pytest
import yaml

from hostsupport.qemu_host import cli
from virtbench.config import parse_campaign
from virtbench.experiments.benchmarks.session import build_objects, image_recipe, with_platform_packages
from virtbench.images import build as images
from virtbench.platforms.base import Paths
from virtbench.remote import ship
from virtbench.remote.ssh import SSHExecutor
from virtbench.selftest import netem

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PLATFORMS = ["native", "docker", "podman", "lxc", "containerd", "runc", "crun"]
HALVED = ["docker", "crun"]
"""Platforms also run with `cpus: 1` (as NAME-1cpu): an engine through its systemd driver, and
a bare runtime making its scope through systemd (--systemd-cgroup)."""
CAMPAIGN_TIMEOUT = 5400


@pytest.fixture
def ref(refhost):
    """The run's one reference guest (tests/integration/conftest.py), shared with every other
    test that needs a systemd + cgroup v2 host."""
    return refhost


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
    return host.ssh(["sh", "-c", f"'{script}'"], timeout=300, check=False).stdout


def _leftovers(host, after_run: bool = False) -> list[str]:
    """virtbench's units, scopes, slices, cgroups and containers still in the guest. after_run:
    the empty parent a run keeps for the next (virtbench.slice) is allowed; `cleanup` removes
    it too. No /virtbench: containerd's containers are scopes of virtbench.slice now."""
    out = _guest(host, "systemctl list-units --all --plain --no-legend virtbench* vb-* | cut -d\\  -f1; "
                       "find /sys/fs/cgroup -mindepth 1 -type d \\( -name \"*virtbench*\" -o -name \"vb-*\" "
                       "-o -name \"lxc.payload.vb*\" \\); docker ps -aq; podman ps -aq; "
                       "ctr -n virtbench containers ls -q")
    allowed = {"virtbench.slice", "/sys/fs/cgroup/virtbench.slice"} if after_run else set()
    left = [line for line in out.split() if line not in allowed]
    if left:
        print(f"left in the guest: {left}\n{out}")
    return left


def test_the_guest_is_a_systemd_cgroup_v2_host_as_users_have(ref):
    facts = _guest(ref, "cat /proc/1/comm; stat -fc %T /sys/fs/cgroup; cat /sys/fs/cgroup/cgroup.subtree_control; "
                        "docker info --format {{.CgroupDriver}}/{{.CgroupVersion}}; "
                        "podman info --format {{.Host.CgroupManager}}").split("\n")
    assert facts[0] == "systemd" and facts[1] == "cgroup2fs", facts
    assert {"cpu", "memory", "io", "pids"} <= set(facts[2].split()), facts
    assert facts[3] == "systemd/2" and facts[4] == "systemd", facts


def test_every_platform_measured_with_limits_taking_effect_and_cleanup_leaving_nothing(ref, env, tmp_path):
    platforms = PLATFORMS + [{"name": f"{p}-1cpu", "type": p, "options": {"cpus": 1}} for p in HALVED]
    campaign = _campaign(ref, "refhost", platforms, [{"name": "openssl", "seconds": 2, "multi": 2},
                                                     {"name": "fork-exec", "runs": 100, "warmup": 5}],
                         probes=[{"name": "pressure", "interval": 0.5}])
    res, seconds = _run(env, tmp_path, campaign, "refhost")
    print(f"campaign on the reference host: {seconds:.0f} s")
    print(res.stdout[-6000:], res.stderr[-3000:], sep="\n")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    shown = cli(env, "report", "latest", "--json")
    # the fresh CI run of #39's branch read an empty report here once (not seen since): the why, if again
    assert shown.returncode == 0 and shown.stdout.strip(), (shown.returncode, shown.stderr[-3000:])
    report = json.loads(shown.stdout)
    rows = {r["platform"]: r for r in report["results"] if r["benchmark"] == "openssl"}
    names = PLATFORMS + [f"{p}-1cpu" for p in HALVED]
    assert sorted(rows) == sorted(names), sorted(rows)
    assert all(rows[p]["n"] == 1 and rows[p]["mean"] > 0 for p in names), rows
    kernel = {r["platform"]: r for r in report["results"] if r["benchmark"] == "fork-exec"}
    assert sorted(kernel) == sorted(names) and all(kernel[p]["n"] == 1 and kernel[p]["mean"] > 0 for p in names), kernel
    print("fork-exec spawns/s on the reference host:", {p: round(kernel[p]["mean"]) for p in names})
    cores = {e["platform"]: e["instance CPU (mean, cores)"] for e in report["probes"]["pressure"]["executions"]
             if e["benchmark"] == "openssl"}
    rates = {p: rows[p]["mean"] for p in names}
    print("openssl -multi 2 on the reference host:", json.dumps({p: [rates[p], cores.get(p)] for p in names}, indent=1))
    for p in HALVED:
        # The known answer: `cpus: 1` halves what two openssl processes get of the 2 vCPUs. Read in
        # guest CPU time (the instance's cgroup usage), which the quota caps exactly; the rates
        # are printed, not judged: under TCG on a loaded 2-core host a guest CPU-second does not
        # do a fixed amount of work (the vCPU threads are descheduled while the guest runs on).
        # The unlimited twin is not compared in cores: how much it gets of the guest depends on the
        # host's load (CI of d2eaae4: docker 0.43 cores unlimited, 0.50 with `cpus: 1`, while the
        # Kubernetes node built beside it). That it had no quota and was never throttled is below;
        # the halving itself, on a quiet host, is the self-test's cpu-quota check (test_selftest_
        # on_the_reference_host, alone).
        assert cores[f"{p}-1cpu"] <= 1.1, (p, cores)
    # the quota's own counters over each execution (cgroup v2 cpu.stat): held, and it acted
    limits = {(x["platform"], x["benchmark"]): x for x in report["probes"]["pressure"]["cpu_limits"]}
    for p in HALVED:
        lim = limits[f"{p}-1cpu", "openssl"]
        assert lim["quota_cpus"] == 1.0 and lim["cpu_per_s"] <= 1.05 and lim["throttled_periods"] > 0, lim
        # unlimited: no quota and never throttled (None: no cpu.max and no nr_throttled at all, as
        # systemd leaves a unit without CPU settings)
        assert limits[p, "openssl"]["quota_cpus"] is None and not limits[p, "openssl"]["throttled_periods"], \
            limits[p, "openssl"]
    notes = report.get("notes", {}).get("probes", [])
    assert any(f"{HALVED[0]}-1cpu's CPU quota of 1 held during the run" in n for n in notes), notes
    assert report["host"]["parallel_scaling"]["scaling"] > 0  # measured in the guest when the run started there
    config = {p["name"]: p["config"] for p in report["platforms"]}
    assert config["docker"]["engine"]["cgroup_driver"] == "systemd", config["docker"]
    assert config["podman"]["engine"]["cgroup_manager"] == "systemd", config["podman"]

    # Where the containers were: systemd's journal names each unit it started. containerd's
    # containers are scopes (runc through systemd), LXC's monitors delegated services, all in
    # virtbench.slice; nothing of theirs was made from the cgroup root (the leftover check).
    units = set(_guest(ref, "journalctl -b --no-pager -o cat -u \"vb-*\" | grep -o \"vb-vb-[A-Za-z0-9_.-]*\" "
                            "| sort -u").split())
    print(f"units virtbench started in the guest: {sorted(units)}")
    assert "virtbench.slice" in config["containerd"]["engine"]["cgroup"], config["containerd"]
    assert "virtbench.slice" in config["lxc"]["cgroup_placement"], config["lxc"]
    assert any("-containerd-" in u and u.endswith(".scope") for u in units), units
    assert any("-lxc-" in u and u.endswith(".service") for u in units), units
    assert not _leftovers(ref, after_run=True), "the run itself left something"
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
    assert not _leftovers(ref, after_run=True)


def test_density_confined_host_is_stopped_by_the_guard_with_the_v2_counters(ref, env, tmp_path):
    """docker under a 512 MiB parent, each instance's workload holding about 64 MiB (mbw, two
    32 MiB arrays): one fits the confined host's 400 MiB floor, two do not. The agent's guard
    must stop the search at 2, before the kernel has to OOM-kill anything, with the parent's
    own counters as the kernel keeps them on cgroup v2."""
    campaign = {"name": "refhost-density", "experiment": "density", "hosts": [ref.spec.model_dump(exclude_none=True)],
                "platforms": [{"name": "docker", "type": "docker"}],
                "density": {"workload": {"name": "mbw", "size_mib": 32, "runs": 10}, "counts": [1, 2],
                            "host_memory": "512M", "guard": {"confined_min_available": "400M"}, "settle": 0,
                            "collapse": 0, "starved": 0}}
    res, seconds = _run(env, tmp_path, campaign, "density")
    out = res.stdout + res.stderr
    print(f"density campaign on the reference host: {seconds:.0f} s", out[-4000:], sep="\n")
    assert res.returncode == 1 and "1 executions failed" in out, out[-3000:]  # count 2, stopped by the guard
    assert "[refhost] cgroup-confined host: every instance under virtbench.slice/" in " ".join(out.split()), out
    entry = json.loads(cli(env, "report", "latest", "--json").stdout)["density"][0]
    assert (entry["platform"], entry["host"], entry["confined"], entry["host_memory"]) == ("docker", "refhost", True,
                                                                                          512 << 20), entry
    assert (entry["stop_reason"], entry["max_count"], entry["stop_count"]) == ("guard", 1, 2), entry
    assert entry["stop_detail"].startswith("confined host of 512 MiB: available memory"), entry["stop_detail"]
    evidence = entry["stop_evidence"]
    parent = evidence["reading"]["parent"]
    assert parent["psi_some_avg10"] is not None and parent["psi_full_avg10"] is not None, parent  # its memory.pressure
    counters = evidence["parent_counters"]
    print("the confined parent's counters at the stop:", json.dumps(counters))
    assert counters["memory.max"] == 512 << 20, counters
    assert counters["memory.events"]["oom_kill"] == 0 and counters["memory.events"]["max"] == 0, counters
    assert {"some", "full"} <= set(counters["memory.pressure"]), counters
    assert (512 - 400) << 20 <= counters["memory.peak"] < 512 << 20, counters  # two instances' workloads at once
    assert counters["memory.peak"] >= parent["usage"] - (1 << 20), (counters, parent)
    assert not _leftovers(ref, after_run=True)


def _selftest_images(tmp_path, accel: str) -> list:
    """The images the checks run from: the quick profile's, and netem's own (ping) where netem
    runs (not under TCG)."""
    paths = Paths(state=tmp_path / "state", runtime=tmp_path / "run")
    campaign = parse_campaign(netem.CAMPAIGN, "netem")
    ping = with_platform_packages(image_recipe(campaign), build_objects(campaign, paths).platforms.values())
    return [images.build(images.recipe_for("quick"))] + ([images.build(ping)] if accel != "tcg" else [])


@pytest.mark.measures  # known answers (io.max throughput) that need the guest to get its CPU
def test_selftest_on_the_reference_host(ref, tmp_path):
    """`virtbench selftest` on the host itself, as a user runs it on a new host: virtbench
    shipped as a run across hosts ships it, the images put where that host's own virtbench
    looks (it cannot build them: no mmdebstrap, and TCG would take an hour)."""
    executor = SSHExecutor(ref.spec, tmp_path)
    executor.open()
    try:
        python = executor.run(["python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], timeout=60)
        virtbench = ship.ensure_virtbench(executor, "x86_64", python.stdout.strip(), ship.Shipment())
        for image in _selftest_images(tmp_path, ref.accel):
            ship.ensure_image(executor, image.root, str(images.DEFAULT_CACHE), ship.Shipment())
        t0 = time.monotonic()
        res = executor.run(["env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", virtbench,
                            "selftest", "--json", "--platform", "runc", "--platform", "crun", "cpu-quota",
                            "io-throttle", "netem", "oom"], timeout=3600, check=False)
        limits = executor.run(["cat", "/var/lib/virtbench/selftest/limits.json"], timeout=60, check=False).stdout
    finally:
        executor.close()
    print(f"selftest on the reference host: {time.monotonic() - t0:.0f} s, exit {res.returncode}", res.stderr[-3000:])
    outcome = json.loads(res.stdout)
    checks = {(c["name"], c["platform"]): c for c in outcome["checks"]}
    for c in checks.values():
        print(f"{c['name']} on {c['platform']}: passed {c['passed']}, skipped {c['skipped']}: {c['measured']} "
              f"{c['reason']}")
    assert sorted(checks) == sorted([("cpu-quota", "runc"), ("cpu-quota", "crun"), ("io-throttle", None),
                                     ("netem", None), ("oom", "runc"), ("oom", "crun")]), sorted(checks)
    assert checks["io-throttle", None]["passed"], checks
    for platform in ("runc", "crun"):  # crun: a runtime these hybrid machines cannot run, on v2 it does
        oom = checks["oom", platform]
        assert oom["passed"], oom
        # the kill read from the scope's memory.events, in virtbench.slice
        assert "OOM killer killed 1 process (memory cgroup virtbench.slice/" in json.dumps(oom["details"]), oom
        # The quota read from cgroup v2's cpu.stat (usage_usec, nr_throttled): it holds in guest
        # CPU time under TCG too; the throughput is shown, judged only on a real CPU.
        quota = checks["cpu-quota", platform]
        assert not quota["skipped"] and "CPU-s/s under cpus: 1" in quota["measured"], quota
        assert quota["details"]["scaling"][0]["scaling"], quota
        if platform == "crun" and not quota["passed"]:
            # Debian 12's crun 1.8.1 under the self-test's nested slice (virtbench.slice/
            # virtbench-vbst_*.slice): 1.19 CPU-s/s, throttled in 0 periods, in the fresh CI run
            # (its `cpus: 1` directly in virtbench.slice holds, test_every_platform...). The
            # self-test says so, as it must: a failed check naming the quota, recorded as not held.
            assert quota["details"]["throttled"] == 0 and ("did not hold" in quota["reason"]
                                                           or "never throttled" in quota["reason"]), quota
            continue
        assert quota["passed"], quota
        assert max(quota["details"]["limited_cpu"]) <= 1.05 and quota["details"]["throttled"] > 0, quota["details"]
    verdicts = json.loads(limits)["platforms"]  # kept for the reports of runs on this host
    assert {verdicts[p][k]["held"] for p, k in (("runc", "cpu"), ("runc", "memory"), ("crun", "memory"))} == {True}, \
        verdicts
    assert checks["cpu-quota", "crun"]["passed"] or verdicts["crun"]["cpu"]["held"] is not True, verdicts
    netem_check = checks["netem", None]  # an answer in timer precision
    if ref.accel == "tcg":
        assert netem_check["skipped"] and "emulated" in netem_check["reason"], netem_check
    else:
        assert netem_check["passed"], netem_check
    crun_held = checks["cpu-quota", "crun"]["passed"]
    assert res.returncode == (0 if crun_held else 1) and outcome["passed"] is crun_held, res.stdout[-3000:]
    assert not _leftovers(ref, after_run=True)

"""Campaign validation: every mistake is one InputError line naming the field and the fix."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from virtbench.config import load_campaign, parse_campaign
from virtbench.errors import InputError

GOOD = {
    "name": "docker-vs-native",
    "baseline": "native",
    "repetitions": 5,
    "warmups": 1,
    "platforms": ["native", "docker", {"name": "docker-1cpu", "type": "docker", "cpus": 1},
                  {"name": "lxc-512m", "type": "lxc", "memory": "512M"}],
    "benchmarks": [{"name": "openssl", "algorithm": "aes-128-cbc", "bytes": 64, "multi": 2, "seconds": 2},
                   {"name": "fio", "size": "256M", "runtime": 5}],
}


def bad(**changes):
    data = {**GOOD, **changes}
    with pytest.raises(InputError) as info:
        parse_campaign(data, "c.yaml")
    return str(info.value)


def test_issue_example_is_valid():
    c = parse_campaign(GOOD, "c.yaml")
    assert [p.name for p in c.platforms] == ["native", "docker", "docker-1cpu", "lxc-512m"]
    assert c.platform("docker-1cpu").type == "docker"
    assert c.platform("docker-1cpu").options == {"cpus": 1.0}
    assert c.platform("lxc-512m").options == {"memory": 512 * 1024 * 1024}
    assert [b.key for b in c.benchmarks] == ["openssl", "fio"]


def test_unknown_top_level_key_suggests_the_right_one():
    msg = bad(repetition=3)
    assert "c.yaml" in msg and "unknown key 'repetition'" in msg and "did you mean 'repetitions'" in msg


def test_unknown_benchmark():
    msg = bad(benchmarks=[{"name": "fioo"}])
    assert "benchmarks[0].name" in msg and "unknown benchmark 'fioo'" in msg and "'fio'" in msg


def test_unknown_platform_type():
    msg = bad(platforms=["native", {"name": "x", "type": "dockr"}])
    assert "platforms[1].type" in msg and "'docker'" in msg


def test_wrong_type_and_impossible_values():
    assert "platforms[1].cpus" in bad(platforms=["native", {"name": "d", "type": "docker", "cpus": "lots"}])
    assert "platforms[1].cpus" in bad(platforms=["native", {"name": "d", "type": "docker", "cpus": -1}])
    assert "repetitions" in bad(repetitions=0)
    assert "benchmarks[0].seconds" in bad(benchmarks=[{"name": "openssl", "seconds": -2}])


def test_unknown_benchmark_parameter():
    msg = bad(benchmarks=[{"name": "fio", "runtim": 5}])
    assert "benchmarks[0].runtim" in msg and "did you mean 'runtime'" in msg


def test_baseline_must_be_a_platform():
    msg = bad(baseline="bare")
    assert "baseline 'bare'" in msg and "native" in msg


def test_duplicate_platform_names():
    assert "used twice" in bad(platforms=["native", "docker", {"name": "docker", "type": "docker", "cpus": 1}])


def test_same_benchmark_twice_gets_distinct_keys():
    c = parse_campaign({**GOOD, "benchmarks": [{"name": "openssl", "algorithm": "aes-128-cbc"},
                                                {"name": "openssl", "algorithm": "des-ede3"}]})
    assert [b.key for b in c.benchmarks] == ["openssl[algorithm=aes-128-cbc]", "openssl[algorithm=des-ede3]"]


def test_native_refuses_resource_limits():
    msg = bad(platforms=[{"name": "native", "cpus": 1}])
    assert "platforms[0]" in msg


def test_load_reports_yaml_syntax_and_missing_file(tmp_path: Path):
    with pytest.raises(InputError, match="not found"):
        load_campaign(tmp_path / "nope.yaml")
    f = tmp_path / "broken.yaml"
    f.write_text("name: x\nplatforms: [native\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_campaign(f)


def test_load_from_file(tmp_path: Path):
    f = tmp_path / "c.yaml"
    f.write_text(textwrap.dedent("""
        name: t
        platforms: [native, docker]
        benchmarks: [sysbench-cpu]
    """))
    c = load_campaign(f)
    assert c.repetitions == 5 and c.warmups == 1 and c.baseline == "native"


def test_yaml_is_parsed_safely(tmp_path: Path):
    f = tmp_path / "evil.yaml"
    f.write_text("name: !!python/object/apply:os.system ['true']\nplatforms: [native]\nbenchmarks: [fio]\n")
    with pytest.raises(InputError):
        load_campaign(f)


def test_sweep_expands_to_points_with_their_parameters():
    c = parse_campaign({**GOOD, "benchmarks": [
        {"name": "sysbench-cpu", "time": 1, "sweep": {"threads": [1, 2, 4]}},
        {"name": "fio", "sweep": {"iodepth": [1, 32], "bs_iops": ["4k", "64k"]}}]})
    keys = [b.key for b in c.benchmarks]
    assert keys[:3] == ["sysbench-cpu[threads=1]", "sysbench-cpu[threads=2]", "sysbench-cpu[threads=4]"]
    assert len(keys) == 3 + 4 and len(set(keys)) == 7
    point = c.benchmarks[1]
    assert point.params == {"time": 1, "threads": 2} and point.sweep == ("threads",)


def test_bad_sweeps():
    assert "benchmarks[0].threads" in bad(benchmarks=[{"name": "sysbench-cpu", "sweep": {"threads": [1, 0]}}])
    assert "both fixed and swept" in bad(benchmarks=[{"name": "sysbench-cpu", "threads": 1,
                                                      "sweep": {"threads": [1, 2]}}])
    assert "benchmarks[0].sweep" in bad(benchmarks=[{"name": "sysbench-cpu", "sweep": {"threads": 4}}])


def test_stored_form_round_trips_with_the_same_keys():
    """A resumed run re-reads the campaign it stored; keys and options must come back unchanged."""
    c = parse_campaign({**GOOD, "benchmarks": [
        {"name": "sysbench-cpu", "time": 1, "sweep": {"threads": [1, 2]}}, {"name": "fio", "runtime": 1}]})
    again = parse_campaign(c.model_dump(mode="json"), "stored run")
    assert again == c


@pytest.mark.parametrize("text, size", [("512M", 512 << 20), ("1G", 1 << 30), ("1.5GiB", 3 << 29),
                                        ("4096", 4096), (8192, 8192), ("64k", 65536)])
def test_sizes_are_binary(text, size):
    from virtbench.platforms.sizes import parse_size

    assert parse_size(text) == size


def test_bad_size():
    assert "platforms[1].memory" in bad(platforms=["native", {"name": "d", "type": "docker", "memory": "lots"}])


def test_stacks_are_declared_with_inside():
    c = parse_campaign({**GOOD, "platforms": ["native", {"name": "vm", "type": "qemu", "vcpus": 2},
                                               {"name": "vm-docker", "type": "docker", "inside": "vm"}]})
    assert c.platform("vm-docker").inside == "vm"
    assert parse_campaign(c.model_dump(mode="json")) == c


@pytest.mark.parametrize("platforms, needle", [
    (["native", {"name": "d", "type": "docker", "inside": "vm"}], "no platform named 'vm'"),
    (["native", "docker", {"name": "d2", "type": "podman", "inside": "docker"}], "only a VM can host"),
    (["native", {"name": "vm", "type": "qemu"}, {"name": "vm2", "type": "qemu", "inside": "vm"}],
     "only container platforms"),
])
def test_bad_stacks(platforms, needle):
    assert needle in bad(platforms=platforms)


def test_instances_and_their_sweep():
    c = parse_campaign({**GOOD, "benchmarks": [
        {"name": "openssl", "seconds": 1, "sweep": {"instances": [1, 2, 4]}}, {"name": "fio", "instances": 2}]})
    assert [b.key for b in c.benchmarks] == ["openssl[instances=1]", "openssl[instances=2]",
                                             "openssl[instances=4]", "fio"]
    assert [b.instances for b in c.benchmarks] == [1, 2, 4, 2]
    assert c.benchmarks[1].params == {"seconds": 1}
    assert parse_campaign(c.model_dump(mode="json")) == c


def test_bad_instances():
    assert "benchmarks[0].instances" in bad(benchmarks=[{"name": "fio", "instances": 0}])
    assert "benchmarks[0].instances" in bad(benchmarks=[{"name": "fio", "instances": "many"}])


def test_full_profile_takes_the_studies_values_under_the_campaigns_own():
    from virtbench.registry import BENCHMARKS

    bridged = ["native", {"name": "docker", "type": "docker", "network": "bridge"}]
    c = parse_campaign({**GOOD, "profile": "full", "platforms": bridged,
                        "benchmarks": [{"name": "iperf3"}, {"name": "sockperf", "time": 3}, "dd"]})
    assert c.benchmarks[0].params == BENCHMARKS.get("iperf3").study == {"time": 20}
    assert c.benchmarks[1].params == {"time": 3}
    assert c.benchmarks[2].params == {"count": 256}
    assert parse_campaign(c.model_dump(mode="json")) == c
    quick = parse_campaign({**GOOD, "platforms": bridged, "benchmarks": ["iperf3"]})
    assert quick.benchmarks[0].params == {}
    for _name, cls in BENCHMARKS.items():
        cls.Params(**cls.study)  # every full profile is valid


@pytest.mark.parametrize("platform, bench, needle", [
    ({"name": "docker", "type": "docker"}, {"name": "iperf3"}, "set network: bridge on platform 'docker'"),
    ({"name": "lxc", "type": "lxc"}, {"name": "sockperf", "server": "host"}, "cannot reach the host"),
    ({"name": "runc", "type": "runc"}, {"name": "nginx-wrk", "client": "host", "server": "instance"},
     "nothing can reach it"),
    ({"name": "ctr", "type": "containerd"}, {"name": "ping"}, "set network: host on platform 'ctr'"),
    ({"name": "vm", "type": "qemu", "network": "user"}, {"name": "iperf3"}, "nothing outside can reach the guest"),
    ({"name": "vm", "type": "qemu"}, {"name": "iperf3", "server": "host"}, "no network card"),
])
def test_a_network_benchmark_that_cannot_connect_is_refused_with_the_fix(platform, bench, needle):
    message = bad(platforms=["native", platform], benchmarks=[bench])
    assert needle in message and "server: instance" in message


@pytest.mark.parametrize("platform, bench", [
    ({"name": "docker", "type": "docker"}, {"name": "iperf3", "server": "instance"}),  # loopback
    ({"name": "docker", "type": "docker"}, {"name": "iperf3", "client": "host", "server": "host"}),
    ({"name": "docker", "type": "docker", "network": "bridge"}, {"name": "iperf3"}),
    ({"name": "lxc", "type": "lxc", "network": "host"}, {"name": "sockperf", "server": "host"}),
    ({"name": "vm", "type": "qemu", "network": "user"}, {"name": "iperf3", "server": "host"}),
    ({"name": "vm", "type": "qemu", "network": "bridge"}, {"name": "iperf3", "client": "host", "server": "instance"}),
])
def test_network_benchmarks_that_can_connect_are_accepted(platform, bench):
    parse_campaign({**GOOD, "platforms": ["native", platform], "benchmarks": [bench]})


@pytest.mark.parametrize("bench", [{"name": "iperf3", "server": "host"},
                                   {"name": "sockperf", "client": "host", "server": "instance"},
                                   {"name": "nginx-wrk", "client": "host", "server": "peer"}])
def test_host_end_with_a_container_inside_a_vm_is_refused(bench):
    platforms = ["native", {"name": "vm", "type": "qemu", "network": "bridge"},
                 {"name": "vm-docker", "type": "docker", "network": "bridge", "inside": "vm"}]
    message = bad(platforms=platforms, benchmarks=[bench])
    assert "runs inside the VM 'vm'" in message and "server: peer" in message
    # the same benchmark instance-to-instance inside the VM is fine
    parse_campaign({**GOOD, "platforms": platforms, "benchmarks": [{**bench, "client": "instance", "server": "peer"}]})


def test_cli_refuses_the_campaign_before_anything_starts(tmp_path: Path):
    import subprocess
    import sys

    import yaml

    campaign = {"name": "net", "platforms": ["native", "docker"], "benchmarks": [{"name": "iperf3", "time": 1}]}
    (tmp_path / "net.yaml").write_text(yaml.safe_dump(campaign))
    db = tmp_path / "store.db"
    r = subprocess.run([sys.executable, "-m", "virtbench", "run", str(tmp_path / "net.yaml"), "--db", f"sqlite:///{db}"],
                       capture_output=True, text=True, timeout=120,
                       env={"PATH": "/usr/bin:/bin", "VIRTBENCH_STATE_DIR": str(tmp_path / "state"),
                            "VIRTBENCH_RUNTIME_DIR": str(tmp_path / "run")})
    assert r.returncode == 2, r.stderr
    assert "has network 'none'" in r.stderr and "fix: set network: bridge on platform 'docker'" in r.stderr
    assert not db.exists() and not (tmp_path / "state").exists()  # no store opened, nothing created

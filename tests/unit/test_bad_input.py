"""Bad input through the real CLI entry: every case one error line (and its fix), exit 2, nothing started.

Each case runs `virtbench.cli.main` in-process as the shell would (argv in, exit code and
stderr out). "Nothing started": the results database was never opened (its file does not
exist), the state directory was never created, and the host lock (taken before any probe,
image build or instance) was never reached.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from virtbench.cli import main

BASE: dict[str, Any] = {"name": "bad-input", "platforms": ["native", "docker"],
                        "benchmarks": [{"name": "sysbench-cpu", "time": 1}]}
DENSITY: dict[str, Any] = {"name": "d", "experiment": "density", "platforms": ["native"],
                           "density": {"workload": {"name": "openssl", "seconds": 1}, "counts": [1, 2]}}
LINE: dict[str, Any] = {"name": "l", "experiment": "line", "platforms": [{"name": "ns", "type": "netns"}],
                        "line": {"lengths": [1, 2]}}
MIGRATION: dict[str, Any] = {"name": "m", "experiment": "migration", "platforms": ["lxc"],
                             "migration": {"mode": "lifecycle", "counts": [1]}}


def camp(**changes: Any) -> dict[str, Any]:
    return {**BASE, **changes}


def plat(**options: Any) -> dict[str, Any]:
    """The campaign with a second platform of these options (a docker one unless `type` says)."""
    return camp(platforms=["native", {"name": "p", "type": "docker", **options}])


def bench(**entry: Any) -> dict[str, Any]:
    return camp(benchmarks=[entry])


def section(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    kind = base["experiment"]
    return {**base, kind: {**base[kind], **changes}}


# (id, campaign as a mapping or raw YAML text, what the one error line must name)
CAMPAIGNS: list[tuple[str, Any, str]] = [
    # the file itself
    ("empty-file", "", "must be a mapping"),
    ("only-comment", "# nothing\n", "must be a mapping"),
    ("top-level-list", "- native\n- docker\n", "must be a mapping"),
    ("top-level-scalar", "hello\n", "must be a mapping"),
    ("top-level-number", "42\n", "must be a mapping"),
    ("not-utf8", b"name: \xff\xfe\nplatforms: [native]\nbenchmarks: [fio]\n", "not UTF-8"),
    ("latin1", "name: caf\xe9\n".encode("latin-1"), "not UTF-8"),
    ("binary-nul", b"\x00\x01\x02\x03\x04", "not a text file"),
    ("elf-header", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)), "not UTF-8"),
    ("utf16", "name: x\n".encode("utf-16"), "not UTF-8"),
    ("yaml-syntax", "name: [unclosed\n", "not valid YAML"),
    ("tab-indent", "name: a\nplatforms:\n\t- native\n", "not valid YAML"),
    ("two-documents", "name: a\n---\nname: b\n", "not valid YAML"),
    ("python-object", "name: !!python/object/apply:os.system ['true']\nplatforms: [native]\n", "not valid YAML"),
    ("python-name", "name: !!python/name:os.system\n", "not valid YAML"),
    ("unknown-tag", "name: !secret x\n", "not valid YAML"),
    ("deep-flow", "[" * 5000 + "]" * 5000, "nested deeper"),
    ("deep-block", "".join("  " * i + "a:\n" for i in range(200)), "nested deeper"),
    ("deep-mixed", "a: " + "{b: [" * 40 + "]}" * 40 + "\n", "nested deeper"),
    ("billion-laughs", "\n".join(
        ["name: lol", "platforms: [native, {name: d, type: docker, cpuset: &a0 [x,x,x,x,x,x,x,x,x,x]}]",
         "description: [" + ",".join(f"&a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)) + "]"]),
     "aliases"),
    ("merge-key-bomb", "\n".join(["a0: &a0 {" + ",".join(f"k{j}: {j}" for j in range(10)) + "}"]
                                 + [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 7)]),
     "aliases"),
    ("huge-integer", "name: a\nrepetitions: " + "9" * 5000 + "\nplatforms: [native]\nbenchmarks: [fio]\n",
     "digits"),
    ("duplicate-key", "name: a\nname: b\nplatforms: [native]\nbenchmarks: [fio]\n", "given twice"),
    ("duplicate-nested-key", "name: a\nplatforms: [native, {name: d, type: docker, cpus: 1, cpus: 2}]\n"
                             "benchmarks: [fio]\n", "given twice"),
    ("integer-key", "name: a\n1: x\nplatforms: [native]\nbenchmarks: [fio]\n", "unknown key"),
    ("null-key", "name: a\n~: x\nplatforms: [native]\nbenchmarks: [fio]\n", "unknown key"),
    ("list-key", "name: a\n? [1, 2]\n: x\nplatforms: [native]\nbenchmarks: [fio]\n", "not valid YAML"),
    # top level
    ("missing-name", {k: v for k, v in BASE.items() if k != "name"}, "name"),
    ("missing-platforms", {k: v for k, v in BASE.items() if k != "platforms"}, "platforms"),
    ("missing-benchmarks", {k: v for k, v in BASE.items() if k != "benchmarks"}, "benchmarks"),
    ("unknown-top-key", camp(repetition=3), "repetition"),
    ("unknown-top-key-far", camp(zzz=1), "zzz"),
    ("name-empty", camp(name=""), "name"),
    ("name-newline", camp(name="a\nb"), "name"),
    ("name-control", camp(name="a\x1b[31mred"), "name"),
    ("name-space", camp(name="my campaign"), "name"),
    ("name-dash-first", camp(name="-rf"), "name"),
    ("name-slash", camp(name="../etc"), "name"),
    ("name-too-long", camp(name="a" * 64), "name"),
    ("name-number", camp(name=5), "name"),
    ("name-list", camp(name=["a"]), "name"),
    ("description-list", camp(description=["a"]), "description"),
    ("repetitions-zero", camp(repetitions=0), "repetitions"),
    ("repetitions-negative", camp(repetitions=-1), "repetitions"),
    ("repetitions-huge", camp(repetitions=10**9), "repetitions"),
    ("repetitions-string", camp(repetitions="five"), "repetitions"),
    ("repetitions-float", camp(repetitions=2.5), "repetitions"),
    ("repetitions-inf", "name: a\nrepetitions: .inf\nplatforms: [native]\nbenchmarks: [fio]\n", "repetitions"),
    ("warmups-negative", camp(warmups=-1), "warmups"),
    ("warmups-huge", camp(warmups=1000), "warmups"),
    ("seed-beyond-32-bit", camp(seed=2**31), "seed"),
    ("seed-huge", camp(seed=10**30), "seed"),
    ("seed-below-32-bit", camp(seed=-(2**31) - 1), "seed"),
    ("seed-string", camp(seed="abc"), "seed"),
    ("seed-float", camp(seed=1.5), "seed"),
    ("shuffle-string", camp(shuffle="sometimes"), "shuffle"),
    ("profile-unknown", camp(profile="huge"), "profile"),
    ("parallel-string", camp(parallel="maybe"), "parallel"),
    ("experiment-unknown", camp(experiment="nosuch"), "unknown kind"),
    ("experiment-list", camp(experiment=["benchmarks"]), "experiment"),
    ("other-kind-section", camp(line={"lengths": [1]}), "section of experiment 'line'"),
    ("settings-for-benchmarks", camp(settings={"x": 1}), "takes no section"),
    # image
    ("image-release-unknown", camp(image={"release": "buster"}), "unknown Debian release 'buster'"),
    ("image-release-typo", camp(image={"release": "bookwrm"}), "did you mean 'bookworm'"),
    ("image-release-newline", camp(image={"release": "bookworm\n--setup-hook=x"}), "unknown Debian release"),
    ("image-release-number", camp(image={"release": 12}), "image.release"),
    ("image-profile-unknown", camp(image={"profile": "tiny"}), "unknown image profile"),
    ("image-unknown-key", camp(image={"relase": "bookworm"}), "known keys of image: profile, release"),
    ("image-not-mapping", camp(image="bookworm"), "image"),
    # adaptive
    ("adaptive-unknown-key", camp(adaptive={"targett": 0.1}), "known keys of adaptive"),
    ("adaptive-target-zero", camp(adaptive={"target": 0}), "adaptive.target"),
    ("adaptive-target-one", camp(adaptive={"target": 1}), "adaptive.target"),
    ("adaptive-max-reps-one", camp(adaptive={"max_repetitions": 1}), "adaptive.max_repetitions"),
    ("adaptive-minutes-inf", "name: a\nadaptive: {max_minutes: .inf}\nplatforms: [native]\nbenchmarks: [fio]\n",
     "adaptive.max_minutes"),
    ("adaptive-until-unknown", camp(adaptive={"until": "forever"}), "adaptive.until"),
    ("adaptive-executions", camp(adaptive={"max_repetitions": 10000},
                                 benchmarks=[{"name": "sysbench-cpu", "sweep": {"threads": list(range(1, 60))}}]),
     "executions"),
    # platforms
    ("platforms-empty", camp(platforms=[]), "non-empty list of platforms"),
    ("platforms-mapping", camp(platforms={"native": {}}), "non-empty list of platforms"),
    ("platforms-string", camp(platforms="native"), "non-empty list of platforms"),
    ("platform-unknown-type", camp(platforms=["native", "dockr"]), "unknown platform type 'dockr'"),
    ("platform-unknown-type-mapping", plat(type="vmware"), "unknown platform type 'vmware'"),
    ("platform-no-name", camp(platforms=["native", {"type": "docker"}]), "platforms[1]"),
    ("platform-number", camp(platforms=["native", 5]), "platforms[1]"),
    ("platform-list", camp(platforms=["native", ["docker"]]), "platforms[1]"),
    ("platform-null", camp(platforms=["native", None]), "platforms[1]"),
    ("platform-duplicate-name", camp(platforms=["native", "docker", {"name": "docker", "type": "docker"}]),
     "used twice"),
    ("platform-name-newline", camp(platforms=["native", {"name": "a\nb", "type": "docker"}]), "not a valid name"),
    ("platform-name-trailing-newline", camp(platforms=["native", {"name": "docker\n", "type": "docker"}]),
     "not a valid name"),
    ("platform-name-dash", camp(platforms=["native", {"name": "--privileged", "type": "docker"}]),
     "not a valid name"),
    ("platform-name-space", camp(platforms=["native", {"name": "my docker", "type": "docker"}]), "not a valid name"),
    ("platform-name-slash", camp(platforms=["native", {"name": "a/../b", "type": "docker"}]), "not a valid name"),
    ("platform-name-unicode", camp(platforms=["native", {"name": "dócker", "type": "docker"}]), "not a valid name"),
    ("platform-type-line-separator", camp(platforms=["native", {"name": "d", "type": "dock\u2028er"}]),
     "unknown platform type"),
    ("netns-type-nel", {**LINE, "platforms": [{"name": "ns", "type": "netns", "x\x85y": 1}]}, "takes no options"),
    ("benchmark-name-paragraph-separator", camp(benchmarks=["fio\u2029x"]), "unknown benchmark"),
    ("platform-unknown-option", plat(cpu=1), "did you mean 'cpus'"),
    ("platform-unknown-option-far", plat(zzz=1), "known keys of platforms[1]"),
    ("platform-cpus-zero", plat(cpus=0), "platforms[1].cpus"),
    ("platform-cpus-negative", plat(cpus=-1), "platforms[1].cpus"),
    ("platform-cpus-string", plat(cpus="lots"), "platforms[1].cpus"),
    ("platform-cpus-inf", "name: a\nplatforms: [native, {name: d, type: docker, cpus: .inf}]\nbenchmarks: [fio]\n",
     "platforms[1].cpus"),
    ("platform-cpus-nan", "name: a\nplatforms: [native, {name: d, type: docker, cpus: .nan}]\nbenchmarks: [fio]\n",
     "platforms[1].cpus"),
    ("platform-cpus-beyond-host", plat(cpus=4000), "CPUs"),
    ("platform-cpuset-bad", plat(cpuset="0-"), "cpuset"),
    ("platform-cpuset-letters", plat(cpuset="all"), "cpuset"),
    ("platform-cpuset-beyond-host", plat(cpuset="0-4000"), "this host's CPUs are"),
    ("platform-cpuset-billion", plat(type="runc", cpuset="0-999999999"), "within CPU 0-8191"),
    ("platform-cpuset-downwards", plat(cpuset="3-1"), "must go upwards"),
    ("platform-memory-inf", "name: a\nplatforms: [native, {name: d, type: docker, memory: .inf}]\n"
                            "benchmarks: [fio]\n", "platforms[1].memory"),
    ("platform-memory-nan", "name: a\nplatforms: [native, {name: d, type: docker, memory: .nan}]\n"
                            "benchmarks: [fio]\n", "platforms[1].memory"),
    ("platform-memory-negative", plat(memory=-5), "platforms[1].memory"),
    ("platform-memory-tiny", plat(memory="1M"), "below 6 MiB"),
    ("platform-memory-words", plat(memory="lots"), "not a size"),
    ("platform-memory-unit", plat(memory="5X"), "not a size"),
    ("platform-memory-absurd", plat(memory="99999999T"), "1P at most"),
    ("platform-memory-beyond-host", plat(memory="900T"), "MemTotal"),
    ("platform-memory-bool", plat(memory=True), "platforms[1].memory"),
    ("platform-network-unknown", plat(network="wifi"), "platforms[1].network"),
    ("platform-runtime-unknown", plat(type="podman", runtime="kata"), "platforms[1].runtime"),
    ("platform-native-swap", plat(type="native", swap="1G"), "swap"),
    ("platform-docker-disk", plat(disk="1G"), "disk"),
    ("platform-lxc-swap-alone", plat(type="lxc", swap="1G"), "swap needs memory"),
    ("platform-lxc-disk-tiny", plat(type="lxc", disk="1M"), "disk below 64M"),
    ("platform-lxc-disk-beyond-free", plat(type="lxc", disk="900T"), "free"),
    ("platform-lxc-init-unknown", plat(type="lxc", init="openrc"), "platforms[1].init"),
    ("platform-oci-iops-huge", plat(type="runc", device_read_iops=10**30), "device_read_iops"),
    ("platform-qemu-vcpus-zero", plat(type="qemu", vcpus=0), "vcpus"),
    ("platform-qemu-memory-small", plat(type="qemu", memory="64M"), "at least 128M"),
    ("platform-qemu-aio", plat(type="qemu", aio="native", cache="writeback"), "aio=native"),
    ("platform-qemu-machine-dash", plat(type="qemu", machine="-x"), "machine"),
    ("platform-qemu-cpu-dash", plat(type="qemu", cpu="--enable-kvm"), "cpu"),
    ("platform-qemu-boot-timeout", plat(type="qemu", boot_timeout=10**9), "boot_timeout"),
    ("platform-qemu-memory-beyond-host", plat(type="qemu", memory="900T"), "MemTotal"),
    ("platform-inside-unknown", camp(platforms=["native", {"name": "d", "type": "docker", "inside": "vm"}]),
     "no platform named 'vm'"),
    ("platform-inside-not-vm", camp(platforms=["native", "docker", {"name": "d2", "type": "podman",
                                                                    "inside": "docker"}]), "only a VM can host"),
    ("platform-inside-number", camp(platforms=["native", {"name": "d", "type": "docker", "inside": 5}]), "inside"),
    ("platform-image-for-benchmarks", camp(platforms=["native", {"name": "d", "type": "docker",
                                                                 "image": {"release": "bullseye"}}]),
     "one image"),
    # baseline
    ("baseline-unknown", camp(baseline="bare"), "baseline 'bare'"),
    ("baseline-number", camp(baseline=5), "baseline"),
    ("baseline-stacked", camp(baseline="d", platforms=["native", {"name": "vm", "type": "qemu"},
                                                       {"name": "d", "type": "docker", "inside": "vm"}]), "stacked"),
    # benchmarks
    ("benchmarks-empty", camp(benchmarks=[]), "non-empty list of benchmarks"),
    ("benchmarks-string", camp(benchmarks="fio"), "non-empty list of benchmarks"),
    ("benchmark-unknown", camp(benchmarks=["fioo"]), "unknown benchmark 'fioo'"),
    ("benchmark-unknown-newline", camp(benchmarks=["fio\nrm -rf /"]), "unknown benchmark"),
    ("benchmark-no-name", bench(time=1), "benchmarks[0]"),
    ("benchmark-number", camp(benchmarks=[5]), "benchmarks[0]"),
    ("benchmark-unknown-param", bench(name="fio", runtim=5), "did you mean 'runtime'"),
    ("benchmark-unknown-param-far", bench(name="fio", zzz=5), "known keys of benchmarks[0]"),
    ("benchmark-listed-twice", camp(benchmarks=["fio", "fio"]), "listed twice"),
    ("benchmark-seconds-negative", bench(name="openssl", seconds=-2), "benchmarks[0].seconds"),
    ("benchmark-threads-zero", bench(name="sysbench-cpu", threads=0), "benchmarks[0].threads"),
    ("benchmark-threads-string", bench(name="sysbench-cpu", threads="many"), "benchmarks[0].threads"),
    ("benchmark-time-huge", bench(name="sysbench-cpu", time=10**9), "benchmarks[0].time"),
    ("fio-size-bad", bench(name="fio", size="lots"), "benchmarks[0].size"),
    ("fio-size-negative", bench(name="fio", size="-1G"), "benchmarks[0].size"),
    ("fio-size-absurd", bench(name="fio", size="99999999999T"), "1P at most"),
    ("fio-size-beyond-free", bench(name="fio", size="900T"), "free"),
    ("fio-size-instances-beyond-free", bench(name="fio", size="100T", instances=200), "free"),
    ("fio-job-unknown", bench(name="fio", jobs=["seq_read"]), "benchmarks[0].jobs"),
    ("fio-job-twice", bench(name="fio", jobs=["seq_read_bw", "seq_read_bw"]), "listed twice"),
    ("fio-ioengine-unknown", bench(name="fio", ioengine="posixaio"), "benchmarks[0].ioengine"),
    ("dd-bs-unaligned", bench(name="dd", bs="1000"), "multiple of 4096"),
    ("dd-count-zero", bench(name="dd", count=0), "benchmarks[0].count"),
    ("dd-size-beyond-free", bench(name="dd", bs="1G", count=1_000_000), "free"),
    ("fileio-size-beyond-free", bench(name="sysbench-fileio", file_total_size="900T"), "free"),
    ("instances-zero", bench(name="fio", instances=0), "benchmarks[0].instances"),
    ("instances-huge", bench(name="fio", instances=10**6), "benchmarks[0].instances"),
    ("instances-string", bench(name="fio", instances="many"), "benchmarks[0].instances"),
    ("instances-pair", camp(platforms=["native", {"name": "d", "type": "docker", "network": "bridge"}],
                            benchmarks=[{"name": "iperf3", "instances": 2}]), "client-server"),
    ("network-unreachable", camp(benchmarks=["iperf3"]), "set network: bridge"),
    ("server-host-unknown", camp(benchmarks=[{"name": "iperf3", "server": {"host": "nosuch"}}]), "no host"),
    ("server-host-unknown-key", camp(benchmarks=[{"name": "iperf3", "server": {"host": "a", "x": 1}}]),
     "known keys of benchmarks[0].server"),
    ("server-clock-error", camp(benchmarks=[{"name": "iperf3", "server": {"host": "a", "max_clock_error": -1}}]),
     "max_clock_error"),
    # sweeps
    ("sweep-not-mapping", bench(name="sysbench-cpu", sweep=[1, 2]), "benchmarks[0].sweep"),
    ("sweep-scalar", bench(name="sysbench-cpu", sweep={"threads": 4}), "benchmarks[0].sweep"),
    ("sweep-empty-list", bench(name="sysbench-cpu", sweep={"threads": []}), "benchmarks[0].sweep"),
    ("sweep-unknown-param", bench(name="sysbench-cpu", sweep={"thread": [1, 2]}), "did you mean 'threads'"),
    ("sweep-bad-value", bench(name="sysbench-cpu", sweep={"threads": [1, 0]}), "benchmarks[0].threads"),
    ("sweep-fixed-and-swept", bench(name="sysbench-cpu", threads=1, sweep={"threads": [1, 2]}),
     "both fixed and swept"),
    ("sweep-too-many", bench(name="sysbench-cpu", sweep={"threads": list(range(1, 41)), "time": list(range(1, 41))}),
     "1600 points"),
    ("sweep-trillion", bench(name="fio", sweep={k: list(range(1, 101)) for k in
                                                ("iodepth", "runtime", "ramp_time", "bs_iops", "size", "jobs")}),
     "more than 1000"),
    ("sweep-across-entries", camp(benchmarks=[{"name": "sysbench-cpu", "time": t, "sweep": {"threads": list(
        range(1, 101))}} for t in range(1, 12)]), "with the entries before it"),
    ("sweep-instances-bad", bench(name="openssl", sweep={"instances": [1, 0]}), "instances"),
    # probes
    ("probes-unknown", camp(probes=["nosuch"]), "unknown probe 'nosuch'"),
    ("probes-twice", camp(probes=["perf", "perf"]), "listed twice"),
    ("probes-not-list", camp(probes="perf"), "probes"),
    ("probes-unknown-option", camp(probes=[{"name": "perf", "scoop": "system"}]), "did you mean 'scope'"),
    ("probes-bad-option", camp(probes=[{"name": "perf", "scope": "galaxy"}]), "probes[0] (perf).scope"),
    ("probes-energy-interval-inf", "name: a\nplatforms: [native]\nbenchmarks: [fio]\n"
                                   "probes: [{name: energy, interval: .inf}]\n", "interval"),
    ("probes-no-name", camp(probes=[{"scope": "system"}]), "probes[0]"),
    # density
    # #26: they ran as an empty benchmarks campaign on the hosts, silently; density now runs through agents
    ("density-with-hosts-own-image", {**DENSITY, "hosts": [{"name": "ref", "address": "192.0.2.1"}],
                                      "platforms": [{"name": "old", "type": "lxc", "image": {"release": "bullseye"}}]},
     "a per-platform image: is not shipped to hosts: yet"),
    ("line-with-hosts", {**LINE, "hosts": [{"name": "ref", "address": "192.0.2.1"}]},
     "hosts: experiment 'line' does not run across hosts"),
    ("density-counts-huge", section(DENSITY, counts=[1, 10**8]), "more than 4096"),
    ("density-counts-empty", section(DENSITY, counts=[]), "counts"),
    ("density-counts-unsorted", section(DENSITY, counts=[4, 2]), "increasing"),
    ("density-counts-zero", section(DENSITY, counts=[0, 1]), "increasing"),
    ("density-until-max-huge", section(DENSITY, counts={"until": "failure", "max": 10**6}), "density.counts.max"),
    ("density-until-unknown-key", section(DENSITY, counts={"until": "failure", "maxx": 3}),
     "known keys of density.counts: until, max, step"),
    ("density-until-step-huge", section(DENSITY, counts={"until": "failure", "max": 8, "step": 10**6}), "step"),
    ("density-guard-unknown-key", section(DENSITY, guard={"x": 1}), "known keys of density.guard: enabled"),
    ("density-guard-psi", section(DENSITY, guard={"max_psi_some": 500}), "density.guard.max_psi_some"),
    ("density-guard-off-unbounded", section(DENSITY, guard={"enabled": False}), "guard"),
    ("density-unknown-key", section(DENSITY, workloads="openssl"), "did you mean 'workload'"),
    ("density-workload-unknown", section(DENSITY, workload={"name": "nosuch"}), "unknown benchmark"),
    ("density-workload-pair", section(DENSITY, workload={"name": "iperf3"}), "client-server"),
    ("density-workload-bad-param", section(DENSITY, workload={"name": "openssl", "seconds": -1}), "seconds"),
    ("density-workload-unknown-param", section(DENSITY, workload={"name": "openssl", "secs": 1}),
     "its parameters: algorithm, bytes"),
    ("density-workload-integer-key", section(DENSITY, workload={"name": "openssl", 5: 1}), "density.workload"),
    ("density-image-unknown-key", {**DENSITY, "platforms": [{"name": "n", "type": "lxc",
                                                             "image": {"release": "bookworm", "x": 1}}]},
     "known keys of platforms[0].image: release, rootfs"),
    ("density-host-memory-inf", "name: d\nexperiment: density\nplatforms: [native]\n"
                                "density: {workload: openssl, counts: [1], host_memory: .inf}\n", "host_memory"),
    ("density-host-memory-beyond-host", section(DENSITY, host_memory="900T"), "MemTotal"),
    ("density-collapse-one", section(DENSITY, collapse=1), "density.collapse"),
    ("density-section-list", {**DENSITY, "density": [1]}, "give a mapping"),
    ("density-with-benchmarks", {**DENSITY, "benchmarks": ["fio"]}, "takes no benchmarks"),
    ("density-image-unknown", {**DENSITY, "platforms": [{"name": "n", "type": "native",
                                                         "image": {"release": "buster"}}]}, "buster"),
    # line
    ("line-search-unknown-key", section(LINE, search={"x": 1}), "known keys of line.search: method"),
    ("line-search-step-tiny", section(LINE, search={"method": "steps", "step": 1e-9}), "line.search.step"),
    ("line-search-start-inf", "name: l\nexperiment: line\nplatforms: [{name: ns, type: netns}]\n"
                              "line: {search: {start: .inf}}\n", "line.search.start"),
    ("line-search-loss-order", section(LINE, search={"loss": [0.5, 0.1]}), "increasing order"),
    ("line-lengths-huge", section(LINE, lengths=[1, 1000]), "outside"),
    ("line-lengths-twice", section(LINE, lengths=[2, 2]), "listed twice"),
    ("line-lengths-empty", section(LINE, lengths=[]), "line.lengths"),
    ("line-payload-small", section(LINE, payload=1), "below"),
    ("line-pinning-unknown", section(LINE, pinning=["numa"]), "unknown pinning mode"),
    ("line-rates-inf", "name: l\nexperiment: line\nplatforms: [{name: ns, type: netns}]\n"
                       "line: {latency_rates: [.inf]}\n", "rates"),
    ("line-rates-many", section(LINE, latency_rates=[0.1] * 100), "latency_rates"),
    ("line-unknown-key", section(LINE, length=[1]), "did you mean 'lengths'"),
    ("line-netns-options", {**LINE, "platforms": [{"name": "ns", "type": "netns", "cpus": 1}]}, "takes no options"),
    # migration
    ("migration-to-unknown-key", section(MIGRATION, mode="offline", to={"path": "/tmp", "x": 1}),
     "known keys of migration.to[0]: path, host, name"),
    ("migration-to-relative", section(MIGRATION, mode="offline", to={"path": "tmp"}), "must be absolute"),
    ("migration-to-neither", section(MIGRATION, mode="offline", to={"name": "x"}), "exactly one of path"),
    ("migration-counts-huge", section(MIGRATION, counts=[1000]), "from 1 to 64"),
    ("migration-counts-twice", section(MIGRATION, counts=[2, 2]), "listed twice"),
    ("migration-payload-huge", section(MIGRATION, payload="1P"), "migration.payload"),
    ("migration-offline-no-to", section(MIGRATION, mode="offline"), "needs a destination"),
    ("migration-mode-unknown", section(MIGRATION, mode="teleport"), "migration.mode"),
    ("migration-unknown-key", section(MIGRATION, count=[1]), "did you mean 'counts'"),
]


def _write(tmp_path: Path, campaign: Any) -> Path:
    f = tmp_path / "campaign.yaml"
    if isinstance(campaign, bytes):
        f.write_bytes(campaign)
    elif isinstance(campaign, str):
        f.write_text(campaign)
    else:
        f.write_text(yaml.safe_dump(campaign, allow_unicode=True))
    return f


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """Run `virtbench ARGS` through the real entry point; (exit code, stdout, stderr)."""
    import signal

    from virtbench.runner import hostlock

    state, runtime = tmp_path / "state", tmp_path / "run"
    monkeypatch.setenv("VIRTBENCH_STATE_DIR", str(state))
    monkeypatch.setenv("VIRTBENCH_RUNTIME_DIR", str(runtime))
    monkeypatch.delenv("VIRTBENCH_DB", raising=False)

    def started(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the run reached the host lock: something was about to start")

    monkeypatch.setattr(hostlock, "hold", started)
    db = tmp_path / "store.db"
    previous = signal.getsignal(signal.SIGTERM)

    def run(*args: str) -> tuple[int, str, str]:
        argv = [a.replace("{db}", f"sqlite:///{db}") for a in args]
        monkeypatch.setattr(sys, "argv", ["virtbench", *argv])
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            signal.signal(signal.SIGTERM, previous)
        out = capsys.readouterr()
        assert not db.exists(), "the results database was opened"
        assert not state.exists() and not runtime.exists(), "state was created"
        return code, out.out, out.err

    return run


def assert_refused(code: int, out: str, err: str, needle: str) -> None:
    lines = err.splitlines()
    assert code == 2, err
    assert "Traceback" not in err and out == "", err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert needle.lower() in err.lower(), err


@pytest.mark.parametrize("campaign, needle", [c[1:] for c in CAMPAIGNS], ids=[c[0] for c in CAMPAIGNS])
def test_bad_campaign_is_refused_in_one_line_before_anything_starts(cli, tmp_path: Path, campaign: Any, needle: str):
    f = _write(tmp_path, campaign)
    assert_refused(*cli("run", str(f), "--db", "{db}"), needle)


ARGUMENTS: list[tuple[str, list[str], str]] = [
    ("run-nothing", ["run"], "exactly one of"),
    ("run-file-and-quick", ["run", "c.yaml", "--quick"], "exactly one of"),
    ("run-file-and-resume", ["run", "c.yaml", "--resume", "x"], "exactly one of"),
    ("run-probe-without-quick", ["run", "c.yaml", "--probe", "perf"], "--probe goes with --quick"),
    ("run-quick-unknown-probe", ["run", "--quick", "--probe", "nosuch"], "nosuch"),
    ("run-unknown-option", ["run", "--bogus"], "no such option"),
    ("run-dash-path", ["run", "-rf.yaml"], "no such option"),
    ("run-dash-path-after-separator", ["run", "--", "-rf.yaml"], "not found"),
    ("run-missing-file", ["run", "nosuch-campaign.yaml"], "not found"),
    ("run-empty-path", ["run", ""], "exactly one of"),
    ("run-newline-path", ["run", "a\nb.yaml"], "not found"),
    ("run-directory", ["run", "."], "directory"),
    ("run-dev-null", ["run", "/dev/null"], "not a regular file"),
    ("run-proc-file", ["run", "/proc/self/status"], "not valid YAML"),
    ("run-two-files", ["run", "a.yaml", "b.yaml"], "unexpected extra argument"),
    ("run-report-flag-value", ["run", "--report=maybe", "c.yaml"], "option"),
    ("unknown-command", ["frobnicate"], "no such command"),
    ("report-min-effect-range", ["report", "--min-effect", "5"], "min-effect"),
    ("report-min-effect-nan", ["report", "--min-effect", "nan"], "min-effect"),
    ("compare-one-run", ["compare", "a"], "missing argument"),
    ("export-format", ["export", "--format", "xls"], "format"),
    ("serve-port-zero", ["serve", "--port", "0"], "port"),
    ("serve-port-word", ["serve", "--port", "http"], "port"),
    ("worker-poll-zero", ["worker", "--poll", "0"], "poll"),
    ("worker-poll-nan", ["worker", "--poll", "nan"], "not a finite number"),
    ("compare-min-effect-inf", ["compare", "a", "b", "--min-effect", "inf"], "min-effect"),
    ("image-build-profile", ["image", "build", "--profile", "huge"], "profile"),
    ("list-unknown", ["list", "nothing"], "no such command"),
]


@pytest.mark.parametrize("args, needle", [a[1:] for a in ARGUMENTS], ids=[a[0] for a in ARGUMENTS])
def test_bad_arguments_are_refused_in_one_line(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               args: list[str], needle: str):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(BASE))
    full = [args[0], "--db", "{db}", *args[1:]] if args[0] == "run" else args
    assert_refused(*cli(*full), needle)


def test_the_suite_is_broad():
    assert len(CAMPAIGNS) + len(ARGUMENTS) > 200
    assert len({c[0] for c in CAMPAIGNS}) == len(CAMPAIGNS) and len({a[0] for a in ARGUMENTS}) == len(ARGUMENTS)


def test_any_bad_input_message_stays_one_line(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The CLI escapes what a message quotes, whichever check raised it (a name with a newline,
    a line separator) so a crafted value cannot forge a second `error:` or `fix:` line."""
    import virtbench.config
    from virtbench.errors import InputError

    def forged(_path: Any, **_kw: Any) -> Any:
        raise InputError("campaign 'a\nerror: all good\u2028ok'", "fix\n  fix: rm -rf /")

    monkeypatch.setattr(virtbench.config, "read_campaign", forged)
    code, out, err = cli("run", str(_write(tmp_path, BASE)), "--db", "{db}")
    assert_refused(code, out, err, "campaign 'a\\nerror: all good\\u2028ok'")
    assert err.splitlines()[0].endswith(" (fix: fix\\n  fix: rm -rf /)")


@pytest.mark.parametrize("run_id", ["*", "../../x", "-rf", "a b", "x" * 80, "vb-*"])
def test_cleanup_of_a_run_id_that_is_no_run_id_is_refused(cli, run_id: str):
    """`cleanup --run` matches leftovers by the id: a glob or a path in it was taken as given
    (before: `cleanup --run '*'` went on to match names with it)."""
    code, out, err = cli("cleanup", "--run", run_id)
    assert_refused(code, out, err, "is not a run id")

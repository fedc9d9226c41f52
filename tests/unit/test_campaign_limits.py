"""Issue #25's campaign defects, each reproduced: budgets by arithmetic, bounds before work, one line.

Each test failed before its fix (see the commit message of the fix).
"""
from __future__ import annotations

import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from virtbench.config import load_yaml, parse_campaign
from virtbench.errors import InputError

BASE: dict[str, Any] = {"name": "c", "platforms": ["native", "docker"], "benchmarks": [{"name": "fio", "runtime": 1}]}


def refused(data: dict[str, Any]) -> str:
    with pytest.raises(InputError) as info:
        parse_campaign(data, "c.yaml")
    message = str(info.value)
    assert "\n" not in message
    return message


def _sweep(values: int, params: int) -> dict[str, Any]:
    names = ("iodepth", "runtime", "ramp_time", "bs_iops", "size", "jobs")[:params]
    return {**BASE, "benchmarks": [{"name": "fio", "sweep": {n: list(range(1, values + 1)) for n in names}}]}


def test_an_oversized_sweep_is_refused_in_constant_memory():
    """Before: the 2,560,000 points of this 800-byte campaign were built (300 MB) before the cap."""
    refused(_sweep(40, 2))  # warm: plugins and modules imported before measuring
    tracemalloc.start()
    try:
        message = refused(_sweep(40, 4))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "40 x 40 x 40 x 40 = 2560000 points" in message and "more than 1000" in message
    assert peak < 2 << 20, f"{peak} bytes allocated to refuse it"


def test_a_trillion_point_sweep_is_refused_at_once():
    """Before: itertools.product of 100^6 was materialized (the process died of memory)."""
    started = time.monotonic()
    message = refused(_sweep(100, 6))
    assert "1000000000000 points" in message and time.monotonic() - started < 1


def test_points_are_counted_across_the_campaign():
    entries = [{"name": "sysbench-cpu", "time": t, "sweep": {"threads": list(range(1, 101))}} for t in range(1, 12)]
    assert "benchmarks[10].sweep" in refused({**BASE, "benchmarks": entries})


def test_executions_are_counted_before_the_schedule_is_built():
    many = {**BASE, "repetitions": 10000, "benchmarks": [
        {"name": "sysbench-cpu", "sweep": {"threads": list(range(1, 101))}}]}
    message = refused(many)
    assert "10001 rounds x 2 platforms x 100 benchmark executions" in message and "more than 1000000" in message
    lines = {**LINE, "repetitions": 10000, "line": {"lengths": [64, 128, 254], "pinning": ["none", "node", "core"]}}
    assert "10001 rounds x 1 platforms x 1338 line nodes per round" in refused(lines)
    moves = {**MIGRATION, "repetitions": 5000, "migration": {"mode": "lifecycle", "counts": list(range(1, 65))}}
    assert "x 2080 instances moved per round" in refused(moves)
    assert parse_campaign({**MIGRATION, "repetitions": 20, "migration": {"mode": "lifecycle", "counts": [1, 8]}})


@pytest.mark.parametrize("seed", [2**31, 2**40, -(2**31) - 1])
def test_a_seed_beyond_the_database_column_is_refused(seed):
    """Before: accepted, then a crash at insert on PostgreSQL (a 32-bit column) after probing and the image build."""
    assert "seed" in refused({**BASE, "seed": seed})


def test_seeds_the_column_holds_are_kept():
    for seed in (0, 2**31 - 1, -(2**31)):
        assert parse_campaign({**BASE, "seed": seed}).seed == seed


@pytest.mark.parametrize("memory, needle", [(float("inf"), "inf is not a size"), (float("nan"), "nan is not a size"),
                                            (-5, "-5 is not a size"), ("-1G", "is not a size"),
                                            ("2000000T", "1P at most"), (2**70, "1P at most")])
def test_impossible_sizes_are_refused(memory, needle):
    """Before: .inf raised OverflowError (a traceback), nan leaked Python's own message."""
    message = refused({**BASE, "platforms": ["native", {"name": "d", "type": "docker", "memory": memory}]})
    assert "platforms[1].memory" in message and needle in message


def test_an_unknown_release_is_refused_at_parse_time():
    """Before: accepted here; refused by the image build, after the platform probes had started instances."""
    message = refused({**BASE, "image": {"release": "buster"}})
    assert "image.release: unknown Debian release 'buster'" in message and "bookworm" in message
    assert "did you mean 'bookworm'" in refused({**BASE, "image": {"release": "bookwrm"}})
    assert "unknown image profile 'tiny'" in refused({**BASE, "image": {"profile": "tiny"}})
    from virtbench.images.build import RELEASES

    for release in RELEASES:
        assert parse_campaign({**BASE, "image": {"release": release}}).image.release == release


DENSITY = {"name": "d", "experiment": "density", "platforms": ["native"],
           "density": {"workload": {"name": "openssl", "seconds": 1}, "counts": [1, 2]}}


def test_density_counts_have_the_cap_until_max_has():
    """Before: counts: [1, 100000000] was accepted (a run started and ramped until the guard tripped)."""
    message = refused({**DENSITY, "density": {**DENSITY["density"], "counts": [1, 10**8]}})
    assert "density.counts" in message and "more than 4096" in message
    assert parse_campaign({**DENSITY, "density": {**DENSITY["density"], "counts": [1, 4096]}})


LINE = {"name": "l", "experiment": "line", "baseline": "ns", "platforms": [{"name": "ns", "type": "netns"}], "line": {}}
MIGRATION = {"name": "m", "experiment": "migration", "platforms": ["lxc"], "migration": {"mode": "offline"}}


@pytest.mark.parametrize("campaign, path, keys, parent", [
    ({**DENSITY, "density": {**DENSITY["density"], "guard": {"x": 1}}}, "density.guard.x",
     "known keys of density.guard: enabled, min_available", "workload"),
    ({**DENSITY, "density": {**DENSITY["density"], "counts": {"until": "failure", "maxx": 4}}}, "density.counts.maxx",
     "did you mean 'max'? known keys of density.counts: until, max, step", "workload"),
    ({**LINE, "line": {"search": {"x": 1}}}, "line.search.x", "known keys of line.search: method, loss", "lengths"),
    ({**MIGRATION, "migration": {"mode": "offline", "to": {"path": "/tmp", "x": 1}}}, "migration.to[0].x",
     "known keys of migration.to[0]: path, host, name", "counts"),
    ({**BASE, "adaptive": {"targt": 0.1}}, "adaptive.targt", "known keys of adaptive: target, max_repetitions",
     "platforms"),
    ({**BASE, "image": {"relase": "bookworm"}}, "image.relase", "known keys of image: profile, release", "platforms"),
    ({**BASE, "benchmarks": [{"name": "iperf3", "server": {"host": "a", "x": 1}}]}, "benchmarks[0].server.x",
     "known keys of benchmarks[0].server: host, max_clock_error", "time"),
])
def test_nested_unknown_keys_name_the_nested_section_and_its_keys(campaign, path, keys, parent):
    """Before: `density.guard.x: unknown key; known keys: workload, counts, ...` (the parent's)."""
    message = refused(campaign)
    assert f"{path}: unknown key" in message and keys in message and parent not in message.split("known keys")[1]


# -- the file --------------------------------------------------------------------------------

def _load(tmp_path: Path, data: bytes | str) -> str:
    from virtbench.config import load_campaign

    f = tmp_path / "c.yaml"
    f.write_bytes(data if isinstance(data, bytes) else data.encode())
    with pytest.raises(InputError) as info:
        load_campaign(f)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_a_file_that_is_not_utf8_is_one_line(tmp_path: Path):
    """Before: UnicodeDecodeError, a traceback."""
    assert "not UTF-8 text (byte 6" in _load(tmp_path, b"name: \xff\xfe\nplatforms: [native]\n")


def test_a_binary_file_is_one_line(tmp_path: Path):
    """Before: YAML's two-line message ("...\\n  in '<unicode string>'")."""
    assert "not a text file" in _load(tmp_path, bytes(range(32)))


def test_deep_nesting_is_refused_while_scanning(tmp_path: Path):
    """Before: 3,000 levels raised RecursionError (a traceback); 100,000 took 5 minutes to scan first."""
    started = time.monotonic()
    assert "nested deeper than 32 levels" in _load(tmp_path, "a: " + "[" * 3000 + "]" * 3000)
    assert "nested deeper than 32 levels" in _load(tmp_path, "[" * 100_000 + "]" * 100_000)
    assert "nested deeper" in _load(tmp_path, "".join("  " * i + "a:\n" for i in range(100)))
    assert time.monotonic() - started < 10


def test_alias_bombs_are_refused_before_anything_is_built():
    """Before: 10^9 values behind 9 lines of anchors were handed to the validators to walk."""
    lines = ["a0: &a0 [x,x,x,x,x,x,x,x,x,x]"] + [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]"
                                                 for i in range(1, 10)]
    load_yaml("a: [1]", "warm")
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match="more than 100000 values once its aliases"):
            load_yaml("\n".join(lines), "c.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20
    assert load_yaml("a: &a {x: 1}\nb: *a\n", "c.yaml") == {"a": {"x": 1}, "b": {"x": 1}}  # small aliases are fine


def test_a_key_given_twice_is_refused():
    """Before: the later value silently won (repetitions: 5 then repetitions: 50)."""
    with pytest.raises(InputError, match="key 'repetitions' given twice"):
        load_yaml("repetitions: 5\nrepetitions: 50\n", "c.yaml")
    assert load_yaml("base: &b {x: 1}\nc: {<<: *b, x: 2}\n", "c.yaml")["c"] == {"x": 2}  # merge keys still work


def test_huge_text_and_numbers_are_one_line(tmp_path: Path):
    with pytest.raises(InputError, match="more than 1048576"):
        load_yaml("a: " + "x" * (1 << 20), "c.yaml")
    assert "digits" in _load(tmp_path, "name: a\nrepetitions: " + "9" * 5000 + "\n")


def test_non_string_keys_are_unknown_keys():
    """Before: Campaign(**data) raised TypeError (keywords must be strings): a traceback."""
    assert "unknown key 1" in refused({**BASE, 1: "x"})


# -- the host --------------------------------------------------------------------------------

def _check(data: dict[str, Any], tmp_path: Path, **figures: int) -> str:
    from virtbench.config import check_host
    from virtbench.platforms.base import Paths

    figures = {"cpus": 2, "memory": 4 << 30, "free": 1 << 30, **figures}
    with pytest.raises(InputError) as info:
        check_host(parse_campaign(data), Paths(state=tmp_path / "state", runtime=tmp_path / "run"), **figures)
    return str(info.value)


def _docker(**options: Any) -> dict[str, Any]:
    return {**BASE, "platforms": ["native", {"name": "d", "type": "docker", **options}]}


def test_engine_limits_beyond_the_host_are_refused_with_its_figures(tmp_path: Path):
    """Before: accepted, then the engine failed in every round (or the guest never booted)."""
    assert "cpus 8 is more than this host's 2 CPUs" in _check(_docker(cpus=8), tmp_path)
    assert "cpuset '0-7' names CPU 7; this host's CPUs are 0-1" in _check(_docker(cpuset="0-7"), tmp_path)
    message = _check(_docker(memory="16G"), tmp_path)
    assert "memory 16.0 GiB is more than this host's 4.0 GiB" in message and "fix: give memory:" in message
    vm = {**BASE, "platforms": ["native", {"name": "vm", "type": "qemu", "memory": "8G"}]}
    assert "this host's 4.0 GiB" in _check(vm, tmp_path)
    stacked = {**BASE, "platforms": ["native", {"name": "vm", "type": "qemu", "vcpus": 2, "memory": "2G"},
                                     {"name": "vm-docker", "type": "docker", "inside": "vm", "cpus": 3}]}
    assert "platforms[2] 'vm-docker': cpus 3 is more than its VM 'vm''s 2 CPUs" in _check(stacked, tmp_path, cpus=64)
    stacked["platforms"][2] = {"name": "vm-docker", "type": "docker", "inside": "vm", "memory": "3G"}
    assert "memory 3.0 GiB is more than its VM 'vm''s 2.0 GiB" in _check(stacked, tmp_path, memory=64 << 30)
    confined = {**DENSITY, "density": {**DENSITY["density"], "host_memory": "8G"}}
    assert "density.host_memory: 8.0 GiB is more than this host's 4.0 GiB" in _check(confined, tmp_path)


def test_a_papers_board_size_runs_on_a_board_of_that_size(tmp_path: Path):
    """Study 000's paper preset confines to 8G, its board's nominal RAM; an "8 GB" board reports
    less (a Raspberry Pi 5: about 7.8 GiB MemTotal). Before: refused on the paper's own board."""
    from virtbench.config import check_host
    from virtbench.platforms.base import Paths

    confined = parse_campaign({**DENSITY, "density": {**DENSITY["density"], "host_memory": "8G"}})
    check_host(confined, Paths(state=tmp_path / "s", runtime=tmp_path / "r"), cpus=4, memory=7_900 << 20, free=1 << 40)
    one_gb = parse_campaign({**DENSITY, "density": {**DENSITY["density"], "host_memory": "1G"}})
    check_host(one_gb, Paths(state=tmp_path / "s", runtime=tmp_path / "r"), cpus=4, memory=910 << 20, free=1 << 40)
    big = {**DENSITY, "density": {**DENSITY["density"], "host_memory": "8G"}}
    assert "even as a board's nominal size" in _check(big, tmp_path, memory=6 << 30)  # a 6 GiB host is not an 8 GB board


def test_scratch_files_beyond_the_free_space_are_refused(tmp_path: Path):
    """Before: fio and dd started and failed with ENOSPC in every round."""
    fio = _check({**BASE, "benchmarks": [{"name": "fio", "size": "4G"}]}, tmp_path)
    assert "benchmark 'fio': needs 4.0 GiB of files" in fio and "has 1.0 GiB free" in fio
    assert str(tmp_path) in fio and "VIRTBENCH_STATE_DIR" in fio  # the nearest existing directory
    dd = _check({**BASE, "benchmarks": [{"name": "dd", "bs": "8M", "count": 256}]}, tmp_path)
    assert "needs 2.0 GiB" in dd
    many = _check({**BASE, "benchmarks": [{"name": "fio", "size": "512M", "instances": 4}]}, tmp_path)
    assert "in each of 4 instances" in many
    lxc = {**BASE, "platforms": ["native", {"name": "l", "type": "lxc", "disk": "2G"}]}
    assert "a disk image of 2.0 GiB" in _check(lxc, tmp_path)


def test_what_the_host_holds_passes(tmp_path: Path):
    from virtbench.config import check_host
    from virtbench.platforms.base import Paths

    ok = {**BASE, "platforms": ["native", {"name": "d", "type": "docker", "cpus": 2, "cpuset": "0-1",
                                           "memory": "1G"}], "benchmarks": [{"name": "fio", "size": "256M"}]}
    check_host(parse_campaign(ok), Paths(state=tmp_path, runtime=tmp_path), cpus=2, memory=4 << 30, free=1 << 30)


def test_a_queued_run_is_refused_before_any_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The web's queue: the worker checks the host before probing, and the run says why it failed."""
    import os

    from virtbench.experiments.benchmarks import session
    from virtbench.platforms.base import Paths
    from virtbench.runner import execute
    from virtbench.store.db import Store

    def probe(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("a platform was probed")

    monkeypatch.setattr(session, "availability_of", probe)
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    too_many = (os.cpu_count() or 1) + 1
    run_id = execute.enqueue(store, parse_campaign(_docker(cpus=too_many)))
    paths = Paths(state=tmp_path / "state", runtime=tmp_path / "run")
    with pytest.raises(InputError, match=f"cpus {too_many} is more than this host's"):
        execute.run_queued(store, run_id, paths)
    run = store.run(run_id)
    assert run.status == "failed" and "more than this host's" in (run.error or "")


def test_the_cli_refuses_a_campaign_beyond_the_host_before_the_store_is_opened(tmp_path: Path):
    import os
    import subprocess
    import sys

    import yaml

    (tmp_path / "c.yaml").write_text(yaml.safe_dump(_docker(memory="900T")))
    db = tmp_path / "store.db"
    r = subprocess.run([sys.executable, "-m", "virtbench", "run", str(tmp_path / "c.yaml"), "--db", f"sqlite:///{db}"],
                       capture_output=True, text=True, timeout=120,
                       env={"PATH": "/usr/bin:/bin", "VIRTBENCH_STATE_DIR": str(tmp_path / "state"),
                            "VIRTBENCH_RUNTIME_DIR": str(tmp_path / "run"),
                            **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"}})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "(MemTotal)" in lines[0] and " (fix: give memory:" in lines[0]
    assert not db.exists() and not (tmp_path / "state").exists()


def test_each_host_of_a_hosts_campaign_is_checked_with_its_own_figures(monkeypatch: pytest.MonkeyPatch):
    """A board with 4 CPUs and 1 GiB refuses `cpus: 8` after the SSH check, before anything is
    built here or shipped there; the local host is checked with this machine's figures."""
    from types import SimpleNamespace

    from virtbench.platforms.base import Paths
    from virtbench.runner import parts as hosts

    calls: list[object] = []

    class Board:
        def __init__(self, spec: Any, runtime: Any) -> None:
            self.spec = spec

        def open(self) -> None:
            calls.append("open")

        def run(self, argv: list[str], **_kw: Any) -> Any:
            calls.append(argv)
            return SimpleNamespace(ok=True, returncode=0, stdout="4\nMemTotal: 1048576 kB\nMemFree: 1 kB\n", stderr="")

        def close(self) -> None:
            pass

    from virtbench.experiments.benchmarks.kind import Benchmarks

    monkeypatch.setattr(hosts, "SSHExecutor", Board)
    monkeypatch.setattr(Benchmarks, "prepare", lambda *a, **k: calls.append("prepare"))
    monkeypatch.setattr(hosts, "_prepare_remote", lambda *a, **k: calls.append("ship"))
    paths = Paths(Path("/nonexistent-state"), Path("/nonexistent-run"))
    board = {"name": "pi", "address": "192.0.2.7"}
    for options, needle in (({"cpus": 8}, "host pi: platforms[1] 'd': cpus 8 is more than this host's 4 CPUs"),
                            ({"memory": "2G"}, "host pi: platforms[1] 'd': memory 2.0 GiB is more than this host's 1.0")):
        c = parse_campaign({**BASE, "hosts": [board], "platforms": ["native", {"name": "d", "type": "docker",
                                                                               **options}]})
        with pytest.raises(InputError) as exc:
            hosts.prepare_parts(Benchmarks(c, paths), paths, 1, lambda m: None)
        assert exc.value.message.startswith(needle), exc.value.message
    assert "prepare" not in calls and "ship" not in calls
    local = parse_campaign({**BASE, "hosts": ["local", board], "platforms": ["native", {"name": "d", "type": "docker",
                                                                                        "cpus": 4000}]})
    with pytest.raises(InputError, match="host local: platforms.1. 'd': cpus 4000"):
        hosts.prepare_parts(Benchmarks(local, paths), paths, 1, lambda m: None)


def test_a_study_part_beyond_this_host_is_skipped_with_the_reason(monkeypatch: pytest.MonkeyPatch):
    """The paper's 8 GiB confined host on a 4 GiB machine: skipped with the figure (or refused,
    exit 2, when asked for by name), never a run that fails after the parts before it."""
    from virtbench import hostinfo
    from virtbench.platforms.base import Availability, Paths
    from virtbench.studies import run as srun
    from virtbench.studies.capabilities import Capabilities
    from virtbench.studies.registry import study

    class Everything(Capabilities):
        def __init__(self) -> None:
            super().__init__(Paths())

        def check(self, name: str) -> Availability:
            return Availability(True, "", "")

        def platforms(self, types: Any) -> dict[str, Availability]:
            return {t: Availability(True, "", "") for t in types}

    monkeypatch.setattr(hostinfo, "meminfo", lambda text=None: {"MemTotal": 4 << 30})
    by = {p.stem: p for p in srun.plan(study("000"), "paper", Everything())}
    ram = by["study000-density-ram-paper"]
    assert ram.campaign is None and "host_memory: 8.0 GiB is more than this host's 4.0 GiB" in ram.skipped
    assert by["study000-density-hostram-2g-paper"].campaign is not None  # 2 GiB fits
    with pytest.raises(InputError, match="part density-ram: density.host_memory: 8.0 GiB"):
        srun.plan(study("000"), "paper", Everything(), ["density-ram"])


def test_a_steps_search_of_a_million_trials_is_refused_with_the_step_that_fits(monkeypatch: pytest.MonkeyPatch):
    """`steps` raises the rate by `step` until loss: 1 pkt/s steps up to a 1.2 Mpkt/s generator were
    1.2 million 20 s trials per point (before: accepted, then running for months)."""
    from types import SimpleNamespace

    from virtbench.experiments.line import kind
    from virtbench.platforms.base import Paths

    campaign = parse_campaign({**LINE, "line": {"lengths": [1], "search": {"method": "steps", "start": 1000,
                                                                            "step": 1}}})
    line = kind.Line(campaign, Paths())
    monkeypatch.setattr(kind.proc, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setattr(kind.proc, "run", lambda *a, **k: SimpleNamespace(stdout="iperf version 2.1.8", stderr=""))
    monkeypatch.setattr(line, "_check_memory", lambda section: None)
    monkeypatch.setattr(line, "_generator_top_rate", lambda section: 1_200_000.0)
    with pytest.raises(InputError) as info:
        line.prepare(lambda m: None)
    assert "up to 1199001 trials of 20 s per point" in info.value.message and info.value.fix == "give step: 1200 or more"

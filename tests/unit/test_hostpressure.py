"""The host/instance pressure reader on a tree recorded on this machine (cgroup v1 hybrid,
kernel 6.18: tests/data/pressure/hybrid, see tests/data/README.md) and on the live host."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from virtbench.probes.hostpressure import PressureReader, parse_proc_cgroup, parse_proc_stat, parse_psi

TREE = Path(__file__).resolve().parent.parent / "data" / "pressure" / "hybrid"


def test_recorded_host_values():
    r = PressureReader(TREE)
    assert r.mem_available() == 23253884 * 1024
    cpu = r.psi("cpu")
    assert cpu is not None and cpu.some_avg10 == 95.51 and cpu.some_total_us == 241981471
    io = r.psi("io")
    assert io is not None and io.full_total_us == 5411926
    t = r.cpu_times()
    assert t is not None and t.total == 51419 + 14371 + 67664 + 662 + 241 + 351
    assert t.busy == t.total - 67664 - 662


def test_recorded_cgroup_v1_hybrid_usage():
    """Memory and CPU come from the v1 controllers the process is in; the unified cgroup's
    cpu.stat (which holds no controller in hybrid mode) is not used for them, but its PSI is."""
    u = PressureReader(TREE).process_usage(4242)
    assert u is not None
    assert u.path == "/vb-probes-rec"
    assert u.memory_bytes == 57425920
    assert u.cpu_ns == 167139126
    assert u.psi["cpu"].some_total_us == 108736 and set(u.psi) == {"cpu", "memory", "io"}


def test_gone_process_has_no_usage():
    assert PressureReader(TREE).process_usage(999999) is None


def test_parsers_reject_garbage():
    with pytest.raises(ValueError, match="PSI"):
        parse_psi("nonsense\n")
    with pytest.raises(ValueError, match="cpu"):
        parse_proc_stat("intr 1 2 3\n")
    assert parse_proc_cgroup("0::/a/b\n4:memory:/x\n1:name=systemd:/\n") == {"": "/a/b", "memory": "/x", "systemd": "/"}


def test_utilisation_between_two_readings():
    a = parse_proc_stat("cpu  100 0 0 100 0 0 0 0 0 0\n")
    b = parse_proc_stat("cpu  150 0 0 150 0 0 0 0 0 0\n")
    assert b.utilisation_since(a) == 0.5 and a.utilisation_since(a) is None


@pytest.mark.skipif(not os.path.exists("/proc/pressure/memory"), reason="kernel without PSI")
def test_live_host():
    r = PressureReader()
    assert r.mem_available() and r.psi("memory") is not None
    u = r.process_usage(os.getpid())
    assert u is not None and u.memory_bytes and u.cpu_ns


def test_usage_files_read_the_same_values_as_the_full_lookup():
    r = PressureReader(TREE)
    files = r.usage_files(4242)
    assert files is not None and files.read() == (57425920, 167139126)
    assert r.usage_files(999999) is None

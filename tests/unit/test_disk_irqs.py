"""Which CPUs serve the disk's interrupts: the quick campaign keeps fio off a CPU that serves them all."""
from __future__ import annotations

from pathlib import Path

from virtbench import hostinfo
from virtbench.benchmarks.fio import Fio, FioParams

DATA = Path(__file__).parents[1] / "data"


def test_one_cpu_serving_a_virtio_disk_is_found_on_the_recorded_table():
    text = (DATA / "interrupts" / "after.txt").read_text()
    assert hostinfo.irq_cpus("virtio1", text) == {1}  # virtio1-req.0: every completion on CPU1
    assert hostinfo.irq_cpus("virtio9", text) is None  # no such device: nothing to keep off
    assert hostinfo.cpus_off(hostinfo.irq_cpus("virtio1", text), [0, 1]) == "0"


def test_interrupts_spread_over_the_cpus_keep_fio_free():
    text = (DATA / "hostfacts" / "nvme-4cpu.interrupts").read_text()
    assert hostinfo.irq_cpus("nvme0", text) == {0, 1, 2, 3}  # one queue per CPU: nobody is charged alone
    assert hostinfo.cpus_off({0, 1, 2, 3}, [0, 1, 2, 3]) is None
    assert hostinfo.cpus_off({1}, [0, 1, 2, 3]) == "0,2,3"
    assert hostinfo.cpus_off({0}, [0]) is None  # one CPU: nowhere else to go


def test_this_machines_disk_is_resolved_from_a_path():
    cpus = hostinfo.disk_irq_cpus("/")
    assert cpus is None or cpus <= set(range(len(Path("/proc/interrupts").read_text().splitlines()[0].split())))


def test_fio_passes_cpus_allowed_on_every_platform_alike():
    argv = Fio(FioParams(cpus_allowed="0,2-3", jobs=["rand_read_iops"])).command("/w")
    assert argv.index("--cpus_allowed=0,2-3") < argv.index("--name=rand_read_iops")  # global: every job
    assert not any(a.startswith("--cpus_allowed") for a in Fio(FioParams()).command("/w"))


def test_quick_campaign_pins_fio_off_the_disk_interrupt_cpu(monkeypatch, tmp_path):
    from virtbench.experiments.benchmarks import quick
    from virtbench.platforms.base import Paths

    monkeypatch.setattr(hostinfo, "disk_irq_cpus", lambda _p: {1})
    monkeypatch.setattr(quick.os, "sched_getaffinity", lambda _pid: {0, 1})
    said: list[str] = []
    assert quick._fio_cpus(Paths(state=tmp_path / "not-yet"), said.append) == "0"
    assert "CPU 0" in said[0]
    fio = next(b for b in quick._campaign(["native", "docker"], 3, 1, None, None, "0").benchmarks if b.name == "fio")
    assert fio.params["cpus_allowed"] == "0"
    vm = quick._campaign(["native", {"name": "kvm", "type": "qemu", "accel": "kvm", "memory": "1G"}], 3, 1, None, None, "0")
    assert "cpus_allowed" not in next(b for b in vm.benchmarks if b.name == "fio").params  # a guest's CPUs are its own

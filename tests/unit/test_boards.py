"""ARM boards' host facts, read from /proc/cpuinfo recorded on real boards (tests/data/hostfacts,
sources in tests/data/README.md), and from constructed sysfs trees for what no board here has."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from virtbench import boards, hostinfo
from virtbench.analysis.summary import Row
from virtbench.report import boards as report_boards

DATA = Path(__file__).parent.parent / "data" / "hostfacts"


def cpuinfo(name: str) -> dict:
    return hostinfo.cpuinfo((DATA / name).read_text())


def test_raspberry_pi_4_on_a_64_bit_kernel_is_four_cortex_a72_without_aes() -> None:
    facts = cpuinfo("rpi4b-arm64.cpuinfo")
    assert facts["cpu_model"] == "4x Cortex-A72"
    # the BCM2711 has no ARMv8 crypto extensions: the studies' slow AES on the Pi 4
    assert facts["aes"] is False and facts["crypto"] == {"aes": False, "pmull": False, "sha1": False, "sha2": False}


def test_rk3588_big_little_names_both_clusters_and_all_crypto_extensions() -> None:
    facts = cpuinfo("rock5b-rk3588.cpuinfo")
    assert facts["cpu_model"] == "4x Cortex-A55 + 4x Cortex-A76"
    assert facts["crypto"] == {"aes": True, "pmull": True, "sha1": True, "sha2": True}
    assert {"aes", "pmull", "sha1", "sha2", "asimd"} <= set(facts["cpu_flags"])


def test_32_bit_kernel_keeps_its_own_line_beside_the_decoded_core() -> None:
    facts = cpuinfo("rpi4b-armhf-tail.cpuinfo")
    assert facts["cpu_model"] == "1x Cortex-A72 (ARMv7 Processor rev 3 (v7l))"
    assert facts["aes"] is False and "neon" in facts["cpu_flags"]


def test_x86_aes_ni_pclmulqdq_and_sha_ni_count_as_the_same_crypto_extensions() -> None:
    facts = cpuinfo("amd-epyc-kvm-amd64.cpuinfo")
    assert facts["cpu_model"] == "AMD EPYC"
    assert facts["crypto"] == {"aes": True, "pmull": True, "sha1": True, "sha2": True}


def test_unknown_parts_are_named_by_vendor_and_code_not_dropped() -> None:
    text = ("processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xfff\n\n"
            "processor\t: 1\nCPU implementer\t: 0x99\nCPU part\t: 0x001\n")
    assert boards.cpu_cores(text) == ["ARM part 0xfff", "implementer 0x99 part 0x001"]


def test_vcgencmd_throttled_bits_now_and_since_boot() -> None:
    got = boards.parse_throttled("throttled=0x50005\n")
    assert got == {"raw": 0x50005, "now": ["under-voltage", "throttled"],
                   "since_boot": ["under-voltage", "throttled"]}
    assert boards.parse_throttled("throttled=0x0")["now"] == []
    assert boards.parse_throttled("error=1 error_msg=\"Command not registered\"") is None


def test_a_throttle_that_began_and_ended_inside_an_execution_is_caught_by_the_since_boot_bits() -> None:
    before = {"firmware": boards.parse_throttled("throttled=0x0")}
    after = {"firmware": boards.parse_throttled("throttled=0x40000")}  # bit 18: throttling has occurred
    assert boards.throttled_during(before, after) == ["throttled"]
    assert boards.throttled_during(after, after) == []  # an old event, before this execution


def _sysfs(root: Path, limit_khz: int, temp: int = 45000) -> None:
    pol = root / "sys/devices/system/cpu/cpufreq/policy0"
    pol.mkdir(parents=True, exist_ok=True)
    (pol / "scaling_cur_freq").write_text(f"{limit_khz}\n")
    (pol / "cpuinfo_max_freq").write_text("1800000\n")
    (pol / "scaling_max_freq").write_text(f"{limit_khz}\n")
    zone = root / "sys/class/thermal/thermal_zone0"
    zone.mkdir(parents=True, exist_ok=True)
    (zone / "temp").write_text(f"{temp}\n")


def test_a_clock_ceiling_lowered_during_an_execution_is_throttling(tmp_path: Path) -> None:
    _sysfs(tmp_path, 1800000)
    before = boards.throttle_state(tmp_path)
    assert before["temp_c"] == 45.0 and before["cpufreq"]["policy0"]["limit_khz"] == 1800000
    _sysfs(tmp_path, 1200000, temp=85000)
    after = boards.throttle_state(tmp_path)
    assert boards.throttled_during(before, after) == ["policy0 clock limit lowered to 1200 MHz"]
    assert boards.throttled_during(after, after) == []
    assert boards.throttle_attachment(after, after) == []
    att = boards.throttle_attachment(before, after)
    assert att[0]["kind"] == "throttle" and att[0]["data"]["why"]


def test_rpi_volt_alarm_is_under_voltage(tmp_path: Path) -> None:
    hw = tmp_path / "sys/class/hwmon/hwmon0"
    hw.mkdir(parents=True)
    (hw / "name").write_text("rpi_volt\n")
    (hw / "in0_lcrit_alarm").write_text("1\n")
    assert boards.throttled_during({}, boards.throttle_state(tmp_path)) == ["under-voltage"]


def _block_tree(root: Path, device_path: str, disk: str, partition: bool = True) -> None:
    """sys/dev/block/MAJ:MIN of tmp_path's own filesystem, pointing into a device tree like a board's."""
    st = os.stat(root)
    dev = root / "sys" / device_path.lstrip("/")
    part = dev / f"{disk}p2" if partition else dev
    part.mkdir(parents=True)
    if partition:
        (part / "partition").write_text("2\n")
    link = root / f"sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    link.parent.mkdir(parents=True)
    link.symlink_to(part)


@pytest.mark.parametrize("device_path,disk,card,kind", [
    ("devices/platform/emmc2bus/fe340000.mmc/mmc_host/mmc0/mmc0:aaaa/block/mmcblk0", "mmcblk0", "SD", "SD card"),
    ("devices/platform/sdhci/mmc_host/mmc1/mmc1:0001/block/mmcblk1", "mmcblk1", "MMC", "eMMC"),
    ("devices/platform/scb/fd500000.pcie/pci0000:00/0000:00:00.0/0000:01:00.0/usb2/2-1/2-1:1.0/host0/"
     "target0:0:0/0:0:0:0/block/sda", "sda", "", "USB"),
    ("devices/platform/axi/1000110000.pcie/pci0000:00/0000:00:00.0/0000:01:00.0/nvme/nvme0/nvme0n1", "nvme0n1", "",
     "NVMe"),
    ("devices/pci0000:00/0000:00:04.0/virtio1/block/vda", "vda", "", "virtio"),
])
def test_storage_kind_under_the_scratch_directory(tmp_path: Path, device_path: str, disk: str, card: str,
                                                  kind: str) -> None:
    _block_tree(tmp_path, device_path, disk)
    if card:
        dev = tmp_path / "sys" / device_path
        (dev / "device").mkdir()
        (dev / "device/type").write_text(f"{card}\n")
    got = boards.storage_kind(tmp_path, root=tmp_path)
    assert got["kind"] == kind and got["device"] == disk


def test_storage_kind_of_this_machine_is_read_for_real() -> None:
    got = boards.storage_kind("/")
    assert got["kind"] and got["kind"] != "unknown" and got["fs"]


def test_board_model_from_the_device_tree(tmp_path: Path) -> None:
    dt = tmp_path / "proc/device-tree"
    dt.mkdir(parents=True)
    (dt / "model").write_bytes(b"Raspberry Pi 5 Model B Rev 1.0\x00")
    assert boards.board_model(tmp_path) == "Raspberry Pi 5 Model B Rev 1.0"


def test_host_facts_carry_board_crypto_storage_and_throttle() -> None:
    facts = hostinfo.facts()
    assert {"board", "crypto", "storage", "throttle"} <= set(facts)
    assert facts["crypto"]["aes"] == facts["aes"]


def _row(platform: str, benchmark: str) -> Row:
    return Row(benchmark=benchmark, metric="m", unit="x", higher_is_better=True, category="cpu", platform=platform,
               n=3, failed=0)


def test_throttled_samples_get_a_quality_warning_on_their_results_only() -> None:
    rows = [_row("native", "openssl"), _row("runc", "openssl"), _row("native", "fio")]
    events = [{"platform": "native", "benchmark": "openssl", "round": 2, "warmup": False, "why": ["under-voltage"]},
              {"platform": "runc", "benchmark": "openssl", "round": 0, "warmup": True, "why": ["throttled"]}]
    report_boards.flag_rows(rows, events)
    assert [f["check"] for f in rows[0].quality] == ["throttle"]
    assert "under-voltage" in rows[0].quality[0]["message"] and rows[0].quality[0]["severity"] == "warn"
    assert rows[1].quality == [] and rows[2].quality == []  # warm-ups are not counted; other cells untouched


def test_hardware_section_says_an_emulated_host_is_emulated() -> None:
    hw = report_boards.hardware({"hostname": "g", "arch": "aarch64", "cpu_model": "2x Cortex-A57",
                                 "crypto": {"aes": True}, "virtualization": {"vm": "qemu", "container": "none"}})
    assert hw["emulated"] is True and hw["aes"] is True
    assert report_boards.hardware({"virtualization": {"vm": "kvm"}})["emulated"] is False


def test_memory_controller_enabled_here_and_disabled_as_raspberry_pi_os_boots() -> None:
    assert hostinfo.memory_controller_problem((DATA / "debian12-amd64.cgroups").read_text()) == ""
    # recorded in the arm64 test guest booted with cgroup_disable=memory, as Raspberry Pi OS boots
    disabled = DATA / "bookworm-arm64-guest-cgroup_disable_memory.cgroups"
    assert "disabled" in hostinfo.memory_controller_problem(disabled.read_text())
    text = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t0\t1\t1\nmemory\t0\t1\t0\n"
    assert "Raspberry Pi OS" in hostinfo.memory_controller_problem(text)
    assert "no cgroup memory" in hostinfo.memory_controller_problem("#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
                                                                 "cpu\t0\t1\t1\n")
    assert "cgroup_enable=memory" in hostinfo.MEMORY_CGROUP_FIX


def test_a_memory_limit_on_a_host_without_the_controller_is_refused_before_any_probe(monkeypatch) -> None:
    from virtbench.config import parse_campaign
    from virtbench.errors import InputError
    from virtbench.experiments.benchmarks import session as session_mod
    from virtbench.platforms.base import Paths

    campaign = parse_campaign({"name": "t", "platforms": [{"name": "native", "type": "native"},
                                                          {"name": "r", "type": "runc", "options": {"memory": "256M"}}],
                               "benchmarks": [{"name": "openssl"}]})
    s = session_mod.build_objects(campaign, Paths(Path("/nonexistent-state"), Path("/nonexistent-run")))
    monkeypatch.setattr(hostinfo, "_read", lambda path, default="": "#h\nmemory\t0\t1\t0\n" if "cgroups" in str(path) else "")
    probed = []
    monkeypatch.setattr(session_mod, "availability_of", lambda *a, **k: probed.append(a))
    with pytest.raises(InputError) as err:
        session_mod.check_available(s)
    assert "cannot limit memory" in err.value.message and "r" in err.value.message
    assert "cgroup_enable=memory" in err.value.fix and probed == []


def test_the_emulated_arm64_guest_recorded_over_ssh() -> None:
    """/proc/cpuinfo of the arm64 test guest (QEMU 7.2 TCG, `-cpu max`, 2 vCPUs)."""
    facts = cpuinfo("qemu-virt-arm64-tcg.cpuinfo")
    assert facts["cpu_model"] == "2x QEMU max"
    assert facts["crypto"] == {"aes": True, "pmull": True, "sha1": True, "sha2": True}


def test_qemu_virt_has_no_model_and_is_named_by_its_compatible_string(tmp_path: Path) -> None:
    dt = tmp_path / "proc/device-tree"
    dt.mkdir(parents=True)
    (dt / "compatible").write_bytes(b"linux,dummy-virt\x00")
    assert boards.board_model(tmp_path) == "linux,dummy-virt"


def test_a_run_on_one_remote_board_is_described_by_the_board_not_the_controller() -> None:
    """The headline's and the intro's host facts: a campaign whose only host is a Pi measured
    the Pi; with several hosts each is described apart and the controller stays the 'host'."""
    from virtbench.report import builder
    from virtbench.store.models import Run

    laptop = {"hostname": "laptop", "arch": "x86_64", "crypto": {"aes": True}, "cpus": 8}
    pi = {"hostname": "pi", "arch": "aarch64", "crypto": {"aes": False}, "cpus": 4,
          "virtualization": {"vm": "none"}}
    one = Run(campaign={}, host_facts=laptop, provenance={"hosts": {"pi": {"facts": pi}}})
    assert report_boards.measured_on(one)["hostname"] == "pi"
    assert builder.headline_json(one, [])["host"][0] == "aarch64, AES no"
    two = Run(campaign={}, host_facts=laptop, provenance={"hosts": {"local": {"facts": {}}, "pi": {"facts": pi}}})
    assert report_boards.measured_on(two)["hostname"] == "laptop"
    doc = builder.headline_json(two, [])
    assert doc["host"][0] == "x86_64, AES yes" and doc["hosts"]["pi"][0] == "aarch64, AES no"
    assert report_boards.measured_on(Run(host_facts=laptop, provenance={}))["hostname"] == "laptop"

"""The quick campaign: settings that decide, a KVM guest only where KVM works, reasons stored."""
from __future__ import annotations

from pathlib import Path

import pytest

from virtbench.experiments.benchmarks import quick
from virtbench.platforms.base import Availability, Paths
from virtbench.platforms.qemu.accel import AccelVerdict
from virtbench.registry import PLATFORMS


@pytest.fixture
def tmp_paths(tmp_path: Path) -> Paths:
    return Paths(state=tmp_path / "state", runtime=tmp_path / "run")


@pytest.fixture
def only_native(monkeypatch):
    def probe(types, paths, log=lambda _m: None):
        return {t: Availability(t == "native", "ok" if t == "native" else f"{t} missing", f"install {t}")
                for t in types}
    monkeypatch.setattr(quick, "availability_of", probe)


def _verdict(monkeypatch, kvm: bool, reason: str, tested: str = "Linux /boot/vmlinuz-6.1.0-28-cloud-amd64") -> None:
    monkeypatch.setattr(PLATFORMS.get("qemu"), "verdict", lambda self, kernel=None: AccelVerdict(kvm, reason, tested))
    monkeypatch.setattr(quick, "_which", lambda _b: True)


def test_without_kvm_the_vm_is_left_out_with_the_reason(monkeypatch, tmp_paths, only_native):
    _verdict(monkeypatch, False, "KVM present but a test guest failed: MSR 0x10a")
    plan = quick.quick_campaign(tmp_paths)
    assert [p.type for p in plan.campaign.platforms] == ["native"]
    vm = next(o for o in plan.left_out if o["platform"] == "kvm (qemu)")
    assert "MSR 0x10a" in vm["reason"] and "emulator" in vm["reason"] and vm["fix"]
    assert {"platform": "docker", "reason": "docker missing", "fix": "install docker"} in plan.left_out


def test_with_kvm_the_quick_campaign_includes_a_kvm_guest(monkeypatch, tmp_paths, only_native):
    _verdict(monkeypatch, True, "KVM works: a test guest booted Linux 6.1 in 1.2 s")
    plan = quick.quick_campaign(tmp_paths)
    vm = plan.campaign.platform("kvm")
    assert vm.type == "qemu" and vm.options["accel"] == "kvm"
    assert all(o["platform"] != "kvm (qemu)" for o in plan.left_out)
    # the guest's disk emulation runs outside its CPU time: fio reports the rate too
    assert next(b for b in plan.campaign.benchmarks if b.name == "fio").params["measure"] == "both"


def test_a_stub_guest_alone_leaves_the_vm_out_on_doubt(monkeypatch, tmp_paths, only_native):
    """The first `make run` of a fresh clone: KVM ran the firmware stub, no kernel was at hand to
    boot, the KVM guest was included, and its setup (booting Linux) then failed and aborted the run."""
    _verdict(monkeypatch, True, "KVM ran a firmware stub guest (no kernel at hand to boot)", "firmware stub")
    plan = quick.quick_campaign(tmp_paths)
    assert [p.type for p in plan.campaign.platforms] == ["native"]
    vm = next(o for o in plan.left_out if o["platform"] == "kvm (qemu)")
    assert "stub" in vm["reason"] and "doubt" in vm["reason"]
    assert "apt-get install linux-image-" in vm["fix"]


@pytest.mark.skipif(not Path("/dev/kvm").exists(), reason="no /dev/kvm: KVM is refused before any test guest")
def test_fresh_machine_kvm_check_finds_no_kernel_and_leaves_the_vm_out(monkeypatch, tmp_path):
    """Fresh as the README defines it: empty state, runtime and cache directories, no kernel in
    /boot. The KVM check then has only its firmware stub (made to run here, as it does on a host
    whose Linux guests hang), and the quick campaign leaves the VM out instead of including it."""
    from virtbench.images import build
    from virtbench.platforms.qemu import accel

    for d in ("state", "run", "cache", "boot"):
        (tmp_path / d).mkdir()
    monkeypatch.setattr(build, "DEFAULT_CACHE", tmp_path / "cache")
    monkeypatch.setattr(accel, "BOOT", tmp_path / "boot")
    monkeypatch.setattr(accel, "try_stub", lambda *a, **k: None)  # the stub ran
    monkeypatch.setattr(quick, "_which", lambda _b: True)
    paths = Paths(state=tmp_path / "state", runtime=tmp_path / "run")
    assert accel.probe_kernel() is None
    guest, why = quick.kvm_guest(paths)
    assert guest is None and "doubt" in why["reason"], why
    (tmp_path / "boot" / "vmlinuz-6.1.0-28-cloud-amd64").write_bytes(b"")
    assert accel.probe_kernel() == tmp_path / "boot" / "vmlinuz-6.1.0-28-cloud-amd64"


def test_without_native_the_quick_campaign_says_so_in_one_line(monkeypatch, tmp_paths):
    from virtbench.errors import UnavailableError

    monkeypatch.setattr(quick, "availability_of", lambda types, paths, log=None: {
        t: Availability(False, f"{t}: chroot test failed", "run as root") for t in types})
    monkeypatch.setattr(quick, "_which", lambda _b: False)
    with pytest.raises(UnavailableError, match="compares every platform with native.*chroot test failed") as exc:
        quick.quick_campaign(tmp_paths)
    assert exc.value.fix == "run as root"


def test_without_qemu_installed_the_reason_names_the_package(monkeypatch, tmp_paths):
    monkeypatch.setattr(quick, "_which", lambda _b: False)
    guest, why = quick.kvm_guest(tmp_paths)
    assert guest is None and "not installed" in why["reason"] and "qemu" in why["fix"]


def test_real_verdict_on_this_host_is_stored_as_a_reason(tmp_paths):
    """Decided by booting, as the qemu platform does (needs qemu; skipped without it)."""
    if not all(quick._which(b) for b in PLATFORMS.get("qemu").binaries):
        pytest.skip("qemu not installed")
    guest, why = quick.kvm_guest(tmp_paths)
    assert (guest is None) != (why is None)
    if why:
        assert "KVM" in why["reason"] or "kvm" in why["reason"]


def test_quick_settings_are_valid_and_adaptive(monkeypatch, tmp_paths, only_native):
    monkeypatch.setattr(quick, "_which", lambda _b: False)
    c = quick.quick_campaign(tmp_paths).campaign
    assert c.adaptive is not None and c.adaptive.until == "decided"
    # 3 declared rounds (the adaptive rule's minimum), then extra rounds for what is undecided only:
    # fewer declared rounds leave the time cap to the noisy cells (error rates: test_verdict)
    assert c.adaptive.max_repetitions >= 16 and c.repetitions == 3 and c.adaptive.max_minutes <= 6
    assert [b.name for b in c.benchmarks] == ["openssl", "fio", "sqlite"]


def test_quick_measures_cpu_time_with_one_verdict_cell_per_benchmark(monkeypatch, tmp_paths, only_native):
    """On a shared host wall-clock rates measure the neighbours (CV 26-51 % at load 5-7): the quick
    campaign's cells are CPU-time measures, one per benchmark (sqlite: the total, not six phases)."""
    from virtbench.registry import BENCHMARKS

    monkeypatch.setattr(quick, "_which", lambda _b: False)
    c = quick.quick_campaign(tmp_paths).campaign
    cells = {}
    for b in c.benchmarks:
        cls = BENCHMARKS.get(b.name)
        cells[b.name] = [m.name for m in cls(cls.Params(**b.params)).metrics()]
    assert cells == {"openssl": ["throughput_cpu"], "fio": ["rand_read_iops_cpu"], "sqlite": ["total_cpu_s"]}


def test_left_out_reasons_reach_the_report_json(tmp_path):
    import json

    from virtbench.analysis import synthetic
    from virtbench.report import builder
    from virtbench.store.db import Store

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    synthetic.fill(store, "sim", repetitions=3, platforms=synthetic.default_platforms()[:2],
                   benchmarks=synthetic.default_benchmarks()[:1])
    why = {"platform": "kvm (qemu)", "reason": "no VM: KVM does not work here (MSR 0x10a); a TCG guest "
           "would measure an emulator", "fix": "run on bare metal"}
    store.update_run("sim", provenance={**store.run("sim").provenance, "left_out": [why]})
    doc = json.loads(json.dumps(builder.report_json(builder.build(store, "sim"))))
    [note] = [w for w in doc["warnings"] if w.get("check") == "left_out"]
    assert note["platform"] == "kvm (qemu)" and "emulator" in note["message"] and note["fix"] == "run on bare metal"


def test_leaving_a_vm_out_takes_what_is_stacked_in_it_and_keeps_the_campaign_valid(tmp_paths):
    from virtbench.config import parse_campaign
    from virtbench.experiments.benchmarks.session import build_objects, leave_out

    campaign = parse_campaign({"name": "q", "platforms": ["native", "runc", {"name": "vm", "type": "qemu"},
                                                          {"name": "d", "type": "docker", "inside": "vm"}],
                               "benchmarks": [{"name": "openssl"}]}, "test")
    session = build_objects(campaign, tmp_paths)
    out: list[dict[str, str]] = []
    leave_out(session, "vm", "setup failed: no kernel", "install one", out)
    assert sorted(session.platforms) == ["native", "runc"]
    assert [p.name for p in session.campaign.platforms] == ["native", "runc"]
    assert out == [{"platform": "d", "reason": "inside vm: setup failed: no kernel", "fix": "install one"},
                   {"platform": "vm", "reason": "setup failed: no kernel", "fix": "install one"}]


def test_the_quick_campaign_tries_each_platform_once(monkeypatch, tmp_path):
    """#40: the verdicts that chose the quick campaign's platforms go with it to the run's
    preparation, which tries only the types nobody tried yet (before, every platform twice)."""
    from virtbench.experiments.benchmarks import session as sessions
    from virtbench.experiments.benchmarks.kind import Benchmarks

    tried: list[list[str]] = []

    def probe(types, paths, log=None):  # noqa: ARG001
        tried.append(list(types))
        return {t: Availability(True, "fine") for t in types}

    monkeypatch.setattr(quick, "availability_of", probe)
    monkeypatch.setattr(sessions, "availability_of", probe)
    monkeypatch.setattr(quick, "kvm_guest", lambda paths: (None, {"platform": "kvm", "reason": "no", "fix": ""}))
    monkeypatch.setattr(quick, "_fio_cpus", lambda paths, log: None)
    paths = Paths(tmp_path / "s", tmp_path / "r")
    plan = quick.quick_campaign(paths)
    kind = Benchmarks(plan.campaign, paths)
    kind.known_availability = plan.availability
    session = sessions.build_objects(plan.campaign, paths)
    session.availability = dict(kind.known_availability)
    monkeypatch.setattr(sessions, "refuse_unlimited_memory", lambda *a, **k: None)
    monkeypatch.setattr(sessions, "refuse_undelegated", lambda *a, **k: None)
    monkeypatch.setattr(sessions, "refuse_read_only_cgroups", lambda *a, **k: None)
    sessions.check_available(session)
    assert tried == [quick.quick_platforms()] and set(session.availability) >= {p.type for p in plan.campaign.platforms}

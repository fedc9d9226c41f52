"""`doctor` and `study list` keep to 100 columns on a pipe, like every other command (#42).

Before: on a pipe the console was 200 columns wide, so `doctor` printed lines of 190 columns and
`study list` of 200 (a long reason of a platform or a study's part on one line). Both commands
print what their probe found; the probe starts instances on the host, so these tests give them a
recorded answer instead: `study list`'s is a real probe of a test host of this project
(tests/data/widths/study-list.json), `doctor`'s a host whose platforms, sandboxes and
cross-builds fail with reasons as long as the real ones."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from click.testing import CliRunner
from rich.cells import cell_len

from virtbench.analysis import synthetic
from virtbench.cli import cli

WIDTH = 100
STUDY_LIST = Path(__file__).parents[1] / "data" / "widths" / "study-list.json"
KVM = ("KVM does not work here (KVM present but a test guest failed: qemu-system-x86_64: error: failed to set "
       "MSR 0x10a to 0x69 (nested virtualization: this host is itself a VM?)); a TCG guest would measure an "
       "emulator (10-50x slower), not the cost of virtualization")


def _doctor_doc() -> dict:
    facts = synthetic.host_facts("doctor-host.example.org")
    facts["cpu_flags"] = ["fpu", "vme", "de", "pse", "tsc", "msr", "pae", "mce", "cx8", "apic", "sep", "mtrr", "pge",
                          "mca", "cmov", "pat", "pse36", "clflush", "mmx", "fxsr", "sse", "sse2", "ss", "ht", "syscall",
                          "nx", "pdpe1gb", "rdtscp", "lm", "constant_tsc", "rep_good", "nopl", "xtopology", "cpuid",
                          "pni", "pclmulqdq", "vmx", "ssse3", "fma", "cx16", "pcid", "sse4_1", "sse4_2", "x2apic",
                          "movbe", "popcnt", "aes", "xsave", "avx", "f16c", "rdrand", "hypervisor", "avx2"]
    return {
        "host": facts, "store": "sqlite:////var/lib/virtbench/results.sqlite", "image_cache": "/var/cache/virtbench",
        "host_kind": "a virtual machine (nested virtualization: KVM guests fail; TCG emulates)",
        "platforms": [
            {"name": "native", "kind": "native", "available": True, "reason": "runs here", "fix": ""},
            {"name": "qemu", "kind": "vm", "available": False, "reason": KVM,
             "fix": "run virtbench on bare metal, or enable nested virtualization on the hypervisor "
                    "(kvm_intel nested=1) and give this VM the host's CPU model"},
            {"name": "runsc", "kind": "container", "available": False,
             "reason": "runsc is not installed (looked for it on PATH: /usr/local/sbin:/usr/local/bin:/usr/sbin:"
                       "/usr/bin:/sbin:/bin) and no docker runtime named runsc is configured in /etc/docker/daemon.json",
             "fix": "install gVisor's runsc from https://gvisor.dev/docs/user_guide/install/ and register it "
                    "with `runsc install`, then restart docker"}],
        "sandboxes": [{"name": "runsc", "what": "gVisor", "version": None, "default_mode": "systrap",
                       "modes": [{"mode": "runsc-kvm", "available": False, "reason": KVM, "fix": ""}],
                       "fix": "install gVisor's runsc from https://gvisor.dev/docs/user_guide/install/"}],
        "cross_build": [{"arch": "arm64", "ok": False,
                         "reason": "no qemu-user-static binfmt handler for aarch64 is registered in "
                                   "/proc/sys/fs/binfmt_misc (qemu-aarch64 not found)",
                         "fix": "apt-get install qemu-user-static binfmt-support, then `update-binfmts --enable`"}],
    }


def _wide(out: str) -> list[str]:
    return [line for line in out.splitlines() if cell_len(line) > WIDTH]


def test_doctor_keeps_to_100_columns_on_a_pipe(monkeypatch):
    monkeypatch.setattr("virtbench.commands.lastprobe.probe_or_last",
                        lambda paths, name, what, wait, compute: (_doctor_doc(), "2026-11-29T01:15:09+00:00"))
    monkeypatch.setattr("virtbench.commands.doctor.state_paths", lambda: None)
    res = CliRunner().invoke(cli, ["doctor"])
    assert res.exit_code == 0, res.output
    assert "runsc is not installed" in res.output and "qemu" in res.output
    assert not _wide(res.output), _wide(res.output)


def test_study_list_keeps_to_100_columns_on_a_pipe(monkeypatch):
    answer = json.loads(STUDY_LIST.read_text())
    monkeypatch.setattr("virtbench.commands.lastprobe.probe_or_last",
                        lambda paths, name, what, wait, compute: (answer, "2026-11-29T01:15:09+00:00"))
    monkeypatch.setattr("virtbench.commands.study._capabilities", lambda *a, **k: SimpleNamespace(paths=None))
    res = CliRunner().invoke(cli, ["study", "list"])
    assert res.exit_code == 0, res.output
    assert "no power meter here" in res.output
    assert not _wide(res.output), _wide(res.output)

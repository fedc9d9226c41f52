"""An emulated arm64 board as a second host: booted for real, reached over real SSH.

The guest is the test host of tests/hostsupport/qemu_host.py: an arm64 image cross-built by
virtbench's own builder (qemu-user), Debian's arm64 kernel, `qemu-system-aarch64 -machine
virt` under TCG, sshd behind a 127.0.0.1 port forward. What runs there goes through the
SSH transport of the several-hosts feature (virtbench.remote.ssh): the host-facts reader
(the same module as locally) and the ARM builds of the benchmark tools, whose outputs the
parsers must read. TCG on a loaded 2-core machine takes minutes to boot: integration + slow.
"""
from __future__ import annotations

import base64
import io
import json
import tarfile
from pathlib import Path

import pytest

from hostsupport.qemu_host import qemu_host, skip_unless_affordable
from virtbench import hostinfo as hostfacts
from virtbench import proc
from virtbench.images.arch import emulation
from virtbench.registry import BENCHMARKS
from virtbench.remote.ssh import SSHExecutor

pytestmark = [pytest.mark.integration, pytest.mark.slow]
SRC = Path(__file__).resolve().parents[2] / "src"
READER = ("__init__.py", "host.py", "boards.py", "proc.py", "errors.py")
"""The host-facts reader and what it imports: standard library only, so it runs on any host."""


def _needs(arch: str) -> None:
    if not proc.which("qemu-system-aarch64" if arch == "arm64" else "qemu-system-arm"):
        pytest.skip("qemu-system-arm is not installed (tools/prepare-tests installs it)")
    emu = emulation(arch)
    if not emu.ok:
        pytest.skip(f"cannot cross-build {arch}: {emu.reason} ({emu.fix})")
    skip_unless_affordable(arch)


def ship_reader(ex: SSHExecutor, dest: str = "/var/lib/virtbench-remote/lib") -> str:
    """virtbench's host-facts modules to `dest` on the host, as base64 of a tar on stdin."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in READER:
            tar.add(SRC / "virtbench" / name, arcname=f"virtbench/{name}")
    ex.run(["mkdir", "-p", dest], timeout=60)
    ex.run(["sh", "-c", f"base64 -d | tar xzf - -C {dest}"], input=base64.b64encode(buf.getvalue()).decode(),
           timeout=120)
    return dest


def remote_facts(ex: SSHExecutor) -> dict:
    lib = ship_reader(ex)
    out = ex.run(["env", f"PYTHONPATH={lib}", "python3", "-c",
                  "import json, virtbench.hostinfo as h; print(json.dumps(h.facts()))"], timeout=300)
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def arm64():
    _needs("arm64")
    with qemu_host("arm64") as host:
        print(f"arm64 guest: {host.timings}")
        yield host


def test_the_arm64_guest_is_reached_over_ssh_and_reports_itself_as_an_emulated_arm_board(arm64, tmp_path):
    with SSHExecutor(arm64.spec, tmp_path / "rt") as ex:
        assert ex.run(["uname", "-m"], timeout=60).stdout.strip() == "aarch64"
        facts = remote_facts(ex)
    assert facts["arch"] == "aarch64"
    assert facts["cpu_model"].startswith("2x ")  # two vCPUs, each decoded from its CPU part
    assert facts["crypto"]["aes"] is True  # TCG's `max` CPU has the ARMv8 crypto extensions
    assert facts["virtualization"]["vm"] == "qemu"  # TCG: the guest was booted with vb.accel=tcg
    assert facts["board"] == "linux,dummy-virt"
    assert facts["storage"]["kind"] == "virtio"


def test_the_parsers_read_the_arm64_builds_run_on_the_guests_own_kernel(arm64, tmp_path):
    """fio needs libaio, which qemu-user lacks: on the guest's real arm64 kernel it runs."""
    cases = [("fio", {"size": "16M", "runtime": 1, "ramp_time": 0}), ("openssl", {"seconds": 1, "bytes": 1024}),
             ("7zip", {}), ("mbw", {"runs": 3})]
    with SSHExecutor(arm64.spec, tmp_path / "rt") as ex:
        for name, params in cases:
            cls = BENCHMARKS.get(name)
            bench = cls(cls.Params(**params))
            workdir = f"/var/tmp/vbtest/{name}"
            ex.run(["mkdir", "-p", workdir], timeout=60)
            res = ex.run(bench.command(workdir), timeout=600, check=False)
            assert res.returncode == 0, f"{name} failed on arm64: {res.stderr[-500:]}"
            values = bench.parse(res.stdout, res.stderr, source=f"{name} on the arm64 guest")
            assert sorted(values) == sorted(m.name for m in bench.metrics())
            assert all(v > 0 for v in values.values())


def test_a_board_booted_without_the_memory_controller_refuses_a_memory_limit_naming_it_and_the_fix(env, tmp_path):
    """#20's bad input, for real: the arm64 guest booted with `cgroup_disable=memory`, as
    Raspberry Pi OS boots a board. A campaign limiting runc's memory there is one line naming the
    board and the cgroup_enable=memory fix, exit 2, and nothing is built, shipped or started."""
    import yaml

    from hostsupport.qemu_host import cli

    _needs("arm64")
    with qemu_host("arm64", name="pi", kernel_args=("cgroup_disable=memory",)) as board:
        cgroups = board.ssh(["cat", "/proc/cgroups"]).stdout
        assert "disabled" in hostfacts.memory_controller_problem(cgroups), cgroups
        campaign = tmp_path / "c.yaml"
        campaign.write_text(yaml.safe_dump({
            "name": "pi-memory", "repetitions": 1, "hosts": ["local", board.spec.model_dump(exclude_none=True)],
            "platforms": ["native", {"name": "small", "type": "runc", "options": {"memory": "256M"}}],
            "benchmarks": [{"name": "openssl", "seconds": 1}]}))
        res = cli(env, "run", str(campaign), "--no-report", timeout=600)
        work_dir = board.ssh(["ls", "-A", board.spec.work_dir], check=False)
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
    error = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(error) == 1 and error[0].startswith("error: host pi: "), res.stderr
    assert "memory controller is disabled" in error[0] and "small cannot limit memory" in error[0]
    assert "cgroup_enable=memory" in res.stderr
    assert not work_dir.ok or not work_dir.stdout.strip(), f"something was shipped: {work_dir.stdout}"
    assert "pi-memory" not in cli(env, "runs").stdout, "a run was started"

"""gVisor (runsc) against the real guest image: a sandbox really runs (its own kernel answers),
limits apply, a crashed sandbox is removed by `virtbench cleanup`, and a short campaign through
the CLI shows CPU work at about native speed and system calls many times dearer, with the
platform kinds stored in the run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from virtbench import proc
from virtbench.cli import cli
from virtbench.platforms.base import Paths
from virtbench.platforms.runsc import Runsc, installed_modes, try_mode

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(proc.which("runsc") is None, reason="runsc not installed (apt-get install runsc)")]


def listed(paths: Paths) -> list[str]:
    root = paths.runtime / "runsc"
    if not root.is_dir():
        return []
    return proc.run(["runsc", "--root", str(root), "list", "--quiet"], check=False).stdout.split()


def sandbox_processes(paths: Paths) -> list[str]:
    """runsc-sandbox / runsc-gofer processes of this state root (they name it, not the container)."""
    out = proc.run(["ps", "-eo", "args"], check=False).stdout
    return [line for line in out.splitlines() if line.startswith("runsc") and f"--root={paths.runtime / 'runsc'}" in line]


def test_runsc_runs_its_own_kernel_with_limits(paths, image, run_id):
    platform = Runsc("g", Runsc.Options(memory="256M", cpus=1), paths)
    inst = platform.create(image, f"vb-t-runsc-{uuid.uuid4().hex[:6]}", run_id)
    try:
        platform.start(inst)
        dmesg = platform.exec(inst, ["dmesg"], timeout=60).stdout
        assert "gVisor" in dmesg  # the Sentry's boot messages, not the host kernel's
        assert platform.exec(inst, ["uname", "-r"], timeout=60).stdout.strip() != os.uname().release
        assert platform.versions()["runsc_platform"] == platform.mode == installed_modes()[1]
        assert platform.describe()["kind"] == "sandbox"
    finally:
        platform.remove(inst)
        platform.remove(inst)  # twice: safe
    assert inst.name not in listed(paths) and not Path(inst.data["dir"]).exists()


def test_crashed_sandbox_removed_by_cleanup(paths, image, run_id):
    """A run killed mid-way leaves a started sandbox (runsc-sandbox and gofer processes, an
    overlay mount); `virtbench cleanup` on the same state removes all of it."""
    platform = Runsc("g", Runsc.Options(), paths)
    inst = platform.create(image, f"vb-t-runsc-{uuid.uuid4().hex[:6]}", run_id)
    platform.start(inst)
    assert inst.name in listed(paths) and sandbox_processes(paths)
    env = {**os.environ, "VIRTBENCH_STATE_DIR": str(paths.state), "VIRTBENCH_RUNTIME_DIR": str(paths.runtime)}
    out = subprocess.run([sys.executable, "-m", "virtbench", "cleanup"], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"runsc container {inst.name}" in out.stdout
    assert inst.name not in listed(paths) and not sandbox_processes(paths)
    assert not Path(inst.data["dir"]).exists()
    assert inst.data["dir"] not in Path("/proc/self/mountinfo").read_text()


def test_kvm_mode_decided_by_trying(paths):
    """Each mode the installed runsc lists is tried with a bounded timeout; the verdict has a reason.
    Nothing of a probe stays, not even for a mode whose sandbox hung (kvm without working KVM
    left an empty cgroup per hierarchy and runsc's lock file each time)."""
    def probe_cgroups() -> set[Path]:
        return set(Path("/sys/fs/cgroup").glob("virtbench/vb-probe-*")) | set(
            Path("/sys/fs/cgroup").glob("*/virtbench/vb-probe-*"))

    before = probe_cgroups()
    for mode in installed_modes()[0]:
        v = try_mode(paths, mode, timeout=20)
        assert v.reason.startswith(f"runsc --platform={mode}")
        if mode == "ptrace":
            assert v.available, v.reason
    assert not list((paths.runtime / "probe").glob("runsc-*")) if (paths.runtime / "probe").is_dir() else True
    assert probe_cgroups() <= before, sorted(map(str, probe_cgroups() - before))
    assert not list((paths.runtime / "runsc").glob("vb-probe-*")) if (paths.runtime / "runsc").is_dir() else True


@pytest.mark.measures  # a ratio to native
def test_campaign_runsc_cpu_native_syscalls_dearer(paths, tmp_path):
    campaign = tmp_path / "c.yaml"
    campaign.write_text("""name: sandbox-it
baseline: native
repetitions: 2
warmups: 0
platforms: [native, runsc]
benchmarks:
  - {name: openssl, seconds: 1}
  - {name: syscall, calls: 20000}
""")
    db = f"sqlite:///{tmp_path / 'r.db'}"
    env = {"VIRTBENCH_STATE_DIR": str(paths.state), "VIRTBENCH_RUNTIME_DIR": str(paths.runtime)}
    result = CliRunner().invoke(cli, ["run", str(campaign), "--db", db, "--no-report"], env=env)
    assert result.exit_code == 0, result.output
    report = CliRunner().invoke(cli, ["report", "--json", "--db", db], env=env)
    assert report.exit_code == 0, report.output
    doc = json.loads(report.output)
    run = doc["runs"][0] if "runs" in doc else doc
    kinds = {p["name"]: p["kind"] for p in run["platforms"]}
    assert kinds == {"native": "baseline", "runsc": "sandbox"}
    ratio = {(r["benchmark"], r["platform"]): r["relative"] for r in run["results"] if r.get("relative")}
    assert 0.8 < ratio[("openssl", "runsc")] < 1.25  # CPU-bound: the Sentry is not involved
    assert ratio[("syscall", "runsc")] < 0.2  # relative performance: 5x the cost or more

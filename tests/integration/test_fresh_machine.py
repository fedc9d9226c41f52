"""The first run on a fresh machine (README, "A fresh machine"): no /var/cache/virtbench,
/var/lib/virtbench or /run/virtbench, no kernel in /boot, no runtime packages.

The quick campaign then includes only platforms whose own setup passes, leaves every other
out with its reason and fix, and a platform that fails at setup anyway is left out with its
reason, never an abort. Real probes and setups; only the directories are pointed elsewhere."""
from __future__ import annotations

import os
import shutil
import sqlite3
import uuid
from pathlib import Path

import pytest

from virtbench.config import parse_campaign
from virtbench.errors import InputError
from virtbench.experiments.benchmarks import quick
from virtbench.experiments.benchmarks.session import build_objects, prepare
from virtbench.images import build
from virtbench.platforms.base import Paths
from virtbench.platforms.qemu import accel
from virtbench.registry import PLATFORMS
from virtbench.runner import execute
from virtbench.store.db import Store

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RUNTIME_BINARIES = ("docker", "dockerd", "containerd", "ctr", "runc", "crun", "podman", "runsc",
                    "qemu-system-x86_64", "qemu-system-aarch64", "qemu-system-arm", "qemu-img")
"""What the runtime packages (docker.io, containerd, runc, crun, podman, runsc, qemu) put on PATH;
lxc's are every lxc-* program."""


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """Paths that do not exist yet, an empty image cache and an empty boot directory (where the
    KVM check looks for a kernel: accel.probe_kernel)."""
    base = f"/var/lib/virtbench-test/fresh-{uuid.uuid4().hex[:8]}"
    paths = Paths(state=Path(base), runtime=Path("/run/virtbench-test") / Path(base).name)
    for d in ("cache", "boot"):
        (tmp_path / d).mkdir()
    monkeypatch.setattr(build, "DEFAULT_CACHE", tmp_path / "cache")
    monkeypatch.setattr(accel, "BOOT", tmp_path / "boot")
    assert not paths.state.exists() and not paths.runtime.exists() and accel.probe_kernel() is None
    yield paths
    execute.cleanup(paths)
    for d in (paths.state, paths.runtime):
        shutil.rmtree(d, ignore_errors=True)


def test_quick_choice_on_a_fresh_machine_includes_only_platforms_whose_setup_passes(fresh):
    log: list[str] = []
    plan = quick.quick_campaign(fresh, log.append)
    chosen = [p.name for p in plan.campaign.platforms]
    out = {o["platform"]: o for o in plan.left_out}
    assert chosen[0] == "native", log
    for name in quick.quick_platforms():  # each either chosen or left out with a reason
        assert (name in chosen) != (name in out), (name, chosen, out)
        assert name in chosen or out[name]["reason"]
    assert ("kvm" in chosen) != ("kvm (qemu)" in out)
    session = build_objects(plan.campaign, fresh)
    prepare(session, log=log.append)  # each platform's own setup, strict: a failure raises here
    assert sorted(session.platforms) == sorted(chosen)
    print(f"chosen: {chosen}; left out: " + "; ".join(f"{k}: {v['reason']}" for k, v in out.items()))


def test_a_missing_runtime_leaves_its_platform_out_with_the_install_fix(fresh, tmp_path, monkeypatch):
    """No runtime package: a PATH holding every program of this one but the runtimes' (nothing
    is uninstalled), and the quick campaign measures native alone, saying what to install."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for d in os.environ["PATH"].split(os.pathsep):
        for f in Path(d).glob("*") if Path(d).is_dir() else ():
            hidden = f.name in RUNTIME_BINARIES or f.name.startswith("lxc-")
            if not hidden and not (bin_dir / f.name).exists() and os.access(f, os.X_OK):
                (bin_dir / f.name).symlink_to(f)
    monkeypatch.setenv("PATH", str(bin_dir))
    plan = quick.quick_campaign(fresh)
    assert [p.name for p in plan.campaign.platforms] == ["native"], plan.left_out
    out = {o["platform"]: o for o in plan.left_out}
    for name in ("docker", "podman", "lxc", "containerd", "runc", "crun", "kvm (qemu)"):
        cls = PLATFORMS.get("qemu" if name.startswith("kvm") else name)
        assert "is not installed" in out[name]["reason"], out[name]
        assert out[name]["fix"] == "apt-get install " + " ".join(cls.packages), out[name]


def _campaign(platforms: list) -> dict:
    return {"name": "fresh-setup", "repetitions": 1, "warmups": 0, "platforms": platforms,
            "benchmarks": [{"name": "openssl", "algorithm": "aes-128-cbc", "bytes": 1024, "multi": 1,
                            "seconds": 1, "clock": "cpu"}]}


def test_a_platform_failing_at_setup_is_left_out_of_a_quick_run_never_an_abort(fresh, tmp_path):
    """A generated (quick-shaped) run whose LXC platform's setup really fails (its 64M disk
    cannot hold the image), and, where KVM cannot run a guest, a KVM guest (the first `make run`
    of issue 28): both left out with their reasons, the others measured. The same campaign from
    a file stops before anything is stored."""
    platforms: list = ["native", "runc", {"name": "small", "type": "lxc", "disk": "64M"}]
    kvm_fails = not accel.accel_verdict(fresh, accel.probe_kernel()).kvm
    if kvm_fails:
        platforms.append({"name": "kvm", "type": "qemu", "accel": "kvm", "memory": "1G"})
    campaign = parse_campaign(_campaign(platforms), "test")
    db = tmp_path / "results.db"
    store = Store(f"sqlite:///{db}")
    with pytest.raises(InputError, match="cannot hold image"):  # a campaign file: stop, nothing stored
        execute.start(store, campaign, fresh)
    assert store.runs() == []
    out = execute.start(store, campaign, fresh, left_out=[{"platform": "crun", "reason": "r", "fix": ""}])
    assert out.executions and out.failed == 0
    run = store.run(out.run_id)
    left = {o["platform"]: o for o in run.provenance["left_out"]}
    assert left["crun"]["reason"] == "r"  # the choice's reasons kept
    assert "setup failed" in left["small"]["reason"] and "cannot hold image" in left["small"]["reason"]
    assert left["small"]["fix"].startswith("give disk of at least")
    if kvm_fails:
        assert "KVM does not work here" in left["kvm"]["reason"], left["kvm"]
    assert [p["name"] for p in run.campaign["platforms"]] == ["native", "runc"]  # a resume will not bring them back
    with sqlite3.connect(db) as conn:
        measured = {p for (p,) in conn.execute("SELECT DISTINCT platform FROM executions")}
    assert measured == {"native", "runc"}

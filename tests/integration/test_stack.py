"""A stack for real: Docker (and, when asked for, Podman) inside a QEMU VM, end to end
through the CLI.

One campaign, one round: native, the VM on its own, and docker inside that VM, with a
one-second sysbench. Two VMs boot (one per unit: the VM's own unit and the stack's); under
TCG emulation the stack's unit also starts dockerd in the guest and imports the image there
(minutes on a 2-core CI runner). While the run goes on, the test asks the guest's Docker
through the VM's agent which containers it runs: the benchmark's container must be there.
Needs root, qemu-system, qemu-utils, e2fsprogs and mmdebstrap (the VM image with docker.io).
VIRTBENCH_TEST_PODMAN_STACK=1 also runs the same with podman inside the VM.
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from virtbench.platforms import mounts
from virtbench.platforms.base import Paths
from virtbench.platforms.qemu import guest
from virtbench.platforms.qemu.host import qemu_processes
from virtbench.platforms.qemu.platform import Qemu

pytestmark = pytest.mark.integration

CAMPAIGN = """
name: stack
repetitions: 1
warmups: 0
platforms:
  - native
  - {name: vm, type: qemu, vcpus: 2, memory: 2G}
  - {name: vm-ENGINE, type: ENGINE, inside: vm}
benchmarks:
  - {name: sysbench-cpu, time: 1}
"""
ENGINES = {  # engine: (its packages in the VM image, what the watcher asks it, its storage driver)
    "docker": (["docker.io"], "docker ps --format 'container={{.Names}}' 2>/dev/null; "
                              "docker info --format 'driver={{.Driver}}' 2>/dev/null", "overlay2"),
    "podman": (["podman", "runc"], "podman ps --format 'container={{.Names}}' 2>/dev/null; "
                                   "podman info --format 'driver={{.Store.GraphDriverName}}' 2>/dev/null",
               "overlay"),
}
# docker always; podman inside a VM (another VM image and two more boots) when asked for
STACKED = ["docker"] + (["podman"] if os.environ.get("VIRTBENCH_TEST_PODMAN_STACK") else [])


@pytest.fixture
def env(tmp_path):
    uniq = uuid.uuid4().hex[:8]
    state, runtime = Path(f"/var/lib/virtbench-test/stack-{uniq}"), Path(f"/run/virtbench-test/stack-{uniq}")
    e = dict(os.environ, VIRTBENCH_DB=f"sqlite:///{tmp_path / 'results.db'}",
             VIRTBENCH_STATE_DIR=str(state), VIRTBENCH_RUNTIME_DIR=str(runtime))
    yield e
    subprocess.run([sys.executable, "-m", "virtbench", "cleanup"], env=e, capture_output=True, timeout=300)
    shutil.rmtree(state, ignore_errors=True)
    shutil.rmtree(runtime, ignore_errors=True)


def vb(env, *args, timeout=3600):
    return subprocess.run([sys.executable, "-m", "virtbench", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def db_rows(env, sql, *params):
    with sqlite3.connect(env["VIRTBENCH_DB"].removeprefix("sqlite:///")) as conn:
        return conn.execute(sql, params).fetchall()


class GuestWatcher(threading.Thread):
    """Asks each booted VM of the run (its init has started the agent) what its Docker runs.

    Waits for the channel's lock only briefly and sends nothing while the runner holds it,
    so it never runs during a measurement, only between the runner's commands."""

    def __init__(self, paths: Paths, look: str) -> None:
        super().__init__(daemon=True)
        self.paths, self.look = paths, look
        self.seen: set[str] = set()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for serial in self.paths.instances.glob("*/serial.log"):
                meta = mounts.read_meta(serial.parent) or {}
                sock = Path(meta.get("sockdir", "/nonexistent")) / "agent.sock"
                try:
                    if "vb-init: agent on" not in serial.read_text(errors="replace") or not sock.exists():
                        continue
                    status, out, _ = guest.call(str(sock), ["sh", "-c", self.look], timeout=20)
                except (OSError, guest.ChannelError):
                    continue
                self.seen.update(out.decode(errors="replace").split())
            self.done.wait(1.0)


@pytest.mark.parametrize("engine", STACKED)
def test_engine_inside_a_vm_runs_the_benchmark(env, tmp_path, engine):
    paths = Paths.from_env(env)
    verdict = Qemu.availability(paths)
    if not verdict.available:
        pytest.skip(f"qemu not available: {verdict.reason}")
    packages, look, driver = ENGINES[engine]
    stack = f"vm-{engine}"
    camp = tmp_path / "stack.yaml"
    camp.write_text(CAMPAIGN.replace("ENGINE", engine))
    watcher = GuestWatcher(paths, look)
    watcher.start()
    t0 = time.monotonic()
    try:
        res = vb(env, "run", str(camp), "--no-report")
    finally:
        watcher.done.set()
        watcher.join(60)
    total = time.monotonic() - t0
    assert res.returncode == 0, res.stdout + res.stderr

    rep = vb(env, "report", "--json")
    assert rep.returncode == 0, rep.stderr
    doc = json.loads(rep.stdout)
    assert doc["status"] == "finished" and not doc["failures"]
    labels = {p["name"]: p["label"] for p in doc["platforms"]}
    accel = "kvm" if labels["vm"].startswith("qemu(kvm") else "tcg"
    assert labels["vm"] == f"qemu({accel},2 vcpu,memory=2048MiB)"
    assert labels[stack] == f"{labels['vm']}/{engine}"  # e.g. qemu(tcg,2 vcpu,memory=2048MiB)/docker
    stacked = next(p for p in doc["platforms"] if p["name"] == stack)
    assert stacked["config"]["inside"] == "vm"
    assert stacked["config"]["outer"]["inner"] == {stack: {"type": engine, "packages": packages}}
    assert "runs inside the instances of vm" in stacked["config"]["engine"]["error"]  # never the host's engine
    vm_versions = next(p for p in doc["platforms"] if p["name"] == "vm")["versions"]
    assert all(vm_versions[f"guest {p}"] not in ("", "?") for p in packages)

    rows = {(r["benchmark"], r["metric"], r["platform"]): r for r in doc["results"]}
    eps = {p: rows[("sysbench-cpu", "events_per_second", p)] for p in ("native", "vm", stack)}
    assert all(r["n"] == 1 and r["failed"] == 0 for r in eps.values())
    assert eps["native"]["relative"] == 1.0

    # it ran in the guest's engine: the watcher saw the benchmark's container there
    [(run_id,)] = db_rows(env, "SELECT id FROM runs")
    container = f"vb-{run_id}-{stack}-r0"
    assert f"container={container}" in watcher.seen, watcher.seen
    assert f"driver={driver}" in watcher.seen
    execs = db_rows(env, "SELECT benchmark, status, instance, stdout FROM executions WHERE platform = ?", stack)
    assert {(b, s) for b, s, _, _ in execs} == {("sysbench-cpu", "ok"), ("lifecycle", "ok")}
    assert all(i == container for _, _, i, _ in execs)
    assert "events per second" in next(out for b, _, _, out in execs if b == "sysbench-cpu")
    life = dict(db_rows(env, "SELECT platform || ':' || metric, value FROM samples WHERE benchmark = 'lifecycle'"))
    assert {f"{stack}:create_s", f"{stack}:start_s", "vm:start_s"} <= set(life)
    if accel == "tcg":  # emulation slows both alike: evidence the stack's sysbench ran in the VM
        assert eps["vm"]["relative"] < 0.6 and eps[stack]["relative"] < 0.6
    print(f"\n{stack}: total {total:.0f} s; vm boot-to-ready (start_s) {life['vm:start_s']:.1f} s; "
          f"{stack} create (VM boot + engine + import + create) {life[f'{stack}:create_s']:.1f} s, "
          f"start {life[f'{stack}:start_s']:.1f} s; relative events/s: vm {eps['vm']['relative']:.3f}, "
          f"{stack} {eps[stack]['relative']:.3f}")

    # nothing left: no QEMU, no mounts, no instance directories
    assert not qemu_processes([f"{paths.instances}/"])
    assert not [line for line in Path("/proc/self/mountinfo").read_text().splitlines()
                if line.split()[4].startswith(str(paths.state))]
    assert not [d for d in paths.instances.iterdir()] if paths.instances.is_dir() else True

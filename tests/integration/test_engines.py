"""Docker, Podman and containerd for real: the engines are started if needed, the guest
image is imported once per engine, and every container made here is removed again."""
from __future__ import annotations

import os
import statistics
import time
import uuid

import pytest

from virtbench import proc
from virtbench.errors import CommandError
from virtbench.platforms.base import EXEC_ENV, LABEL, Instance, Paths
from virtbench.platforms.containerd import CTR, Containerd
from virtbench.platforms.docker import Docker
from virtbench.platforms.podman import Podman

pytestmark = pytest.mark.integration
ENGINES = [Docker, Podman, Containerd]
MiB = 1024 * 1024


@pytest.fixture(scope="module", params=ENGINES, ids=lambda c: c.type)
def engine(request, paths, image):
    """The platform class with its engine running and the image imported."""
    cls = request.param
    if proc.which(cls.binaries[0]) is None:
        pytest.skip(f"{cls.binaries[0]} not installed (apt-get install {' '.join(cls.packages)})")
    cls.ensure_engine(paths)
    cls("setup", cls.Options(), paths).prepare(image)
    yield cls
    cls.cleanup(paths)  # anything a failed test left behind


def leftovers(cls, run_id: str) -> list[str]:
    """Everything of this run the engine still knows about."""
    if cls is Containerd:
        found = proc.run([*CTR, "containers", "ls", "-q", f'labels."{LABEL}"=={run_id}']).stdout.split()
        tasks = proc.run([*CTR, "tasks", "ls", "-q"]).stdout.split()
        snaps = [line.split()[0] for line in proc.run([*CTR, "snapshots", "ls"]).stdout.splitlines()[1:]]
        return found + [t for t in tasks if run_id in t] + [s for s in snaps if run_id in s]
    return proc.run([*cls.base_argv(), "ps", "-a", "-q", "--filter", f"label={LABEL}={run_id}"]).stdout.split()


def name_for(run_id: str) -> str:
    return f"vb-{run_id}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def running(engine, paths, image, run_id, request):
    """A started instance with the options given by indirect parametrization, removed afterwards."""
    opts = getattr(request, "param", {})
    if engine is Containerd and opts.get("network") == "bridge":
        pytest.skip("containerd refuses a bridge network in __init__ (see the unit tests)")
    platform = engine("t", engine.Options(**opts), paths)
    inst = platform.create(image, name_for(run_id), run_id)
    try:
        platform.start(inst)
        yield platform, inst
    finally:
        platform.stop(inst)
        platform.remove(inst)
        assert leftovers(engine, run_id) == []


def test_probe_available(engine, paths):
    avail = engine.availability(paths)
    assert avail.available, f"{avail.reason} (fix: {avail.fix})"
    assert "ran a container" in avail.reason


def test_prepare_idempotent_and_fast(engine, paths, image):
    platform = engine("t", engine.Options(), paths)
    started = time.monotonic()
    platform.prepare(image)
    platform.prepare(image)
    assert time.monotonic() - started < 5
    listing = platform.host.run(platform.image_query_argv(image)).stdout
    assert listing.strip(), f"{image.tag} with its tar hash label is not in {engine.type}"


def test_exec_runs_the_guest_image(running):
    platform, inst = running
    assert platform.exec(inst, ["cat", "/etc/debian_version"]).stdout.strip().startswith("12.")
    assert platform.exec(inst, ["openssl", "version"]).stdout.startswith("OpenSSL 3")


def test_exec_env_is_exactly_exec_env(running):
    platform, inst = running
    lines = platform.exec(inst, ["env"]).stdout.splitlines()
    assert dict(line.split("=", 1) for line in lines) == EXEC_ENV


def test_failing_exec_raises_with_stderr(running):
    platform, inst = running
    with pytest.raises(CommandError) as err:
        platform.exec(inst, ["sh", "-c", "echo boom-on-stderr >&2; exit 3"])
    assert err.value.returncode == 3
    assert "boom-on-stderr" in err.value.stderr


@pytest.mark.parametrize("running", [dict(cpus=1, memory="256MiB", cpuset="0")], indirect=True)
def test_limits_visible_inside(running):
    platform, inst = running
    quota = platform.exec(inst, ["cat", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
                                 "/sys/fs/cgroup/cpu/cpu.cfs_period_us"]).stdout.split()
    assert quota == ["100000", "100000"]
    limit = platform.exec(inst, ["cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]).stdout.strip()
    assert int(limit) == 256 * MiB
    status = platform.exec(inst, ["grep", "Cpus_allowed_list", "/proc/self/status"]).stdout
    assert status.split()[-1] == "0"


def interfaces(platform, inst: Instance) -> list[str]:
    dev = platform.exec(inst, ["cat", "/proc/net/dev"]).stdout.splitlines()[2:]
    return sorted(line.split(":")[0].strip() for line in dev)


def test_network_none_is_loopback_only(running):
    assert interfaces(*running) == ["lo"]


@pytest.mark.parametrize("running", [dict(network="host")], indirect=True)
def test_network_host_sees_host_interfaces(running):
    # The host's namespace is compared by identity: its interface list is not stable
    # while other workers add and remove veths (a CI run saw `vbhosts<tag>a` vanish
    # between the two reads).
    platform, inst = running
    inside = platform.exec(inst, ["readlink", "/proc/self/ns/net"]).stdout.strip()
    assert inside == os.readlink("/proc/self/ns/net")
    assert "eth0" in interfaces(platform, inst)


@pytest.mark.parametrize("running", [dict(network="bridge")], indirect=True)
def test_network_bridge_has_own_interface(running):
    assert "eth0" in interfaces(*running)


def test_stop_remove_leaves_nothing_and_remove_is_idempotent(engine, paths, image, run_id):
    platform = engine("t", engine.Options(), paths)
    inst = platform.create(image, name_for(run_id), run_id)
    platform.start(inst)
    platform.stop(inst)
    platform.remove(inst)
    platform.remove(inst)
    assert leftovers(engine, run_id) == []


def test_cleanup_after_crash(engine, paths, image, run_id, tmp_path):
    platform = engine("t", engine.Options(), paths)
    crashed = platform.create(image, name_for(run_id), run_id)
    platform.start(crashed)
    created_only = platform.create(image, name_for(run_id), run_id)
    other_run = "t" + uuid.uuid4().hex[:8]
    bystander = platform.create(image, name_for(other_run), other_run)
    # Same run id, another virtbench state directory (another setup or test session).
    foreign = engine("t", engine.Options(), Paths(state=tmp_path / "state", runtime=tmp_path / "run"))
    stranger = foreign.create(image, name_for(run_id), run_id)
    try:
        removed = engine.cleanup(paths, run_id)
        assert len(removed) == 2 and all("could not" not in r for r in removed), removed
        assert any(crashed.name in r for r in removed) and any(created_only.name in r for r in removed)
        assert set(leftovers(engine, run_id)) == {stranger.name if engine is Containerd else stranger.data["id"][:12]}
        assert leftovers(engine, other_run) != []  # another run's containers are left alone
        assert engine.cleanup(paths, run_id) == []
    finally:
        platform.remove(bystander)
        foreign.remove(stranger)
    assert leftovers(engine, run_id) == [] and leftovers(engine, other_run) == []


def test_versions_and_describe(engine, paths):
    platform = engine("t", engine.Options(cpus=1), paths)
    versions = platform.versions()
    assert versions.get("runc", "?") not in ("?", "not installed")
    doc = platform.describe()
    assert doc["type"] == engine.type and doc["cpus"] == 1
    assert "error" not in doc["engine"] and doc["engine"]["runtime"]


def test_lifecycle_timings(engine, paths, image, run_id):
    """Start-to-exit time of each lifecycle step, median of 5 (printed with -s)."""
    platform = engine("t", engine.Options(), paths)
    steps: dict[str, list[float]] = {k: [] for k in ("create", "start", "exec true", "stop", "remove")}
    for _ in range(5):
        t0 = time.perf_counter()
        inst = platform.create(image, name_for(run_id), run_id)
        t1 = time.perf_counter()
        platform.start(inst)
        t2 = time.perf_counter()
        platform.exec(inst, ["true"])
        t3 = time.perf_counter()
        platform.stop(inst)
        t4 = time.perf_counter()
        platform.remove(inst)
        t5 = time.perf_counter()
        for key, seconds in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
            steps[key].append(seconds)
    medians = {k: statistics.median(v) * 1000 for k, v in steps.items()}
    print(f"\n{engine.type} lifecycle medians (ms): "
          + ", ".join(f"{k} {v:.0f}" for k, v in medians.items())
          + f", total {sum(medians.values()):.0f}")
    assert leftovers(engine, run_id) == []


def test_daemon_that_dies_reports_log_tail_and_fix(tmp_path, monkeypatch):
    from virtbench import services
    from virtbench.errors import UnavailableError

    monkeypatch.setattr(services, "systemd_running", lambda: False)  # the direct start path

    broken = services.Daemon(name="brokend", probe=("false",), unit="brokend", package="brokend",
                             start=("sh", "-c", "echo cannot bind socket: address in use >&2; exit 1"))
    started = time.monotonic()
    with pytest.raises(UnavailableError) as err:
        services.ensure(broken, log_dir=tmp_path, timeout=30)
    assert time.monotonic() - started < 10  # a dead daemon is not waited for
    assert "cannot bind socket" in err.value.message and "exited" in err.value.message
    assert str(tmp_path / "brokend.log") in err.value.fix


def test_containerd_cleanup_removes_orphaned_snapshot(engine, paths, run_id):
    """A writable layer whose container is gone (crash between the two deletes)."""
    if engine is not Containerd:
        pytest.skip("containerd only")
    parent = next(line.split()[0] for line in proc.run([*CTR, "snapshots", "ls"]).stdout.splitlines()[1:]
                  if line.split()[-1] == "Committed")
    key = name_for(run_id)
    proc.run([*CTR, "snapshots", "prepare", key, parent])
    proc.run([*CTR, "snapshots", "label", key, f"{LABEL}={run_id}", f"org.virtbench.state={paths.state}"])
    assert engine.cleanup(paths, run_id) == [f"containerd snapshot {key} (run {run_id})"]
    assert key not in proc.run([*CTR, "snapshots", "ls"]).stdout

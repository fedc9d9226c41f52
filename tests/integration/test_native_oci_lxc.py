"""native, runc, crun and lxc against the real guest image: lifecycle, limits, network, cleanup.

Everything is checked from the host's point of view too (mountinfo, the runtime's own
listing, the image rootfs), because a leak there is what breaks the next run.
"""
from __future__ import annotations

import json
import os
import socket
import stat
import statistics
import threading
import time
import uuid
from pathlib import Path

import pytest

from virtbench import proc
from virtbench.errors import CommandError
from virtbench.platforms import bridge, cgroups, mounts, oci
from virtbench.platforms.base import EXEC_ENV, Paths, Platform
from virtbench.platforms.lxc import LXC
from virtbench.platforms.native import Native
from virtbench.platforms.oci import HYBRID, Crun, Runc

pytestmark = pytest.mark.integration

CLASSES: dict[str, type[Platform]] = {"native": Native, "runc": Runc, "lxc": LXC}
CONTAINERS = ["runc", "lxc"]
TIMINGS: dict[str, dict[str, list[float]]] = {}


def make(kind: str, paths: Paths, **options) -> Platform:
    cls = CLASSES[kind]
    return cls(kind, cls.Options(**options), paths)


def fresh_name(kind: str) -> str:
    return f"vb-t-{kind}-{uuid.uuid4().hex[:6]}"


def running(kind: str, paths: Paths) -> list[str]:
    """What the runtime itself still knows about (its private root / lxcpath)."""
    if kind == "runc":
        return proc.run(["runc", "--root", str(paths.runtime / "runc"), "list", "-q"]).stdout.split()
    if kind == "lxc":
        return proc.run(["lxc-ls", "-P", str(paths.state / "lxc")], check=False).stdout.split()
    return [d.name for d, _ in mounts.leftovers(paths.instances, "native", None)]


def instance_dir(kind: str, paths: Paths, name: str) -> Path:
    return paths.state / "lxc" / name if kind == "lxc" else paths.instances / name


def snapshot(root: Path, *, skip: str = "var/tmp/virtbench") -> dict[str, tuple[int, int]]:
    """Paths, types and sizes of the image (other sessions' scratch dirs left out)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == skip:
            dirnames[:] = []
            continue
        for n in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, n))
            out[os.path.normpath(os.path.join(rel_dir, n))] = (
                stat.S_IFMT(st.st_mode), st.st_size if stat.S_ISREG(st.st_mode) else 0)
    return out


def host_cgroup_limits(pid: int) -> dict[str, str]:
    """Read the limits of a process's cgroup from the host (v1 per controller, or v2)."""
    groups = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        for c in ctrls.split(",") if ctrls else [""]:
            groups[c] = path
    root = Path("/sys/fs/cgroup")
    if cgroups.cgroup_mode() == "v2":
        d = root / groups[""].lstrip("/")
        quota, period = (d / "cpu.max").read_text().split()
        return {"quota": quota, "period": period, "memory": (d / "memory.max").read_text().strip(),
                "cpuset": (d / "cpuset.cpus").read_text().strip()}
    read = lambda ctrl, f: (root / ctrl / groups[ctrl].lstrip("/") / f).read_text().strip()  # noqa: E731
    return {"quota": read("cpu", "cpu.cfs_quota_us"), "period": read("cpu", "cpu.cfs_period_us"),
            "memory": read("memory", "memory.limit_in_bytes"), "cpuset": read("cpuset", "cpuset.cpus")}


def assert_gone(kind: str, paths: Paths, name: str) -> None:
    d = instance_dir(kind, paths, name)
    assert mounts.mounts_under(d) == []
    assert not [m for m in mounts.read_mountinfo() if name in m.mount_point]
    assert not d.exists()
    assert name not in running(kind, paths)
    assert not Path(f"/sys/class/net/{bridge.veth_name(name)}").exists()


@pytest.fixture(scope="module", autouse=True)
def tidy(paths):
    """After the module: nothing of these platforms may be left, and print the timings."""
    yield
    for cls in (*CLASSES.values(), Crun):
        cls.cleanup(paths)
    assert all(running(k, paths) == [] for k in CLASSES)
    for d in (paths.state / "lxc", paths.runtime / "runc", paths.runtime / "crun",
              paths.runtime / "probe", paths.instances, paths.state, paths.state.parent, paths.runtime):
        try:
            d.rmdir()
        except OSError:
            pass
    if TIMINGS:
        print("\nlifecycle timings, median of 5 (ms):")
        print(f"{'platform':10}" + "".join(f"{s:>10}" for s in ("create", "start", "exec", "stop", "remove")))
        for kind, steps in TIMINGS.items():
            print(f"{kind:10}" + "".join(f"{statistics.median(v) * 1000:10.1f}" for v in steps.values()))


@pytest.mark.parametrize("kind", list(CLASSES))
def test_probe_available(kind, paths):
    result = CLASSES[kind].availability(paths)
    assert result.available, result


def test_runc_probe_leaves_no_cgroup(paths):
    """The probe's container has a top-level cgroup of its own, which `runc delete` removes; under
    virtbench/ it left that empty parent in every hierarchy after each run (seen by `cleanup`)."""
    if oci.systemd_cgroups("runc"):
        pytest.skip("systemd places the probe in a scope of virtbench.slice and removes it")
    made: list[str] = []
    real = oci.build_oci_config

    def spy(**kw):
        made.append(kw["cgroups_path"])
        return real(**kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(oci, "build_oci_config", spy)
        assert Runc.try_instance(paths).available
    assert len(made) == 1 and made[0].count("/") == 1 and made[0].startswith("/vb-probe-"), made
    assert not list(Path("/sys/fs/cgroup").glob(f"*{made[0]}")) and not Path(f"/sys/fs/cgroup{made[0]}").exists()


def test_crun_probe(paths):
    result = Crun.availability(paths)
    if cgroups.cgroup_mode() == "hybrid":
        assert not result.available and HYBRID in result.reason
        assert "systemd.unified_cgroup_hierarchy=1" in result.fix and "runc" in result.fix
    else:
        assert result.available, result


@pytest.mark.parametrize("kind", list(CLASSES))
def test_lifecycle(kind, paths, image, run_id):
    before = snapshot(image.rootfs)
    platform = make(kind, paths)
    assert platform.versions() and platform.describe()["type"] == kind
    name = fresh_name(kind)
    inst = platform.create(image, name, run_id)
    scratch = f"/var/tmp/virtbench/{inst.name}"
    try:
        platform.start(inst)
        release = (image.rootfs / "etc/debian_version").read_text().strip()
        assert platform.exec(inst, ["cat", "/etc/debian_version"]).stdout.strip() == release
        assert release.startswith("12.")
        assert platform.exec(inst, ["openssl", "version"]).stdout.startswith("OpenSSL 3")
        env = dict(line.split("=", 1) for line in platform.exec(inst, ["env"]).stdout.splitlines())
        assert env == EXEC_ENV
        assert platform.exec(inst, ["pwd"]).stdout.strip() == "/"
        with pytest.raises(CommandError) as err:
            platform.exec(inst, ["sh", "-c", "echo oops >&2; exit 3"])
        assert err.value.returncode == 3 and "oops" in err.value.stderr
        platform.exec(inst, ["sh", "-c", f"mkdir -p {scratch} && echo x > {scratch}/f && echo y > /vb-marker"])
        written = image.rootfs / scratch.lstrip("/") / "f"
        # scratch never lands in the shared image: native's is a host directory bind-mounted
        # into the chroot (bare-metal speed), containers write to their overlay
        assert not written.exists()
        if kind == "native":
            assert (Path(inst.data["dir"]) / "scratch" / inst.name / "f").read_text() == "x\n"
        platform.stop(inst)
    finally:
        platform.remove(inst)
    platform.remove(inst)  # a second remove is harmless
    assert_gone(kind, paths, inst.name)
    assert not (image.rootfs / scratch.lstrip("/")).exists()
    after = snapshot(image.rootfs)
    if kind == "native":
        after.pop("vb-marker", None)  # chroot writes to the rootfs itself, like bare metal would
        (image.rootfs / "vb-marker").unlink(missing_ok=True)
    assert after == before


def _sleepers(seconds: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", seconds.encode()]:
                pids.append(int(entry.name))
        except OSError:
            pass
    return pids


@pytest.mark.parametrize("kind", list(CLASSES))
def test_stop_kills_what_a_benchmark_left_running(kind, paths, image, run_id):
    platform = make(kind, paths)
    inst = platform.create(image, fresh_name(kind), run_id)
    seconds = str(40000 + uuid.uuid4().int % 9999)
    try:
        platform.start(inst)
        platform.exec(inst, ["sh", "-c", f"setsid sleep {seconds} </dev/null >/dev/null 2>&1 &"])
        deadline = time.monotonic() + 5
        while not _sleepers(seconds) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _sleepers(seconds)
        platform.stop(inst)
        assert _sleepers(seconds) == []
    finally:
        platform.remove(inst)
    assert_gone(kind, paths, inst.name)


@pytest.mark.parametrize("kind", CONTAINERS)
def test_limits(kind, paths, image, run_id):
    platform = make(kind, paths, cpus=1, cpuset="0", memory="256MiB")
    inst = platform.create(image, fresh_name(kind), run_id)
    try:
        platform.start(inst)
        limits = host_cgroup_limits(platform.init_pid(inst))
        assert limits == {"quota": "100000", "period": "100000", "memory": str(256 * 1024 * 1024),
                          "cpuset": "0"}
        # and the limit binds: nproc inside follows the cpuset
        assert platform.exec(inst, ["nproc"]).stdout.strip() == "1"
    finally:
        platform.remove(inst)
    assert_gone(kind, paths, inst.name)


def _interfaces(platform: Platform, inst) -> set[str]:
    lines = platform.exec(inst, ["cat", "/proc/net/dev"]).stdout.splitlines()[2:]
    return {line.split(":", 1)[0].strip() for line in lines}


@pytest.mark.parametrize("kind", CONTAINERS)
def test_network_none_and_host(kind, paths, image, run_id):
    host_ifs = {line.split(":", 1)[0].strip() for line in Path("/proc/net/dev").read_text().splitlines()[2:]}
    for network, expected in (("none", {"lo"}), ("host", host_ifs)):
        platform = make(kind, paths, network=network)
        inst = platform.create(image, fresh_name(kind), run_id)
        try:
            platform.start(inst)
            got = _interfaces(platform, inst)
            if network == "none":
                assert got == expected
            else:  # the host's own interfaces (others' veths come and go meanwhile)
                assert {i for i in expected if not i.startswith(("vb", "veth"))} <= got
        finally:
            platform.remove(inst)
        assert_gone(kind, paths, inst.name)


@pytest.mark.parametrize("kind", CONTAINERS)
def test_network_bridge(kind, paths, image, run_id):
    platform = make(kind, paths, network="bridge")
    inst = platform.create(image, fresh_name(kind), run_id)
    server = socket.socket()
    try:
        platform.start(inst)
        address = inst.data["address"]
        assert _interfaces(platform, inst) == {"lo", "eth0"}
        assert f"inet {address}/24" in platform.exec(inst, ["cat", "/proc/net/fib_trie"]).stdout \
            or address in platform.exec(inst, ["cat", "/proc/net/fib_trie"]).stdout
        server.bind((f"{bridge.SUBNET}.1", 0))
        server.listen(1)
        server.settimeout(10)
        port = server.getsockname()[1]
        got: list[str] = []

        def accept() -> None:
            conn, peer = server.accept()
            got.append(peer[0] + " " + conn.recv(100).decode())
            conn.close()
        t = threading.Thread(target=accept)
        t.start()
        platform.exec(inst, ["bash", "-c", f"echo hello > /dev/tcp/{bridge.SUBNET}.1/{port}"], timeout=10)
        t.join(10)
        assert got == [f"{address} hello\n"]
    finally:
        server.close()
        platform.remove(inst)
    assert_gone(kind, paths, inst.name)
    assert not [p for p in bridge.LEASES.glob("*") if p.read_text().endswith(inst.name)]


def _refused_quickly(platform: Platform, inst, address: str) -> None:
    """A connection to a closed port is refused at once (RST): the peer answered at layer 2."""
    start = time.monotonic()
    r = platform.exec(inst, ["bash", "-c", f"exec 3<>/dev/tcp/{address}/9"], timeout=20, check=False)
    assert r.returncode != 0 and "refused" in r.stderr, r.stderr
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("kind", CONTAINERS)
def test_bridge_address_reuse_keeps_peers_reachable(kind, paths, image, run_id):
    """An address reused by a new instance keeps its MAC, so a peer's ARP cache stays right.

    With a random MAC per instance, the client's SYNs went to the removed server's MAC and
    peer benchmarks hung until their timeout (11 of 24 in a runc/lxc campaign)."""
    platform = make(kind, paths, network="bridge")
    a, b = (platform.create(image, fresh_name(kind), run_id) for _ in range(2))
    later: list = []
    try:
        platform.start(a)
        platform.start(b)
        address = b.data["address"]
        _refused_quickly(platform, a, address)  # a caches b's MAC
        mac = platform.exec(b, ["cat", "/sys/class/net/eth0/address"]).stdout.strip()
        assert mac == bridge.mac_for(address)
        platform.remove(b)
        # The lowest free address goes first, and the bridge is host-wide: a parallel test's
        # instance may free a lower one meanwhile. Those go to fillers until b's comes up.
        while True:
            later.append(c := platform.create(image, fresh_name(kind), run_id))
            platform.start(c)
            if _last_octet(c.data["address"]) >= _last_octet(address) or len(later) > 16:
                break
        assert c.data["address"] == address, "another test took b's address meanwhile"
        assert platform.exec(c, ["cat", "/sys/class/net/eth0/address"]).stdout.strip() == mac
        _refused_quickly(platform, a, address)
    finally:
        for inst in (a, b, *later):
            platform.remove(inst)


def _last_octet(address: str) -> int:
    return int(address.rsplit(".", 1)[1])


@pytest.mark.parametrize("kind", list(CLASSES))
def test_crash_then_cleanup(kind, paths, image):
    """create+start, then the harness 'dies': cleanup of that run removes all, and only that run."""
    crashed, other = "t" + uuid.uuid4().hex[:8], "t" + uuid.uuid4().hex[:8]
    platform = make(kind, paths)
    lost = platform.create(image, fresh_name(kind), crashed)
    platform.start(lost)
    kept = platform.create(image, fresh_name(kind), other)
    platform.start(kept)
    try:
        removed = type(platform).cleanup(paths, crashed)
        assert removed and any(lost.name in r for r in removed)
        assert_gone(kind, paths, lost.name)
        platform.exec(kept, ["true"])  # the other run's instance is untouched
        assert type(platform).cleanup(paths, crashed) == []
    finally:
        type(platform).cleanup(paths, other)
    assert_gone(kind, paths, kept.name)


@pytest.mark.parametrize("kind", [*CLASSES, "crun"])
def test_cleanup_with_nothing_there(kind, tmp_path):
    empty = Paths(state=tmp_path / "state", runtime=tmp_path / "run")
    cls = Crun if kind == "crun" else CLASSES[kind]
    assert cls.cleanup(empty, "nope") == []
    # a run-less cleanup may also drop host-wide leftovers (an unused vbbr0, empty cgroups)
    assert not [r for r in cls.cleanup(empty) if str(tmp_path) in r]
    assert cls.cleanup(empty) == []


@pytest.mark.measures  # asserts a time
@pytest.mark.parametrize("kind", list(CLASSES))
def test_lifecycle_timings(kind, paths, image, run_id):
    platform = make(kind, paths)
    steps: dict[str, list[float]] = {s: [] for s in ("create", "start", "exec", "stop", "remove")}
    for _ in range(5):
        t0 = time.perf_counter()
        inst = platform.create(image, fresh_name(kind), run_id)
        t1 = time.perf_counter()
        try:
            platform.start(inst)
            t2 = time.perf_counter()
            platform.exec(inst, ["true"])
            t3 = time.perf_counter()
            platform.stop(inst)
            t4 = time.perf_counter()
        finally:
            platform.remove(inst)
        t5 = time.perf_counter()
        for step, dt in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
            steps[step].append(dt)
        assert_gone(kind, paths, inst.name)
    TIMINGS[kind] = steps
    assert statistics.median(steps["exec"]) < 1.0


def test_native_rejects_limits():
    with pytest.raises(Exception, match="takes no resource limits"):
        Native.Options(cpus=1)


def test_describe_records_effective_settings(paths):
    d = make("runc", paths, cpus=2, memory="1GiB").describe()
    assert d["resources"]["cpu"] == {"quota": 200000, "period": 100000}
    assert d["cgroup"] in ("v1", "v2", "hybrid")
    assert make("lxc", paths, cpus=1).describe()["cgroup_config"]
    assert make("native", paths).describe()["namespaces"] == []
    json.dumps([d, make("native", paths).describe()])

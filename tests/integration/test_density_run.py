"""Density for real: LXC system containers (OOM, ENOSPC, systemd), per-platform images, a
confined until-failure campaign through the CLI with its report, the host guard, and cleanup
after a crash. Every run is confined (`host_memory`) so the shared host is never at risk."""
from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tarfile
import time
import uuid
from pathlib import Path

import pytest

from hostsupport.density import _campaign, leftovers, vb  # noqa: F401 - shared with test_density_signals
from virtbench.errors import InputError
from virtbench.images import guest
from virtbench.images.build import Recipe, build, host_arch
from virtbench.platforms import cgroups, kernellog
from virtbench.platforms.lxc import LXC

pytestmark = pytest.mark.integration

WORKLOAD = "{name: openssl, algorithm: des-ede3, bytes: 64, multi: 1, seconds: 1}"
"""multi: 1: until quick's parser fix for OpenSSL 1.1.1's -multi sum ("evp") lands, bullseye needs it."""


# -- system containers ---------------------------------------------------------------------------
@pytest.fixture
def lxc_of(paths, image, run_id):
    made = []

    def make(**options):
        plat = LXC("lxc", LXC.Options(**options), paths)
        plat.prepare(image)
        inst = plat.create(image, f"vb-t-dens-{uuid.uuid4().hex[:6]}", run_id)
        made.append((plat, inst))
        plat.start(inst)
        return plat, inst

    yield make
    for plat, inst in made:
        plat.stop(inst)
        plat.remove(inst)


@pytest.mark.measures  # an OOM kill, read from the kernel log: alone
def test_memory_plus_swap_exceeded_is_oom_killed_and_read_from_the_cgroup(lxc_of):
    plat, inst = lxc_of(memory="64M", swap=0)
    cg = plat.memory_cgroup(inst)
    assert cg and cg.endswith(f"lxc.payload.{inst.name}")
    before = cgroups.oom_counters(cg)
    assert before.get("oom_kill") == 0
    mark = kernellog.mark()
    r = plat.exec(inst, ["timeout", "60", "tail", "/dev/zero"], timeout=120, check=False)
    assert r.returncode == 137  # SIGKILL by the OOM killer, not the timeout (124)
    after = cgroups.oom_counters(cg)
    assert after["oom_kill"] == 1
    assert any("tail" in line for line in kernellog.oom_lines_since(mark))


@pytest.mark.measures  # reads the host's free disk space before and after: alone
def test_write_beyond_disk_fails_with_enospc_inside_only(lxc_of, paths):
    plat, inst = lxc_of(memory="128M", disk="512M")
    assert "/dev/loop" in plat.exec(inst, ["df", "/"], timeout=30).stdout
    host_free = os.statvfs(paths.state).f_bavail * os.statvfs(paths.state).f_frsize
    r = plat.exec(inst, ["dd", "if=/dev/zero", "of=/fill", "bs=1M", "count=1024"], timeout=300, check=False)
    assert r.returncode != 0 and "No space left on device" in r.stderr
    disk = Path(inst.data["dir"]) / "rootdev"
    assert disk.stat().st_blocks * 512 <= 512 << 20  # the sparse image never grows beyond disk:
    host_after = os.statvfs(paths.state).f_bavail * os.statvfs(paths.state).f_frsize
    assert host_after > 256 << 20 and host_free - host_after < 600 << 20
    assert plat.exec(inst, ["touch", "/tmp/still-writable-after-rm"], timeout=30, check=False).returncode in (0, 1)


def test_systemd_system_container_boots(paths, run_id):
    recipe = Recipe(release="bookworm", arch=host_arch(), profile="density",
                    packages=("ca-certificates", "iproute2", "openssl", "procps", "systemd-sysv"))
    img = build(recipe)
    plat = LXC("lxc", LXC.Options(memory="128M", swap=0, init="systemd"), paths)
    assert plat.image_packages() == ("systemd-sysv",)
    plat.prepare(img)
    inst = plat.create(img, f"vb-t-sysd-{uuid.uuid4().hex[:6]}", run_id)
    try:
        plat.start(inst)
        assert plat.exec(inst, ["ps", "-p", "1", "-o", "comm="], timeout=30).stdout.strip() == "systemd"
        state = plat.exec(inst, ["systemctl", "is-system-running"], timeout=30, check=False).stdout.strip()
        assert state in ("running", "degraded")
    finally:
        plat.stop(inst)
        plat.remove(inst)


def test_image_init_without_an_init_is_refused(paths, image):
    plat = LXC("lxc", LXC.Options(init="image"), paths)
    with pytest.raises(InputError, match="has none"):
        plat.prepare(image)


# -- images side by side ---------------------------------------------------------------------------
def _tar_of(files: dict[str, bytes], path: Path) -> None:
    with tarfile.open(path, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_releases_busybox_and_brought_archives(tmp_path):
    packages = ("ca-certificates", "iproute2", "openssl", "procps")
    bookworm = guest.resolve(guest.PlatformImage(release="bookworm"), packages, ("openssl",))
    bullseye = guest.resolve(guest.PlatformImage(release="bullseye"), packages, ("openssl",))
    v12 = guest.tool_version(bookworm, ["openssl", "version"])
    v11 = guest.tool_version(bullseye, ["openssl", "version"])
    assert v12.startswith("OpenSSL 3.") and v11.startswith("OpenSSL 1.1.1")
    tiny = guest.resolve(guest.PlatformImage(release="busybox"), packages, ("openssl",))
    assert guest.tool_version(tiny, ["openssl", "version"]) == v12
    assert sum(f.stat().st_size for f in tiny.rootfs.rglob("*") if f.is_file() and not f.is_symlink()) < 40 << 20

    # an LXC-template-like .tar.zst of the tiny image: a brought rootfs
    zst = tmp_path / "tiny-template.tar.zst"
    subprocess.run(["tar", "--zstd", "-C", str(tiny.rootfs), "-cf", str(zst), "."], check=True)
    brought = guest.brought(zst)
    assert brought.manifest["archive_kind"] == "rootfs tarball"
    assert guest.tool_version(brought, ["openssl", "version"]) == v12

    # a `docker save` archive with two layers; the second deletes openssl (a whiteout)
    save = tmp_path / "save"
    (save / "l1").mkdir(parents=True)
    (save / "l2").mkdir()
    subprocess.run(["cp", str(tiny.tarball), str(save / "l1/layer.tar")], check=True)
    _tar_of({"usr/bin/.wh.openssl": b"", "etc/added-by-layer2": b"x\n"}, save / "l2/layer.tar")
    (save / "manifest.json").write_text(json.dumps([{"Config": "c.json", "RepoTags": ["t:1"],
                                                     "Layers": ["l1/layer.tar", "l2/layer.tar"]}]))
    archive = tmp_path / "saved.tar"
    subprocess.run(["tar", "-C", str(save), "-cf", str(archive), "manifest.json", "l1", "l2"], check=True)
    img = guest.brought(archive)
    assert img.manifest["archive_kind"] == "docker save"
    assert (img.rootfs / "etc/added-by-layer2").is_file()
    assert not (img.rootfs / "usr/bin/openssl").exists()
    with pytest.raises(InputError, match="lacks the workload's tool 'openssl'"):
        guest.tool_version(img, ["openssl", "version"])

    junk = tmp_path / "junk.tar.xz"
    _tar_of({"README": b"not a rootfs\n"}, tmp_path / "junk.tar")
    subprocess.run(["xz", "-k", str(tmp_path / "junk.tar")], check=True)
    with pytest.raises(InputError, match="is not a root filesystem archive"):
        guest.brought(junk)
    notar = tmp_path / "notar.tar.zst"
    notar.write_bytes(b"\x00" * 100)
    with pytest.raises(InputError, match="not a tar archive"):
        guest.brought(notar)


def test_the_cgroup_exec_helper_enters_a_nested_cgroup_it_makes_in_every_hierarchy():
    """QEMU starts through `python -m virtbench.platforms.cgroups exec` inside a confining parent
    (density, selftest). On cgroup v1 a cpuset level made on the way has no CPUs, and the kernel
    refused its child's (EACCES): `selftest --platform qemu` failed before the VM started."""
    rel = f"vbtest-{uuid.uuid4().hex[:8]}/inner"
    try:
        r = subprocess.run([sys.executable, "-m", "virtbench.platforms.cgroups", "exec", "--cgroup", rel, "--",
                            "cat", "/proc/self/cgroup"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr[-2000:]
        joined = {line.split(":")[1]: line.split(":")[2] for line in r.stdout.splitlines()}
        controllers = ["memory"] if cgroups.is_v2() else ["memory", "cpuset", "cpu", "pids"]
        assert all(joined.get("" if cgroups.is_v2() else c) == "/" + rel for c in controllers), r.stdout
    finally:
        cgroups.remove_tree(rel.split("/")[0])


# -- the experiment through the CLI ------------------------------------------------------------------
def _why(entry: dict) -> str:
    """What a density entry says of its stop: enough to tell a failure's cause from CI's log."""
    keys = ("max_count", "stop_reason", "stop_count", "stop_message", "stop_evidence")
    return json.dumps({k: entry.get(k) for k in keys} | {"points": entry.get("points", [])[:2]}, default=str)[:6000]


@pytest.mark.measures  # density with the host guard: alone
def test_until_failure_campaign_report_and_nothing_left(env, tmp_path):
    camp = _campaign(tmp_path, f"""
name: density-it
experiment: density
platforms:
  - {{name: native, type: native}}
  - {{name: lxc-64m, type: lxc, memory: 64M, swap: 0}}
  - {{name: lxc-bullseye, type: lxc, memory: 64M, swap: 0, image: {{release: bullseye}}}}
density:
  workload: {WORKLOAD}
  counts: {{until: failure, max: 3}}
  host_memory: 256M
  settle: 0
  collapse: 0     # the shared test machine's load must not stop this run: mechanics only
  starved: 0
""")
    res = vb(env, "run", str(camp), "--no-report")
    assert res.returncode == 0, res.stderr
    assert leftovers(env) == []
    # LXC parks each stopping container's monitor in lxc.pivot: the run removes it (alone here,
    # so no other container keeps one)
    assert not list(Path("/sys/fs/cgroup").glob("*/lxc.pivot")), "lxc.pivot cgroups left"
    report = vb(env, "report", "--json")
    doc = json.loads(report.stdout)
    entries = {e["platform"]: e for e in doc["density"]}
    lxc = entries["lxc-64m"]
    assert lxc["max_count"] == 3 and lxc["stop_reason"] == "max_reached", _why(lxc)
    assert [p["count"] for p in lxc["points"]] == [1, 2, 3] and all(p["ok"] for p in lxc["points"])
    assert len(lxc["points"][2]["per_instance"]) == 3
    # the workload started at one time inside the instances, and the overlap was measured
    assert all(p["overlap"] is not None and p["overlap"] >= 0.5 for p in lxc["points"]), lxc["points"]
    assert lxc["points"][2]["start_spread_s"] < 1.0
    assert doc["results"] == []  # the density section is the result: no empty rows against a baseline
    assert lxc["memory_per_instance_bytes"] > 0 and lxc["confined"] and lxc["host_memory"] == 256 << 20
    assert entries["native"]["max_count"] == 1 and not entries["native"]["confined"]
    assert "OpenSSL 1.1.1" in entries["lxc-bullseye"]["image"]["tool_version"]
    assert "OpenSSL 3." in lxc["image"]["tool_version"]
    text = vb(env, "report").stdout
    assert "Density: maximum count per platform" in text and "cgroup-confined host" in text
    assert "density[count=" not in text and "Performance relative to" not in text and "no data" not in text
    figs = tmp_path / "figs"
    assert vb(env, "report", "--figures", str(figs)).returncode == 0
    assert (figs / "density-per-instance.png").is_file() and (figs / "density-aggregate.svg").is_file()
    html = tmp_path / "r.html"
    assert vb(env, "report", "--html", str(html)).returncode == 0
    assert "Density until failure" in html.read_text()


@pytest.mark.measures  # density, OOM: alone
def test_oom_in_the_confined_host_is_the_stop_reason(env, tmp_path):
    """64 MiB for everything: each LXC container's workload (two openssl processes) needs a few
    MiB, so the parent's limit is hit during the workload; the kernel's counters say so."""
    camp = _campaign(tmp_path, f"""
name: density-oom
experiment: density
platforms:
  - {{name: lxc, type: lxc, memory: 64M, swap: 0}}
density:
  workload: {WORKLOAD}
  counts: {{until: failure, max: 64, step: 4}}
  host_memory: 24M
  guard: {{confined: false}}   # the subject is the OOM: the 24M host's own guard would stop it first
  settle: 0
""")
    res = vb(env, "run", str(camp), "--no-report")
    assert res.returncode == 1 and "executions failed" in res.stderr, res.stderr  # the failing counts
    assert leftovers(env) == []
    entry = json.loads(vb(env, "report", "--json").stdout)["density"][0]
    assert entry["stop_reason"] in ("oom", "start_failure", "workload_failure"), entry
    assert entry["stop_count"] == entry["max_count"] + 1  # bisected to the exact count
    if entry["stop_reason"] == "oom":
        evidence = entry["stop_evidence"]
        assert any(evidence.get("oom_kills", evidence.get("oom_counters", {})).values())
        log = evidence.get("kernel_log") or []  # the kernel may log a start-time kill after the check
        assert not log or any("oom" in line.lower() or "out of memory" in line.lower() for line in log)
    assert [p["ok"] for p in entry["points"]].count(False) >= 1


@pytest.mark.measures  # the host guard: alone
def test_guard_trip_stops_and_cleans_up(env, tmp_path):
    camp = _campaign(tmp_path, f"""
name: density-guard
experiment: density
platforms:
  - {{name: lxc, type: lxc, memory: 64M}}
density:
  workload: {WORKLOAD}
  counts: [1, 2]
  host_memory: 256M
  guard: {{min_available: 100000G, calm_wait: 0}}   # stop at once: waiting would not raise the floor
""")
    res = vb(env, "run", str(camp), "--no-report")
    assert res.returncode == 0, res.stderr
    entry = json.loads(vb(env, "report", "--json").stdout)["density"][0]
    assert entry["stop_reason"] == "guard" and entry["max_count"] == 0
    assert "before instance 1 started and stayed so for 0 s" in entry["stop_detail"], entry["stop_detail"]
    assert "MemAvailable" in entry["stop_detail"] and entry["stop_evidence"]["reading"]["mem_available"] > 0
    assert leftovers(env) == []


@pytest.mark.parametrize("body, needle", [
    ("counts: {until: failure}\n  guard: {enabled: false}\n  host_memory: 256M", "no limit"),
    ("counts: [1]\n  host_memory: 100000G", "is more than this host's"),
])
def test_bad_input_exits_2_with_nothing_started(env, tmp_path, body, needle):
    camp = _campaign(tmp_path, f"""
name: density-bad
experiment: density
platforms: [{{name: lxc, type: lxc}}]
density:
  workload: {WORKLOAD}
  {body}
""")
    res = vb(env, "run", str(camp), "--no-report")
    assert res.returncode == 2 and needle in res.stderr, res.stderr
    assert leftovers(env) == []
    db = env["VIRTBENCH_DB"].removeprefix("sqlite:///")
    if Path(db).exists():
        with sqlite3.connect(db) as conn:
            assert conn.execute("select count(*) from executions").fetchone()[0] == 0


@pytest.mark.measures  # density with the host guard: alone
def test_crash_leaves_nothing_after_cleanup(env, tmp_path):
    camp = _campaign(tmp_path, """
name: density-crash
experiment: density
platforms: [{name: lxc, type: lxc, memory: 64M}]
density:
  workload: {name: openssl, algorithm: des-ede3, bytes: 64, multi: 1, seconds: 60}
  counts: [1, 2, 3]
  host_memory: 256M
""")
    log = tmp_path / "run.log"
    with log.open("w") as out:
        p = subprocess.Popen([sys.executable, "-m", "virtbench", "run", str(camp), "--no-report"], env=env,
                             stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 300  # the guard may first wait for a host pressed by the tests before
    while time.monotonic() < deadline and p.poll() is None and not any(x.startswith("lxc:") for x in leftovers(env)):
        time.sleep(0.2)
    time.sleep(2)
    if not leftovers(env):  # the run ended first, or never got there: its own output says why
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        pytest.fail(f"no instance and confining parent mid-run (run exit {p.returncode}):\n{log.read_text()[-4000:]}")
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert leftovers(env), "SIGKILL gives no chance to clean up"
    res = vb(env, "cleanup")
    assert res.returncode == 0, res.stderr
    assert leftovers(env) == []


@pytest.mark.measures  # density with the host guard: alone
def test_resume_goes_on_where_the_search_stopped(env, tmp_path):
    """SIGTERM after two counts were measured; --resume measures only the counts after them
    (in later probes), never the stored ones again, and finishes the platform's summary."""
    camp = _campaign(tmp_path, f"""
name: density-resume
experiment: density
platforms: [{{name: lxc, type: lxc, memory: 64M}}]
density:
  workload: {WORKLOAD}
  counts: [1, 2, 3, 4]
  host_memory: 256M
  settle: 0
  collapse: 0
  starved: 0
""")
    db = env["VIRTBENCH_DB"].removeprefix("sqlite:///")

    def counts() -> list[tuple[int, str]]:
        if not Path(db).exists():
            return []
        with sqlite3.connect(db) as conn:
            try:
                return conn.execute("select round, benchmark from executions order by id").fetchall()
            except sqlite3.OperationalError:
                return []

    p = subprocess.Popen([sys.executable, "-m", "virtbench", "run", str(camp), "--no-report"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(counts()) < 2:
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGTERM)
    p.wait(timeout=120)
    before = counts()
    assert len(before) in (2, 3) and all(r == 1 for r, _ in before), before
    with sqlite3.connect(db) as conn:
        run_id = conn.execute("select id from runs").fetchone()[0]
    res = vb(env, "run", "--resume", run_id, "--no-report")
    assert res.returncode == 0, res.stderr
    after = counts()
    assert after[:len(before)] == before
    measured = [b for _, b in after if b.startswith("density[")]
    assert sorted(measured) == sorted(f"density[count={c}]" for c in (1, 2, 3, 4)), after  # each once
    assert all(r == 2 for r, b in after[len(before):] if b.startswith("density["))  # a new probe
    entry = json.loads(vb(env, "report", "--json").stdout)["density"][0]
    assert entry["max_count"] == 4 and entry["stop_reason"] == "counts_done"
    assert leftovers(env) == []

"""argv the engine platforms build, and the OCI archive writer; nothing is run."""
from __future__ import annotations

import hashlib
import json
import resource
import tarfile
from pathlib import Path

import pytest

from virtbench.errors import InputError
from virtbench.images.image import Image
from virtbench.images.oci import IMAGE_NAME_ANNOTATION, write_oci_archive
from virtbench.platforms.base import EXEC_ENV, LABEL, Instance, Paths
from virtbench.platforms.containerd import CGROUP_MOUNT, Containerd, owner_selector
from virtbench.platforms.docker import STATE_LABEL, TAR_LABEL, Docker, owner_labels
from virtbench.platforms.podman import Podman, rlimit_flags

PATHS = Paths(state=Path("/nonexistent/state"), runtime=Path("/nonexistent/run"))
ENV_ARGS = [f"{k}={v}" for k, v in EXEC_ENV.items()]


@pytest.fixture
def fake_image(tmp_path: Path) -> Image:
    root = tmp_path / "img"
    (root / "rootfs" / "etc").mkdir(parents=True)
    (root / "rootfs" / "etc" / "debian_version").write_text("12.0\n")
    with tarfile.open(root / "rootfs.tar", "w") as tar:
        tar.add(root / "rootfs", arcname=".")
    digest = hashlib.sha256((root / "rootfs.tar").read_bytes()).hexdigest()
    return Image(recipe_hash="ab" * 32, root=root, release="bookworm", arch="amd64",
                 profile="quick", packages=("openssl",), tar_sha256=digest)


def make(cls, **opts):
    return cls("p", cls.Options(**opts), PATHS)


def instance(name: str = "vb-x") -> Instance:
    return Instance(name=name, platform="p", run_id="r1")


def flag_value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


@pytest.mark.parametrize("cls", [Docker, Podman])
def test_engine_create_defaults(cls, fake_image):
    argv = make(cls).create_argv(fake_image, "vb-a", "r1")
    assert flag_value(argv, "--name") == "vb-a"
    labels = [argv[i + 1] for i, a in enumerate(argv) if a == "--label"]
    assert labels == [f"{LABEL}=r1", f"{STATE_LABEL}={PATHS.state}"]
    assert flag_value(argv, "--network") == "none"
    assert argv[-3:] == [fake_image.tag, "sleep", "infinity"]
    assert "--cpus" not in argv and "--memory" not in argv and "--cpuset-cpus" not in argv


@pytest.mark.parametrize("cls", [Docker, Podman])
def test_engine_create_limits(cls, fake_image):
    argv = make(cls, cpus=1.5, cpuset="0-1", memory="256MiB", network="host").create_argv(
        fake_image, "vb-a", "r1")
    assert flag_value(argv, "--cpus") == "1.5"
    assert flag_value(argv, "--cpuset-cpus") == "0-1"
    assert flag_value(argv, "--memory") == str(256 * 1024 * 1024)
    assert flag_value(argv, "--network") == "host"


@pytest.mark.parametrize("cls", [Docker, Podman])
def test_engine_exec_has_exact_env_and_no_tty(cls):
    argv = make(cls).exec_argv(instance(), ["cat", "/etc/debian_version"])
    i = argv.index("exec")
    assert argv[i + 1] == "vb-x"
    assert argv[i + 2:] == ["/usr/bin/env", "-i", *ENV_ARGS, "cat", "/etc/debian_version"]
    assert "-i" not in argv[:i + 2] and "-t" not in argv and "--tty" not in argv


def test_docker_import_labels_the_tar_hash(fake_image):
    argv = Docker.import_argv(fake_image)
    assert argv[:2] == ["docker", "import"]
    assert flag_value(argv, "--change") == f"LABEL {TAR_LABEL}={fake_image.tar_sha256}"
    assert argv[-2:] == [str(fake_image.tarball), fake_image.tag]
    query = Docker.image_query_argv(fake_image)
    assert f"label={TAR_LABEL}={fake_image.tar_sha256}" in query
    assert f"reference={fake_image.tag}" in query


def test_podman_global_flags_and_rlimits(fake_image):
    argv = make(Podman).create_argv(fake_image, "vb-a", "r1")
    assert argv[0] == "podman" and flag_value(argv, "--runtime") == "runc"
    ulimits = [argv[i + 1] for i, a in enumerate(argv) if a == "--ulimit"]
    hard_nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard_nofile != resource.RLIM_INFINITY:
        assert f"nofile={hard_nofile}:{hard_nofile}" in ulimits
    nproc = [u for u in ulimits if u.startswith("nproc=")]
    if nproc:
        soft, hard = nproc[0].split("=")[1].split(":")
        assert soft == hard
        pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
        assert int(hard) <= pid_max
    assert ulimits == [a for i, a in enumerate(rlimit_flags()) if i % 2 == 1]


def test_containerd_create_maps_options(fake_image):
    argv = make(Containerd, cpus=1.5, memory="256MiB", network="host").create_argv(fake_image, "vb-a", "r1")
    assert argv[:7] == ["ctr", "--address", "/run/containerd/containerd.sock", "-n", "virtbench", "containers", "create"]
    owner = [f"{LABEL}=r1", f"{STATE_LABEL}={PATHS.state}"]
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--label"] == owner
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--snapshotter-label"] == owner
    assert flag_value(argv, "--cpu-quota") == "150000" and flag_value(argv, "--cpu-period") == "100000"
    assert flag_value(argv, "--memory-limit") == str(256 * 1024 * 1024)
    assert "--net-host" in argv
    assert flag_value(argv, "--mount") == CGROUP_MOUNT
    envs = [argv[i + 1] for i, a in enumerate(argv) if a == "--env"]
    assert envs == ENV_ARGS
    assert argv[-4:] == [fake_image.tag, "vb-a", "sleep", "infinity"]


def test_containerd_default_network_is_own_namespace(fake_image):
    argv = make(Containerd).create_argv(fake_image, "vb-a", "r1")
    assert "--net-host" not in argv and "--cni" not in argv and "--cpu-quota" not in argv


def test_containerd_bridge_rejected_before_anything_starts():
    with pytest.raises(InputError) as err:
        make(Containerd, network="bridge")
    assert err.value.exit_code == 2 and "bridge" in err.value.message and err.value.fix


def test_containerd_exec_ids_unique_and_env_from_container():
    p = make(Containerd)
    a, b = p.exec_argv(instance(), ["true"]), p.exec_argv(instance(), ["true"])
    assert a[:6] == ["ctr", "--address", "/run/containerd/containerd.sock", "-n", "virtbench", "tasks"] and a[6] == "exec"
    assert flag_value(a, "--exec-id") != flag_value(b, "--exec-id")
    assert flag_value(a, "--exec-id").startswith("vb-")
    assert a[-2:] == ["vb-x", "true"]
    assert "-t" not in a and "--tty" not in a


def test_oci_archive_is_consistent(fake_image, tmp_path):
    out = tmp_path / "oci.tar"
    write_oci_archive(fake_image, out)
    with tarfile.open(out) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    for name, blob in files.items():  # every blob is stored under its own digest
        if name.startswith("blobs/sha256/"):
            assert hashlib.sha256(blob).hexdigest() == name.rsplit("/", 1)[1]
    index = json.loads(files["index.json"])
    desc = index["manifests"][0]
    assert desc["annotations"][IMAGE_NAME_ANNOTATION] == fake_image.tag
    manifest = json.loads(files[f"blobs/sha256/{desc['digest'][7:]}"])
    assert desc["size"] == len(files[f"blobs/sha256/{desc['digest'][7:]}"])
    config = json.loads(files[f"blobs/sha256/{manifest['config']['digest'][7:]}"])
    layer = manifest["layers"][0]
    assert layer["digest"] == f"sha256:{fake_image.tar_sha256}"
    assert config["rootfs"]["diff_ids"] == [layer["digest"]]
    assert layer["size"] == fake_image.tarball.stat().st_size
    assert (config["os"], config["architecture"]) == ("linux", "amd64")


@pytest.mark.parametrize("cls", [Docker, Podman, Containerd])
def test_missing_runtime_probe_and_cleanup_do_not_raise(cls, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no engine binaries at all
    avail = cls.availability(PATHS)
    assert not avail.available and "not installed" in avail.reason and "apt-get install" in avail.fix
    assert cls.cleanup(PATHS) == [] and cls.cleanup(PATHS, "r1") == []


def test_cleanup_selects_by_run_and_state_directory():
    assert owner_labels(PATHS, "r1") == [f"{LABEL}=r1", f"{STATE_LABEL}={PATHS.state}"]
    assert owner_labels(PATHS, None) == [LABEL, f"{STATE_LABEL}={PATHS.state}"]
    assert owner_selector(PATHS, "r1") == f'labels."{LABEL}"=="r1",labels."{STATE_LABEL}"=="{PATHS.state}"'
    assert owner_selector(PATHS, None) == f'labels."{LABEL}",labels."{STATE_LABEL}"=="{PATHS.state}"'


@pytest.mark.parametrize("cls,info", [(Docker, {"CgroupDriver": "systemd"}),
                                      (Podman, {"host": {"cgroupManager": "systemd"}})])
def test_engines_get_the_slice_name_from_the_systemd_driver_and_a_path_from_cgroupfs(cls, info, fake_image):
    plat = cls("p", cls.Options(), PATHS)
    plat._info = info
    plat.cgroup_parent = "virtbench.slice/virtbench-vbst_abc.slice"
    argv = plat.create_argv(fake_image, "vb-a", "r1")
    assert argv[argv.index("--cgroup-parent") + 1] == "virtbench-vbst_abc.slice"
    plat._info = {"CgroupDriver": "cgroupfs", "host": {"cgroupManager": "cgroupfs"}}
    plat.cgroup_parent = "vbst-abc"
    argv = plat.create_argv(fake_image, "vb-a", "r1")
    assert argv[argv.index("--cgroup-parent") + 1] == "/vbst-abc"


class Recorder:
    """An executor that runs nothing and answers every command with success."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def run(self, argv, *, timeout=None, check=True, input=None, detached_children=False):
        from virtbench.proc import Result

        self.calls.append(list(argv))
        return Result(list(argv), 0, "", "", 0.0)


@pytest.mark.parametrize("systemd", [True, False])
def test_containerd_container_is_a_scope_of_virtbench_slice_only_where_systemd_runs(fake_image, monkeypatch,
                                                                                     systemd):
    """ctr 1.6's `containers create` cannot set a cgroup: on a systemd + v2 host the container is
    made by `ctr run --detach` at start with runc's systemd cgroup option and the cgroup path
    `virtbench.slice:vb:NAME` (the scope vb-NAME.scope); elsewhere containerd's cgroupfs default."""
    from virtbench.platforms import slices

    monkeypatch.setattr(slices, "systemd_managed", lambda: systemd)
    rec = Recorder()
    p = Containerd("p", Containerd.Options(cpus=1, memory="256M", cpuset="0"), PATHS, rec)
    inst = p.create(fake_image, "vb-a", "r1")
    p.start(inst)
    spec = p.create_argv(fake_image, "vb-a", "r1")[7:-4]  # the container's own flags, the same on both
    if systemd:
        run, update = rec.calls[0], rec.calls[1]
        assert run[:7] == ["ctr", "--address", "/run/containerd/containerd.sock", "-n", "virtbench", "run", "--detach"]
        assert flag_value(run, "--cgroup") == "virtbench.slice:vb:vb-a" and "--runc-systemd-cgroup" in run
        assert run[-len(spec) - 4:] == [*spec, fake_image.tag, "vb-a", "sleep", "infinity"]
        assert update[:5] == ["runc", "--root", "/run/containerd/runc/virtbench", "--systemd-cgroup", "update"]
        assert p.memory_cgroup(inst) == "virtbench.slice/vb-vb-a.scope"
        assert "virtbench.slice" in p.describe()["engine"]["cgroup"]
    else:
        create, start, update = rec.calls[:3]
        assert create[5:7] == ["containers", "create"] and "--cgroup" not in create
        assert start[5:7] == ["tasks", "start"]
        assert "--systemd-cgroup" not in update and update[3] == "update"
    assert not any("--runc-systemd-cgroup" in c for c in rec.calls) or systemd

"""Stacks on the qemu side without booting: which platforms a VM hosts, what its image and
disk then hold, the image as the guest sees it, and dockerd started through an executor."""
from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from virtbench import proc
from virtbench.errors import CommandError, InputError, UnavailableError
from virtbench.executor import Outside
from virtbench.images import vmdisk
from virtbench.images.image import Image
from virtbench.platforms import docker as docker_mod
from virtbench.platforms.base import Instance, InstanceExecutor, Paths
from virtbench.platforms.docker import Docker
from virtbench.platforms.qemu import stack as qemu_stack
from virtbench.platforms.qemu.options import QemuOptions
from virtbench.platforms.qemu.platform import Qemu
from virtbench.registry import PLATFORMS

PATHS = Paths(Path("/st"), Path("/rt"))


def vm(**options) -> Qemu:
    return Qemu("vm", QemuOptions(accel="tcg", **options), PATHS)  # tcg: nothing is probed


def inner(ptype: str, name: str | None = None):
    """As the session builds a platform declared `inside: vm`: refused until bound to a VM."""
    cls = PLATFORMS.get(ptype)
    name = name or f"vm-{ptype}"
    return cls(name, cls.Options(), PATHS, Outside(name, "vm"))


def image(tmp_path: Path, tar_sha: str = "ab" * 32) -> Image:
    root = tmp_path / "img"
    root.mkdir(parents=True, exist_ok=True)
    (root / "manifest.json").write_text(json.dumps({"tar_sha256": tar_sha}))
    return Image(recipe_hash="cd" * 32, root=root, release="bookworm", arch="amd64", profile="quick",
                 packages=("openssl", "sysbench"), tar_sha256=tar_sha, manifest={"variant": "minbase"})


def result(status: int, stdout: str = "", stderr: str = "") -> proc.Result:
    return proc.Result(["x"], status, stdout, stderr, 0.0)


# -- accept_inner / inner_image -------------------------------------------------------------
def test_accept_docker_adds_its_packages_and_guards_its_commands(tmp_path, monkeypatch):
    outer, d = vm(), inner("docker")
    outer.accept_inner(d)
    assert qemu_stack.inner_packages(outer._inner) == ("docker.io",)
    desc = outer.describe()
    assert desc["inner"] == {"vm-docker": {"type": "docker", "packages": ["docker.io"]}}
    assert desc["guest_image"] == vmdisk.GUEST_IMAGE_DIR and "cgroup2" in desc["guest_init"]

    # until a VM is up, the inner platform's commands are refused, never sent to the host's engine
    with pytest.raises(UnavailableError, match="runs inside the instances of vm"):
        d.host.run(["docker", "info"])
    assert "runs inside the instances of vm" in d.describe()["engine"]["error"]

    # prepare builds the VM image with the packages and a disk carrying the image
    seen = {}
    monkeypatch.setattr(vmdisk, "prepare", lambda img, headroom, **kw: seen.update(kw) or _disk(tmp_path))
    outer.prepare(image(tmp_path), log=lambda _m: None)
    assert seen["inner_packages"] == ("docker.io",) and seen["stack"] is True


def test_a_plain_vm_prepares_the_plain_disk(tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr(vmdisk, "prepare", lambda img, headroom, **kw: seen.update(kw) or _disk(tmp_path))
    p = vm()
    p.prepare(image(tmp_path), log=lambda _m: None)
    assert seen["inner_packages"] == () and seen["stack"] is False
    assert "inner" not in p.describe()


def _disk(tmp_path: Path) -> vmdisk.VMDisk:
    meta = dict.fromkeys(("vm_image", "kernel_version", "kernel_package", "size", "init_sha256",
                          "agent_sha256", "key"), "x")
    (tmp_path / "disk.json").write_text(json.dumps(meta))
    return vmdisk.VMDisk(root=tmp_path, image=image(tmp_path), kernel_version="6.1", size=1)


@pytest.mark.parametrize("ptype", ["native", "runc", "crun", "lxc", "containerd", "qemu"])
def test_unsupported_inner_types_are_refused_naming_the_supported(ptype):
    if ptype not in PLATFORMS.names():
        pytest.skip(f"{ptype} not registered")
    if ptype in qemu_stack.supported():
        pytest.skip(f"{ptype} is supported")
    with pytest.raises(InputError) as err:
        vm().accept_inner(inner(ptype))
    assert "docker" in err.value.message and f"({ptype})" in err.value.message
    assert "inside: vm" in err.value.fix


def test_inner_image_is_the_same_image_at_the_guest_path(tmp_path):
    outer, img = vm(), image(tmp_path)
    with pytest.raises(InputError, match="hosts no inner platform"):
        outer.inner_image(img)
    outer.accept_inner(inner("docker"))
    g = outer.inner_image(img)
    assert g.root == Path("/var/lib/virtbench/image") == Path(vmdisk.GUEST_IMAGE_DIR)
    assert g.tarball == Path("/var/lib/virtbench/image/rootfs.tar")
    assert (g.tag, g.tar_sha256, g.recipe_hash, g.packages) == (img.tag, img.tar_sha256, img.recipe_hash,
                                                                img.packages)
    # what docker runs in the guest: an import of that path, labelled with the same archive hash
    argv = Docker.import_argv(g)
    assert argv[-2:] == ["/var/lib/virtbench/image/rootfs.tar", img.tag]
    assert f"{docker_mod.TAR_LABEL}={img.tar_sha256}" in argv[argv.index("--change") + 1]


# -- the VM image and disk of a stack -------------------------------------------------------
def test_vm_recipe_adds_inner_packages(tmp_path):
    img = image(tmp_path)
    plain, stack = vmdisk.vm_recipe(img), vmdisk.vm_recipe(img, ("docker.io",))
    assert set(stack.packages) - set(plain.packages) == {"docker.io"}
    assert stack.hash() != plain.hash()
    with_kernel = Image(**{**img.__dict__, "packages": stack.packages})
    assert vmdisk.has_kernel(with_kernel, ("docker.io",)) and not vmdisk.has_kernel(img, ("docker.io",))


def test_disk_key_of_a_plain_vm_is_unchanged(tmp_path):
    from virtbench.images.agent import AGENT_SCRIPT

    img = image(tmp_path)
    sha = lambda t: hashlib.sha256(t.encode()).hexdigest()  # noqa: E731
    before = json.dumps({"image": img.tar_sha256, "size": 123, "format": vmdisk.FORMAT,
                         "init": sha(vmdisk.INIT_SCRIPT), "agent": sha(AGENT_SCRIPT)}, sort_keys=True)
    assert vmdisk.disk_key(img, 123) == hashlib.sha256(before.encode()).hexdigest()[:16]
    assert vmdisk.init_script(False) == vmdisk.INIT_SCRIPT


def test_disk_key_of_a_stack_depends_on_the_carried_image(tmp_path):
    vm_img, one, two = image(tmp_path / "a"), image(tmp_path / "b", "01" * 32), image(tmp_path / "c", "02" * 32)
    keys = {vmdisk.disk_key(vm_img, 123), vmdisk.disk_key(vm_img, 123, one), vmdisk.disk_key(vm_img, 123, two)}
    assert len(keys) == 3
    assert vmdisk.carried_files(one) == {"/var/lib/virtbench/image/rootfs.tar": one.tarball,
                                         "/var/lib/virtbench/image/manifest.json": one.root / "manifest.json"}
    assert vmdisk.carried_files(None) == {}


def test_stack_init_mounts_cgroup2_before_the_agent_starts():
    text = vmdisk.init_script(True)
    assert text.startswith(vmdisk.INIT_SCRIPT.split(vmdisk.STACK_ANCHOR)[0])
    assert text.index("mnt cgroup2 cgroup2 /sys/fs/cgroup") < text.index("exec -c /usr/local/sbin/vb-agent")
    assert text.index("mnt proc proc /proc") < text.index("mnt cgroup2")
    assert subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True).returncode == 0


def test_carry_commands_make_missing_directories_and_root_owned_files(tmp_path):
    rootfs = tmp_path / "rootfs"
    (rootfs / "var/lib").mkdir(parents=True)
    tar = tmp_path / "rootfs.tar"
    cmds = vmdisk._carry_commands({"/var/lib/virtbench/image/rootfs.tar": tar}, rootfs)
    mkdirs = [c for c in cmds if c.startswith("mkdir ")]
    assert mkdirs == ["mkdir /var/lib/virtbench", "mkdir /var/lib/virtbench/image"]
    assert f"write {tar} /var/lib/virtbench/image/rootfs.tar" in cmds
    assert "sif /var/lib/virtbench/image/rootfs.tar mode 0100644" in cmds
    assert "sif /var/lib/virtbench/image/rootfs.tar uid 0" in cmds
    with pytest.raises(Exception, match="space"):
        vmdisk._carry_commands({"/var/lib/virtbench/image/rootfs.tar": tmp_path / "a b.tar"}, rootfs)


# -- dockerd inside the VM, through an executor ---------------------------------------------
class Scripted:
    """An executor in place of a VM: dockerd's check answers with the given statuses in turn
    (the last one repeats), `tail` with the given log, anything else succeeds."""

    def __init__(self, probe_statuses: list[int], log: str = "") -> None:
        self.calls: list[tuple[list[str], float | None]] = []
        self.statuses = list(probe_statuses)
        self.log = log

    def run(self, argv, *, timeout=None, check=True, input=None, detached_children=False):
        self.calls.append((list(argv), timeout))
        if argv[:2] == ["sh", "-c"] and argv[2] == docker_mod._GUEST_ANSWERS:
            return result(self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0])
        if argv[0] == "tail":
            return result(0, self.log)
        return result(0)

    def spawn(self, argv):
        raise AssertionError("no spawn")


@pytest.fixture
def no_sleep(monkeypatch):
    monkeypatch.setattr(docker_mod.time, "sleep", lambda _s: None)


def test_dockerd_is_started_detached_then_polled(no_sleep):
    ex = Scripted([1, 1, 0])
    inner("docker").ensure_engine_in(ex)
    first, timeout = ex.calls[0]
    assert first == ["sh", "-c", docker_mod._GUEST_START] and timeout is not None
    script = docker_mod._GUEST_START
    assert "setsid dockerd --storage-driver=overlay2 </dev/null >>/var/log/vb-dockerd.log 2>&1 &" in script
    assert "{" not in script  # a fixed script: nothing interpolated from input
    assert [c[0][2] for c in ex.calls[1:]] == [docker_mod._GUEST_ANSWERS] * 3


def test_dockerd_that_dies_is_reported_with_its_log(no_sleep):
    ex = Scripted([1, 3], log="level=error msg=\"failed to start daemon: boom\"")
    with pytest.raises(UnavailableError) as err:
        inner("docker").ensure_engine_in(ex)
    assert "dockerd inside the VM exited" in err.value.message and "boom" in err.value.message
    assert ex.calls[-1][0] == ["tail", "-n", "15", docker_mod.GUEST_DOCKERD_LOG]


def test_dockerd_that_never_answers_times_out(no_sleep, monkeypatch):
    clock = iter(range(0, 10_000, 50))
    monkeypatch.setattr(docker_mod.time, "monotonic", lambda: next(clock))
    with pytest.raises(UnavailableError, match="did not answer within 180 s"):
        inner("docker").ensure_engine_in(Scripted([1], log="still loading"))


def test_a_broken_channel_is_not_mistaken_for_a_slow_dockerd(no_sleep):
    with pytest.raises(UnavailableError, match="cannot check dockerd inside the VM .status 255"):
        inner("docker").ensure_engine_in(Scripted([255]))


def test_a_timed_out_check_is_retried(no_sleep):
    class SlowOnce(Scripted):
        def run(self, argv, **kw):
            if argv[:2] == ["sh", "-c"] and argv[2] == docker_mod._GUEST_ANSWERS and not hasattr(self, "slow"):
                self.slow = True
                raise CommandError(argv, None, "", "", timed_out=True, timeout=60)
            return super().run(argv, **kw)

    inner("docker").ensure_engine_in(SlowOnce([0]))


# -- the inner container after its VM is gone -----------------------------------------------
class Outer:
    def __init__(self, up: bool) -> None:
        self.up, self.argvs = up, []

    def exec(self, instance, argv, *, timeout=None, check=True):
        self.argvs.append(argv)
        if argv == ["true"]:
            return result(0 if self.up else 255)
        return result(255, stderr="virtbench-guest: cannot connect to the VM's agent socket")


def test_removing_a_container_whose_vm_is_gone_is_a_no_op():
    d = inner("docker")
    d = d.bind(InstanceExecutor(Outer(up=False), Instance("vb-vm", "vm", "r1")))
    d.remove(Instance("vb-c", "vm-docker", "r1"))


def test_a_failed_remove_in_a_running_vm_still_raises():
    d = inner("docker")
    d = d.bind(InstanceExecutor(Outer(up=True), Instance("vb-vm", "vm", "r1")))
    with pytest.raises(CommandError):
        d.remove(Instance("vb-c", "vm-docker", "r1"))


def test_outside_executor_refuses_spawn_too():
    ex = Outside("vm-docker", "vm")
    with pytest.raises(UnavailableError):
        ex.spawn(["true"])


# -- podman inside the VM ---------------------------------------------------------------------
def test_podman_and_docker_in_one_vm_get_both_runtimes():
    outer = vm()
    outer.accept_inner(inner("docker"))
    outer.accept_inner(inner("podman"))
    assert qemu_stack.inner_packages(outer._inner) == ("docker.io", "podman", "runc")


def test_podman_is_configured_for_the_guest_then_checked():
    from virtbench.platforms import podman as podman_mod

    ex = Scripted([0])
    inner("podman").ensure_engine_in(ex)
    assert ex.calls[0][0] == ["sh", "-c", podman_mod._GUEST_SETUP]
    check = ex.calls[1][0]
    assert check[0] == "podman" and "info" in check and "--runtime" in check

    class Broken(Scripted):
        def run(self, argv, **kw):
            if "info" in argv:
                return result(125, stderr="Error: cannot find runtime")
            return super().run(argv, **kw)

    with pytest.raises(UnavailableError, match="podman does not work inside the VM: Error: cannot find runtime"):
        inner("podman").ensure_engine_in(Broken([0]))


def test_podman_guest_config_is_valid_toml(tmp_path):
    import tomllib

    from virtbench.platforms import podman as podman_mod

    script = podman_mod._GUEST_SETUP.replace(podman_mod.GUEST_CONF, str(tmp_path / "c.conf")) \
        .replace("mkdir -p /etc/containers", f"mkdir -p {tmp_path}")
    subprocess.run(["sh", "-c", script], check=True)
    conf = tomllib.loads((tmp_path / "c.conf").read_text())
    assert conf == {"engine": {"cgroup_manager": "cgroupfs", "events_logger": "file", "runtime": "runc"}}
    (tmp_path / "c.conf").write_text("# the user's\n")
    subprocess.run(["sh", "-c", script], check=True)
    assert (tmp_path / "c.conf").read_text() == "# the user's\n"  # an existing file stays

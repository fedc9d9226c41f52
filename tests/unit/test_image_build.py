import hashlib
import json
from pathlib import Path

import pytest

from virtbench.errors import InputError
from virtbench.images import build


def test_mounts_using_finds_mounted_paths_only():
    assert build.mounts_using(Path("/proc")), "/proc is a mount point on every Linux host"
    assert build.mounts_using(Path("/nonexistent/virtbench/image")) == []


def test_force_rebuild_refuses_an_image_in_use(monkeypatch, tmp_path):
    recipe = build.Recipe(release="bookworm", arch="amd64", profile="quick", packages=("fio",))
    monkeypatch.setattr(build, "mounts_using", lambda root: ["/var/lib/virtbench/instances/x/root"])
    with pytest.raises(InputError, match="in use"):
        build.build(recipe, tmp_path, force=True)


# -- mirrors reach mmdebstrap's command line (issue 25) --------------------------------------------
CAMPAIGN = {"name": "m", "platforms": ["native"], "benchmarks": ["openssl"]}
BAD_MIRRORS = ["--setup-hook=touch /tmp/vb-pwned", "-", "/etc/shadow", "deb.debian.org/debian",
               "deb http://deb.debian.org/debian bookworm main\ndeb http://evil/ x main",
               "http://deb.debian.org/$(id)", "ftp://deb.debian.org/debian",
               "deb http://deb.debian.org/debian bookworm main; touch /tmp/x", "deb --setup-hook=x bookworm main",
               "https://user:S3cr3t@mirror.example/debian"]
GOOD_MIRRORS = ["http://deb.debian.org/debian", "https://[2001:db8::1]:3142/debian", "file:///srv/mirror",
                "deb http://deb.debian.org/debian bookworm-updates main contrib",
                "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg arch=amd64] "
                "https://deb.debian.org/debian bookworm main"]


@pytest.mark.parametrize("mirror", BAD_MIRRORS)
def test_a_mirror_that_is_not_a_mirror_is_refused_when_the_campaign_is_parsed(mirror):
    from virtbench.config import parse_campaign

    with pytest.raises(InputError) as exc:
        parse_campaign({**CAMPAIGN, "image": {"mirrors": [mirror]}}, "c.yaml")
    assert "mirror" in exc.value.message and "\n" not in exc.value.message and "S3cr3t" not in str(exc.value)


@pytest.mark.parametrize("mirror", GOOD_MIRRORS)
def test_urls_and_deb_lines_are_mirrors(mirror):
    from virtbench.config import parse_campaign

    assert parse_campaign({**CAMPAIGN, "image": {"mirrors": [mirror]}}, "c.yaml").image.mirrors == (mirror,)


def test_image_build_mirror_option_is_refused_before_anything_runs(monkeypatch, capsys):
    from virtbench import cli

    monkeypatch.setattr(build, "build", lambda *a, **k: pytest.fail("the build started"))
    monkeypatch.setattr("sys.argv", ["virtbench", "image", "build", "--mirror=--setup-hook=touch /tmp/vb-pwned"])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith("error: mirror") and len(err.strip().splitlines()) == 1


def test_mmdebstrap_takes_suite_target_and_mirrors_after_a_double_dash(monkeypatch, tmp_path):
    from virtbench import proc
    from virtbench.errors import CommandError
    from virtbench.images.arch import Emulation

    calls: list[list[str]] = []

    def run(argv, **_kw):
        calls.append(list(argv))
        raise CommandError(list(argv), 100, "", "E: apt-get update failed")

    monkeypatch.setattr(proc, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(build, "require_buildable", lambda r, a: Emulation(a, True, True, "native"))
    monkeypatch.setattr(proc, "run", run)
    recipe = build.Recipe(release="bookworm", arch="amd64", profile="quick", packages=("fio",),
                          mirrors=("http://deb.debian.org/debian",))
    with pytest.raises(CommandError):
        build.build(recipe, tmp_path)
    assert len(calls) == 2  # the build, then its verbose --simulate retry
    for argv in calls:
        dash = argv.index("--")
        assert argv[dash + 1:dash + 2] == ["bookworm"] and argv[-1] == "http://deb.debian.org/debian"
        assert all(a.startswith("--") or a == "mmdebstrap" for a in argv[:dash])
    assert "--simulate" in calls[1][:calls[1].index("--")]


def test_a_recipe_made_directly_is_checked_too():
    with pytest.raises(InputError, match="not a mirror"):
        build.Recipe(release="bookworm", arch="amd64", profile="quick", packages=(), mirrors=("--setup-hook=x",))


@pytest.mark.parametrize("packages, kernel", [(("fio",), False), (("openssh-server", "linux-image-cloud-arm64"), True)])
def test_an_image_with_a_kernel_gets_its_initrd_made_once_after_every_package(monkeypatch, tmp_path, packages, kernel):
    """Debian's kernel postinst and the update-initramfs trigger would each make the initrd (each
    minutes under qemu-user): INITRD=No skips the first, one customize hook makes it at the end."""
    from virtbench import proc
    from virtbench.errors import CommandError
    from virtbench.images.arch import Emulation

    seen: list[tuple[list[str], dict]] = []

    def run(argv, **kw):
        seen.append((list(argv), kw.get("env") or {}))
        raise CommandError(list(argv), 1, "", "stop here")

    monkeypatch.setattr(proc, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(build, "require_buildable", lambda r, a: Emulation(a, True, True, "native"))
    monkeypatch.setattr(proc, "run", run)
    with pytest.raises(CommandError):
        build.build(build.Recipe(release="bookworm", arch="arm64", profile="board", packages=packages), tmp_path)
    argv, env = seen[0]
    hooks = [a for a in argv[:argv.index("--")] if a.startswith("--customize-hook=")]
    assert hooks == ([f"--customize-hook={build.INITRD_ONCE_HOOK}"] if kernel else [])
    assert (env.get("INITRD") == "No") is kernel
    assert "update-initramfs -c -k all" in build.INITRD_ONCE_HOOK


BOARD_MODULES = ("virtio_pci", "virtio_blk", "virtio_scsi", "sd_mod", "ext4")


def test_initrd_modules_are_part_of_the_hash_only_when_set_and_must_be_module_names():
    plain = build.Recipe(release="bookworm", arch="arm64", profile="board", packages=("linux-image-cloud-arm64",))
    listed = build.Recipe(release="bookworm", arch="arm64", profile="board", packages=("linux-image-cloud-arm64",),
                          initrd_modules=BOARD_MODULES)
    before = {"release": "bookworm", "arch": "arm64", "variant": "minbase", "packages": ["linux-image-cloud-arm64"],
              "format": 1}  # the hash of every recipe without initrd_modules is what it was
    assert plain.hash() == hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()
    assert listed.hash() != plain.hash()
    assert listed.hash() == build.Recipe(**{**listed.__dict__, "initrd_modules": tuple(reversed(BOARD_MODULES))}).hash()
    for bad in ("virtio_blk; reboot", "-x", "", "a b"):
        with pytest.raises(InputError, match="not a kernel module name"):
            build.Recipe(release="bookworm", arch="arm64", profile="board", packages=(), initrd_modules=(bad,))


def test_the_initrd_hook_writes_modules_list_then_makes_the_initrd_once(tmp_path, monkeypatch):
    """Run as mmdebstrap runs it (sh -c HOOK exec ROOT), with a stand-in chroot on PATH."""
    import subprocess

    root, bin_dir = tmp_path / "root", tmp_path / "bin"
    (root / "etc/initramfs-tools/conf.d").mkdir(parents=True)
    (root / "etc/initramfs-tools/modules").write_text("# List of modules\n")
    (root / "usr/sbin").mkdir(parents=True)
    (root / "usr/sbin/update-initramfs").write_text("#!/bin/sh\n")
    (root / "usr/sbin/update-initramfs").chmod(0o755)
    bin_dir.mkdir()
    (bin_dir / "chroot").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/calls\n')
    (bin_dir / "chroot").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    recipe = build.Recipe(release="bookworm", arch="arm64", profile="board", packages=("linux-image-cloud-arm64",),
                          initrd_modules=BOARD_MODULES)
    subprocess.run(["sh", "-c", build.initrd_hook(recipe), "exec", str(root)], env=env, check=True)
    assert (root / build.INITRD_LIST_CONF).read_text() == "MODULES=list\n"
    assert (root / "etc/initramfs-tools/modules").read_text() == "# List of modules\n" + "".join(
        f"{m}\n" for m in BOARD_MODULES)
    assert (tmp_path / "calls").read_text() == f"{root} update-initramfs -c -k all\n"
    plain = build.Recipe(release="bookworm", arch="arm64", profile="board", packages=("linux-image-cloud-arm64",))
    assert build.initrd_hook(plain) == build.INITRD_ONCE_HOOK
    (root / "usr/sbin/update-initramfs").unlink()  # no initramfs-tools: nothing written, nothing run
    (root / build.INITRD_LIST_CONF).unlink()
    subprocess.run(["sh", "-c", build.initrd_hook(recipe), "exec", str(root)], env=env, check=True)
    assert not (root / build.INITRD_LIST_CONF).exists()
    assert (tmp_path / "calls").read_text().count("update-initramfs") == 1


def _kernel_root(root: Path, version: str = "6.1.0-57-cloud-arm64") -> str:
    """A root filesystem with what check_boot_support reads: the cloud-arm64 kernel's options
    (virtio, SCSI disks and ext4 as in Debian's config) and its module files."""
    (root / "boot").mkdir(parents=True)
    (root / "boot" / f"config-{version}").write_text(
        "CONFIG_EXT4_FS=y\nCONFIG_VIRTIO_PCI=m\nCONFIG_VIRTIO_BLK=m\nCONFIG_SCSI_VIRTIO=m\nCONFIG_BLK_DEV_SD=m\n"
        "CONFIG_VIRTIO_CONSOLE=m\nCONFIG_VIRTIO_NET=m\nCONFIG_DEVTMPFS=y\nCONFIG_BLK_DEV_INITRD=y\n")
    for module in ("virtio/virtio_pci", "block/virtio_blk", "scsi/virtio_scsi", "char/virtio_console", "net/virtio_net"):
        path = root / "lib/modules" / version / "kernel/drivers" / f"{module}.ko"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    (root / "etc/initramfs-tools/conf.d").mkdir(parents=True)
    (root / "etc/initramfs-tools/initramfs.conf").write_text("# comment\nMODULES=most\nBUSYBOX=auto\n")
    (root / "etc/initramfs-tools/modules").write_text("# List of modules\n")
    return version


def test_a_listed_initrd_must_name_the_root_disks_drivers(tmp_path, monkeypatch):
    from virtbench import proc
    from virtbench.images import vmdisk

    monkeypatch.setattr(proc, "which", lambda name: None)  # no lsinitramfs: the configuration alone
    version = _kernel_root(tmp_path)
    assert vmdisk.check_boot_support(tmp_path, version) == []  # MODULES=most
    (tmp_path / build.INITRD_LIST_CONF).write_text("MODULES=list\n")  # conf.d overrides initramfs.conf
    (tmp_path / "etc/initramfs-tools/modules").write_text("# List of modules\nvirtio_pci\nvirtio-blk\n")
    problems = vmdisk.check_boot_support(tmp_path, version)
    assert [p.split(", and ")[1].split()[0] for p in problems] == ["virtio_scsi", "sd_mod"], problems
    (tmp_path / "etc/initramfs-tools/modules").write_text("".join(f"{m}\n" for m in vmdisk.VIRTIO_INITRD_MODULES))
    assert vmdisk.check_boot_support(tmp_path, version) == []
    (tmp_path / "etc/initramfs-tools/conf.d/zz").write_text("MODULES=dep\n")  # the last one read wins
    assert vmdisk.check_boot_support(tmp_path, version) == [f"{tmp_path}/etc/initramfs-tools/conf.d/zz: MODULES is "
                                                           f"'dep', not 'most'; the initrd may lack virtio_blk"]

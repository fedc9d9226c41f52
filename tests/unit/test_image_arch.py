"""`image build --arch`: which architectures Debian ships, and whether this host can run another
architecture's maintainer scripts (qemu-user through binfmt_misc), checked before mmdebstrap."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from virtbench import proc
from virtbench.cli import cli
from virtbench.errors import InputError
from virtbench.images import arch
from virtbench.images.build import recipe_for


def test_recipe_hash_differs_per_architecture() -> None:
    a, b, c = (recipe_for("quick", "bookworm", x) for x in ("amd64", "arm64", "armhf"))
    assert len({a.hash(), b.hash(), c.hash()}) == 3 and b.arch == "arm64"


@pytest.mark.parametrize("release,bad,ok", [("bookworm", "riscv64", "armhf"), ("trixie", "mipsel", "riscv64"),
                                            ("bullseye", "sparc64", "arm64")])
def test_an_architecture_the_release_does_not_ship_is_refused(release: str, bad: str, ok: str) -> None:
    with pytest.raises(InputError) as err:
        recipe_for("quick", release, bad)
    assert f"does not ship architecture '{bad}'" in err.value.message and ok in err.value.fix
    assert recipe_for("quick", release, ok).arch == ok


def test_cli_refuses_an_unknown_architecture_with_exit_2() -> None:
    result = CliRunner().invoke(cli, ["image", "build", "--arch", "sparc"])
    assert result.exit_code == 2 or getattr(result.exception, "exit_code", None) == 2
    assert isinstance(result.exception, InputError) and "sparc" in result.exception.message


def test_no_binfmt_misc_names_the_mount_and_the_registration(tmp_path: Path) -> None:
    emu = arch.emulation("arm64", binfmt_dir=tmp_path / "none", native="amd64")
    assert not emu.ok and "not mounted" in emu.reason
    assert "mount -t binfmt_misc" in emu.fix and "update-binfmts --enable qemu-aarch64" in emu.fix


def test_unregistered_or_disabled_entries_name_the_fix(tmp_path: Path) -> None:
    (tmp_path / "status").write_text("enabled\n")
    emu = arch.emulation("armhf", binfmt_dir=tmp_path, native="amd64")
    assert not emu.ok and "qemu-arm" in emu.fix and "mount" not in emu.fix
    (tmp_path / "qemu-arm").write_text("disabled\ninterpreter /usr/libexec/qemu-binfmt/arm-binfmt-P\nflags: PF\n")
    emu = arch.emulation("armhf", binfmt_dir=tmp_path, native="amd64")
    assert not emu.ok and "disabled" in emu.reason and emu.fix == "update-binfmts --enable qemu-arm"


def test_an_enabled_entry_with_arch_test_installed_can_build(tmp_path: Path) -> None:
    (tmp_path / "status").write_text("enabled\n")
    (tmp_path / "qemu-aarch64").write_text("enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\n"
                                           "flags: PF\noffset 0\n")
    emu = arch.emulation("arm64", binfmt_dir=tmp_path, native="amd64")
    assert emu.ok == bool(proc.which("arch-test"))
    assert emu.ok or emu.fix == "apt-get install arch-test"


def test_32_bit_arm_on_an_arm64_board_runs_natively_without_binfmt(tmp_path: Path) -> None:
    emu = arch.emulation("armhf", binfmt_dir=tmp_path / "none", native="arm64")
    assert emu.ok and emu.native
    assert arch.emulation("arm64", native="arm64").native


def test_this_hosts_binfmt_registration_is_reported_by_doctor_for_each_board_architecture() -> None:
    report = arch.cross_build_report()
    assert {r["arch"] for r in report} == set(arch.BOARD_ARCHES) - {arch.host_arch()}
    for r in report:
        assert r["ok"] or r["fix"]


def test_apt_sources_are_part_of_the_recipe_hash_only_when_given() -> None:
    plain = recipe_for("quick", "bookworm", "armhf")
    own = recipe_for("quick", "bookworm", "armhf", mirrors=["deb http://deb.debian.org/debian bookworm main"])
    assert plain.hash() != own.hash() and own.mirrors
    assert plain == recipe_for("quick", "bookworm", "armhf") and not plain.mirrors


def test_a_mirror_mid_sync_is_one_line_naming_the_way_around() -> None:
    from virtbench.images.build import _mirror_mid_sync

    out = ("Err:5 http://security.debian.org/debian-security bookworm-security/main armhf Packages\n"
           "  File has unexpected size (334084 != 350380). Mirror sync in progress? [IP: 203.0.113.80 80]\n")
    with pytest.raises(InputError) as err:
        _mirror_mid_sync(out, recipe_for("quick", "bookworm", "armhf"))
    assert "mid-sync for armhf" in err.value.message and "--mirror" in err.value.fix
    _mirror_mid_sync("E: something else", recipe_for("quick", "bookworm", "armhf"))  # not this case: no error


def test_a_failed_build_leaves_nothing_mounted_under_its_chroot(tmp_path: Path) -> None:
    from virtbench.images.build import _unmount_under

    work = tmp_path / "work"
    (work / "chroot/proc").mkdir(parents=True)
    proc.run(["mount", "-t", "tmpfs", "tmpfs", str(work / "chroot/proc")], timeout=30)
    _unmount_under(work)
    assert str(work) not in Path("/proc/self/mountinfo").read_text() and not work.exists()


def test_cli_without_binfmt_refuses_a_cross_build_with_exit_2_before_mmdebstrap(monkeypatch, tmp_path: Path) -> None:
    """A fresh x86 machine (no qemu-user-static, binfmt_misc not mounted): `image build --arch
    arm64` is one error naming the mount and the registration, exit 2, and nothing is run."""
    from virtbench.images import build as build_mod

    real = arch.emulation
    monkeypatch.setattr(arch, "emulation", lambda a, **kw: real(a, binfmt_dir=tmp_path / "none", native="amd64"))
    ran: list[list[str]] = []
    monkeypatch.setattr(build_mod.proc, "run", lambda argv, **kw: ran.append(list(argv)))
    result = CliRunner().invoke(cli, ["image", "build", "--arch", "arm64", "--force"])
    assert getattr(result.exception, "exit_code", None) == 2, result.output
    err = result.exception
    assert isinstance(err, InputError) and "cannot build an image for arm64 here" in err.message
    assert "binfmt_misc is not mounted" in err.message and "update-binfmts --enable qemu-aarch64" in (err.fix or "")
    assert ran == [] and "\n" not in err.message

"""gVisor platform options, sandbox runtimes behind engines, and the bad input around them:
each refused with one line and a fix before anything starts (nothing here runs a runtime)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from virtbench import services
from virtbench.config import campaign_path, load_campaign
from virtbench.errors import InputError
from virtbench.platforms import runsc as runsc_mod
from virtbench.platforms import sandboxes
from virtbench.platforms.base import Paths
from virtbench.platforms.containerd import Containerd
from virtbench.platforms.docker import Docker
from virtbench.platforms.runsc import Runsc
from virtbench.registry import PLATFORMS

PATHS = Paths(state=Path("/nonexistent/state"), runtime=Path("/nonexistent/run"))
RUNTIMES = {"runc": {"path": "runc"}, "runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--platform=ptrace"]}}


@pytest.fixture
def gvisor(monkeypatch):
    """An installed runsc 20221219 (ptrace and kvm, default ptrace), as Debian 12 ships it."""
    monkeypatch.setattr(runsc_mod, "installed_modes", lambda: (("kvm", "ptrace"), "ptrace"))
    monkeypatch.setattr(runsc_mod, "version", lambda: "0.0~20221219.0")
    real = runsc_mod.proc.which
    monkeypatch.setattr(runsc_mod.proc, "which", lambda n: "/usr/bin/runsc" if n == "runsc" else real(n))


def make(cls, **opts):
    return cls("p", cls.Options(**opts), PATHS)


def test_every_platform_declares_a_kind():
    kinds = {name: cls.kind for name, cls in PLATFORMS.items()}
    assert set(kinds.values()) <= {"baseline", "container", "sandbox", "vm"}
    assert (kinds["native"], kinds["runc"], kinds["runsc"], kinds["qemu"]) == ("baseline", "container", "sandbox", "vm")


def test_runsc_modes_and_flags(gvisor):
    p = make(Runsc)
    assert p.mode == "ptrace" and p.kind == "sandbox"
    assert p._rt()[-2:] == ["--platform=ptrace", "--network=none"]
    assert make(Runsc, platform="kvm", network="host").runtime_flags() == ["--platform=kvm", "--network=host"]
    assert p.versions() == {"runsc": "0.0~20221219.0", "runsc_platform": "ptrace"}
    assert p.label() == "runsc[ptrace]" and make(Runsc, platform="ptrace", cpus=1).label() == "runsc(cpus=1.0,platform=ptrace)"


def test_runsc_platform_the_version_lacks(gvisor):
    with pytest.raises(InputError, match=r"runsc 0.0~20221219.0 has no platform 'systrap' \(it has: kvm, ptrace\)") as exc:
        make(Runsc, platform="systrap")
    assert "set platform: to one of kvm, ptrace" in exc.value.fix


def test_runsc_missing(monkeypatch):
    monkeypatch.setattr(runsc_mod.proc, "which", lambda n: None)
    with pytest.raises(InputError, match="runsc \\(gVisor\\) is not installed") as exc:
        make(Runsc)
    assert exc.value.fix == "apt-get install runsc"


def test_runsc_bridge_refused():
    with pytest.raises(ValueError, match="network"):
        Runsc.Options(network="bridge")


def test_docker_runtime_known(gvisor, monkeypatch):
    monkeypatch.setattr(sandboxes, "docker_runtimes", lambda: RUNTIMES)
    d = make(Docker, runtime="runsc")
    assert d.kind == "sandbox" and Docker.kind == "container"
    assert make(Docker, runtime="runc").kind == "container"
    assert sandboxes.docker_runtime_mode("runsc") == "ptrace"


def test_docker_runtime_argv(gvisor, monkeypatch, tmp_path):
    from virtbench.images.image import Image

    monkeypatch.setattr(sandboxes, "docker_runtimes", lambda: RUNTIMES)
    img = Image(recipe_hash="ab" * 32, root=tmp_path, release="bookworm", arch="amd64", profile="quick",
                packages=(), tar_sha256="cd" * 32)
    argv = make(Docker, runtime="runsc").create_argv(img, "vb-a", "r1")
    assert argv[argv.index("--runtime") + 1] == "runsc"
    assert "--runtime" not in make(Docker).create_argv(img, "vb-a", "r1")


def test_docker_runtime_unknown_to_running_engine(gvisor, monkeypatch):
    monkeypatch.setattr(sandboxes, "docker_runtimes", lambda: {"runc": {"path": "runc"}})
    with pytest.raises(InputError, match="the running dockerd does not know runtime 'runsc' \\(it knows: runc\\)") as exc:
        make(Docker, runtime="runsc")
    snippet = json.loads(exc.value.fix.split("add ", 1)[1].split(" to /etc/docker/daemon.json")[0])
    assert snippet == {"runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]}}}
    assert "virtbench does not rewrite yours" in exc.value.fix


def test_docker_runtime_engine_to_be_started(gvisor, monkeypatch):
    """No dockerd: virtbench will start one with --add-runtime, unless daemon.json declares runtimes."""
    monkeypatch.setattr(sandboxes, "docker_runtimes", lambda: None)
    monkeypatch.setattr(services, "systemd_running", lambda: False)
    monkeypatch.setattr(services, "dockerd_runtime_names", lambda: ["runsc"])
    make(Docker, runtime="runsc")
    monkeypatch.setattr(services, "dockerd_runtime_names", lambda: ["other"])
    with pytest.raises(InputError, match="would start without runtime 'runsc'"):
        make(Docker, runtime="runsc")


def test_docker_runtime_bad_names(gvisor):
    with pytest.raises(InputError, match="unknown runtime 'gvisor'"):
        make(Docker, runtime="gvisor")


@pytest.mark.parametrize("engine", [Docker, Containerd])
def test_kata_without_kvm_or_install(engine, monkeypatch):
    monkeypatch.setattr(sandboxes.proc, "which", lambda n: None)
    with pytest.raises(InputError, match="Kata Containers is not installed"):
        make(engine, runtime="kata")


def test_kata_needs_kvm(monkeypatch):
    from virtbench.platforms.qemu import accel as qemu_accel

    monkeypatch.setattr(sandboxes.proc, "which", lambda n: f"/usr/bin/{n}" if n.startswith("kata") else None)
    monkeypatch.setattr(qemu_accel, "accel_verdict", lambda *a, **k: qemu_accel.AccelVerdict(False, "test guest hung", "stub"))
    monkeypatch.setattr(qemu_accel, "probe_kernel", lambda: None)
    v = sandboxes.kata_status(PATHS)
    assert not v.available and "needs working KVM: test guest hung" in v.reason


def test_containerd_without_runsc_shim(monkeypatch):
    monkeypatch.setattr(sandboxes.proc, "which", lambda n: None)
    with pytest.raises(InputError, match="containerd-shim-runsc-v1 is not installed \\(Debian's runsc package"):
        make(Containerd, runtime="runsc")
    assert make(Containerd).kind == "container"


def test_dockerd_start_flags(tmp_path, monkeypatch):
    """The dockerd virtbench starts reads virtbench's copy of daemon.json with runsc added;
    the user's file is never written."""
    monkeypatch.setattr(services.proc, "which", lambda n: "/usr/bin/runsc" if n == "runsc" else None)
    conf, own = tmp_path / "daemon.json", tmp_path / "run" / "dockerd.json"
    runsc_entry = {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]}
    assert services.dockerd_start_flags(conf, own) == [f"--config-file={own}"]
    assert json.loads(own.read_text()) == {"runtimes": {"runsc": runsc_entry}} and not conf.exists()
    assert services.dockerd_runtime_names(conf) == ["runsc"]
    conf.write_text('{"log-level": "warn", "runtimes": {"kata": {"path": "/opt/kata"}}}')
    services.dockerd_start_flags(conf, own)
    assert json.loads(own.read_text()) == {"log-level": "warn", "runtimes": {"kata": {"path": "/opt/kata"}, "runsc": runsc_entry}}
    assert json.loads(conf.read_text()) == {"log-level": "warn", "runtimes": {"kata": {"path": "/opt/kata"}}}
    conf.write_text('{"runtimes": {"runsc": {"path": "/opt/runsc"}}}')  # the user's own entry wins
    assert services.dockerd_start_flags(conf, own) == [] and services.dockerd_runtime_names(conf) == ["runsc"]
    conf.write_text("{not json")
    assert services.dockerd_start_flags(conf, own) == []  # dockerd reports its own file's error
    monkeypatch.setattr(services.proc, "which", lambda n: None)
    assert services.dockerd_start_flags(tmp_path / "none.json", own) == []


def test_docker_runsc_network_none_only(gvisor, monkeypatch):
    monkeypatch.setattr(sandboxes, "docker_runtimes",
                        lambda: {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]}})
    with pytest.raises(InputError, match="dockerd runs runsc with --network=none, so network 'bridge'"):
        make(Docker, runtime="runsc", network="bridge")
    assert sandboxes.docker_runtime_mode("runsc") == "ptrace"


def test_shipped_sandboxes_campaign():
    assert campaign_path("sandboxes").name == "sandboxes.yaml"
    campaign = load_campaign(campaign_path("sandboxes"))
    types = {p.name: (p.type, p.options) for p in campaign.platforms}
    assert types["docker-runsc"] == ("docker", {"runtime": "runsc"}) and "runsc" in types
    assert [b.name for b in campaign.benchmarks] == ["openssl", "syscall", "context-switch", "fork-exec",
                                                      "page-fault", "file-metadata"]
    with pytest.raises(InputError, match="shipped campaign: .*sandboxes"):
        load_campaign("no-such-campaign")


@pytest.mark.parametrize(("platform", "message"), [
    ("{name: g, type: runsc, platform: systrap}", "has no platform 'systrap'"),
    ("{name: d, type: docker, runtime: gvisor}", "unknown runtime 'gvisor'"),
    ("{name: c, type: containerd, runtime: runsc}", "containerd-shim-runsc-v1 is not installed"),
])
def test_cli_bad_sandbox_input_exits_2_before_anything(gvisor, monkeypatch, tmp_path, platform, message):
    from click.testing import CliRunner

    from virtbench.cli import cli

    monkeypatch.setattr(sandboxes.proc, "which", lambda n: None if "shim" in n else f"/usr/bin/{n}")
    campaign = tmp_path / "c.yaml"
    campaign.write_text(f"name: bad\nplatforms: [native, {platform}]\nbenchmarks: [syscall]\n")
    db = tmp_path / "r.db"
    env = {"VIRTBENCH_STATE_DIR": str(tmp_path / "state"), "VIRTBENCH_RUNTIME_DIR": str(tmp_path / "run")}
    result = CliRunner().invoke(cli, ["run", str(campaign), "--db", f"sqlite:///{db}"], env=env)
    err = result.exception  # main() prints it as `error: ... / fix: ...` and exits with its code
    assert isinstance(err, InputError) and err.exit_code == 2, result.output
    assert message in err.message and err.fix
    import sqlite3

    assert sqlite3.connect(db).execute("select count(*) from runs").fetchone() == (0,)  # no run stored
    assert not (tmp_path / "state" / "instances").exists()  # nothing created

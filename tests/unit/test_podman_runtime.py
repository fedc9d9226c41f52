"""podman's `runtime:` (runc by default, crun, runsc): podman's global --runtime on every command
of the platform's own containers, runsc as a sandbox with dockerd's arguments, and a runtime
this host cannot run refused with its fix before anything starts. Nothing is run here."""
from __future__ import annotations

from pathlib import Path

import pytest

from virtbench import proc
from virtbench.config import parse_campaign
from virtbench.errors import InputError
from virtbench.platforms.base import Instance, Paths
from virtbench.platforms.podman import Podman

PATHS = Paths(state=Path("/nonexistent/state"), runtime=Path("/nonexistent/run"))


@pytest.fixture
def installed(monkeypatch):
    """Every runtime binary 'installed' (the argv tests do not depend on this host's packages)."""
    monkeypatch.setattr(proc, "which", lambda name: f"/usr/bin/{name}")


def make(**opts) -> Podman:
    return Podman("p", Podman.Options(**opts), PATHS)


def test_runsc_is_a_sandbox_with_the_runtime_before_every_command(installed, tmp_path):
    p = make(runtime="runsc")
    assert p.kind == "sandbox" and make().kind == "container"
    inst = Instance(name="vb-x", platform="p", run_id="r1")
    exec_argv = p.exec_argv(inst, ["true"])
    assert exec_argv[:5] == ["podman", "--runtime", "runsc", "--runtime-flag", "network=none"]
    assert exec_argv.index("exec") > exec_argv.index("--runtime")  # a global flag, before the command


def test_runtime_goes_with_create_not_after_it(installed, tmp_path):
    from virtbench.images.image import Image

    image = Image(recipe_hash="ab" * 32, root=tmp_path, release="bookworm", arch="amd64", profile="quick",
                  packages=(), tar_sha256="cd" * 32)
    argv = make(runtime="runsc").create_argv(image, "vb-a", "r1")
    assert argv[1:5] == ["--runtime", "runsc", "--runtime-flag", "network=none"]
    assert "--runtime" not in argv[argv.index("create"):]  # podman create has no --runtime of its own


def test_default_is_runc_and_class_commands_keep_it(installed):
    assert make().cli_argv()[:3] == ["podman", "--runtime", "runc"]
    assert Podman.base_argv()[:3] == ["podman", "--runtime", "runc"]


def test_a_missing_runtime_is_refused_with_the_fix(monkeypatch):
    monkeypatch.setattr(proc, "which", lambda name: None if name == "runsc" else f"/usr/bin/{name}")
    with pytest.raises(InputError) as caught:
        make(runtime="runsc")
    assert "runsc is not installed" in caught.value.message and caught.value.fix == "apt-get install runsc"


def test_runsc_with_a_network_is_refused(installed):
    with pytest.raises(InputError, match="network 'bridge' cannot work"):
        make(runtime="runsc", network="bridge")


def test_unknown_runtime_is_one_line_from_the_campaign(installed):
    with pytest.raises(InputError) as caught:
        parse_campaign({"name": "c", "platforms": [{"name": "pod", "type": "podman", "runtime": "kata"}],
                        "benchmarks": ["sqlite"]}, "c.yaml")
    assert "runtime" in caught.value.message and "\n" not in caught.value.message


def test_crun_on_a_hybrid_cgroup_host_is_refused(installed):
    unified = Path("/sys/fs/cgroup/unified/cgroup.controllers")
    if not unified.exists() or not unified.read_text().strip():
        pytest.skip("not a hybrid cgroup host with cgroup2 controllers (crun runs here)")
    with pytest.raises(InputError) as caught:
        make(runtime="crun")
    assert "hybrid" in caught.value.message and "runtime: runc" in caught.value.fix

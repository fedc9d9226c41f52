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

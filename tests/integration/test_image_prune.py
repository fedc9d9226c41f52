"""Removing cached images: refused while mounted; the engines' imported copies go too."""
from __future__ import annotations

import json
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest

from virtbench import proc
from virtbench.errors import InputError
from virtbench.images.build import list_images, remove
from virtbench.platforms.containerd import Containerd
from virtbench.platforms.docker import Docker
from virtbench.platforms.podman import Podman

pytestmark = pytest.mark.integration


def fake_image(cache: Path, digest: str) -> Path:
    root = cache / digest[:16]
    (root / "rootfs").mkdir(parents=True)
    (root / "rootfs" / "marker").write_text("x")
    (root / "manifest.json").write_text(json.dumps({"recipe_hash": digest, "release": "bookworm", "arch": "amd64",
                                                    "profile": "auto", "packages": [], "tar_sha256": "0" * 64}))
    return root


def test_remove_refuses_a_mounted_image_then_removes_it(tmp_path):
    fake_image(tmp_path / "cache", "ab" * 32)
    (image,) = list_images(tmp_path / "cache")
    target = tmp_path / "mnt"
    target.mkdir()
    proc.run(["mount", "--bind", str(image.rootfs), str(target)], timeout=30)
    try:
        with pytest.raises(InputError, match="in use by 1 mounts"):
            remove(image)
        assert (image.rootfs / "marker").exists()
    finally:
        proc.run(["umount", str(target)], timeout=30)
    remove(image)
    assert list_images(tmp_path / "cache") == []


def _tiny_tar(tmp_path: Path) -> Path:
    tar = tmp_path / "tiny.tar"
    (tmp_path / "hello").write_text("hi")
    with tarfile.open(tar, "w") as t:
        t.add(tmp_path / "hello", arcname="hello")
    return tar


def _run(argv: list[str]) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=300).stdout


@pytest.mark.parametrize("platform", [Docker, Podman, Containerd])
def test_forget_image_removes_the_engines_copy(platform, tmp_path):
    tag = f"localhost/virtbench:prune{uuid.uuid4().hex[:8]}"
    tar = _tiny_tar(tmp_path)
    Docker.ensure_engine(None)
    if platform is Containerd:
        Containerd.ensure_engine(None)
        _run(["docker", "import", str(tar), tag])
        _run(["docker", "save", "-o", str(tmp_path / "saved.tar"), tag])
        _run(["docker", "rmi", "-f", tag])
        _run(["ctr", "-n", "virtbench", "images", "import", str(tmp_path / "saved.tar")])

        def listed() -> bool:
            return tag in _run(["ctr", "-n", "virtbench", "images", "ls", "-q"]).split()
        said = f"containerd image {tag}"
    else:
        cli = platform.base_argv()
        _run([*cli, "import", str(tar), tag])

        def listed() -> bool:
            return bool(_run([*cli, "images", "-q", "--filter", f"reference={tag}"]).strip())
        said = f"{platform.cli} image {tag}"
    assert listed()
    assert platform.forget_image(tag) == [said]
    assert not listed()
    assert platform.forget_image(tag) == []  # nothing left: nothing said


@pytest.mark.measures  # reads the shared image cache whole: nothing may build into it meanwhile
def test_prune_dry_run_names_candidates_and_removes_nothing():
    import sys

    before = [i.recipe_hash for i in list_images()]
    r = subprocess.run([sys.executable, "-m", "virtbench", "image", "prune", "--dry-run"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert [i.recipe_hash for i in list_images()] == before
    from virtbench.images.build import recipe_for

    current = {recipe_for(p).hash()[:12] for p in ("quick", "full")}
    named = {line.split()[2] for line in r.stdout.splitlines() if line.startswith("would ")}
    assert named == {h[:12] for h in before} - current

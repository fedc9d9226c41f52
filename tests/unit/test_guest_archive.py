"""A brought rootfs archive (`image: {rootfs: FILE}`) is a local file, whatever its name (#25)."""
from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from virtbench.errors import InputError
from virtbench.images import guest


def _rootfs_tar(path: Path, extra: dict[str, bytes] | None = None) -> Path:
    src = path.parent / "src"
    (src / "etc").mkdir(parents=True)
    (src / "bin").mkdir()
    (src / "bin/sh").write_text("#!/bin/false\n")
    for name, data in (extra or {}).items():
        (src / name).write_bytes(data)
    with tarfile.open(path, "w") as tar:
        for p in sorted(src.iterdir()):
            tar.add(p, arcname=p.name)
    return path


def test_an_archive_named_host_colon_file_is_read_here_not_over_rsh(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _rootfs_tar(tmp_path / "localhost:rootfs.tar")
    image = guest.brought(Path("localhost:rootfs.tar"), tmp_path / "cache", log=lambda _m: None)
    assert (image.rootfs / "bin/sh").is_file()


def test_a_docker_save_layer_outside_the_archive_is_refused(tmp_path):
    manifest = json.dumps([{"Config": "c.json", "Layers": ["/etc/hostname.tar"]}]).encode()
    archive = _rootfs_tar(tmp_path / "saved.tar", {"manifest.json": manifest, "layer.tar": b""})
    with pytest.raises(InputError, match="outside the archive"):
        guest.brought(archive, tmp_path / "cache", log=lambda _m: None)

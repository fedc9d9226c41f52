"""A built guest image: one Debian root filesystem that every platform runs."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Image:
    recipe_hash: str
    """Content hash of the recipe (release, architecture, packages): the cache key."""
    root: Path
    """Cache directory holding rootfs/, rootfs.tar and manifest.json."""
    release: str
    arch: str
    profile: str
    packages: tuple[str, ...]
    tar_sha256: str
    """Hash of the built archive: identifies the exact bytes every platform ran."""
    manifest: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def rootfs(self) -> Path:
        return self.root / "rootfs"

    @property
    def tarball(self) -> Path:
        return self.root / "rootfs.tar"

    @property
    def tag(self) -> str:
        """Name used by container engines (docker/podman/containerd)."""
        return f"localhost/virtbench:{self.recipe_hash[:16]}"

    @property
    def short(self) -> str:
        return self.recipe_hash[:12]

    def provenance(self) -> dict[str, Any]:
        return {
            "recipe_hash": self.recipe_hash,
            "tar_sha256": self.tar_sha256,
            "release": self.release,
            "arch": self.arch,
            "profile": self.profile,
            "packages": list(self.packages),
            "installed": self.manifest.get("installed", {}),
        }

    @classmethod
    def load(cls, root: Path) -> Image:
        data = json.loads((root / "manifest.json").read_text())
        return cls(
            recipe_hash=data["recipe_hash"],
            root=root,
            release=data["release"],
            arch=data["arch"],
            profile=data["profile"],
            packages=tuple(data["packages"]),
            tar_sha256=data["tar_sha256"],
            manifest=data,
        )

"""Write the guest image as an OCI image archive, for `ctr images import`.

containerd has no `import` of a plain root filesystem tarball, and going through
`docker save` would make the containerd platform depend on docker. An OCI archive with one
uncompressed layer is simple: the layer is rootfs.tar itself, so its digest is also its
diff_id and nothing is recompressed.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import time
from pathlib import Path
from typing import Any

from .image import Image

ARCHIVE_NAME = "oci.tar"
IMAGE_NAME_ANNOTATION = "io.containerd.image.name"
REF_NAME_ANNOTATION = "org.opencontainers.image.ref.name"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

_DEB_TO_OCI = {"amd64": ("amd64", None), "arm64": ("arm64", "v8"), "armhf": ("arm", "v7"),
               "armel": ("arm", "v6"), "i386": ("386", None), "ppc64el": ("ppc64le", None),
               "s390x": ("s390x", None), "riscv64": ("riscv64", None)}


def oci_archive(image: Image) -> Path:
    """Path of the image's OCI archive, written on first use and cached next to the image.

    The image directory is replaced as a whole when the image is rebuilt, so an existing
    archive always belongs to the rootfs.tar beside it."""
    target = image.root / ARCHIVE_NAME
    if target.is_file():
        return target
    tmp = target.with_name(f".{ARCHIVE_NAME}.{os.getpid()}.tmp")
    try:
        write_oci_archive(image, tmp)
        tmp.rename(target)  # atomic: a concurrent reader sees no archive or a whole one
    finally:
        tmp.unlink(missing_ok=True)
    return target


def write_oci_archive(image: Image, out: Path) -> None:
    write_layout(out, image.tarball, name=image.tag, arch=image.arch,
                 history={"created_by": f"virtbench image {image.recipe_hash}", "comment": "mmdebstrap"})


def write_layout(out: Path, layer: Path, *, name: str, arch: str, history: dict[str, str],
                 config: dict[str, Any] | None = None) -> None:
    """One image of one uncompressed layer (a Debian architecture's tar) as an OCI image-layout
    tar that `ctr images import` names `name`: the guest image, and the test Kubernetes node's
    pause and busybox images (tools/kubernetes/make-image), which no registry can provide here.
    config: the image's run configuration (Entrypoint, Cmd, ...); PATH and / by default."""
    layer_digest, layer_size = _sha256_file(layer)
    oci_arch, variant = _DEB_TO_OCI.get(arch, (arch, None))
    image_config: dict[str, Any] = {
        "architecture": oci_arch,
        "os": "linux",
        "config": config or {"Env": [f"PATH={DEFAULT_PATH}"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
        "history": [history],
    }
    if variant:
        image_config["variant"] = variant
    config_blob = _canonical(image_config)
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": CONFIG_TYPE, "digest": _digest(config_blob), "size": len(config_blob)},
        "layers": [{"mediaType": LAYER_TYPE, "digest": f"sha256:{layer_digest}", "size": layer_size}],
    }
    manifest_blob = _canonical(manifest)
    tag = name.rsplit(":", 1)[1]
    index = {
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": MANIFEST_TYPE, "digest": _digest(manifest_blob), "size": len(manifest_blob),
            # containerd takes the full name from its own annotation; the OCI one is a tag only.
            "annotations": {IMAGE_NAME_ANNOTATION: name, REF_NAME_ANNOTATION: tag},
        }],
    }
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        _add_bytes(tar, "oci-layout", _canonical({"imageLayoutVersion": "1.0.0"}))
        _add_bytes(tar, "index.json", _canonical(index))
        _add_bytes(tar, f"blobs/sha256/{_digest(manifest_blob)[7:]}", manifest_blob)
        _add_bytes(tar, f"blobs/sha256/{_digest(config_blob)[7:]}", config_blob)
        info = tarfile.TarInfo(f"blobs/sha256/{layer_digest}")
        info.size, info.mtime, info.mode = layer_size, int(time.time()), 0o644
        with open(layer, "rb") as f:
            tar.addfile(info, f)


def _canonical(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _digest(blob: bytes) -> str:
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def _sha256_file(path: Path) -> tuple[str, int]:
    """Hashed here rather than trusted from the manifest: a wrong digest fails the import."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
    tar.addfile(info, io.BytesIO(data))

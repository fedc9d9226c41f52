"""virtbench's image where a node's kubelet finds it: imported into the node's containerd, or
pushed to a registry the user names. No image is pulled from the internet.

Import: the same OCI archive the containerd platform imports (images/oci.py), into the
node's containerd under its CRI namespace k8s.io (where the kubelet looks), labelled with the
installation that imported it so `cleanup` removes exactly that; pods then say
`imagePullPolicy: Never`. It runs where the platform runs: on the node itself (a campaign's
`hosts:` naming the node, whose agent runs there), or here with the node's socket given.

Registry: `skopeo copy` of the same archive to REGISTRY/virtbench:TAG (credentials from
skopeo's own auth file, never from argv), and pods pull it (`IfNotPresent`). A registry
keeps what was pushed; virtbench removes nothing there.
"""
from __future__ import annotations

from pathlib import Path

from ... import proc
from ...errors import InputError
from ...executor import Executor
from ...images.image import Image
from ...images.oci import oci_archive
from .options import K8S_NAMESPACE, OWNER_LABEL

TAR_LABEL = "org.virtbench.tar"


def ctr(socket: Path) -> list[str]:
    return ["ctr", "--address", str(socket), "-n", K8S_NAMESPACE]


def registry_ref(registry: str, image: Image) -> str:
    """Where the image goes in a registry: REGISTRY/virtbench:TAG (the tag is the image's hash)."""
    return f"{registry.rstrip('/')}/virtbench:{image.tag.rsplit(':', 1)[1]}"


def push_argv(archive: Path, image: Image, registry: str) -> list[str]:
    """skopeo copies the OCI archive (its one manifest, by its ref name) to the registry."""
    tag = image.tag.rsplit(":", 1)[1]
    return ["skopeo", "copy", "--quiet", f"oci-archive:{archive}:{tag}", f"docker://{registry_ref(registry, image)}"]


def inspect_argv(image: Image, registry: str) -> list[str]:
    return ["skopeo", "inspect", "--raw", f"docker://{registry_ref(registry, image)}"]


def check_importable(socket: Path, registry: str | None, host: Executor, name: str) -> None:
    """Before anything starts: the image can reach the node, by the socket or the registry."""
    if registry is not None:
        if proc.which("skopeo") is None:
            raise InputError(f"platform {name}: registry: {registry} is pushed to with skopeo, which is not installed",
                             "apt-get install skopeo (it reads registry credentials from its auth file)")
        return
    if not is_socket(socket, host):
        raise InputError(f"platform {name}: the image can neither be imported (no containerd socket at {socket} "
                         "on this host) nor pulled (no registry: given)",
                         "run on the node (hosts: [NODE]), give the node's socket as containerd_socket: "
                         "(or $CONTAINERD_ADDRESS), or "
                         "give registry: HOST[:PORT]/PATH")
    res = host.run([*ctr(socket), "namespaces", "ls", "-q"], timeout=30, check=False)
    if not res.ok:
        raise InputError(f"platform {name}: the containerd at {socket} does not answer: "
                         f"{(res.stderr or res.stdout).strip()[-200:]}",
                         "give the node's containerd socket as containerd_socket: (or $CONTAINERD_ADDRESS), "
                         "or registry:")


def is_socket(path: Path, host: Executor) -> bool:
    return host.run(["test", "-S", str(path)], timeout=30, check=False).ok


def present(socket: Path, image: Image, host: Executor) -> bool:
    """Whether the node has this image (by name and the hash of its layer)."""
    out = host.run([*ctr(socket), "images", "ls", "-q",
                    f'name=={image.tag},labels."{TAR_LABEL}"=={image.tar_sha256}'], timeout=60, check=False)
    return bool(out.ok and out.stdout.strip())


def import_image(socket: Path, image: Image, owner: str, host: Executor) -> None:
    """The image into the node's containerd (k8s.io), labelled with its installation."""
    host.run([*ctr(socket), "images", "import", str(oci_archive(image))], timeout=1800)
    host.run([*ctr(socket), "images", "label", image.tag, f"{TAR_LABEL}={image.tar_sha256}",
              f"{OWNER_LABEL}={owner}"], timeout=60)


def remove_imported(socket: Path, owner: str, host: Executor) -> list[str]:
    """Every image this installation imported into the node's containerd, removed."""
    if not is_socket(socket, host):
        return []
    res = host.run([*ctr(socket), "images", "ls", "-q", f'labels."{OWNER_LABEL}"=={owner}'], timeout=60, check=False)
    removed = []
    for tag in res.stdout.split() if res.ok else []:
        r = host.run([*ctr(socket), "images", "rm", tag], timeout=300, check=False)
        removed.append(f"image {tag} (containerd {socket}, namespace {K8S_NAMESPACE})" if r.ok
                       else f"image {tag} not removed: {r.stderr.strip()[-200:]}")
    return removed


def push(image: Image, registry: str, host: Executor) -> None:
    """The image to the registry, unless it is there already; a failure refuses the platform."""
    if host.run(inspect_argv(image, registry), timeout=120, check=False).ok:
        return
    res = host.run(push_argv(oci_archive(image), image, registry), timeout=3600, check=False)
    if not res.ok:
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
        raise InputError(f"pushing the image to {registry} failed: {tail[0][-300:]}",
                         "check that the registry answers and that skopeo's auth file (skopeo login) "
                         "may push there")

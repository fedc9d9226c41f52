"""Files and directories of the server's host that a campaign from a request names.

A campaign can make virtbench open paths of the machine it runs on: an Ansible inventory
(`hosts: {inventory: PATH}`), SSH keys and known_hosts files (`hosts: [{key: ...}]`), a
rootfs archive (`platforms: [{image: {rootfs: FILE}}]`), migration destinations
(`migration: {to: {path: DIR}}`), a local mirror (`image: {mirrors: [file:///DIR]}`), a
kubeconfig (`platforms: [{type: kubernetes, kubeconfig: FILE}]`; without one, the server's
default kubeconfig, whose cluster and credentials are the server owner's). From
the command line that is the user's own choice; from a request it would let the web's
client read (or write) files as the server's user, and learn from the answer whether they
exist. So before a request's campaign is parsed at all (parsing reads an inventory), every
such value is looked up here, wherever it is nested, and refused unless it lies under a
directory the server's owner allowed (`virtbench serve --allow-path DIR`; none by default).
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import InputError

PATH_KEYS = frozenset({"inventory", "key", "known_hosts", "rootfs", "path", "kubeconfig", "containerd_socket"})
"""Keys whose value is a path of this host, in any section (hosts, a platform's image, migration.to,
a kubernetes platform's kubeconfig and the node's containerd socket)."""
MIRROR_KEY = "mirrors"
FILE_SCHEMES = ("file", "copy")
"""mmdebstrap's mirror URL schemes that read a directory of this host."""


class PathNotAllowed(InputError):
    """A path of the server's host named by a request, outside the allowed directories (HTTP 403)."""


def named_paths(data: Any, where: str = "") -> Iterator[tuple[str, Any]]:
    """(field, value) of every host path the campaign mapping names, however it is nested."""
    if isinstance(data, dict):
        if data.get("type") == "kubernetes" and data.get("kubeconfig") is None:
            # no kubeconfig named: the server's own default one, which the request names as surely
            from ..platforms.kubernetes.options import default_kubeconfig

            yield (f"{where}.kubeconfig" if where else "kubeconfig"), str(default_kubeconfig())
        for key, value in data.items():
            here = f"{where}.{key}" if where else str(key)
            if key in PATH_KEYS and value is not None and not isinstance(value, (dict, list)):
                yield here, value
            elif key == MIRROR_KEY and isinstance(value, (list, tuple, str)):
                for i, line in enumerate([value] if isinstance(value, str) else value):
                    yield from ((f"{here}[{i}]", p) for p in _mirror_paths(line))
            else:
                yield from named_paths(value, here)
    elif isinstance(data, (list, tuple)):
        for i, item in enumerate(data):
            yield from named_paths(item, f"{where}[{i}]")


def _mirror_paths(line: Any) -> Iterator[Any]:
    """A mirror's local paths: file:// and copy:// URLs, or the whole entry when it is no
    URL and no `deb` line (mmdebstrap reads an existing file as a sources.list)."""
    if not isinstance(line, str):
        yield line
        return
    words = line.split()
    local = [urlsplit(w).path or w for w in words if ":" in w and w.split(":", 1)[0].lower() in FILE_SCHEMES]
    if local:
        yield from local
    elif words and words[0] not in ("deb", "deb-src") and "://" not in words[0]:
        yield line


def allowed_dirs(dirs: Sequence[str | Path]) -> tuple[Path, ...]:
    """The --allow-path directories, resolved (symlinks followed); each must exist, be no less
    than a directory of its own (`/` would allow every file of the host) and be writable by no
    other user: one who can write it could swap a symlink between the check and the use."""
    out = []
    for d in dirs:
        p = Path(d).expanduser()
        if not p.is_absolute() or not p.is_dir():
            raise InputError(f"--allow-path {str(d)!r}: not an absolute path of an existing directory",
                             "give a directory campaigns from the web may name files under, e.g. /srv/virtbench")
        real = Path(os.path.realpath(p))
        if real == Path(real.anchor):
            raise InputError(f"--allow-path {str(d)!r}: the root directory would let requests name every file "
                             "of this host", "give a directory of its own, e.g. /srv/virtbench")
        if problem := _others_can_write(real):
            raise InputError(f"--allow-path {str(d)!r}: {problem}",
                             "give a directory of its own that only its owner can write, e.g. one made by "
                             "`mkdir -m 0700 /srv/virtbench`")
        out.append(real)
    return tuple(out)


def _others_can_write(path: Path) -> str | None:
    """Why another user could change what lies under path (None: no one but its owner and root):
    the directory writable by all or by a group other than root's, or owned by another user."""
    st = path.stat()
    if st.st_mode & 0o002:
        return f"{path} is writable by every user{' (a shared directory like /tmp)' if st.st_mode & 0o1000 else ''}"
    if st.st_mode & 0o020 and st.st_gid != 0:
        return f"{path} is writable by its group (gid {st.st_gid})"
    if st.st_uid not in (0, os.geteuid()):
        return f"{path} belongs to another user (uid {st.st_uid})"
    return None


def check(data: Any, allowed: Sequence[Path], source: str) -> None:
    """Refuse the campaign if it names a host path outside `allowed`, without touching it
    beyond resolving its symlinks (the answer is the same whether it exists or not)."""
    for where, value in named_paths(data):
        text = value if isinstance(value, str) else ""
        if text.startswith("/") and "\0" not in text and _under(Path(os.path.realpath(text)), allowed):
            continue
        shown = repr(text[:80]) if text else "a non-text value"
        fix = ("the server's owner can allow a directory with `virtbench serve --allow-path DIR`; give an "
               "absolute path under it" if not allowed else
               "give an absolute path under " + ", ".join(str(a) for a in allowed))
        raise PathNotAllowed(f"{source}: {where}: {shown} is not under a directory this server lets requests "
                             "name", fix)


def _under(path: Path, allowed: Sequence[Path]) -> bool:
    return any(path == a or a in path.parents for a in allowed)

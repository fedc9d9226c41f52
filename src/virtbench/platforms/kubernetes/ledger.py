"""The clusters this installation made objects on, so `virtbench cleanup` can find them again.

`cleanup(paths, run_id)` is given no campaign: it cannot know which kubeconfig a crashed run
used. So the preflight of every run records each cluster it will touch (kubeconfig path,
context, namespace and whether virtbench owns it, the node's containerd socket) under the
state directory, never a credential; cleanup visits each, removes what carries this
installation's label (pods; with everything asked for, also its namespaces and imported
images), and forgets a cluster once nothing of it is left.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ...executor import HostExecutor
from ..base import Paths
from ..closing import NotRemoved
from . import image
from .cluster import Cluster, temp_dir
from .options import OWNER_LABEL, RUN_LABEL, label_value, owner_of


def _file(paths: Paths) -> Path:
    return paths.state / "kubernetes" / "clusters.json"


def entries(paths: Paths) -> dict[str, dict[str, Any]]:
    try:
        doc = json.loads(_file(paths).read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in doc.items() if isinstance(v, dict)} if isinstance(doc, dict) else {}


def _write(paths: Paths, doc: dict[str, dict[str, Any]]) -> None:
    f = _file(paths)
    if not doc:  # nothing left to visit: no file (a test's state directory empties)
        f.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            f.parent.rmdir()
        return
    f.parent.mkdir(parents=True, exist_ok=True)
    tmp = f.with_name(f".{f.name}.{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True))
    tmp.replace(f)


def record(paths: Paths, entry: dict[str, Any]) -> None:
    """Remember a cluster (kubeconfig, context, namespace, own_namespace, socket, import)."""
    key = hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()[:16]
    doc = entries(paths)
    if doc.get(key) != entry:
        doc[key] = entry
        _write(paths, doc)


def forget(paths: Paths, key: str) -> None:
    doc = entries(paths)
    if doc.pop(key, None) is not None:
        _write(paths, doc)


def cleanup(paths: Paths, run_id: str | None) -> list[str]:
    """Remove this installation's pods (of one run, or all) on every recorded cluster; with all
    asked for, its namespaces and imported images too, and forget the cluster once clean."""
    owner = owner_of(paths.state)
    removed: list[str] = []
    if run_id is None:  # nothing measures now (the host lock): certificates a killed client left
        for f in temp_dir(paths.runtime).glob("tmp*"):
            with contextlib.suppress(OSError):
                f.unlink()
                removed.append(f"a certificate file the kubernetes client left ({f.name})")
    for key, e in entries(paths).items():
        where = f"context {e.get('context')} of {e.get('kubeconfig')}"
        problems = 0
        try:
            cluster = Cluster(Path(e["kubeconfig"]), e.get("context"), temp_dir(paths.runtime))
        except Exception as exc:  # noqa: BLE001 - a kubeconfig gone: said, kept for a later try
            removed.append(NotRemoved(f"{where}: not visited: {exc}"))
            continue
        try:
            selector = f"{OWNER_LABEL}={owner}" + (f",{RUN_LABEL}={label_value(run_id)}" if run_id else "")
            namespaces = [e["namespace"]]
            if run_id is None and e.get("own_namespace"):
                namespaces = sorted(set(namespaces) | set(cluster.namespaces(f"{OWNER_LABEL}={owner}")))
            for ns in namespaces:
                for pod in cluster.pods(ns, selector) if cluster.namespace(ns) else []:
                    name = pod["metadata"]["name"]
                    cluster.delete_pod(ns, name, grace=0)
                    removed.append(f"pod {ns}/{name} ({where})")
            if run_id is None:
                for ns in namespaces if e.get("own_namespace") else []:
                    if cluster.namespace(ns) is not None:
                        gone = cluster.delete_namespace(ns, wait=120)
                        problems += 0 if gone else 1
                        removed.append(f"namespace {ns} ({where})" if gone else
                                       NotRemoved(f"namespace {ns} ({where}): still terminating"))
                if e.get("socket") and not e.get("registry"):
                    removed += image.remove_imported(Path(e["socket"]), owner, HostExecutor())
        except Exception as exc:  # noqa: BLE001 - one cluster's trouble must not stop the others
            removed.append(NotRemoved(f"{where}: cleanup stopped: {exc}"))
            problems += 1
        finally:
            cluster.close()
        if run_id is None and not problems:
            forget(paths, key)
    return removed

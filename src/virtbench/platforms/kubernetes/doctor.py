"""`virtbench doctor`'s kubernetes section: the cluster of the default kubeconfig, if any.

What a user pointing virtbench at a cluster wants to know first: which kubeconfig, context
and API server a campaign without `kubeconfig:` would use, whether it answers (its version),
and its nodes (Ready, kubelet, container runtime) and RuntimeClasses. Asked only by doctor,
the user's own command (loading a kubeconfig may run its exec credential plugin).
"""
from __future__ import annotations

from typing import Any

from ...errors import VirtbenchError
from ..base import Paths
from .cluster import Cluster, temp_dir
from .options import default_kubeconfig
from .preflight import ready


def report(paths: Paths) -> dict[str, Any]:
    path = default_kubeconfig()
    out: dict[str, Any] = {"kubeconfig": str(path), "reachable": False}
    try:
        import kubernetes

        out["client"] = kubernetes.__version__
    except ImportError:
        return {**out, "reason": "the kubernetes client library is not installed",
                "fix": "pip install 'virtbench[kubernetes]'"}
    if not path.is_file():
        return {**out, "reason": f"no kubeconfig at {path}",
                "fix": "set KUBECONFIG (or give kubeconfig: in the campaign) to use a cluster"}
    try:
        cluster = Cluster(path, None, temp_dir(paths.runtime))
        out.update(context=cluster.context, server=cluster.server)
        try:
            out["version"] = cluster.version().get("gitVersion")
            out["nodes"] = [{"name": n["metadata"]["name"], "ready": ready(n),
                             "kubelet": (n["status"].get("nodeInfo") or {}).get("kubeletVersion"),
                             "runtime": (n["status"].get("nodeInfo") or {}).get("containerRuntimeVersion")}
                            for n in cluster.nodes()]
            out["reachable"] = True
            try:
                from kubernetes import client

                items = cluster.call(client.NodeV1Api(cluster.api).list_runtime_class, what="RuntimeClasses")
                out["runtime_classes"] = [i["metadata"]["name"] for i in items.get("items") or []]
            except VirtbenchError:
                out["runtime_classes"] = None  # not allowed to list them: said as unknown
        finally:
            cluster.close()
    except VirtbenchError as exc:
        out.update(reason=exc.message, fix=exc.fix or "")
    return out


def lines(doc: dict[str, Any]) -> list[str]:
    """The section as the terminal shows it."""
    if not doc.get("reachable"):
        return [f"  default cluster: none usable: {doc.get('reason', '?')}"] + (
            [f"    fix: {doc['fix']}"] if doc.get("fix") else [])
    nodes = ", ".join(f"{n['name']} ({'Ready' if n['ready'] else 'not Ready'}, kubelet {n['kubelet']}, {n['runtime']})"
                      for n in doc.get("nodes") or []) or "none"
    classes = doc.get("runtime_classes")
    return [f"  default cluster: context {doc['context']} of {doc['kubeconfig']}, API server {doc['server']}: "
            f"reachable, Kubernetes {doc.get('version')}",
            f"    nodes: {nodes}",
            f"    RuntimeClasses: {', '.join(classes) if classes else 'none' if classes == [] else 'not listed'}"]

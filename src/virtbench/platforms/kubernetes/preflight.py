"""Every reason a kubernetes platform cannot run, found before anything starts: one line each,
naming the cause and the fix (exit 2).

In order, each check needing the one before: the kubeconfig and its context (read as YAML,
nothing run), the API server answering, the RBAC the platform needs (SelfSubjectAccessReview,
so a forbidden verb is named before a pod is made), the namespace given, the node (found,
Ready), the RuntimeClass, the pod's limits against the node's allocatable resources, and
the image's way to the node (a containerd socket to import into, or a registry).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import InputError, VirtbenchError
from . import image
from .cluster import Cluster, Gone
from .manifest import needed_access

if TYPE_CHECKING:
    from .platform import Kubernetes

UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
         "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}


def quantity(text: str) -> float:
    """A Kubernetes quantity ('1930m', '2', '16Gi', '4000000Ki', '1e3') as a number."""
    text = str(text).strip()
    if text.endswith("m"):
        return float(text[:-1]) / 1000
    for suffix in sorted(UNITS, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * UNITS[suffix]
    return float(text)


def check(platform: Kubernetes, cluster: Cluster) -> dict[str, Any]:
    """Refuse what cannot run (InputError/UnavailableError); the cluster's facts otherwise."""
    o = platform.options
    who = f"platform {platform.name}"
    version = cluster.version()  # unreachable: UnavailableError naming the server
    facts: dict[str, Any] = {"server": version.get("gitVersion", "?")}
    denied = [f"{verb} {res}" + (f" in {ns}" if ns else "") for verb, res, ns, group in
              needed_access(platform.namespace, platform.own_namespace) if not cluster.review(verb, res, ns, group)]
    if o.runtime_class and not cluster.review("get", "runtimeclasses", None, "node.k8s.io"):
        denied.append("get runtimeclasses")
    if denied:
        raise InputError(f"{who}: the user of {cluster.where()} may not {', '.join(denied)}",
                         "grant the RBAC the README lists for the kubernetes platform (a Role for pods and pods/exec "
                         "in the namespace, a ClusterRole for nodes, namespaces and runtimeclasses)")
    if not platform.own_namespace and cluster.namespace(platform.namespace) is None:
        raise InputError(f"{who}: namespace {platform.namespace!r} does not exist in {cluster.where()}",
                         "create it, or remove namespace: and virtbench makes (and removes) its own")
    node = _node(who, cluster, o.node)
    facts.update(node=node["metadata"]["name"], kubelet=(node["status"].get("nodeInfo") or {}).get("kubeletVersion"),
                 container_runtime=(node["status"].get("nodeInfo") or {}).get("containerRuntimeVersion"))
    if o.runtime_class:
        try:
            facts["runtime_handler"] = cluster.runtime_class(o.runtime_class).get("handler")
        except Gone:
            try:
                from kubernetes import client

                known = [i["metadata"]["name"] for i in cluster.call(
                    client.NodeV1Api(cluster.api).list_runtime_class, what="RuntimeClasses").get("items") or []]
            except VirtbenchError:
                known = []
            raise InputError(f"{who}: RuntimeClass {o.runtime_class!r} does not exist in {cluster.where()}",
                             f"use one of {', '.join(known)}" if known else
                             "create it (handler: the containerd runtime's name), or remove runtime_class:") from None
    _fits(who, node, o.cpus, o.memory)
    image.check_importable(o.socket_path(), o.registry, platform.host, platform.name)
    return facts


def _node(who: str, cluster: Cluster, name: str | None) -> dict[str, Any]:
    """The node named (found and Ready), or without a name the first Ready one."""
    if name is not None:
        try:
            node = cluster.node(name)
        except Gone:
            known = [n["metadata"]["name"] for n in cluster.nodes()]
            raise InputError(f"{who}: node {name!r} is not in {cluster.where()}",
                             f"use one of {', '.join(known) or '(no nodes)'} as node:") from None
        if not ready(node):
            raise InputError(f"{who}: node {name!r} is not Ready ({_condition_text(node)})",
                             "wait for the node (its kubelet and container runtime) or name another node:")
        if taints := blocking_taints(node):
            raise InputError(f"{who}: node {name!r} takes no new pods: tainted {', '.join(taints)}"
                             f"{_pressure_text(node)}", "clear the node's condition (its kubelet lifts the "
                             "taint), untaint it, or name another node:")
        return node
    nodes = [n for n in cluster.nodes() if ready(n) and not blocking_taints(n)]
    if not nodes:
        raise InputError(f"{who}: {cluster.where()} has no Ready node that takes new pods",
                         "start a node, or name one with node:")
    return nodes[0]


def blocking_taints(node: dict[str, Any]) -> list[str]:
    """The node's taints that keep virtbench's pods off it (they tolerate none: NoSchedule and
    NoExecute; the kubelet's disk-pressure taint is one, and a pod would stay Pending until
    ready_timeout)."""
    return [f"{t.get('key')}{'=' + t['value'] if t.get('value') else ''}:{t.get('effect')}"
            for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]


def _pressure_text(node: dict[str, Any]) -> str:
    """' (DiskPressure: the kubelet's message)' for every pressure condition that is True."""
    out = [f"{c['type']}: {c.get('message') or c.get('reason') or 'True'}"
           for c in (node.get("status") or {}).get("conditions") or []
           if c.get("type", "").endswith("Pressure") and c.get("status") == "True"]
    return f" ({'; '.join(out)})" if out else ""


def ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def _condition_text(node: dict[str, Any]) -> str:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return f"Ready={c.get('status')}: {c.get('reason') or ''} {c.get('message') or ''}".strip()
    return "no Ready condition"


def _fits(who: str, node: dict[str, Any], cpus: float | None, memory: int | None) -> None:
    """A limit above the node's allocatable resources can never be scheduled."""
    alloc = (node.get("status") or {}).get("allocatable") or {}
    name = node["metadata"]["name"]
    if cpus is not None and "cpu" in alloc and cpus > quantity(alloc["cpu"]) + 1e-9:
        raise InputError(f"{who}: cpus {cpus:g} is more than node {name} can give a pod (allocatable cpu "
                         f"{alloc['cpu']})", f"set cpus to at most {quantity(alloc['cpu']):g}")
    if memory is not None and "memory" in alloc and memory > quantity(alloc["memory"]):
        have = quantity(alloc["memory"])
        raise InputError(f"{who}: memory {memory / 2**20:.0f} MiB is more than node {name} can give a pod "
                         f"(allocatable {have / 2**20:.0f} MiB)", f"set memory to at most {int(have // 2**20)}M")

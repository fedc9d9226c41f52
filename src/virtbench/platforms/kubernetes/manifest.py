"""The objects virtbench asks a cluster for, as plain manifests (pure: built, never sent here).

One pod per instance, one container in it, from virtbench's own image: its main process
only waits (and ends at once on SIGTERM, so a delete does not wait out a grace period), and
every benchmark is exec'd into it, as into a docker or containerd container.
"""
from __future__ import annotations

from typing import Any

from ..base import EXEC_ENV
from .options import CONTAINER, OWNER_LABEL, PLATFORM_LABEL, RUN_LABEL, KubernetesOptions, label_value

WAIT = "trap 'exit 0' TERM; sleep infinity & wait"
"""The container's main process: the image's sh, waiting; SIGTERM ends it at once (a bare
`sleep` as PID 1 ignores SIGTERM, and every delete would wait out the grace period)."""
GRACE_SECONDS = 10
"""terminationGracePeriodSeconds: what a main process that ignores SIGTERM is given."""


def quantity_cpu(cpus: float) -> str:
    """cpus as a Kubernetes quantity in millicores (1.5 -> '1500m')."""
    return f"{round(cpus * 1000)}m"


def resources(options: KubernetesOptions) -> dict[str, Any]:
    """Requests equal to limits: the pod gets what it asks for and no more (QoS Guaranteed when
    both cpus and memory are set, Burstable with one of them, BestEffort with none)."""
    limits: dict[str, str] = {}
    if options.cpus is not None:
        limits["cpu"] = quantity_cpu(options.cpus)
    if options.memory is not None:
        limits["memory"] = str(int(options.memory))
    return {"requests": dict(limits), "limits": dict(limits)} if limits else {}


def labels(run_id: str, owner: str, platform: str) -> dict[str, str]:
    return {RUN_LABEL: label_value(run_id), OWNER_LABEL: owner, PLATFORM_LABEL: label_value(platform)}


def pod(name: str, namespace: str, image: str, options: KubernetesOptions, *, run_id: str, owner: str,
        platform: str, pull: str) -> dict[str, Any]:
    """The pod of one instance. `pull`: Never (imported into the node) or IfNotPresent (a registry)."""
    container: dict[str, Any] = {
        "name": CONTAINER, "image": image, "imagePullPolicy": pull,
        "command": ["sh", "-c", WAIT],
        "env": [{"name": k, "value": v} for k, v in EXEC_ENV.items()],
        "workingDir": "/",
    }
    if res := resources(options):
        container["resources"] = res
    if options.privileged:
        container["securityContext"] = {"privileged": True}
    spec: dict[str, Any] = {
        "containers": [container],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": GRACE_SECONDS,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        # the node's resolver: a cluster without a DNS service still resolves as the host does
        "dnsPolicy": "Default",
    }
    if options.network == "host":
        spec["hostNetwork"] = True
    if options.runtime_class is not None:
        spec["runtimeClassName"] = options.runtime_class
    if options.node is not None:
        # through the scheduler (nodeName would skip it, and the pod's scheduled step with it)
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [options.node]}]}]}}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels(run_id, owner, platform)},
            "spec": spec}


def namespace(name: str, owner: str) -> dict[str, Any]:
    """A namespace of virtbench's own, labelled so `cleanup` finds it."""
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {OWNER_LABEL: owner, RUN_LABEL: "namespace"}}}


def access_review(verb: str, resource: str, namespace: str | None, group: str = "") -> dict[str, Any]:
    """A SelfSubjectAccessReview: may the kubeconfig's user do `verb` on `resource`?"""
    attrs: dict[str, Any] = {"verb": verb, "resource": resource, "group": group}
    if namespace is not None:
        attrs["namespace"] = namespace
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs}}


def needed_access(namespace: str, own_namespace: bool, exec_: bool = True) -> list[tuple[str, str, str | None, str]]:
    """(verb, resource, namespace, group) the platform needs: the RBAC the README lists."""
    need: list[tuple[str, str, str | None, str]] = [
        (v, "pods", namespace, "") for v in ("create", "get", "list", "watch", "delete")]
    if exec_:
        need.append(("create", "pods/exec", namespace, ""))
    need.append(("get", "nodes", None, ""))
    if own_namespace:
        need += [("create", "namespaces", None, ""), ("delete", "namespaces", None, "")]
    return need

"""What a campaign says about a Kubernetes cluster, checked without touching it.

Reading a kubeconfig may run a program (a `user.exec` credential plugin), so nothing here
opens one: the options are validated as values only, and the cluster is first contacted
by the platform's preflight when a run starts (cluster.py).
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ...services import CONTAINERD_SOCKET
from ..base import PlatformOptions

RUN_LABEL = "org.virtbench"
"""Label key on every pod virtbench makes; the value is the run id (as base.LABEL)."""
OWNER_LABEL = "org.virtbench.state"
"""Label key naming the virtbench installation (its state directory, hashed) that made an
object: `cleanup` takes only its own, never another installation's on a shared cluster."""
PLATFORM_LABEL = "org.virtbench.platform"
NAMESPACE_PREFIX = "virtbench-"
CONTAINER = "bench"
"""The name of the one container of every pod."""
K8S_NAMESPACE = "k8s.io"
"""The containerd namespace the kubelet's CRI plugin keeps its images in."""

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_REGISTRY = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]*(:\d{1,5})?(/[a-z0-9]+(?:[._-][a-z0-9]+)*)*")


def default_kubeconfig(environ: dict[str, str] | None = None) -> Path:
    """Where kubectl looks: the first file of $KUBECONFIG, else ~/.kube/config."""
    env = os.environ if environ is None else environ
    first = next((p for p in env.get("KUBECONFIG", "").split(os.pathsep) if p), "")
    return Path(first).expanduser() if first else Path("~/.kube/config").expanduser()


def default_socket(environ: dict[str, str] | None = None) -> Path:
    """Where ctr looks: $CONTAINERD_ADDRESS (a path, or unix://PATH), else containerd's own
    default. A study's campaign names no socket, so this is how a k0s node's (/run/k0s/...) is given."""
    env = os.environ if environ is None else environ
    given = env.get("CONTAINERD_ADDRESS", "").strip().removeprefix("unix://")
    return Path(given) if given.startswith("/") else Path(CONTAINERD_SOCKET)


def owner_of(state: Path) -> str:
    """The OWNER_LABEL value of a state directory (a label value holds no '/')."""
    return hashlib.sha256(str(state).encode()).hexdigest()[:16]


class KubernetesOptions(PlatformOptions):
    """A cluster (kubeconfig, context), where on it (namespace, node, RuntimeClass) and the pod's
    resources: cpus and memory become the container's requests and limits (equal, so a pod with
    both is of the Guaranteed QoS class)."""

    kubeconfig: Path | None = Field(None, description="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    context: str | None = Field(None, description="context of the kubeconfig (default: its current-context)")
    namespace: str | None = Field(None, description="an existing namespace to make the pods in (default: virtbench "
                                                    "creates its own, labelled, and removes it after the run)")
    node: str | None = Field(None, description="the node the pods run on (through the scheduler, by node name)")
    runtime_class: str | None = Field(None, description="RuntimeClass of the pods (e.g. runsc); default: the "
                                                        "node's default runtime")
    privileged: bool = Field(False, description="run the container privileged")
    network: Literal["pod", "host"] = Field(  # type: ignore[assignment]  # pods have no `none`/`bridge`
        "pod", description="pod: the pod's own network from the cluster's CNI (pods reach each other); "
                           "host: hostNetwork, the node's own stack")
    registry: str | None = Field(None, description="push the image to this registry (HOST[:PORT]/PATH, with "
                                                   "skopeo and the registry credentials of skopeo's auth file) "
                                                   "instead of importing it into the node's containerd")
    containerd_socket: Path | None = Field(None, description=(
        "the node's containerd socket, where the image is imported (namespace k8s.io) when no registry "
        "is given: run on the node (hosts: [NODE]) or give the socket's path here (default: "
        "$CONTAINERD_ADDRESS, as ctr reads it, else /run/containerd/containerd.sock; k0s: "
        "/run/k0s/containerd.sock)"))
    ready_timeout: float = Field(300.0, gt=0, le=3600, description="seconds a pod may take to become Ready")

    @field_validator("namespace", "node", "runtime_class")
    @classmethod
    def _dns(cls, v: str | None) -> str | None:
        """Names the API server would refuse are refused here, with the rule."""
        if v is not None and (len(v) > 253 or not _DNS_SUBDOMAIN.fullmatch(v)):
            raise ValueError(f"{v!r} is not a Kubernetes name (lower-case letters, digits, '-' and '.')")
        return v

    @field_validator("namespace")
    @classmethod
    def _label(cls, v: str | None) -> str | None:
        if v is not None and (len(v) > 63 or not _DNS_LABEL.fullmatch(v)):
            raise ValueError(f"namespace {v!r} must be at most 63 lower-case letters, digits and '-'")
        return v

    @field_validator("context")
    @classmethod
    def _context(cls, v: str | None) -> str | None:
        if v is not None and (not v.strip() or "\0" in v or "\n" in v):
            raise ValueError("give the context's name as the kubeconfig spells it")
        return v

    @field_validator("registry")
    @classmethod
    def _registry(cls, v: str | None) -> str | None:
        if v is not None and (len(v) > 255 or not _REGISTRY.fullmatch(v) or "/" not in v and "." not in v
                              and ":" not in v and v != "localhost"):
            raise ValueError(f"registry {v!r}: give HOST[:PORT]/PATH, e.g. registry.example.org:5000/virtbench")
        return v

    @field_validator("kubeconfig", "containerd_socket")
    @classmethod
    def _absolute(cls, v: Path | None) -> Path | None:
        if v is not None and not v.expanduser().is_absolute():
            raise ValueError(f"{str(v)!r} must be an absolute path (or start with ~)")
        return v.expanduser() if v is not None else None

    @model_validator(mode="after")
    def _no_cpuset(self) -> KubernetesOptions:
        if self.cpuset is not None:
            raise ValueError("cpuset: a pod cannot name its CPUs; the kubelet's CPU manager gives whole CPUs to a "
                             "Guaranteed pod (--cpu-manager-policy=static); remove cpuset and set cpus (a whole "
                             "number) and memory")
        return self

    def kubeconfig_path(self) -> Path:
        return self.kubeconfig or default_kubeconfig()

    def socket_path(self) -> Path:
        return self.containerd_socket or default_socket()


def pod_name(instance: str) -> str:
    """The pod's name for an instance name: a DNS label (lower case, '-' only), with a hash of the
    instance name when it had to change, so two platforms' pods never share one."""
    name = re.sub(r"[^a-z0-9-]+", "-", instance.lower()).strip("-")
    if name == instance and len(name) <= 63:
        return name
    digest = hashlib.sha256(instance.encode()).hexdigest()[:8]
    return f"{name[:54].strip('-')}-{digest}"


def label_value(text: str) -> str:
    """A label value (63 characters of [A-Za-z0-9._-], alphanumeric at both ends) for a name."""
    value = re.sub(r"[^A-Za-z0-9._-]+", "-", text)[:63].strip("-_.")
    return value or "x"

"""Kubernetes pods as a platform: one pod per instance, on a node of a cluster the user names.

Through the official `kubernetes` client (cluster.py), never kubectl. A pod runs virtbench's
own image (the one every platform runs: imported into the node's containerd, or pushed to a
registry, image.py) with a main process that only waits (manifest.py); each benchmark is
exec'd into it through the API's exec stream by a small helper process (kexec.py), as
`docker exec` runs one into a container. Exec, rather than a pod per execution whose command
is the benchmark: the same binaries, in the same kind of instance, prepared (scratch
directory) and cleaned exactly as on every other platform, and a pod's start-up stays out of
the benchmark's numbers (the tools time themselves inside the pod); the start-up is measured
on its own, by watched events (events.py).

Lifecycle, each step timed by the watch (not by polling): create sends the pod (its watch
opened first), start waits for Ready (scheduled, running, ready on the way), stop deletes it
and waits until its container is terminated, remove until the pod is gone. Everything is
labelled with the run and the installation (options.OWNER_LABEL); the clusters a run touches
are recorded (ledger.py) so `virtbench cleanup` finds them after a crash.
"""
from __future__ import annotations

import json
import re
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ...errors import UnavailableError, VirtbenchError
from ...executor import Executor
from ...images.image import Image
from ..base import Availability, Instance, Paths, Platform, PlatformOptions
from . import events, image, ledger, manifest, podcgroup, preflight
from .cluster import Cluster, Gone, temp_dir
from .options import CONTAINER, NAMESPACE_PREFIX, KubernetesOptions, default_kubeconfig, owner_of, pod_name

STOP_WAIT = manifest.GRACE_SECONDS + 50
GONE_WAIT = 120.0
WATCH_SECONDS = 3600


class Kubernetes(Platform):
    """Pods on a Kubernetes node, each benchmark exec'd into its pod."""

    type = "kubernetes"
    pod = True
    kind = "container"
    Options = KubernetesOptions
    options: KubernetesOptions
    description = ("Kubernetes pods through the API (official client): virtbench's image imported into the node's "
                   "containerd or pushed to a registry, benchmarks exec'd into the pod")
    reachable_network = "pod"
    image_per_instance = False
    python_extra: ClassVar[str | None] = "kubernetes"
    fleet_gap: ClassVar[str | None] = (
        "each exec is a helper process holding the API client (about 45 MB and 0.4 CPU-seconds to start), so N pods "
        "running the workload at once would add N such processes to the host the guard watches")

    def __init__(self, name: str, options: PlatformOptions, paths: Paths,
                 executor: Executor | None = None) -> None:
        super().__init__(name, options, paths, executor)
        self.owner = owner_of(paths.state)
        self.namespace = self.options.namespace or f"{NAMESPACE_PREFIX}{self.owner[:12]}"
        self.own_namespace = self.options.namespace is None
        self.image_ref: str | None = None
        self.facts: dict[str, Any] = {}
        self._cluster: Cluster | None = None
        self._live: dict[str, tuple[events.Timeline, events.Watcher | None]] = {}
        self._namespace_made = False
        if self.options.runtime_class not in (None, "runc"):
            self.kind = "sandbox"  # type: ignore[misc, assignment]  # a sandbox runtime behind the kubelet

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = Cluster(self.options.kubeconfig_path(), self.options.context, temp_dir(self.paths.runtime))
        return self._cluster

    # -- discovery -------------------------------------------------------------------------
    @classmethod
    def try_instance(cls, paths: Paths) -> Availability:
        """The client library; a cluster is each entry's own (its preflight), and doctor reports the
        default kubeconfig's (doctor.py): no kubeconfig is read here, so none's exec plugin runs."""
        try:
            import kubernetes
        except ImportError:
            return Availability(False, "the kubernetes client library is not installed",
                                "pip install 'virtbench[kubernetes]'")
        return Availability(True, f"client {kubernetes.__version__} (a campaign names its cluster with kubeconfig:; "
                                  "doctor's kubernetes section: the default one)")

    @classmethod
    def entry_gap(cls, options: Mapping[str, Any]) -> Availability | None:
        """No kubeconfig where the entry (or kubectl's default) looks: the cluster is each entry's."""
        path = Path(options["kubeconfig"]).expanduser() if options.get("kubeconfig") else default_kubeconfig()
        if path.exists():
            return None
        return Availability(False, f"no kubeconfig at {path}", "give the cluster's kubeconfig as the platform's "
                            "kubeconfig: PATH, or set KUBECONFIG (kubectl's own file works)")

    def preflight(self) -> None:
        """Every refusal before anything starts (preflight.py), then the cluster recorded."""
        self.facts = preflight.check(self, self.cluster)
        ledger.record(self.paths, {"kubeconfig": str(self.cluster.kubeconfig), "context": self.cluster.context,
                                   "namespace": self.namespace, "own_namespace": self.own_namespace,
                                   "socket": str(self.options.socket_path()),
                                   "registry": self.options.registry})

    def versions(self) -> dict[str, str]:
        try:
            import kubernetes

            out = {"client": kubernetes.__version__}
        except ImportError:
            out = {"client": "not installed"}
        facts = self.facts or {}
        for key in ("server", "kubelet", "container_runtime", "runtime_handler"):
            if facts.get(key):
                out[key] = str(facts[key])
        return out

    def describe(self) -> dict[str, Any]:
        doc = super().describe()
        doc["kubeconfig"] = str(self.options.kubeconfig_path())
        doc["engine"] = {"context": self._cluster.context if self._cluster else self.options.context,
                         "api_server": self._cluster.server if self._cluster else None,
                         "namespace": self.namespace, "own_namespace": self.own_namespace,
                         "node": self.facts.get("node") or self.options.node,
                         "runtime_class": self.options.runtime_class,
                         "image": "registry " + self.options.registry if self.options.registry
                         else f"imported into containerd {self.options.socket_path()} (k8s.io)",
                         "qos": _qos(self.options), "exec": "API exec stream (kexec helper per command)",
                         "lifecycle": "timed by watched events"}
        return doc

    def label(self) -> str:
        shown = {k: getattr(self.options, k) for k in ("runtime_class", "node", "cpus", "memory")}
        inner = ",".join(f"{k}={v}" for k, v in shown.items() if v is not None)
        return f"kubernetes({inner})" if inner else "kubernetes"

    # -- lifecycle -------------------------------------------------------------------------
    def prepare(self, image_: Image) -> None:
        """The image where the node finds it; then one pod of it started and removed (decided by
        trying: a RuntimeClass whose shim is missing, an image the kubelet cannot see, a node that
        takes no pods are refused here, with the pod's own reason)."""
        socket = self.options.socket_path()
        if self.options.registry:
            image.push(image_, self.options.registry, self.host)
            self.image_ref = image.registry_ref(self.options.registry, image_)
        else:
            if not image.present(socket, image_, self.host):
                image.import_image(socket, image_, self.owner, self.host)
            self.image_ref = image_.tag
        probe = self.create(image_, f"vb-probe-{uuid.uuid4().hex[:8]}", "probe")
        try:
            self.start(probe)
        except VirtbenchError as exc:
            raise UnavailableError(f"platform {self.name}: a test pod did not start: {exc.message}",
                                   exc.fix or "see the pod's events (kubectl describe pod) and the kubelet's log") from None
        finally:
            self.discard(probe)

    def ensure_namespace(self) -> None:
        """The namespace virtbench owns, made on the first create of the run (not in prepare: a
        resume's cleanup runs between the two)."""
        if not self.own_namespace or self._namespace_made:
            return
        found = self.cluster.namespace(self.namespace)
        if found is not None and (found.get("status") or {}).get("phase") == "Terminating":
            deadline = time.monotonic() + GONE_WAIT
            while found is not None and time.monotonic() < deadline:
                time.sleep(0.5)
                found = self.cluster.namespace(self.namespace)
        if found is None:
            try:
                self.cluster.create_namespace(manifest.namespace(self.namespace, self.owner))
            except VirtbenchError as exc:
                if "already exists" not in exc.message:
                    raise
        self._namespace_made = True

    def create(self, image_: Image, name: str, run_id: str) -> Instance:
        if self.image_ref is None:
            raise UnavailableError(f"{self.name}: the image is not on the node yet (prepare() imports it)")
        self.ensure_namespace()
        pod = pod_name(name)
        body = manifest.pod(pod, self.namespace, self.image_ref, self.options, run_id=run_id, owner=self.owner,
                            platform=self.name, pull="IfNotPresent" if self.options.registry else "Never")
        response = self.cluster.watch_pod(self.namespace, pod, WATCH_SECONDS)  # open before the pod exists
        timeline = events.Timeline(t0=time.perf_counter(), wall0=time.time())
        watcher = events.Watcher(response, timeline)
        try:
            created = self.cluster.create_pod(body)
        except BaseException:
            watcher.close()
            raise
        timeline.steps["created"] = time.perf_counter() - timeline.t0
        self._live[name] = (timeline, watcher)
        meta = created.get("metadata") or {}
        return Instance(name=name, platform=self.name, run_id=run_id,
                        data={"pod": pod, "namespace": self.namespace, "uid": meta.get("uid")})

    def start(self, instance: Instance) -> None:
        timeline, watcher = self._live[instance.name]
        assert watcher is not None
        try:
            if not watcher.wait("ready", self.options.ready_timeout):
                raise UnavailableError(f"pod {instance.data['pod']} not ready: {self._why(instance, timeline, watcher)}",
                                       _fix(timeline.failure))
        finally:
            watcher.close()
            self._live[instance.name] = (timeline, None)
        pod = self.cluster.pod(self.namespace, instance.data["pod"]) or {}
        status = pod.get("status") or {}
        container = (status.get("containerStatuses") or [{}])[0]
        instance.data.update(node=(pod.get("spec") or {}).get("nodeName"), pod_ip=status.get("podIP"),
                             container_id=container.get("containerID"), qos=status.get("qosClass"))

    def _why(self, instance: Instance, timeline: events.Timeline, watcher: events.Watcher) -> str:
        if timeline.failure:
            return timeline.failure
        seen = ", ".join(timeline.steps) or "nothing"
        try:
            warnings = [e for e in self.cluster.pod_events(self.namespace, instance.data["pod"])
                        if e.get("type") == "Warning"]
        except VirtbenchError:
            warnings = []
        last = f"; last warning: {warnings[-1].get('reason')}: {str(warnings[-1].get('message'))[:300]}" \
            if warnings else ""
        ended = f" (the watch ended: {watcher.error})" if watcher.error else ""
        return f"after {self.options.ready_timeout:g} s it was {seen}{ended}{last}"

    def exec_argv(self, instance: Instance, argv: list[str]) -> list[str]:
        o = self.options
        return [sys.executable, "-m", "virtbench.platforms.kubernetes.kexec",
                "--kubeconfig", str(o.kubeconfig_path()), *(["--context", o.context] if o.context else []),
                "--namespace", str(instance.data["namespace"]), "--pod", str(instance.data["pod"]),
                "--container", CONTAINER, "--temp-dir", str(temp_dir(self.paths.runtime)), "--", *argv]

    def stop(self, instance: Instance) -> None:
        """Delete the pod; return once its container is terminated (the kubelet stopped it)."""
        timeline, watcher = self._live.get(instance.name, (None, None))
        if timeline is None or timeline.stop_t0 is not None:
            return
        if watcher is not None:  # created, never started: the create's watch ends here
            watcher.close()
            self._live[instance.name] = (timeline, None)
        pod = instance.data["pod"]
        try:
            response = self.cluster.watch_pod(self.namespace, pod, WATCH_SECONDS)
        except Gone:
            return
        watcher = events.Watcher(response, timeline)
        timeline.stop_t0 = time.perf_counter()
        self._live[instance.name] = (timeline, watcher)
        if not self.cluster.delete_pod(self.namespace, pod):
            timeline.mark("gone", time.perf_counter())
        elif not watcher.wait("stopped", STOP_WAIT) and "gone" not in timeline.steps:
            raise UnavailableError(f"pod {pod}: its container did not stop within {STOP_WAIT} s of the delete")

    def remove(self, instance: Instance) -> None:
        """Until the pod is gone from the API (its sandbox torn down). Safe to call twice."""
        pod = instance.data.get("pod")
        timeline, watcher = self._live.pop(instance.name, (None, None))
        if pod is None:
            return
        try:
            if watcher is None or timeline is None or timeline.stop_t0 is None:  # never stopped: delete at once
                if self.cluster.delete_pod(self.namespace, pod, grace=0):
                    self._wait_gone(pod)
            elif not watcher.wait("gone", GONE_WAIT):
                raise UnavailableError(f"pod {pod} still exists {GONE_WAIT:g} s after its delete")
        finally:
            if watcher is not None:
                watcher.close()
            if timeline is not None:
                instance.data["timeline"] = {"steps": timeline.steps, "api": timeline.offsets(),
                                             "terminated": timeline.terminated, "events": timeline.events}

    def _wait_gone(self, pod: str) -> None:
        deadline = time.monotonic() + GONE_WAIT
        while self.cluster.pod(self.namespace, pod) is not None:
            if time.monotonic() > deadline:
                raise UnavailableError(f"pod {pod} still exists {GONE_WAIT:g} s after its delete")
            time.sleep(0.2)

    def event_times(self, instance: Instance) -> tuple[dict[str, float], str]:
        """The pod's steps on virtbench's clock (start steps from the create, stop steps from the
        delete) as `pod_<step>` seconds; the record keeps the API's whole-second stamps of the same
        steps (from the create, as `api`), the container's terminated state (OOMKilled) and the events."""
        timeline = instance.data.get("timeline") or {}
        steps = timeline.get("steps") or {}
        times = {f"pod_{k}": float(v) for k, v in steps.items() if k in (*events.START_STEPS, *events.STOP_STEPS)}
        return times, json.dumps(timeline, sort_keys=True) if timeline else ""

    # -- networking ------------------------------------------------------------------------
    def address(self, instance: Instance) -> str:
        """The pod's IP as the API gives it (under hostNetwork the node's): the node need not be
        the host virtbench runs on, so neither 127.0.0.1 nor an address read inside will do."""
        ip = instance.data.get("pod_ip")
        if not ip:
            raise UnavailableError(f"{self.name}: pod {instance.data.get('pod')} has no IP in its status")
        return str(ip)

    def host_address(self, instance: Instance) -> str:
        """This host's source address on its route to the pod: the node's own address when
        virtbench runs on the node (hostNetwork), the CNI bridge's for a pod there, and this
        host's address towards the node when it is another machine or namespace."""
        ip = self.address(instance)
        out = self.host.run(["ip", "-4", "-o", "route", "get", ip], timeout=30).stdout
        match = re.search(r"\bsrc (\d+\.\d+\.\d+\.\d+)", out)
        if not match:
            raise UnavailableError(f"{self.name}: this host has no route to pod {instance.data.get('pod')} at {ip}: "
                                   f"{out.strip()!r}", "run virtbench on the node (hosts: [NODE]) for network "
                                   "benchmarks between the host and pods")
        return match.group(1)

    # -- where its processes are -----------------------------------------------------------
    def memory_cgroup(self, instance: Instance) -> str | None:
        """The container's memory cgroup on this host (found once per pod, by its UID)."""
        if "memory_cgroup" not in instance.data and instance.data.get("uid") and "container_id" in instance.data:
            instance.data["memory_cgroup"] = podcgroup.memory_cgroup(instance.data["uid"], instance.data["container_id"])
        return instance.data.get("memory_cgroup")

    def host_pid(self, instance: Instance) -> int | None:
        """A process of the pod's container, read from its cgroup (the node's own view)."""
        rel = self.memory_cgroup(instance)
        if rel is None:
            return None
        try:
            first = (podcgroup.hierarchy("memory") / rel.lstrip("/") / "cgroup.procs").read_text().split()
        except OSError:
            return None
        return int(first[0]) if first else None

    # -- after the run ---------------------------------------------------------------------
    def close(self) -> None:
        """The namespace virtbench made and the image it imported, removed; the watches closed."""
        for name, (_, watcher) in list(self._live.items()):
            if watcher is not None:
                watcher.close()
            self._live.pop(name, None)
        if self._cluster is None:
            return
        try:
            if self.own_namespace and self.cluster.namespace(self.namespace) is not None:
                self.cluster.delete_namespace(self.namespace, wait=GONE_WAIT)
            self._namespace_made = False
            if self.image_ref is not None and not self.options.registry:  # imported now, or left by a crash
                image.remove_imported(self.options.socket_path(), self.owner, self.host)
                self.image_ref = None
        finally:
            self.cluster.close()

    @classmethod
    def cleanup(cls, paths: Paths, run_id: str | None = None) -> list[str]:
        return ledger.cleanup(paths, run_id)


def _qos(o: KubernetesOptions) -> str:
    return "Guaranteed" if o.cpus is not None and o.memory is not None else \
        "Burstable" if o.cpus is not None or o.memory is not None else "BestEffort"


def _fix(failure: str | None) -> str:
    if failure and "ErrImageNeverPull" in failure:
        return ("the image is not in the node's containerd: run on the node (hosts: [NODE]) or give its socket as "
                "containerd_socket: (or $CONTAINERD_ADDRESS), or use registry:")
    if failure and failure.startswith("unschedulable"):
        return "free the node (or lower cpus/memory), or name another node:"
    return "see the pod's events and the kubelet's log on the node"

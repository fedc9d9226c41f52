"""The few Kubernetes API calls `start` makes to check its node, over HTTPS from the host.

The standard library only (the system python3 runs these tools, before any venv exists), with
the admin client certificate of the node's own CA, through the veth: exactly the path a user's
client takes with DIR/kubeconfig.
"""
from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from .layout import Node


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Api:
    def __init__(self, node: Node) -> None:
        self.base = node.api_url
        self.ctx = ssl.create_default_context(cafile=str(node.pki / "ca.crt"))
        self.ctx.load_cert_chain(str(node.pki / "admin.crt"), str(node.pki / "admin.key"))

    def call(self, method: str, path: str, body: dict[str, Any] | None = None, raw: bool = False) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=15) as r:
                text = r.read().decode()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            try:
                detail = json.loads(detail).get("message", detail)
            except ValueError:
                pass
            raise ApiError(exc.code, detail[:300]) from None
        return text if raw else json.loads(text)

    def get(self, path: str) -> Any:
        return self.call("GET", path)

    def exists(self, path: str) -> bool:
        try:
            self.get(path)
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def create(self, path: str, body: dict[str, Any]) -> None:
        try:
            self.call("POST", path, body)
        except ApiError as exc:
            if exc.status != 409:  # already there: start is idempotent
                raise

    def delete(self, path: str, body: dict[str, Any] | None = None) -> None:
        try:
            self.call("DELETE", path, body)
        except ApiError as exc:
            if exc.status != 404:
                raise


def wait_for(what: str, check: Callable[[], Any], timeout: float, interval: float = 0.5) -> Any:
    """check() until it returns something true; TimeoutError naming `what` and the last error."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        try:
            result = check()
            if result:
                return result
        except (ApiError, OSError, ValueError) as exc:
            last = str(exc)[:300]
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s" + (f" (last: {last})" if last else ""))
        time.sleep(interval)


def node_ready(api: Api, name: str) -> bool:
    node = api.get(f"/api/v1/nodes/{name}")
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", []))


def probe_pod(name: str, image: str, text: str, runtime_class: str | None) -> dict[str, Any]:
    """A pod the scheduler places (no nodeName), that prints `text` and ends."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "probe", "image": image, "imagePullPolicy": "Never",
                        "command": ["sh", "-c", f"echo {text}"]}],
    }
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def pod_outcome(api: Api, ns: str, name: str) -> str | None:
    """'Succeeded', or a one-line reason it cannot, or None while it is still on its way."""
    pod = api.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    status = pod.get("status", {})
    phase = status.get("phase")
    if phase == "Succeeded":
        return "Succeeded"
    if phase == "Failed":
        return f"pod failed: {status.get('reason') or ''} {status.get('message') or ''}".strip()
    return None


def pod_story(api: Api, ns: str, name: str) -> str:
    """The pod's last state and events, for a message saying why it did not run."""
    parts = []
    try:
        status = api.get(f"/api/v1/namespaces/{ns}/pods/{name}").get("status", {})
        parts.append(f"phase {status.get('phase')}")
        for c in status.get("containerStatuses", []) or []:
            for kind, st in (c.get("state") or {}).items():
                parts.append(f"container {kind}: {st.get('reason', '')} {st.get('message', '')}".strip())
        events = api.get(f"/api/v1/namespaces/{ns}/events?fieldSelector=involvedObject.name%3D{name}")
        for e in events.get("items", [])[-4:]:
            parts.append(f"{e.get('reason')}: {(e.get('message') or '').strip()[:300]}")
    except (ApiError, OSError, ValueError) as exc:
        parts.append(f"(status unreadable: {exc})")
    return "; ".join(parts)

"""One cluster as virtbench talks to it: the official `kubernetes` client, raw JSON both ways.

Every request goes through the client's generated API methods with `_preload_content=False`
and the answer is read as the API server's own JSON (camelCase, exactly what `kubectl get
-o json` shows and what tests/data/kubernetes records), so nothing depends on the client's
model classes. Requests have short timeouts and no retries: an API server that does not
answer is said in one line at once, not after minutes of retrying.

Credentials stay inside the client: messages name the kubeconfig file, the context and the
API server's address, never a token, certificate or password; an API error is reduced to its
status and the server's own message (ApiException's text carries response headers).
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from ...errors import InputError, UnavailableError, VirtbenchError
from ...extras import require

TIMEOUT = (5.0, 30.0)
"""(connect, read) seconds of an ordinary request."""


class Gone(VirtbenchError):
    """The object asked for does not exist (HTTP 404)."""


def read_kubeconfig(path: Path) -> dict[str, Any]:
    """The kubeconfig as YAML, read without running anything it names (an exec plugin runs only
    when the client loads it)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputError(f"no kubeconfig at {path}", "give the cluster's kubeconfig as the platform's kubeconfig: "
                         "PATH, or set KUBECONFIG (kubectl's own file works)") from None
    except OSError as exc:
        raise InputError(f"kubeconfig {path} cannot be read: {exc.strerror}",
                         "make it readable by the user virtbench runs as") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("contexts") or [], list):
        raise InputError(f"kubeconfig {path} is not a kubeconfig (YAML with clusters, users and contexts)",
                         "give the file kubectl uses for the cluster")
    return doc


def context_of(doc: dict[str, Any], path: Path, context: str | None) -> tuple[str, str]:
    """(context name, API server URL) of the context asked for, or of the current one."""
    contexts = {c.get("name"): c.get("context") or {} for c in doc.get("contexts") or [] if isinstance(c, dict)}
    name = context or doc.get("current-context")
    if not name:
        raise InputError(f"kubeconfig {path} has no current-context and the platform names none",
                         f"set context: to one of {', '.join(sorted(map(str, contexts))) or '(none: the file has no contexts)'}")
    if name not in contexts:
        raise InputError(f"kubeconfig {path} has no context {name!r}",
                         f"use one of {', '.join(sorted(map(str, contexts))) or '(none)'} as context:")
    clusters = {c.get("name"): c.get("cluster") or {} for c in doc.get("clusters") or [] if isinstance(c, dict)}
    server = str((clusters.get(contexts[name].get("cluster")) or {}).get("server") or "")
    if not server:
        raise InputError(f"kubeconfig {path}: context {name!r} names no cluster with a server address",
                         "fix the kubeconfig's clusters: entry (server: https://HOST:PORT)")
    return str(name), server


class Cluster:
    """A kubeconfig's context, connected on first use."""

    def __init__(self, kubeconfig: Path, context: str | None, temp_dir: Path | None = None) -> None:
        self.kubeconfig = kubeconfig
        doc = read_kubeconfig(kubeconfig)
        self.context, self.server = context_of(doc, kubeconfig, context)
        self.temp_dir = temp_dir
        self._api: Any = None

    def where(self) -> str:
        return f"context {self.context!r} of {self.kubeconfig} (API server {self.server})"

    # -- the client ----------------------------------------------------------------------
    @property
    def api(self) -> Any:
        """The client's ApiClient for this context (loading may run the kubeconfig's exec plugin)."""
        if self._api is None:
            require("kubernetes", "the kubernetes platform")
            from kubernetes import client, config

            cfg = client.Configuration()
            try:
                if self.temp_dir is not None:  # certificates the client writes out: in our private directory
                    self.temp_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
                config.load_kube_config(config_file=str(self.kubeconfig), context=self.context,
                                        client_configuration=cfg, persist_config=False,
                                        temp_file_path=str(self.temp_dir) if self.temp_dir else None)
            except Exception as exc:  # noqa: BLE001 - the loader's errors are many kinds
                raise InputError(f"{self.where()}: the client cannot use it: {_short(type(exc).__name__, exc)}",
                                 "check the context's user entry (certificates, token or exec plugin)") from None
            cfg.retries = False  # one try: an unreachable server is said at once
            cfg.connection_pool_maxsize = 64  # N pods at once: each start and stop holds a watch open
            self._api = client.ApiClient(configuration=cfg)
        return self._api

    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api)

    def close(self) -> None:
        if self._api is not None:
            try:
                self._api.close()
            except Exception:  # noqa: BLE001 - closing a pool is best effort
                pass
            self._api = None

    def call(self, method: Callable[..., Any], *args: Any, what: str, timeout: Any = TIMEOUT, **kwargs: Any) -> Any:
        """One request, its JSON answer as a dict; errors as one line without credentials."""
        try:
            resp = method(*args, _preload_content=False, _request_timeout=timeout, **kwargs)
            data = resp.data
            resp.release_conn()  # back to the pool: a run makes thousands of requests
        except Exception as exc:  # noqa: BLE001 - translated: ApiException, urllib3's, the loader's
            raise self.error(exc, what) from None
        return json.loads(data) if data else {}

    def error(self, exc: BaseException, what: str) -> VirtbenchError:
        """An exception of the client as virtbench's error, naming the request and the fix."""
        if isinstance(exc, VirtbenchError):
            return exc
        status = getattr(exc, "status", None)
        if isinstance(status, int) and status:
            message = _status_message(exc)
            if status == 404:
                return Gone(f"{what}: not found ({message})")
            if status == 401:
                return InputError(f"{what}: the API server refused the credentials of {self.where()} (401)",
                                  "renew the context's credentials (its token or certificate expired?)")
            if status == 403:
                return InputError(f"{what}: forbidden for the user of {self.where()}: {message}",
                                  "grant the RBAC the README lists for the kubernetes platform")
            return VirtbenchError(f"{what}: the API server answered {status}: {message}")
        return UnavailableError(f"the API server of {self.where()} does not answer ({what}): "
                                f"{_short(type(exc).__name__, exc)}",
                                "check that the cluster is up and that this host reaches its API server")

    # -- requests ------------------------------------------------------------------------
    def version(self) -> dict[str, Any]:
        from kubernetes import client

        return dict(self.call(client.VersionApi(self.api).get_code, what="the API server's version"))

    def review(self, verb: str, resource: str, namespace: str | None, group: str = "") -> bool:
        from kubernetes import client

        from .manifest import access_review

        answer = self.call(client.AuthorizationV1Api(self.api).create_self_subject_access_review,
                           access_review(verb, resource, namespace, group), what=f"may I {verb} {resource}")
        return bool((answer.get("status") or {}).get("allowed"))

    def node(self, name: str) -> dict[str, Any]:
        return dict(self.call(self.core().read_node, name, what=f"node {name}"))

    def nodes(self) -> list[dict[str, Any]]:
        return list(self.call(self.core().list_node, what="the nodes").get("items") or [])

    def runtime_class(self, name: str) -> dict[str, Any]:
        from kubernetes import client

        return dict(self.call(client.NodeV1Api(self.api).read_runtime_class, name, what=f"RuntimeClass {name}"))

    def namespace(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.call(self.core().read_namespace, name, what=f"namespace {name}"))
        except Gone:
            return None

    def create_namespace(self, body: dict[str, Any]) -> None:
        self.call(self.core().create_namespace, body, what=f"creating namespace {body['metadata']['name']}")

    def delete_namespace(self, name: str, wait: float = 0.0) -> bool:
        """Delete it; with wait, until it is gone (its pods with it). True if gone."""
        try:
            self.call(self.core().delete_namespace, name, what=f"deleting namespace {name}")
        except Gone:
            return True
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.namespace(name) is None:
                return True
            time.sleep(0.5)
        return self.namespace(name) is None

    def namespaces(self, selector: str) -> list[str]:
        items = self.call(self.core().list_namespace, label_selector=selector, what="namespaces").get("items") or []
        return [i["metadata"]["name"] for i in items]

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return list(self.call(self.core().list_namespaced_pod, namespace, label_selector=selector,
                              what=f"pods in {namespace}").get("items") or [])

    def create_pod(self, body: dict[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        return dict(self.call(self.core().create_namespaced_pod, meta["namespace"], body,
                              what=f"creating pod {meta['name']}"))

    def delete_pod(self, namespace: str, name: str, grace: int | None = None) -> bool:
        """Ask for the pod's deletion; False if it was gone already."""
        kwargs = {} if grace is None else {"grace_period_seconds": grace}
        try:
            self.call(self.core().delete_namespaced_pod, name, namespace, what=f"deleting pod {name}", **kwargs)
        except Gone:
            return False
        return True

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.call(self.core().read_namespaced_pod, name, namespace, what=f"pod {name}"))
        except Gone:
            return None

    def pod_events(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """The Events about a pod (why it does not start: a sandbox, an image, a runtime)."""
        return list(self.call(self.core().list_namespaced_event, namespace,
                              field_selector=f"involvedObject.name={name}", what=f"events of pod {name}")
                    .get("items") or [])

    def watch_pod(self, namespace: str, name: str, seconds: int) -> Any:
        """A watch of one pod, open (the server registered it) when this returns: the raw
        response whose lines are its events."""
        try:
            return self.core().list_namespaced_pod(namespace, field_selector=f"metadata.name={name}", watch=True,
                                                   timeout_seconds=seconds, _preload_content=False,
                                                   _request_timeout=(TIMEOUT[0], seconds + 30))
        except Exception as exc:  # noqa: BLE001 - as call()
            raise self.error(exc, f"watching pod {name}") from None


def _status_message(exc: BaseException) -> str:
    """The API server's own message of a failed request (its Status body), or the reason."""
    body = getattr(exc, "body", None)
    if body is None and getattr(exc, "http_resp", None) is not None:
        body = getattr(exc.http_resp, "data", None)  # type: ignore[attr-defined]
    try:
        doc = json.loads(body) if body else {}
        if isinstance(doc, dict) and doc.get("message"):
            return str(doc["message"])[:300]
    except (ValueError, TypeError):
        pass
    return str(getattr(exc, "reason", "") or type(exc).__name__)[:200]


def _short(kind: str, exc: BaseException) -> str:
    """An exception's text, first line, without anything that looks like a credential."""
    text = str(exc).splitlines()[0] if str(exc) else kind
    for marker in ("Bearer ", "token", "password", "BEGIN "):
        if marker.lower() in text.lower():
            return kind
    return f"{kind}: {text[:200]}" if not text.startswith(kind) else text[:200]


def temp_dir(runtime: Path) -> Path:
    """Where the client writes a kubeconfig's certificates (0600 files, removed when the process
    exits): virtbench's private runtime directory, not /tmp."""
    return runtime / "kubernetes"

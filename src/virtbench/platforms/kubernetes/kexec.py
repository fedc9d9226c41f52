"""Run one command in a pod's container through the API's exec stream, as its own process.

    python -m virtbench.platforms.kubernetes.kexec --kubeconfig F [--context C] --namespace N --pod P -- ARGV...

The platform's exec_argv builds this argv, so every caller of the harness (a benchmark, a
server in the background, the scratch directory's mkdir) runs it through the one subprocess
function like `docker exec` or `ctr tasks exec`: its stdout and stderr are the command's,
byte for byte, and its exit status is the command's (from the stream's status channel). The
command runs in the pod's container exactly as the kubelet's exec runs it (CRI exec into the
running container: its cgroup, namespaces and environment); nothing of this helper runs in
the pod, and the benchmarks time themselves inside, so the stream's cost is outside their
numbers. The helper's own failure (no API server, no pod) is one line on stderr and status
EXEC_FAILED, never a command's status.
"""
from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any

import yaml

EXEC_FAILED = 125
"""The helper could not run the command at all (as `docker run` says a daemon error)."""
NOT_EXECUTED = 126


def exit_status(error_channel: str) -> tuple[int, str]:
    """The command's exit status from the exec stream's status channel (a metav1.Status):
    Success is 0, NonZeroExitCode carries the status; anything else (the command could not be
    started) is NOT_EXECUTED with the server's message."""
    try:
        doc = yaml.safe_load(error_channel) if error_channel.strip() else None
    except yaml.YAMLError:
        doc = None
    if not isinstance(doc, dict):
        return EXEC_FAILED, "the exec stream ended without a status"
    if doc.get("status") == "Success":
        return 0, ""
    for cause in (doc.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            try:
                return int(cause.get("message")), ""
            except (TypeError, ValueError):
                break
    return NOT_EXECUTED, str(doc.get("message") or doc.get("reason") or "exec failed")


def run(cluster: Any, namespace: str, pod: str, container: str, argv: list[str]) -> int:
    from kubernetes.stream import stream
    from kubernetes.stream.ws_client import ERROR_CHANNEL

    resp = stream(cluster.core().connect_get_namespaced_pod_exec, pod, namespace, container=container,
                  command=argv, stdin=False, stdout=True, stderr=True, tty=False, _preload_content=False,
                  binary=True)
    out, err = sys.stdout.buffer, sys.stderr.buffer
    try:
        while resp.is_open():
            resp.update(timeout=1)
            if resp.peek_stdout():
                out.write(_bytes(resp.read_stdout()))
                out.flush()
            if resp.peek_stderr():
                err.write(_bytes(resp.read_stderr()))
                err.flush()
        for data, sink in ((resp.read_stdout(), out), (resp.read_stderr(), err)):
            if data:
                sink.write(_bytes(data))
                sink.flush()
        code, message = exit_status(_bytes(resp.read_channel(ERROR_CHANNEL)).decode(errors="replace"))
    finally:
        resp.close()
    if message:
        err.write(f"kubernetes exec: {message}\n".encode())
    return code


def _bytes(data: Any) -> bytes:
    return data if isinstance(data, bytes) else str(data or "").encode()


def main(args: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kexec", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True, type=Path)
    parser.add_argument("--context")
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--pod", required=True)
    parser.add_argument("--container", default="bench")
    parser.add_argument("--temp-dir", type=Path)
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    # a timeout's SIGTERM ends us through sys.exit, so the client's atexit removes the
    # certificates it wrote out for an inline kubeconfig
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    ns = parser.parse_args(args)
    argv = ns.argv[1:] if ns.argv[:1] == ["--"] else ns.argv
    if not argv:
        parser.error("give the command after --")
    from ...errors import VirtbenchError
    from .cluster import Cluster

    try:
        cluster = Cluster(ns.kubeconfig, ns.context, ns.temp_dir)
        try:
            return run(cluster, ns.namespace, ns.pod, ns.container, argv)
        except Exception as exc:  # noqa: BLE001 - said in one line, as the error of a request
            raise cluster.error(exc, f"exec in pod {ns.pod}") from None
        finally:
            cluster.close()
    except VirtbenchError as exc:
        sys.stderr.write(f"kubernetes exec: {exc}\n")
        return EXEC_FAILED


if __name__ == "__main__":
    sys.exit(main())

"""A pod's lifecycle, timed by the arrival of watched events on virtbench's clock.

created -> scheduled -> running -> ready, then stopped -> gone: each step is the first
event (of a watch opened before the request that causes it) in which the pod shows it,
timed by `time.perf_counter()` when its line arrived, from the moment the request was sent
(the create for the start steps, the delete for the stop steps). Polling would time the
polling interval; the API's own timestamps are whole seconds (RFC 3339 without fractions), so
they are kept beside ours as a cross-check only.

`Timeline.feed` is pure (an event and its arrival time in, the steps it shows recorded), so
the logic is tested on watch events recorded from a real node (tests/data/kubernetes).
"""
from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

START_STEPS = ("scheduled", "running", "ready")
STOP_STEPS = ("stopped", "gone")
FAILED_WAITING = frozenset({"ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName",
                            "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
                            "CrashLoopBackOff", "ImageInspectError"})
"""Container waiting reasons that never resolve by waiting (the pod will not start)."""


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") == "True":
            return dict(c)
    return None


def _container(obj: dict[str, Any]) -> dict[str, Any]:
    statuses = (obj.get("status") or {}).get("containerStatuses") or []
    return dict(statuses[0]) if statuses else {}


def api_seconds(stamp: str | None) -> float | None:
    """An API timestamp (RFC 3339, whole seconds) as epoch seconds."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass
class Timeline:
    """One pod's steps: seconds from the request that caused them, on virtbench's clock, and
    the API's own timestamps of the same steps (epoch seconds, whole) where it has one."""

    t0: float
    """perf_counter() when the create was sent."""
    wall0: float
    """time.time() at the same moment (to set the API's timestamps beside ours)."""
    steps: dict[str, float] = field(default_factory=dict)
    api: dict[str, float] = field(default_factory=dict)
    stop_t0: float | None = None
    failure: str | None = None
    """Why the pod will never become ready (unschedulable, an image it cannot get, failed)."""
    terminated: dict[str, Any] = field(default_factory=dict)
    """The container's terminated state (reason OOMKilled, Completed, Error; exitCode)."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """Every event seen: {t, type, phase} (the raw objects are not kept: a pod's status is long)."""

    def mark(self, step: str, arrival: float, api_stamp: str | None = None) -> None:
        if step in self.steps:
            return
        base = self.stop_t0 if step in STOP_STEPS and self.stop_t0 is not None else self.t0
        self.steps[step] = arrival - base
        if (api := api_seconds(api_stamp)) is not None:
            self.api[step] = api

    def feed(self, kind: str, obj: dict[str, Any], arrival: float) -> None:
        """What one watch event shows. `kind`: ADDED, MODIFIED, DELETED (ERROR and BOOKMARK
        carry no pod: ignored; a watch's ERROR, such as "Too large resource version", was seen
        here in a recorded watch of a pod that could not be scheduled)."""
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return
        status = obj.get("status") or {}
        self.events.append({"t": round(arrival - self.t0, 6), "type": kind, "phase": status.get("phase")})
        if kind == "DELETED":
            self._terminated(obj, arrival)
            self.mark("gone", arrival)
            return
        if kind not in ("ADDED", "MODIFIED"):
            return
        if (created := (obj.get("metadata") or {}).get("creationTimestamp")) and "created" not in self.api:
            if (api := api_seconds(created)) is not None:
                self.api["created"] = api
        if (c := _condition(obj, "PodScheduled")) is not None:
            self.mark("scheduled", arrival, c.get("lastTransitionTime"))
        container = _container(obj)
        running = (container.get("state") or {}).get("running")
        if status.get("phase") == "Running" or running:
            self.mark("running", arrival, (running or {}).get("startedAt"))
        if (c := _condition(obj, "Ready")) is not None:
            self.mark("ready", arrival, c.get("lastTransitionTime"))
        self._terminated(obj, arrival)
        if self.failure is None and "ready" not in self.steps:
            self.failure = _failure(obj)

    def _terminated(self, obj: dict[str, Any], arrival: float) -> None:
        status = obj.get("status") or {}
        term = ((_container(obj).get("state") or {}).get("terminated"))
        if term or status.get("phase") in ("Succeeded", "Failed"):
            if term and not self.terminated:
                self.terminated = {"reason": term.get("reason"), "exitCode": term.get("exitCode")}
            if self.stop_t0 is not None:
                self.mark("stopped", arrival, (term or {}).get("finishedAt"))

    def offsets(self) -> dict[str, float]:
        """The API's timestamps as seconds from the create (our clock's origin): the cross-check."""
        return {k: v - self.wall0 for k, v in self.api.items()}


def _failure(obj: dict[str, Any]) -> str | None:
    status = obj.get("status") or {}
    if status.get("phase") == "Failed":
        return f"pod failed: {status.get('reason') or ''} {status.get('message') or ''}".strip()
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            return f"unschedulable: {c.get('message') or c.get('reason')}"
    waiting = ((_container(obj).get("state") or {}).get("waiting")) or {}
    if waiting.get("reason") in FAILED_WAITING:
        return f"{waiting['reason']}: {waiting.get('message') or ''}".strip().rstrip(":")
    return None


def lines(chunks: Iterator[bytes]) -> Iterator[tuple[bytes, float]]:
    """Complete lines of a chunked stream, each with the perf_counter() of its arrival."""
    buf = b""
    for chunk in chunks:
        now = time.perf_counter()
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield line, now
    if buf.strip():
        yield buf, time.perf_counter()


class Watcher:
    """Reads one open watch response in a thread, feeding a Timeline; `wait` for a step."""

    def __init__(self, response: Any, timeline: Timeline) -> None:
        self.response = response
        self.timeline = timeline
        self.changed = threading.Condition()
        self.ended = False
        self.error: str | None = None
        self.thread = threading.Thread(target=self._read, name="pod-watch", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for line, arrival in lines(self.response.stream(amt=None, decode_content=False)):
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                with self.changed:
                    if event.get("type") == "ERROR":
                        self.error = str((event.get("object") or {}).get("message") or "watch error")
                    else:
                        self.timeline.feed(str(event.get("type")), event.get("object") or {}, arrival)
                    self.changed.notify_all()
        except Exception as exc:  # noqa: BLE001 - a closed or broken watch ends the reader
            self.error = self.error or f"{type(exc).__name__}"
        finally:
            with self.changed:
                self.ended = True
                self.changed.notify_all()

    def wait(self, step: str, timeout: float) -> bool:
        """Until `step` is seen (True), the pod fails, the watch ends, or the time is up (False)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while step not in self.timeline.steps:
                if (self.timeline.failure and step in START_STEPS) or self.ended or "gone" in self.timeline.steps:
                    return step in self.timeline.steps  # nothing more will come
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, 1.0))
            return True

    def close(self) -> None:
        """The socket is shut down first: closing the response while the reader blocks in a
        read of the same TLS socket waited forever (seen: a pod's remove hung in close)."""
        sock = getattr(getattr(self.response, "connection", None), "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # the blocked read returns, the reader ends
            except OSError:
                pass
        self.thread.join(5)
        for step in (self.response.close, self.response.release_conn):
            try:
                step()
            except Exception:  # noqa: BLE001 - closing a finished stream
                pass

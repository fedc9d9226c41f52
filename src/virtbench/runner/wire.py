"""The agent's wire format: one JSON object per line, datetimes and bytes encoded so the
controller stores exactly what the agent measured."""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any


def encode(value: Any) -> Any:
    """json.dumps' default for what JSON lacks (the agent's side)."""
    if isinstance(value, datetime):
        return {"__datetime__": value.isoformat()}
    if isinstance(value, bytes):
        return {"__b64__": base64.b64encode(value).decode()}
    raise TypeError(f"{type(value).__name__} is not JSON")


def decode(obj: Any) -> Any:
    """The controller's inverse of the agent's encoding (datetimes and bytes)."""
    if isinstance(obj, dict):
        if set(obj) == {"__datetime__"}:
            return datetime.fromisoformat(obj["__datetime__"])
        if set(obj) == {"__b64__"}:
            return base64.b64decode(obj["__b64__"])
        return {k: decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode(v) for v in obj]
    return obj


def parse(line: str) -> dict[str, Any] | None:
    """One message, or None for a line that is none (a stray print)."""
    try:
        msg = json.loads(line)
    except json.JSONDecodeError:
        return None
    return msg if isinstance(msg, dict) else None


@dataclass(frozen=True)
class PastExecution:
    """An execution a host measured (before the run was interrupted, or in this part), as its
    agent reads it back: the columns a kind goes on from (density's search, adaptive rounds),
    not the raw output."""

    id: int
    round: int
    platform: str
    benchmark: str
    status: str
    error: str
    warmup: bool = False
    duration_s: float = 0.0


@dataclass(frozen=True)
class PastSample:
    execution_id: int
    instance: int
    metric: str
    value: float
    round: int = 0
    warmup: bool = False
    platform: str = ""
    benchmark: str = ""
    higher_is_better: bool = True


def history(executions: list[Any], samples: list[Any]) -> dict[str, list[dict[str, Any]]]:
    """A host's earlier executions and their samples for its agent (the controller's side)."""
    ids = {e.id for e in executions}
    by_id = {e.id: e for e in executions}
    return {"executions": [{"id": e.id, "round": e.round, "platform": e.platform, "benchmark": e.benchmark,
                            "status": e.status, "error": e.error or "", "warmup": e.warmup,
                            "duration_s": float(getattr(e, "duration_s", 0.0) or 0.0)} for e in executions],
            "samples": [{"execution_id": s.execution_id, "instance": s.instance, "metric": s.metric,
                         "value": s.value, "round": by_id[s.execution_id].round,
                         "warmup": by_id[s.execution_id].warmup, "platform": by_id[s.execution_id].platform,
                         "benchmark": by_id[s.execution_id].benchmark,
                         "higher_is_better": bool(getattr(s, "higher_is_better", True))}
                        for s in samples if s.execution_id in ids]}

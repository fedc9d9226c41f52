"""The agent's wire format: one JSON object per line, datetimes and bytes encoded so the
controller stores exactly what the agent measured."""
from __future__ import annotations

import base64
import json
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

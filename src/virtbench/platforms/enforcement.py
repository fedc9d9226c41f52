"""Whether each platform's limits hold on this host, and what a CPU limit is expected to change.

`virtbench selftest --platform P` checks that P's `cpus` and `memory` limits are enforced,
read from the cgroup's own counters, and records the verdicts here (STATE/selftest/limits.json,
one entry per platform type and limit). A run copies the verdicts of the limits its platforms
use into its provenance, so its report flags every comparison that used a limit shown not to
hold, wherever the report is read.

A CPU quota's expected effect follows from the host's parallel scaling (hostinfo.expected_ratio).
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .base import Paths

FORMAT = 1
LIMITS = {"cpu": "cpus", "memory": "memory"}
"""The limits checked, by the platform option that sets each."""


def verdicts_file(paths: Paths) -> Path:
    return paths.state / "selftest" / "limits.json"


def recorded(paths: Paths) -> dict[str, dict[str, dict[str, Any]]]:
    """{platform type: {"cpu"|"memory": verdict}} as the last self-tests left them ({} if none)."""
    try:
        doc = json.loads(verdicts_file(paths).read_text())
    except (OSError, ValueError):
        return {}
    return doc.get("platforms", {}) if isinstance(doc, dict) and doc.get("format") == FORMAT else {}


def record(paths: Paths, platform_type: str, limit: str, verdict: dict[str, Any]) -> None:
    """Store one limit check's verdict (held: True/False, measured, reason) for a platform type."""
    f = verdicts_file(paths)
    f.parent.mkdir(parents=True, exist_ok=True)
    platforms = recorded(paths)
    platforms.setdefault(platform_type, {})[limit] = {**verdict, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    doc = {"format": FORMAT, "platforms": platforms}
    tmp = f.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(f)


def for_platforms(paths: Paths, platforms: Iterable[tuple[str, str, Mapping[str, Any]]]) -> dict[str, Any]:
    """For each (name, type, options) that sets a limit: each limit's recorded verdict, or
    {"checked": False} when no self-test has checked it on this host."""
    known = recorded(paths)
    out: dict[str, Any] = {}
    for name, ptype, options in platforms:
        used = {limit: known.get(ptype, {}).get(limit, {"checked": False})
                for limit, option in LIMITS.items() if options.get(option) is not None}
        if used:
            out[name] = {"type": ptype, **used}
    return out

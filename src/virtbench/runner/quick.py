"""The quick campaign: every core benchmark on every platform this host can run, briefly.

For a first look and for CI; minutes, not hours. Platforms this host cannot run are left out
with the reason, so one command works everywhere.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..config import Campaign, parse_campaign
from ..platforms.base import Paths
from .session import probe_types

QUICK_PLATFORMS = ("native", "docker", "podman", "lxc", "containerd", "runc", "crun")
QUICK_BENCHMARKS: list[dict[str, Any]] = [
    {"name": "openssl", "algorithm": "aes-128-cbc", "bytes": 1024, "multi": 1, "seconds": 2},
    {"name": "fio", "size": "128M", "runtime": 1, "ramp_time": 0},
    {"name": "sysbench-cpu", "threads": 1, "time": 2},
    {"name": "sqlite", "rows": 100000},
]


def quick_campaign(paths: Paths, log: Callable[[str], None] = lambda _m: None,
                   repetitions: int = 3, warmups: int = 1, probes: list[str] | None = None) -> Campaign:
    verdicts = probe_types(list(QUICK_PLATFORMS), paths, log)
    platforms = []
    for name in QUICK_PLATFORMS:
        v = verdicts[name]
        if v.available:
            platforms.append(name)
        else:
            log(f"skipping {name}: {v.reason}" + (f" (fix: {v.fix})" if v.fix else ""))
    return parse_campaign({"name": "quick", "baseline": "native", "repetitions": repetitions,
                           "warmups": warmups, "platforms": platforms, "benchmarks": QUICK_BENCHMARKS,
                           "probes": probes or []},
                          "quick campaign")

"""Image profiles: which benchmarks' tools an image carries.

`quick` holds the core suite's tools; `full` every registered benchmark's. Heavy tools
(Blender, PyTorch, MariaDB) only enter an image whose profile or campaign selects them.
"""
from __future__ import annotations

from ..errors import InputError
from ..registry import BENCHMARKS

QUICK = ("openssl", "fio", "sysbench-cpu", "sqlite")
PROFILES = ("quick", "full")


def profile_benchmarks(profile: str) -> list[str]:
    if profile == "quick":
        return [b for b in QUICK if b in BENCHMARKS.names()]
    if profile == "full":
        return BENCHMARKS.names()
    raise InputError(f"unknown image profile {profile!r}", f"use one of {', '.join(PROFILES)}")


def profile_packages(profile: str) -> list[str]:
    packages: set[str] = set()
    for name in profile_benchmarks(profile):
        packages.update(BENCHMARKS.get(name).packages)
    return sorted(packages)

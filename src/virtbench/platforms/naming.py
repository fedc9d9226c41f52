"""Instance names every runtime accepts, unique whatever the user calls a platform.

A name is `vb-<run id>-<platform>-r<round>`, and the runner derives the names of the
instances that go with it by appending a suffix (`-peer`, `-host`, `-vm`, `-i<N>`). The
strictest rules among the runtimes decide what a name may look like:
- a hostname (the UTS name of OCI/LXC containers, the VM's `vb.hostname`) holds at most
  63 bytes (RFC 1123 label; Linux allows 64);
- containerd identifiers are `[A-Za-z0-9]+([._-][A-Za-z0-9]+)*`: no separator twice in a row
  and none at the end;
- Docker and Podman names are `[A-Za-z0-9][A-Za-z0-9_.-]*`; runc ids `[\\w+.-]+`; LXC names
  become path components.
Cutting a long name at 63 characters made long platform names collide (the round suffix was
cut off) and pushed `-peer` names past the limit, so a platform part that does not fit or
breaks a rule is shortened and given a hash of the full platform name instead.
"""
from __future__ import annotations

import hashlib
import re

INSTANCE_PREFIX = "vb-"
"""Start of every object's name a platform creates (cleanup finds leftovers by it)."""

MAX_NAME = 63
SUFFIX_ROOM = 6
"""Room kept for the longest derived suffix (`-peer`, `-host`, `-i256`)."""
_VALID = re.compile(r"[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*")
_HASH = 8


def valid(name: str) -> bool:
    """Whether every runtime accepts this name (the strictest rules above)."""
    return len(name) <= MAX_NAME and _VALID.fullmatch(name) is not None


def unit_name(run_id: str, platform: str, round_: int) -> str:
    """The instance name of one round of one platform in a run (stable, so a resumed run and
    `cleanup` find the same names)."""
    head, tail = f"{INSTANCE_PREFIX}{run_id}-", f"-r{round_}"
    room = MAX_NAME - SUFFIX_ROOM - len(head) - len(tail)
    if len(platform) <= room and _VALID.fullmatch(platform):
        name = head + platform + tail
    else:
        digest = hashlib.sha256(platform.encode()).hexdigest()[:_HASH]
        slug = re.sub(r"[^A-Za-z0-9]+", "-", platform).strip("-")[:max(0, room - _HASH - 1)].strip("-")
        name = head + (f"{slug}-{digest}" if slug else digest) + tail
    if not valid(name) or len(name) > MAX_NAME - SUFFIX_ROOM:
        raise ValueError(f"run id {run_id!r} leaves no room for an instance name")
    return name


def derived(name: str, suffix: str) -> str:
    """A companion instance's name (`-peer`, `-host`, `-vm`, `-i3`): always valid, because
    unit names keep SUFFIX_ROOM free."""
    full = name + suffix
    if len(suffix) > SUFFIX_ROOM or not valid(full):
        raise ValueError(f"instance name {full!r} is not valid for every runtime")
    return full


def fit(head: str, tail: str = "") -> str:
    """The name `head + tail` of one of a group of instances (`vb-<run id>-<platform>-p1` +
    `-17`) as it is when it keeps SUFFIX_ROOM free and every runtime accepts it; otherwise the
    head shortened with a hash of the full head, and the tail kept: cutting at 63 characters
    made two names that differ only past the cut one (two platforms, or `-1` and `-10`)."""
    name = head + tail
    if valid(name) and len(name) <= MAX_NAME - SUFFIX_ROOM:
        return name
    room = MAX_NAME - SUFFIX_ROOM - len(tail) - _HASH - 1
    digest = hashlib.sha256(head.encode()).hexdigest()[:_HASH]
    slug = re.sub(r"[^A-Za-z0-9]+", "-", head)[:max(0, room)].strip("-")
    name = (f"{slug}-{digest}" if slug else digest) + tail
    if room < 0 or not valid(name):
        raise ValueError(f"no valid instance name of {head!r} and {tail!r}")
    return name

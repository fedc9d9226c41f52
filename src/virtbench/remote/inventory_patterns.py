"""Ansible's host patterns: `host:port`, `[v6addr]:port` and ranges (`web[01:03]`, `n[a:f]`,
`10.0.0.[1:9:2]`), expanded as Ansible's inventory plugins expand them. The number of names is
computed before any is made, so `h[0:99999999999]` costs nothing. Errors (ValueError) say what
is wrong with the pattern without repeating it.
"""
from __future__ import annotations

import ipaddress
import re
import string

MAX_HOSTS = 4096

_HOSTPORT = re.compile(r"((?:[^:\[\]]|\[[^\]]*\])*):([0-9]+)")
_RANGED_NAME = re.compile(r"(?:[A-Za-z0-9_-]|\[[^\]]*\])+(?:\.(?:[A-Za-z0-9_-]|\[[^\]]*\])+)*")


def expand_pattern(pattern: str) -> tuple[list[str], int | None]:
    """`web[01:03].lab:2222` -> ([web01.lab, web02.lab, web03.lab], 2222), as Ansible expands it."""
    host, port = pattern, None
    m = re.fullmatch(r"\[(.+)\]:([0-9]+)", pattern) or _HOSTPORT.fullmatch(pattern)
    if m and _is_address(m.group(1)):
        host, port = m.group(1), int(m.group(2))
    if pattern.endswith(":") and port is None:
        raise ValueError("a host pattern ending in ':' (give host:PORT)")
    if port is not None and not 0 < port < 65536:
        raise ValueError("a port out of range")
    if "[" not in host or _is_ip(host):
        return [host], port
    if _count(host) > MAX_HOSTS:
        raise ValueError(f"a host range of more than {MAX_HOSTS} hosts")
    return _expand(host), port


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _is_address(text: str) -> bool:
    return _is_ip(text) or bool(_RANGED_NAME.fullmatch(text))


def _bounds(nrange: str) -> tuple[list[str], int]:
    """The values of one [beg:end(:step)] range, zero-padded as written; and their count."""
    parts = nrange.split(":")
    if len(parts) not in (2, 3):
        raise ValueError("a host range that is not [begin:end] or [begin:end:step]")
    beg, end = parts[0] or "0", parts[1]
    if not end:
        raise ValueError("a host range without an end")
    try:
        step = int(parts[2]) if len(parts) == 3 else 1
    except ValueError:
        raise ValueError("a host range step that is not a number") from None
    if step < 1:
        raise ValueError("a host range step below 1")
    if len(beg) == len(end) == 1 and beg in string.ascii_letters and end in string.ascii_letters:
        i, j = string.ascii_letters.index(beg), string.ascii_letters.index(end)
        if i > j:
            raise ValueError("a host range whose begin is after its end")
        values = list(string.ascii_letters[i:j + 1:step])
        return values, len(values)
    if not (beg.isdigit() and end.isdigit()):
        raise ValueError("a host range that is neither numbers nor single letters")
    width = len(beg) if beg[0] == "0" and len(beg) > 1 else 0
    if width and width != len(end):
        raise ValueError("a zero-padded host range with begin and end of different lengths")
    lo, hi = int(beg), int(end)
    count = max(0, (hi - lo) // step + 1)
    if count > MAX_HOSTS:
        return [], count
    return [str(v).zfill(width) for v in range(lo, hi + 1, step)], count


def _split_range(name: str) -> tuple[str, str, str]:
    head, _, rest = name.partition("[")
    nrange, sep, tail = rest.partition("]")
    if not sep:
        raise ValueError("a host range without its closing ']'")
    return head, nrange, tail


def _count(name: str) -> int:
    """How many names a pattern expands to, computed before expanding anything."""
    total = 1
    while "[" in name:
        head, nrange, name = _split_range(name)
        total *= _bounds(nrange)[1]
        if total > MAX_HOSTS:
            return total
    return total


def _expand(name: str) -> list[str]:
    if "[" not in name:
        return [name]
    head, nrange, tail = _split_range(name)
    rest = _expand(tail)
    return [f"{head}{v}{t}" for v in _bounds(nrange)[0] for t in rest]

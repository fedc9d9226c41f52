"""Sizes as campaigns write them (512M, 1G: binary suffixes, as Docker, LXC and QEMU read them)
and as people read them back."""
from __future__ import annotations

import math
import re
import typing
from typing import Annotated, Any

from pydantic import BeforeValidator

MAX_SIZE = 1 << 50
"""A pebibyte: no memory, disk or file size of a campaign is larger (and 2^63 would overflow the
kernel's and the engines' 64-bit fields)."""
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(value: object) -> int:
    """Bytes from 512M, 1G, 1.5GiB, 4096: suffixes are binary (M = MiB), as Docker, LXC and
    QEMU read them, so `memory: 512M` means the same on every platform."""
    if isinstance(value, bool):
        raise ValueError("give a size such as 512M or 1G")
    if isinstance(value, (int, float)):
        number = value
    else:
        match = _SIZE.match(str(value))
        if not match:
            raise ValueError(f"{value!r} is not a size; give e.g. 512M, 1G or a number of bytes")
        number = float(match.group(1)) * 1024 ** " kmgt".index(match.group(2).lower() or " ")
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{value!r} is not a size; give e.g. 512M, 1G or a number of bytes")
    if number > MAX_SIZE:
        raise ValueError(f"{value!r} is more than any machine has (1P at most); give e.g. 512M or 1G")
    return int(number)


Size = Annotated[int, BeforeValidator(parse_size)]
"""A byte count written with binary suffixes in campaigns."""


def size_words(n: int) -> str:
    """A byte count as a person writes it, exact and read back by parse_size: 1073741824 ->
    '1 GiB'; a count of no whole KiB stays a number."""
    for exp, unit in ((4, "TiB"), (3, "GiB"), (2, "MiB"), (1, "KiB")):
        if n and n % 1024**exp == 0:
            return f"{n // 1024**exp} {unit}"
    return str(n)


def is_size(field: Any) -> bool:
    """Whether a pydantic field (FieldInfo) or annotation is a Size, also inside `Size | None`:
    shown with size_words."""
    marks = [*getattr(field, "metadata", ()), *getattr(field, "__metadata__", ())]
    if any(getattr(m, "func", None) is parse_size for m in marks):
        return True
    return any(is_size(a) for a in typing.get_args(getattr(field, "annotation", field)))

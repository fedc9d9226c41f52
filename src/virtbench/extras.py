"""Optional dependencies, grouped as the package's extras, and the one message when one is missing.

The core (run, report as text/JSON, export as CSV/JSON, SQLite) needs none of them. A command
that does needs its extra: `require` says which, with the pip line, before anything starts
(exit 2), instead of an ImportError from deep inside.
"""
from __future__ import annotations

import importlib.util

from .errors import InputError

EXTRAS: dict[str, tuple[str, ...]] = {
    "web": ("fastapi", "uvicorn", "jinja2", "multipart", "zxcvbn"),
    "figures": ("matplotlib", "plotly"),
    "parquet": ("pyarrow",),
    "postgres": ("psycopg",),
    "kubernetes": ("kubernetes",),
}
"""extra name in pyproject.toml -> the modules it provides (checked against pyproject by a test)."""


def missing(extra: str) -> list[str]:
    """The extra's modules that cannot be imported here."""
    return [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]


def require(extra: str, what: str) -> None:
    """Raise InputError naming the extra if `what` (a command or feature) cannot run here."""
    gone = missing(extra)
    if gone:
        raise InputError(f"{what} needs the '{extra}' extra ({', '.join(gone)} not installed)",
                         f"pip install 'virtbench[{extra}]'")

"""What a store URL names, without opening it (opening a SQLite URL creates the file)."""
from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError


def missing_sqlite_file(url: str) -> str | None:
    """The path of the SQLite file the URL names when that file does not exist; None for every
    other URL (another database, in-memory, a file: URI, or one SQLAlchemy cannot parse: the
    store says what is wrong with it when opened)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    path = parsed.database
    if parsed.get_backend_name() != "sqlite" or not path or path == ":memory:" or path.startswith("file:"):
        return None
    return None if Path(path).exists() else path

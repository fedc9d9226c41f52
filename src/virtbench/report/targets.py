"""Where report files go (`export -o DIR`, `report --html FILE`, `report --figures DIR`),
proved writable before any work: `-o /sys/kernel` or a read-only filesystem ended in a
traceback after the report was built."""
from __future__ import annotations

import tempfile
from pathlib import Path

from ..errors import InputError


def writable_dir(directory: Path, option: str, named: Path | None = None) -> None:
    """Make the directory (and its parents) and write a scratch file in it, or one line, exit 2
    naming the option and what it named (named: the file, when directory is its parent)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=directory).close()
    except OSError as exc:
        where = Path(str(exc.filename or directory))
        shown = f" ({where})" if where != directory and where.parent != directory else ""
        there = "there" if named is None else f"in {directory}"
        raise InputError(f"{option} {named or directory}: cannot write files {there}: "
                         f"{exc.strerror or type(exc).__name__}{shown}",
                         f"give {option} a {'directory' if named is None else 'file in a directory'} you can create "
                         "and write") from None


def writable_file(path: Path, option: str) -> None:
    """The file's directory made and writable, and the file itself no directory, or one line, exit 2."""
    if path.is_dir():
        raise InputError(f"{option} {path}: a directory, not a file", f"give {option} the path of a file to write")
    writable_dir(path.parent, option, path)

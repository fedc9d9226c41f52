"""Error types. Each carries the fix a user needs, so the CLI can print one clear line.

Exit codes are part of the scripting contract: 2 for bad input (nothing started),
1 for a run where some samples failed, 0 when all went well.
"""
from __future__ import annotations


class VirtbenchError(Exception):
    """Base for errors virtbench reports to the user (never a traceback)."""

    exit_code = 1

    def __init__(self, message: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.message} (fix: {self.fix})" if self.fix else self.message


class InputError(VirtbenchError):
    """The user's input (campaign, option, name) is wrong; raised before anything starts."""

    exit_code = 2


class NoData(InputError):
    """A run asked for its results before it has any (queued, or stopped before measuring):
    refused in one line by the CLI (exit 2) and with 409 Conflict by the web app."""


class UnavailableError(VirtbenchError):
    """A platform or tool the user asked for cannot run on this host."""

    exit_code = 2


class CommandError(VirtbenchError):
    """A command failed or timed out; keeps its argv and full output so nothing is lost."""

    def __init__(
        self,
        argv: list[str],
        returncode: int | None,
        stdout: str,
        stderr: str,
        *,
        timed_out: bool = False,
        timeout: float | None = None,
    ) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out
        if timed_out:
            what = f"timed out after {timeout:g} s"
        else:
            what = f"exited with status {returncode}"
        tail = (stderr or stdout).strip().splitlines()[-3:]
        detail = ("; " + " | ".join(tail)) if tail else ""
        super().__init__(f"command {_short(argv)} {what}{detail}")


class ParseError(VirtbenchError):
    """A tool ran but its output does not hold what the parser needs."""

    def __init__(self, tool: str, pattern: str, source: str = "<output>") -> None:
        self.tool = tool
        self.pattern = pattern
        self.source = source
        super().__init__(f"{tool}: no match for {pattern!r} in {source}")


def _short(argv: list[str], limit: int = 120) -> str:
    text = " ".join(argv)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def disk_full(exc: BaseException) -> VirtbenchError | None:
    """A full disk anywhere in an exception's chain (ENOSPC from the OS, SQLite's "database or
    disk is full"), as the one line the CLI prints; None when the error is something else."""
    import errno

    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            where = f" writing {e.filename}" if e.filename else ""
            return VirtbenchError(f"disk full{where}: no space left on device",
                                  "free space there, or point VIRTBENCH_STATE_DIR / --db at a larger filesystem; "
                                  "then virtbench cleanup")
        if "database or disk is full" in str(e) or "No space left on device" in str(e):
            return VirtbenchError("disk full: the results store could not be written (database or disk is full)"
                                  if "database" in str(e) else "disk full: no space left on device",
                                  "free space on the store's filesystem, or give --db / VIRTBENCH_STATE_DIR on a "
                                  "larger one; then virtbench cleanup")
        e = e.__cause__ or e.__context__
    return None


class StoreError(VirtbenchError):
    """The results store cannot be opened or written (locked, disk full, unreachable). Said in
    one line without the database's password; exit 2 like bad input, nothing more was done."""

    exit_code = 2


def reason_of(exc: BaseException) -> str:
    """A failure as it is recorded (an execution's error, a run's): a virtbench error's own
    message, anything else with its type."""
    return str(exc) if isinstance(exc, VirtbenchError) else f"{type(exc).__name__}: {exc}"

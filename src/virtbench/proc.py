"""The one place virtbench starts processes.

Every command is an argv list (never a shell string), runs in its own process group so a
timeout or Ctrl-C kills the whole tree, and a failure raises CommandError carrying the
complete stdout/stderr. Tests replay recorded outputs by pointing parsers at files, not by
patching this function.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from .errors import CommandError

DEFAULT_TIMEOUT = 600.0


@dataclass(frozen=True)
class Result:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run(
    argv: Sequence[str],
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    check: bool = True,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    detached_children: bool = False,
) -> Result:
    """Run argv to completion; raise CommandError on failure or timeout when check is set.

    detached_children: the command leaves a long-lived child behind (runc create, a daemon)
    that inherits stdout/stderr. Pipes would then never close, so output goes to temporary
    files instead, read back once the command itself has exited.
    """
    args = [str(a) for a in argv]
    if not args:
        raise ValueError("empty argv")
    if detached_children:
        return _run_to_files(args, timeout=timeout, check=check, env=env, cwd=cwd)
    start = time.perf_counter()
    try:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise CommandError(args, 127, "", f"{args[0]}: command not found ({exc})") from None
    try:
        stdout, stderr = proc.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        stdout, stderr = proc.communicate()
        raise CommandError(args, None, stdout, stderr, timed_out=True, timeout=timeout) from None
    except BaseException:
        # Ctrl-C or SIGTERM while waiting: never leave the child's tree running.
        _kill_group(proc)
        proc.communicate()
        raise
    result = Result(args, proc.returncode, stdout, stderr, time.perf_counter() - start)
    if check and proc.returncode != 0:
        raise CommandError(args, proc.returncode, stdout, stderr)
    return result


def _run_to_files(args: list[str], *, timeout: float | None, check: bool,
                  env: Mapping[str, str] | None, cwd: str | None) -> Result:
    import tempfile

    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        try:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=err, text=True,
                                    env=dict(env) if env is not None else None, cwd=cwd)
        except FileNotFoundError as exc:
            raise CommandError(args, 127, "", f"{args[0]}: command not found ({exc})") from None
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            out.seek(0), err.seek(0)
            raise CommandError(args, None, out.read(), err.read(), timed_out=True, timeout=timeout) from None
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        out.seek(0), err.seek(0)
        result = Result(args, proc.returncode, out.read(), err.read(), time.perf_counter() - start)
    if check and result.returncode != 0:
        raise CommandError(args, result.returncode, result.stdout, result.stderr)
    return result


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_or_kill(process: subprocess.Popen[str], grace: float) -> None:
    """Give a signalled process `grace` seconds to exit, then SIGKILL its group."""
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        process.wait()


def pipe(first: Sequence[str], second: Sequence[str], *, timeout: float | None = DEFAULT_TIMEOUT) -> Result:
    """Run `first | second` (first's stdout into second's stdin, bytes untouched), both argv
    lists, each in its own process group: a stream between two programs (tar into ssh)
    without a shell. Raises CommandError naming the side that failed, with both sides' stderr."""
    a, b = [str(x) for x in first], [str(x) for x in second]
    if not a or not b:
        raise ValueError("empty argv")
    start = time.perf_counter()
    started: list[subprocess.Popen[bytes]] = []

    def kill_all() -> None:
        for p in started:
            _kill_group(p)  # type: ignore[arg-type]
            p.wait()

    try:
        left = subprocess.Popen(a, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        started.append(left)
        assert left.stdout is not None
        right = subprocess.Popen(b, stdin=left.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 start_new_session=True)
        started.append(right)
    except FileNotFoundError as exc:
        kill_all()
        raise CommandError(a if not started else b, 127, "", f"command not found ({exc})") from None
    except BaseException:
        kill_all()
        raise
    left.stdout.close()  # only the consumer holds the pipe: a consumer that dies ends the producer
    try:
        out, err_b = right.communicate(timeout=timeout)
        left_err = left.stderr.read() if left.stderr else b""
        left.wait(timeout=30)
    except subprocess.TimeoutExpired:
        kill_all()
        raise CommandError([*a, "|", *b], None, "", "", timed_out=True, timeout=timeout) from None
    except BaseException:  # Ctrl-C or SIGTERM: never leave either side running
        kill_all()
        raise
    finally:
        if left.stderr:
            left.stderr.close()
    stderr = (left_err + err_b).decode(errors="replace")
    for argv, code in ((a, left.returncode), (b, right.returncode)):
        if code != 0:
            raise CommandError([*a, "|", *b], code, out.decode(errors="replace"),
                               f"{argv[0]} exited {code}: {stderr}")
    return Result([*a, "|", *b], 0, out.decode(errors="replace"), stderr, time.perf_counter() - start)


def which(name: str) -> str | None:
    """Path of an executable on PATH (shutil.which, re-exported so callers import one module)."""
    import shutil

    return shutil.which(name)


class Background:
    """A long-running process (a benchmark's server). Output goes to temporary files so a
    chatty server can never block on a full pipe; stop() kills its whole process group."""

    def __init__(self, argv: Sequence[str]) -> None:
        import tempfile

        self.argv = [str(a) for a in argv]
        self._out = tempfile.TemporaryFile("w+")
        self._err = tempfile.TemporaryFile("w+")
        try:
            self.process = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self._out,
                                            stderr=self._err, text=True, start_new_session=True)
        except FileNotFoundError as exc:
            raise CommandError(self.argv, 127, "", f"{self.argv[0]}: command not found ({exc})") from None
        self.started = time.perf_counter()

    def alive(self) -> bool:
        return self.process.poll() is None

    def output(self) -> tuple[str, str]:
        self._out.seek(0), self._err.seek(0)
        return self._out.read(), self._err.read()

    def stop(self, grace: float = 2.0, sig: int = signal.SIGTERM) -> Result:
        """Signal the group (SIGTERM; SIGINT for tools that report on Ctrl-C, such as
        `perf stat`), SIGKILL after `grace` seconds; return what it printed."""
        if self.alive():
            try:
                os.killpg(self.process.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            _wait_or_kill(self.process, grace)
        stdout, stderr = self.output()
        self._out.close()
        self._err.close()
        return Result(self.argv, self.process.returncode, stdout, stderr, time.perf_counter() - self.started)


def spawn(argv: Sequence[str]) -> Background:
    """Start argv in the background (its own process group); the caller must stop() it."""
    return Background(argv)


class Stream:
    """A process spoken to line by line: stdin written by the caller, stdout read as it comes
    (a remote agent's results, one JSON line each), stderr kept in a temporary file. Its own
    process group, like every command here; close() ends it."""

    def __init__(self, argv: Sequence[str]) -> None:
        import tempfile

        self.argv = [str(a) for a in argv]
        self._err = tempfile.TemporaryFile("w+")
        try:
            self.process = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=self._err, text=True, errors="replace", bufsize=1,
                                            start_new_session=True)
        except FileNotFoundError as exc:
            raise CommandError(self.argv, 127, "", f"{self.argv[0]}: command not found ({exc})") from None

    def send(self, line: str) -> bool:
        """Write one line to its stdin; False if it is gone."""
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(line.rstrip("\n") + "\n")
            self.process.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def lines(self) -> Iterator[str]:
        """Its stdout, line by line, until it closes."""
        assert self.process.stdout is not None
        for line in self.process.stdout:
            yield line.rstrip("\n")

    def stderr(self) -> str:
        self._err.seek(0)
        return self._err.read()

    def close(self, grace: float = 10.0) -> int:
        """Close its stdin (the agent's signal to finish or clean up), wait, then kill; its exit status."""
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
        except OSError:
            pass
        _wait_or_kill(self.process, grace)
        return self.process.returncode


def stream(argv: Sequence[str]) -> Stream:
    """Start argv with a stdin to write to and a stdout to read line by line."""
    return Stream(argv)

"""`virtbench serve`: the app under uvicorn, and by default a worker process beside it.

The worker is a child process (never a thread of the server: measurements must not share
an interpreter with request handling). It gets the database URL through its environment,
not its argv, so a PostgreSQL password does not show in `ps`; it does not get the web
token (worker_env): the worker runs campaigns' benchmarks, which need no say over the app. It is asked to stop (SIGTERM:
the run in progress is interrupted cleanly and resumes at the next start) when the server
exits, and the kernel sends it SIGTERM too if the server dies without cleaning up.
"""
from __future__ import annotations

import ctypes
import os
import secrets
import signal
import subprocess
import sys

import click

from ..analysis.blas import BLAS_THREADS, one_blas_thread
from ..errors import InputError
from ..store.db import Store, redact
from .hostpaths import allowed_dirs
from .security import token_problem
from .settings import Settings, loopback_hosts

TOKEN_ENV = ("VIRTBENCH_TOKEN",)
"""Where `serve` may have read its token from: never passed on to the worker."""

WORKER_STOP_S = 180.0
"""How long the worker may take to stop: the instance in use is removed first."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def worker_env(db_url: str, drop: tuple[str, ...] = (), hide: tuple[str, ...] = ()) -> dict[str, str]:
    """This process's environment for the worker: without drop, without the token variables,
    and without any variable holding one of hide (the token, however it was given)."""
    def keep(name: str, value: str) -> bool:
        return name not in drop and name not in TOKEN_ENV and not any(h and h in value for h in hide)

    return {k: v for k, v in os.environ.items() if keep(k, v)} | {"VIRTBENCH_DB": db_url}


def start_worker(db_url: str, drop: tuple[str, ...] = (), hide: tuple[str, ...] = (),
                 allow_meter: bool = False) -> subprocess.Popen:
    """The worker process (argv without any secret; environment from worker_env)."""
    argv = [sys.executable, "-m", "virtbench", "worker", *(["--allow-meter"] if allow_meter else [])]
    return subprocess.Popen(argv, env=worker_env(db_url, drop, hide), preexec_fn=_die_with_parent)


def stop_worker(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(WORKER_STOP_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def check_token(token: str) -> None:
    """A weak token is refused before anything starts (exit 2), never served with a warning."""
    problem = token_problem(token)
    if problem:
        raise InputError(f"--token/VIRTBENCH_TOKEN: {problem}",
                         "leave it out and a strong one is generated and printed, or use a generated one "
                         f"such as {secrets.token_urlsafe(32)}")


def serve(*, db_url: str | None, host: str, port: int, token: str | None, private: bool, worker: bool,
          secure_cookies: bool = False, log_level: str = "warning", allow_paths: tuple[str, ...] = (),
          allow_meter: bool = False) -> None:
    generated = not token
    token = token or secrets.token_urlsafe(32)
    check_token(token)
    allowed = allowed_dirs(allow_paths)
    blas_set = one_blas_thread()  # before the app imports numpy
    import uvicorn

    from .app import BUSY_TIMEOUT_S, create_app

    store = Store(db_url, busy_timeout_s=BUSY_TIMEOUT_S)  # migrations run here, before the worker opens it
    settings = Settings(db_url=store.url, token=token, private=private, allowed_hosts=loopback_hosts(host, port),
                        secure_cookies=secure_cookies, allowed_paths=allowed, allow_meter=allow_meter,
                        worker_hint="virtbench worker" + ("" if db_url is None else " --db URL"))
    app = create_app(settings, store)
    shown = f"[{host}]" if ":" in host else host
    say = lambda m: click.echo(m, err=True)  # noqa: E731
    say(f"virtbench web on http://{shown}:{port}/  (database {redact(store.url)})")
    if generated:
        say(f"token (needed to schedule, cancel, delete; give --token or VIRTBENCH_TOKEN to choose): {token}")
    if allowed:
        say("requests may name files under: " + ", ".join(map(str, allowed)))
    if host not in ("127.0.0.1", "localhost", "::1") and not private:
        say("warning: listening beyond this host and not --private: anyone who can reach it reads the results")
    proc = start_worker(store.url, (BLAS_THREADS,) if blas_set else (), (token,), allow_meter) if worker else None
    if proc:
        say(f"worker started (pid {proc.pid}); stop both with Ctrl-C")
    try:
        uvicorn.run(app, host=host, port=port, log_level=log_level, server_header=False, proxy_headers=False,
                    access_log=log_level in ("info", "debug"))
    finally:
        stop_worker(proc)

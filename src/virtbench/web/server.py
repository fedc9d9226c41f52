"""`virtbench serve`: the app under uvicorn, and by default a worker process beside it.

The worker is a child process (never a thread of the server: measurements must not share
an interpreter with request handling). It gets the database URL through its environment,
not its argv, so a PostgreSQL password does not show in `ps`. It is asked to stop (SIGTERM:
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

from ..commands.shared import BLAS_THREADS, one_blas_thread
from ..store.db import Store, redact
from .settings import Settings, loopback_hosts

WORKER_STOP_S = 180.0
"""How long the worker may take to stop: the instance in use is removed first."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def start_worker(db_url: str, drop: tuple[str, ...] = ()) -> subprocess.Popen:
    """The worker process; drop: variables of this process's environment it must not inherit."""
    env = {k: v for k, v in os.environ.items() if k not in drop} | {"VIRTBENCH_DB": db_url}
    return subprocess.Popen([sys.executable, "-m", "virtbench", "worker"], env=env, preexec_fn=_die_with_parent)


def stop_worker(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(WORKER_STOP_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def serve(*, db_url: str | None, host: str, port: int, token: str | None, private: bool, worker: bool,
          secure_cookies: bool = False, log_level: str = "warning") -> None:
    blas_set = one_blas_thread()  # before the app imports numpy
    import uvicorn

    from .app import create_app

    generated = not token
    token = token or secrets.token_urlsafe(24)
    store = Store(db_url)  # migrations run here, before the worker opens the same database
    settings = Settings(db_url=store.url, token=token, private=private, allowed_hosts=loopback_hosts(host, port),
                        secure_cookies=secure_cookies, worker_hint="virtbench worker" + ("" if db_url is None else " --db URL"))
    app = create_app(settings, store)
    shown = f"[{host}]" if ":" in host else host
    say = lambda m: click.echo(m, err=True)  # noqa: E731
    say(f"virtbench web on http://{shown}:{port}/  (database {redact(store.url)})")
    if generated:
        say(f"token (needed to schedule, cancel, delete; give --token or VIRTBENCH_TOKEN to choose): {token}")
    if len(token) < 16:
        say("warning: a token shorter than 16 characters is easy to guess")
    if host not in ("127.0.0.1", "localhost", "::1") and not private:
        say("warning: listening beyond this host and not --private: anyone who can reach it reads the results")
    proc = start_worker(store.url, (BLAS_THREADS,) if blas_set else ()) if worker else None
    if proc:
        say(f"worker started (pid {proc.pid}); stop both with Ctrl-C")
    try:
        uvicorn.run(app, host=host, port=port, log_level=log_level, server_header=False, proxy_headers=False,
                    access_log=log_level in ("info", "debug"))
    finally:
        stop_worker(proc)

"""`report` and `serve` run numpy's OpenBLAS with one thread (its second thread spinning for work
doubled the CPU of small matrix products), never the benchmarks a worker runs."""
from __future__ import annotations

import os
import subprocess
import sys

from virtbench.commands import shared


def test_one_blas_thread_sets_it_only_when_the_user_did_not(monkeypatch):
    monkeypatch.delenv(shared.BLAS_THREADS, raising=False)
    assert shared.one_blas_thread() is True and os.environ[shared.BLAS_THREADS] == "1"
    monkeypatch.setenv(shared.BLAS_THREADS, "4")
    assert shared.one_blas_thread() is False and os.environ[shared.BLAS_THREADS] == "4"


def test_the_web_worker_does_not_inherit_the_servers_setting(monkeypatch):
    from virtbench.web import server

    seen = {}

    class Popen:
        def __init__(self, argv, env, preexec_fn):
            seen.update(env)

    monkeypatch.setattr(server.subprocess, "Popen", Popen)
    monkeypatch.setenv(shared.BLAS_THREADS, "1")
    server.start_worker("sqlite:///x.db", (shared.BLAS_THREADS,))
    assert shared.BLAS_THREADS not in seen and seen["VIRTBENCH_DB"] == "sqlite:///x.db"
    server.start_worker("sqlite:///x.db")
    assert seen[shared.BLAS_THREADS] == "1"  # the user's own choice is passed on


def test_serving_imports_numpy_only_after_the_setting():
    """numpy reads the variable once, when it loads: nothing on `serve`'s path may load it before."""
    code = ("import sys; import virtbench.cli; from virtbench.extras import require; require('web', 'serve'); "
            "from virtbench.web import server; "
            "assert 'numpy' not in sys.modules, 'numpy loaded before serve() sets the thread count'")
    env = {k: v for k, v in os.environ.items() if k != shared.BLAS_THREADS}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)

"""Databases for tests on both backends: SQLite, and a real PostgreSQL server when
VIRTBENCH_TEST_PG_URL is set (tools/start-postgres starts one and prints the URL).

Used by the `backend`, `db_url` and `store` fixtures of tests/conftest.py and by the web
tests' filled templates; no fixtures here.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

PG_ENV = "VIRTBENCH_TEST_PG_URL"


def pg_database(base_url: str, template: str | None = None) -> tuple[str, str, Callable[[], None]]:
    """A fresh database beside base_url's (optionally a copy of template): (url, name, drop)."""
    name = "vbtest_" + uuid.uuid4().hex[:10]
    admin = create_engine(base_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:  # names are generated here, never input
        conn.execute(text(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else "")))

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return make_url(base_url).set(database=name).render_as_string(hide_password=False), name, drop


def database(backend: str, tmp_path: Path, template: str | None) -> tuple[str, Callable[[], None] | None]:
    """(url, drop or None): an empty database of that backend, or a copy of template."""
    if backend == "sqlite":
        path = tmp_path / "web.db"
        if template:
            shutil.copyfile(template, path)
        return f"sqlite:///{path}", None
    url, _, drop = pg_database(os.environ[PG_ENV], template)
    return url, drop


OWNER = """
import sys, time
from virtbench.store.db import Store
Store(sys.argv[1]).create_run(run_id=sys.argv[2], name="stuck", source="", seed=1, host_id=None, host_facts={},
                              campaign={"platforms": [{"name": "native", "type": "native"}]}, image={},
                              provenance={}, platforms=[], benchmarks=[], status="running")
print("running", flush=True)
time.sleep(600)
"""


def running_owner(url: str, run_id: str) -> subprocess.Popen[str]:
    """A real process that sets run_id running in the store, as `virtbench run` does, and then
    lives until killed (the tests kill it with SIGKILL: a crash that marks nothing)."""
    p = subprocess.Popen([sys.executable, "-c", OWNER, url, run_id], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "running"
    return p

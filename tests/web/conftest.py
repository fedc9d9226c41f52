"""Fixtures of the web tests: a store on SQLite and, when VIRTBENCH_TEST_PG_URL is set, the same
tests again on a real PostgreSQL server (tools/start-postgres starts one and prints the URL).

Each test gets its own database: an empty one, or a copy of a template filled once per
session with two synthetic runs (a file copy on SQLite, CREATE DATABASE ... TEMPLATE on
PostgreSQL), so tests never see each other's rows and do not pay for the filling each time.
"""
from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from dbsupport import PG_ENV, database, pg_database
from virtbench.store.db import Store

from .helpers import TOKEN, fill, make_client


def pytest_configure(config):
    # starlette's TestClient asks for httpx2; httpx works and is what FastAPI documents
    config.addinivalue_line("filterwarnings", "ignore:Using `httpx`")


@pytest.fixture(scope="session")
def templates(tmp_path_factory):
    """backend -> the filled template (SQLite file path or PostgreSQL database name), made once."""
    made: dict[str, str] = {}
    drops: list[Callable[[], None]] = []

    def get(backend: str) -> str:
        if backend not in made:
            if backend == "sqlite":
                path = tmp_path_factory.mktemp("template") / "filled.db"
                store = Store(f"sqlite:///{path}")
                fill(store)
                store.engine.dispose()  # the last connection closing checkpoints the WAL into the file
                made[backend] = str(path)
            else:
                url, name, drop = pg_database(os.environ[PG_ENV])
                store = Store(url)
                fill(store)
                store.engine.dispose()
                made[backend] = name
                drops.append(drop)
        return made[backend]

    yield get
    for drop in drops:
        drop()


@pytest.fixture
def filled(backend, tmp_path, templates):
    """A store holding the two synthetic runs of fill()."""
    url, drop = database(backend, tmp_path, templates(backend))
    s = Store(url)
    yield s
    s.engine.dispose()
    if drop:
        drop()


@pytest.fixture
def client(filled):
    return make_client(filled)


@pytest.fixture
def auth():
    return {"Authorization": f"Bearer {TOKEN}"}

"""Several processes opening the same old-schema database at once (a web server and its worker
started together, two `virtbench report` after an upgrade) migrate it once: the others wait
for the migration and find the schema current. Before the lock, the second one failed with
`duplicate column name` (SQLite) or a duplicate-column error (PostgreSQL)."""
from __future__ import annotations

import multiprocessing as mp
import shutil
from pathlib import Path

from alembic import command

from virtbench.store import db as store_db
from virtbench.store.db import Store

DATA = Path(__file__).parents[1] / "data" / "report"
OPENERS = 4


def _open(url: str, barrier, results) -> None:
    barrier.wait(30)
    try:
        Store(url)
        results.put("ok")
    except Exception as exc:  # noqa: BLE001 - the failure is what the test reports
        results.put(f"{type(exc).__name__}: {exc}")


def _open_at_once(url: str) -> list[str]:
    ctx = mp.get_context("fork")
    barrier, results = ctx.Barrier(OPENERS), ctx.Queue()
    procs = [ctx.Process(target=_open, args=(url, barrier, results)) for _ in range(OPENERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    return [results.get(timeout=5) for _ in procs]


def _old_schema(url: str, revision: str) -> None:
    store = Store(url, migrate=False)
    with store.engine.begin() as conn:
        command.upgrade(store_db._alembic_config(conn), revision)
    store.engine.dispose()


def test_old_sqlite_file_opened_by_several_processes_at_once(tmp_path):
    for i in range(3):  # the race needs the openers to overlap: a few tries make it certain before the fix
        path = tmp_path / f"old-{i}.sqlite"
        shutil.copy(DATA / "store-0003.sqlite", path)
        url = f"sqlite:///{path}"
        assert _open_at_once(url) == ["ok"] * OPENERS
        current, head = Store(url).schema_version()
        assert current == head


def test_old_database_opened_by_several_processes_at_once(db_url):
    """The same on each backend (PostgreSQL when a server is given), from the schema before the head."""
    for _ in range(2):
        _old_schema(db_url, "0005")
        assert _open_at_once(db_url) == ["ok"] * OPENERS
        current, head = Store(db_url).schema_version()
        assert current == head
        with Store(db_url).engine.begin() as conn:
            command.downgrade(store_db._alembic_config(conn), "0005")

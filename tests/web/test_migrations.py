"""Migrations (0002, the web app's, and any after it) on SQLite and PostgreSQL: from 0001 up, down
to 0001, up again; data kept, models matching."""
from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from virtbench.store.db import Store, _alembic_config
from virtbench.store.models import Base, Run


def test_upgrade_downgrade_upgrade_keeps_runs(db_url):
    store = Store(db_url, migrate=False)
    with store.engine.begin() as conn:
        command.upgrade(_alembic_config(conn), "0001")
    with store.engine.begin() as conn:  # a row as the 0001 schema knew it
        conn.exec_driver_sql(
            "INSERT INTO runs (id, name, status, campaign, campaign_source, seed, host_facts, image, provenance, "
            "created_at, error) VALUES ('old', 'before-0002', 'finished', '{}', '', 1, '{}', '{}', '{}', "
            "'2024-01-01 00:00:00', '')")
    store.migrate()
    current, head = store.schema_version()
    assert current == head >= "0002"
    with store.session() as s:
        old = s.get(Run, "old")
        assert (old.cancel_requested, old.worker, old.progress) == (False, None, None)
    cols = {c["name"] for c in inspect(store.engine).get_columns("runs")}
    assert {"worker", "worker_host", "target_host", "heartbeat_at", "cancel_requested", "progress"} <= cols
    with store.engine.begin() as conn:
        command.downgrade(_alembic_config(conn), "0001")
    insp = inspect(store.engine)
    assert "workers" not in insp.get_table_names() and "worker" not in {c["name"] for c in insp.get_columns("runs")}
    store.migrate()
    with store.engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
    with store.session() as s:
        assert s.get(Run, "old").name == "before-0002"
    store.engine.dispose()

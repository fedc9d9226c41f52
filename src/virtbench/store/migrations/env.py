"""Alembic environment: virtbench passes its own connection (see store/db.py)."""
from alembic import context

from virtbench.store.models import Base

target_metadata = Base.metadata
connection = context.config.attributes.get("connection")
if connection is None:  # invoked by the alembic CLI with a URL
    from sqlalchemy import create_engine

    connection = create_engine(context.config.get_main_option("sqlalchemy.url") or "").connect()
context.configure(connection=connection, target_metadata=target_metadata,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()

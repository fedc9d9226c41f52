"""run_platforms.kind: what isolates each platform of a run (baseline, container, sandbox, vm, stack)

Revision ID: 0005
Revises: 0004

Stored with the run, so a report says what the platform was when it ran, not what today's
plugin declares. Runs stored before this revision read the kind from their stored config
(`config.kind`, written since the platform plugins declared it; a stacked platform's config
names its `inside`), else ''.
"""
import json

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("run_platforms") as batch_op:
        batch_op.add_column(sa.Column("kind", sa.String(16), nullable=False, server_default=""))
    table = sa.table("run_platforms", sa.column("id", sa.Integer), sa.column("config", sa.JSON),
                     sa.column("kind", sa.String))
    bind = op.get_bind()
    for row_id, config in bind.execute(sa.select(table.c.id, table.c.config)).all():
        doc = json.loads(config) if isinstance(config, str) else (config or {})
        kind = "stack" if doc.get("inside") else str(doc.get("kind") or "")
        if kind:
            bind.execute(table.update().where(table.c.id == row_id).values(kind=kind))


def downgrade() -> None:
    with op.batch_alter_table("run_platforms") as batch_op:
        batch_op.drop_column("kind")

"""attachments: per-execution data that is not a scalar sample

Revision ID: 0004
Revises: 0003

HDR histograms (line), probe series and counters (probes), host-guard series (density):
one row per (execution, name), the bytes with their media type, and `kind` saying what
reads it. run_id is kept beside execution_id so a run's attachments come from one index.
"""
import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "attachments",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("execution_id", sa.Integer(), sa.ForeignKey("executions.id", ondelete="CASCADE"), nullable=False),
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("media_type", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False, server_default="ok"),
        sa.Column("error", sa.Text(), nullable=False, server_default=""),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("execution_id", "name", name="uq_attachments_execution_name"),
    )
    op.create_index("ix_attachments_run_kind", "attachments", ["run_id", "kind"])


def downgrade() -> None:
    op.drop_index("ix_attachments_run_kind", table_name="attachments")
    op.drop_table("attachments")

"""runs.owner: the process that measures a running run (host|boot id|pid|start time)

Revision ID: 0009
Revises: 0008

A `virtbench run` killed with -9 never marks its run interrupted, so the run stayed
`running` forever. With the owner recorded, a reader on the same host sees that the process
is gone and marks the run interrupted (store/owner.py); runs stored before this revision
have no owner and keep their status.
"""
import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("owner", sa.String(255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch_op:
        batch_op.drop_column("owner")

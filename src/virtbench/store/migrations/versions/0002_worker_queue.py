"""web app: worker queue (claim, heartbeat, cancel, progress of runs), workers, report cache

Revision ID: 0002
Revises: 0001

The web app schedules runs as 'queued' rows that `virtbench worker` processes claim,
heartbeat and resume; these columns are that bookkeeping, all nullable or defaulted so
runs recorded before this migration (and by `virtbench run`) need nothing filled in.
report_cache keeps each finished run's computed statistics for the pages (a pure cache).
"""
import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('worker', sa.String(length=128), nullable=True))
        batch_op.add_column(sa.Column('worker_host', sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column('target_host', sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column('heartbeat_at', sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column('cancel_requested', sa.Boolean(), nullable=False,
                                      server_default=sa.false()))
        batch_op.add_column(sa.Column('progress', sa.JSON(), nullable=True))
        batch_op.create_index('ix_runs_created_at', ['created_at'], unique=False)

    with op.batch_alter_table('executions', schema=None) as batch_op:  # counts per run and status, index-only
        batch_op.create_index('ix_executions_run_status', ['run_id', 'status'], unique=False)

    op.create_table('workers',
    sa.Column('id', sa.String(length=128), nullable=False),
    sa.Column('hostname', sa.String(length=255), nullable=False),
    sa.Column('pid', sa.Integer(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('run_id', sa.String(length=64), nullable=True),
    sa.Column('started_at', sa.DateTime(), nullable=False),
    sa.Column('heartbeat_at', sa.DateTime(), nullable=False),
    sa.Column('facts', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('workers', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_workers_hostname'), ['hostname'], unique=False)

    op.create_table('report_cache',
    sa.Column('run_id', sa.String(length=64), nullable=False),
    sa.Column('version', sa.String(length=255), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('run_id')
    )


def downgrade() -> None:
    op.drop_table('report_cache')
    with op.batch_alter_table('workers', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_workers_hostname'))
    op.drop_table('workers')
    with op.batch_alter_table('executions', schema=None) as batch_op:
        batch_op.drop_index('ix_executions_run_status')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index('ix_runs_created_at')
        batch_op.drop_column('progress')
        batch_op.drop_column('cancel_requested')
        batch_op.drop_column('heartbeat_at')
        batch_op.drop_column('target_host')
        batch_op.drop_column('worker_host')
        batch_op.drop_column('worker')

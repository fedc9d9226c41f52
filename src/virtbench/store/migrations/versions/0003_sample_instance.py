"""samples.instance: per-instance values of benchmarks run in several instances at once

Revision ID: 0003
Revises: 0002

The unique key of a sample gains the instance index. The 0001 constraint was unnamed, so its
name is looked up (PostgreSQL names it itself; SQLite reflects it unnamed and is rebuilt by
batch mode with a naming convention).
"""
import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

OLD_COLUMNS = ["run_id", "round", "platform", "benchmark", "metric"]
CONVENTION = {"uq": "uq_%(table_name)s_%(column_0_name)s"}


def _old_constraint_name() -> str:
    for uq in sa.inspect(op.get_bind()).get_unique_constraints("samples"):
        if list(uq["column_names"]) == OLD_COLUMNS:
            return uq["name"] or "uq_samples_run_id"
    return "uq_samples_run_id"


def upgrade() -> None:
    old = _old_constraint_name()
    with op.batch_alter_table("samples", naming_convention=CONVENTION) as batch_op:
        batch_op.add_column(sa.Column("instance", sa.Integer(), nullable=False, server_default="0"))
        batch_op.drop_constraint(old, type_="unique")
        batch_op.create_unique_constraint("uq_samples_point", [*OLD_COLUMNS, "instance"])


def downgrade() -> None:
    with op.batch_alter_table("samples", naming_convention=CONVENTION) as batch_op:
        batch_op.drop_constraint("uq_samples_point", type_="unique")
        batch_op.create_unique_constraint("uq_samples_run_id", OLD_COLUMNS)
        batch_op.drop_column("instance")

"""executions.host, samples.host: the inventory name of the host that measured (multi-host runs)

Revision ID: 0007
Revises: 0006

A run across several hosts measures the same (round, platform, benchmark) once per host, so
the unique keys of executions and samples gain the host. '' is the machine the run started
on, which is what every run before this revision measured on.
"""
import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None

EXEC_COLUMNS = ["run_id", "round", "platform", "benchmark"]
SAMPLE_COLUMNS = ["run_id", "round", "platform", "benchmark", "metric", "instance"]
CONVENTION = {"uq": "uq_%(table_name)s_%(column_0_name)s"}


def _constraint(table: str, columns: list[str], default: str) -> str:
    for uq in sa.inspect(op.get_bind()).get_unique_constraints(table):
        if list(uq["column_names"]) == columns:
            return uq["name"] or default
    return default


CHILDREN = ("samples", "attachments")
"""Tables whose rows reference executions with ON DELETE CASCADE."""


def upgrade() -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    if sqlite:
        # SQLite rebuilds `executions` to change its unique key (copy, drop, rename); with
        # foreign keys on (they cannot be turned off inside the migration's transaction)
        # dropping the old table would cascade to every sample and attachment: keep them aside.
        for child in CHILDREN:
            op.execute(f"CREATE TEMP TABLE _vb0007_{child} AS SELECT * FROM {child}")
    old = _constraint("executions", EXEC_COLUMNS, "uq_executions_run_id")
    with op.batch_alter_table("executions", naming_convention=CONVENTION) as batch_op:
        batch_op.add_column(sa.Column("host", sa.String(63), nullable=False, server_default=""))
        batch_op.drop_constraint(old, type_="unique")
        batch_op.create_unique_constraint("uq_executions_point", [*EXEC_COLUMNS, "host"])
    if sqlite:
        for child in CHILDREN:
            op.execute(f"DELETE FROM {child}")
            op.execute(f"INSERT INTO {child} SELECT * FROM _vb0007_{child}")
            op.execute(f"DROP TABLE _vb0007_{child}")
    old = _constraint("samples", SAMPLE_COLUMNS, "uq_samples_point")
    with op.batch_alter_table("samples", naming_convention=CONVENTION) as batch_op:
        batch_op.add_column(sa.Column("host", sa.String(63), nullable=False, server_default=""))
        batch_op.drop_constraint(old, type_="unique")
        batch_op.create_unique_constraint("uq_samples_point", [*SAMPLE_COLUMNS, "host"])


def downgrade() -> None:
    with op.batch_alter_table("samples", naming_convention=CONVENTION) as batch_op:
        batch_op.drop_constraint("uq_samples_point", type_="unique")
        batch_op.create_unique_constraint("uq_samples_point", SAMPLE_COLUMNS)
        batch_op.drop_column("host")
    with op.batch_alter_table("executions", naming_convention=CONVENTION) as batch_op:
        batch_op.drop_constraint("uq_executions_point", type_="unique")
        batch_op.create_unique_constraint("uq_executions_run_id", EXEC_COLUMNS)
        batch_op.drop_column("host")

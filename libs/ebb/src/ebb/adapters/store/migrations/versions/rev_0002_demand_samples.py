"""The planner's demand record: demand_samples (one row per NodePool and pass kept for a demandWindow).

Revision ID: 0002
Revises: 0001
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types (a revision must not change when models.py does).
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "demand_samples",
        sa.Column("cluster", sa.String(253), nullable=False),
        sa.Column("nodepool", sa.String(253), nullable=False),
        sa.Column("at", TS, nullable=False),
        sa.Column("cpu", sa.BigInteger(), nullable=False),
        sa.Column("memory", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("cluster", "nodepool", "at", name=op.f("pk_demand_samples")),
    )


def downgrade() -> None:
    op.drop_table("demand_samples")

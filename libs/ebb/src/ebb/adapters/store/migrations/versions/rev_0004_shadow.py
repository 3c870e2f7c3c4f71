"""Shadow mode (docs/shadow.md): ``decisions.shadow`` marks what a planner in shadow mode would have done, and
``shadow_removals`` keeps the removals another disrupter made, with ebb's verdict on each node.

Revision ID: 0004
Revises: 0003
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types (a revision must not change when models.py does).
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("decisions") as batch:
        batch.add_column(sa.Column("shadow", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.create_table(
        "shadow_removals",
        sa.Column("cluster", sa.String(253), nullable=False),
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("removed_at", TS, nullable=False),
        sa.Column("nodepool", sa.String(253), nullable=False),
        sa.Column("instance_type", sa.String(253), nullable=False),
        sa.Column("removed_by", sa.String(32), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("verdict", sa.String(64), nullable=False),
        sa.Column("verdict_inner", sa.String(64), nullable=False),
        sa.Column("verdict_text", sa.Text(), nullable=False),
        sa.Column("verdict_at", TS, nullable=True),
        sa.Column("price", sa.Numeric(14, 6), nullable=True),
        sa.PrimaryKeyConstraint("cluster", "node", "removed_at", name=op.f("pk_shadow_removals")),
    )
    op.create_index(op.f("ix_shadow_removals_cluster_removed_at"), "shadow_removals", ["cluster", "removed_at"])


def downgrade() -> None:
    op.drop_table("shadow_removals")
    with op.batch_alter_table("decisions") as batch:
        batch.drop_column("shadow")

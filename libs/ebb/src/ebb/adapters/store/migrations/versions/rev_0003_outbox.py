"""A decision's state where the next actor sees it: ``decisions.approve_at`` (when a proposal is due for
validation) and the transactional ``outbox`` (the messages a change publishes, written with it).

Revision ID: 0003
Revises: 0002
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types (a revision must not change when models.py does).
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BIGID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("decisions") as batch:
        batch.add_column(sa.Column("approve_at", TS, nullable=True))
    op.create_table(
        "outbox",
        sa.Column("id", BIGID, autoincrement=True, nullable=False),
        sa.Column("cluster", sa.String(253), nullable=False),
        sa.Column("origin", sa.String(64), nullable=False),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("message_id", sa.String(128), nullable=False),
        sa.Column("decision_id", sa.String(64), nullable=True),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("sent_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox")),
    )
    op.create_index(op.f("ix_outbox_cluster_origin_sent_at"), "outbox", ["cluster", "origin", "sent_at"])


def downgrade() -> None:
    op.drop_table("outbox")
    with op.batch_alter_table("decisions") as batch:
        batch.drop_column("approve_at")

"""The first store schema: decisions, decision_events, budget_ledger, holds, processed_messages.

Revision ID: 0001
Revises:
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the column types (a revision must not change when models.py does).
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BIGID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "decisions",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("cluster", sa.String(253), nullable=False),
        sa.Column("method", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("nodes", JSON, nullable=False),
        sa.Column("replacements", JSON, nullable=False),
        sa.Column("savings", sa.Numeric(14, 6), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("explanation", JSON, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("approved_at", TS, nullable=True),
        sa.Column("started_at", TS, nullable=True),
        sa.Column("finished_at", TS, nullable=True),
        sa.CheckConstraint(
            "state IN ('proposed', 'approved', 'executing', 'succeeded', 'failed', 'rolled_back', 'rejected')",
            name=op.f("ck_decisions_state"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_decisions")),
    )
    op.create_index(op.f("ix_decisions_cluster_state"), "decisions", ["cluster", "state"])
    op.create_index(op.f("ix_decisions_created_at"), "decisions", ["created_at"])

    op.create_table(
        "decision_events",
        sa.Column("id", BIGID, autoincrement=True, nullable=False),
        sa.Column("decision_id", sa.String(64), nullable=False),
        sa.Column("event_id", sa.String(128), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("node", sa.String(253), nullable=True),
        sa.Column("at", TS, nullable=False),
        sa.Column("detail", JSON, nullable=False),
        sa.ForeignKeyConstraint(
            ["decision_id"],
            ["decisions.id"],
            name=op.f("fk_decision_events_decision_id_decisions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_decision_events")),
        sa.UniqueConstraint("event_id", name=op.f("uq_decision_events_event_id")),
    )
    op.create_index(op.f("ix_decision_events_decision_id_at"), "decision_events", ["decision_id", "at"])

    op.create_table(
        "budget_ledger",
        sa.Column("cluster", sa.String(253), nullable=False),
        sa.Column("nodepool", sa.String(253), nullable=False),
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("decision_id", sa.String(64), nullable=True),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.Column("acquired_at", TS, nullable=False),
        sa.Column("expires_at", TS, nullable=True),
        sa.ForeignKeyConstraint(
            ["decision_id"],
            ["decisions.id"],
            name=op.f("fk_budget_ledger_decision_id_decisions"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("cluster", "nodepool", "node", name=op.f("pk_budget_ledger")),
    )
    op.create_index(op.f("ix_budget_ledger_decision_id"), "budget_ledger", ["decision_id"])

    op.create_table(
        "holds",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("cluster", sa.String(253), nullable=False),
        sa.Column("scope_kind", sa.String(16), nullable=False),
        sa.Column("scope", sa.String(512), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(253), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("expires_at", TS, nullable=True),
        sa.CheckConstraint(
            "scope_kind IN ('cluster', 'nodepool', 'node', 'namespace', 'workload')",
            name=op.f("ck_holds_scope_kind"),
        ),
        sa.CheckConstraint("kind IN ('manual', 'automatic')", name=op.f("ck_holds_kind")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_holds")),
    )
    op.create_index(op.f("ix_holds_cluster_scope_kind_scope"), "holds", ["cluster", "scope_kind", "scope"])
    op.create_index(op.f("ix_holds_expires_at"), "holds", ["expires_at"])

    op.create_table(
        "processed_messages",
        sa.Column("consumer", sa.String(128), nullable=False),
        sa.Column("message_id", sa.String(128), nullable=False),
        sa.Column("topic", sa.String(249), nullable=True),
        sa.Column("processed_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("consumer", "message_id", name=op.f("pk_processed_messages")),
    )
    op.create_index(op.f("ix_processed_messages_processed_at"), "processed_messages", ["processed_at"])


def downgrade() -> None:
    op.drop_table("processed_messages")
    op.drop_table("holds")
    op.drop_table("budget_ledger")
    op.drop_table("decision_events")
    op.drop_table("decisions")

"""The store's tables (docs/architecture.md#store), shared by PostgreSQL (distributed) and SQLite (embedded).

The Alembic revisions in ``migrations/versions`` create exactly these tables; an integration test
compares the migrated database with this metadata.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any, Final

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Numeric,
    String,
    Text,
    false,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from ebb.core.decision import STATES, State

NAMING_CONVENTION: Final = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

#: JSON documents: JSONB on PostgreSQL, JSON (text) on SQLite.
Json = JSON().with_variant(JSONB(), "postgresql")
#: 64-bit autoincrement keys; SQLite only autoincrements INTEGER PRIMARY KEY.
BigId = BigInteger().with_variant(Integer(), "sqlite")
Timestamp = DateTime(timezone=True)

#: the lifecycle's states: ``ebb.core.decision.State`` is their one owner
DECISION_STATES: Final = STATES
HOLD_SCOPES: Final = ("cluster", "nodepool", "node", "namespace", "workload")
HOLD_KINDS: Final = ("manual", "automatic")


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: Json, list[Any]: Json}


class Decision(Base):
    """One disruption decision and where it stands (``ebb.core.decision``: proposed → approved → executing →
    succeeded | rolled_back | failed, or rejected). Read and written through ``ebb.adapters.store.decisions``."""

    __tablename__ = "decisions"
    __table_args__ = (
        CheckConstraint(_in("state", DECISION_STATES), name="state"),
        Index(None, "cluster", "state"),
        Index(None, "created_at"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    cluster: Mapped[str] = mapped_column(String(253))
    #: how the node is disrupted: expiration, drift, emptiness, consolidation, interruption, ...
    method: Mapped[str] = mapped_column(String(32))
    #: the specific reason, human readable (e.g. "NodeClass drifted: ami changed")
    reason: Mapped[str] = mapped_column(Text)
    #: delete or replace
    action: Mapped[str] = mapped_column(String(16))
    #: the candidate nodes (names, with their pool and instance type)
    nodes: Mapped[list[Any]] = mapped_column(Json)
    #: replacement nodes to launch first (empty for a delete)
    replacements: Mapped[list[Any]] = mapped_column(Json)
    #: estimated savings per hour, in the cloud's currency; null when not a cost decision
    savings: Mapped[Decimal | None] = mapped_column(Numeric(14, 6))
    state: Mapped[str] = mapped_column(String(16), default=State.PROPOSED.value)
    #: why (and why not): the inputs and checks that led to this decision
    explanation: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    created_at: Mapped[datetime] = mapped_column(Timestamp)
    updated_at: Mapped[datetime] = mapped_column(Timestamp)
    approved_at: Mapped[datetime | None] = mapped_column(Timestamp)
    started_at: Mapped[datetime | None] = mapped_column(Timestamp)
    finished_at: Mapped[datetime | None] = mapped_column(Timestamp)
    #: a proposal: when it is due to be validated (whichever planner leads then approves or rejects it)
    approve_at: Mapped[datetime | None] = mapped_column(Timestamp)
    #: a decision of a planner in shadow mode (docs/shadow.md): what ebb would have done; it sends no message, takes
    #: no budget in the ledger and is never executed
    shadow: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class DecisionEvent(Base):
    """A decision's timeline: Proposed, Approved, Rejected, Tainted, Launching, WaitingReadiness,
    Evicted, Terminated, RolledBack, Failed."""

    __tablename__ = "decision_events"
    __table_args__ = (Index(None, "decision_id", "at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    decision_id: Mapped[str] = mapped_column(String(64), ForeignKey("decisions.id", ondelete="CASCADE"))
    #: the id of the CloudEvent that reported it (unique: a redelivered event is recorded once)
    event_id: Mapped[str] = mapped_column(String(128), unique=True)
    type: Mapped[str] = mapped_column(String(32))
    node: Mapped[str | None] = mapped_column(String(253))
    at: Mapped[datetime] = mapped_column(Timestamp)
    detail: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)


class BudgetLedgerEntry(Base):
    """A node currently consuming one of its pool's disruption budget. Planners and executors
    take budget by inserting rows under row locks (SELECT ... FOR UPDATE on the pool's rows), so
    no two of them can exceed a budget; rows are released when the disruption ends."""

    __tablename__ = "budget_ledger"
    __table_args__ = (Index(None, "decision_id"),)

    cluster: Mapped[str] = mapped_column(String(253), primary_key=True)
    nodepool: Mapped[str] = mapped_column(String(253), primary_key=True)
    node: Mapped[str] = mapped_column(String(253), primary_key=True)
    decision_id: Mapped[str | None] = mapped_column(String(64), ForeignKey("decisions.id", ondelete="SET NULL"))
    #: the disruption reason the budget applies to (Empty, Drifted, Underutilized, ...)
    reason: Mapped[str] = mapped_column(String(32))
    acquired_at: Mapped[datetime] = mapped_column(Timestamp)
    #: a lease: an entry whose holder died is reclaimable after this
    expires_at: Mapped[datetime | None] = mapped_column(Timestamp)


class Hold(Base):
    """A consolidation hold, manual (an operator's) or automatic (e.g. after a rollback)."""

    __tablename__ = "holds"
    __table_args__ = (
        CheckConstraint(_in("scope_kind", HOLD_SCOPES), name="scope_kind"),
        CheckConstraint(_in("kind", HOLD_KINDS), name="kind"),
        Index(None, "cluster", "scope_kind", "scope"),
        Index(None, "expires_at"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    cluster: Mapped[str] = mapped_column(String(253))
    scope_kind: Mapped[str] = mapped_column(String(16))
    #: the held object's name (or namespace/name); empty for the whole cluster
    scope: Mapped[str] = mapped_column(String(512), default="")
    kind: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text)
    created_by: Mapped[str | None] = mapped_column(String(253))
    created_at: Mapped[datetime] = mapped_column(Timestamp)
    #: null: until removed
    expires_at: Mapped[datetime | None] = mapped_column(Timestamp)

    def in_force(self, now: datetime) -> bool:
        """Whether the hold holds at ``now`` (``DecisionStore.list_holds`` asks the same of the database)."""
        return self.expires_at is None or self.expires_at > now


class DemandSample(Base):
    """One sample of the planner's demand record (``ebb.core.demand``): what a NodePool's pods requested at a
    pass, kept so that a new leader, or a restarted planner, holds what a demandWindow's peak asks for."""

    __tablename__ = "demand_samples"

    cluster: Mapped[str] = mapped_column(String(253), primary_key=True)
    nodepool: Mapped[str] = mapped_column(String(253), primary_key=True)
    at: Mapped[datetime] = mapped_column(Timestamp, primary_key=True)
    #: millicores
    cpu: Mapped[int] = mapped_column(BigInteger)
    #: bytes
    memory: Mapped[int] = mapped_column(BigInteger)


class ProcessedMessage(Base):
    """Ids of messages a consumer has applied, written in the same transaction as the effect."""

    __tablename__ = "processed_messages"
    __table_args__ = (Index(None, "processed_at"),)

    consumer: Mapped[str] = mapped_column(String(128), primary_key=True)
    message_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    topic: Mapped[str | None] = mapped_column(String(249))
    processed_at: Mapped[datetime] = mapped_column(Timestamp)


class OutboxMessage(Base):
    """A message to publish, written in the transaction of the change it reports (a transactional outbox): a
    decision's command on ebb.disruption.commands, its steps on ebb.disruption.events. The relay of the writer's
    ``origin`` (``ebb.adapters.store.outbox``) publishes the unsent ones in ``id`` order and then sets
    ``sent_at``."""

    __tablename__ = "outbox"
    __table_args__ = (Index(None, "cluster", "origin", "sent_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    cluster: Mapped[str] = mapped_column(String(253))
    #: which relay publishes it: the writer's service (consolidation-planner, termination-executor)
    origin: Mapped[str] = mapped_column(String(64))
    topic: Mapped[str] = mapped_column(String(249))
    #: the message's id (the CloudEvent id consumers apply once)
    message_id: Mapped[str] = mapped_column(String(128))
    decision_id: Mapped[str | None] = mapped_column(String(64))
    #: the message's payload (its JSON form, id included)
    payload: Mapped[dict[str, Any]] = mapped_column(Json)
    created_at: Mapped[datetime] = mapped_column(Timestamp)
    #: null until the relay published it
    sent_at: Mapped[datetime | None] = mapped_column(Timestamp)


class ShadowRemoval(Base):
    """A node removal a planner in shadow mode saw another disrupter make (Karpenter, a person, the cloud), with ebb's
    own verdict on the node at its last pass before the removal began (docs/shadow.md): what the shadow report
    sets beside ebb's shadow decisions."""

    __tablename__ = "shadow_removals"
    __table_args__ = (Index(None, "cluster", "removed_at"),)

    cluster: Mapped[str] = mapped_column(String(253), primary_key=True)
    node: Mapped[str] = mapped_column(String(253), primary_key=True)
    removed_at: Mapped[datetime] = mapped_column(Timestamp, primary_key=True)
    nodepool: Mapped[str] = mapped_column(String(253), default="")
    instance_type: Mapped[str] = mapped_column(String(253), default="")
    #: who removed it (``ebb.core.recording``): karpenter, ebb, unknown
    removed_by: Mapped[str] = mapped_column(String(32))
    #: why (Underutilized, Empty, Drifted, Expired, Interrupted, ..., deleted)
    reason: Mapped[str] = mapped_column(String(64), default="")
    detail: Mapped[str] = mapped_column(Text, default="")
    #: ebb's verdict on the node at its last pass before the removal: ``disrupt`` (a command of the pass) or the
    #: kind of the cause that left it alone (``ebb.core.causes.Cause``), with the cause it qualifies; empty when no
    #: pass saw the node
    verdict: Mapped[str] = mapped_column(String(64), default="")
    verdict_inner: Mapped[str] = mapped_column(String(64), default="")
    verdict_text: Mapped[str] = mapped_column(Text, default="")
    verdict_at: Mapped[datetime | None] = mapped_column(Timestamp)
    #: the node's price per hour at that pass (what ebb would have saved by removing it without a replacement)
    price: Mapped[Decimal | None] = mapped_column(Numeric(14, 6))


metadata = Base.metadata

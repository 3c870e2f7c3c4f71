"""Reading and writing the store's decisions, decision timelines and holds (SQLAlchemy async).

One :class:`Repository` serves one cluster: every row it writes carries that cluster's name and every
query it runs is limited to it, so several clusters (or several test runs) can share one database.
Rows come back as detached ORM objects (``expire_on_commit=False``): read their attributes freely, but
they are not tracked by any session.

Decisions are listed newest first with keyset pagination: the cursor is an opaque, URL-safe encoding
of the last row's ``(created_at, id)``, so pages stay stable while new decisions are inserted.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final

from sqlalchemy import ColumnElement, and_, cast, delete, exists, func, literal_column, or_, select, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from ebb.adapters.store.migrate import async_url
from ebb.adapters.store.models import Decision, DecisionEvent, Hold
from ebb.core.decision import State

MAX_PAGE: Final = 500


class CursorError(ValueError):
    """A pagination cursor this repository did not make."""


@dataclass(frozen=True, slots=True)
class DecisionFilter:
    """Filters of :meth:`Repository.list_decisions`; None means "any"."""

    #: a ``State`` or its value (ValueError at the query when it is neither)
    state: State | str | None = None
    method: str | None = None
    reason: str | None = None
    #: a NodePool one of the decision's nodes belongs to (``nodes[].nodePool``)
    nodepool: str | None = None
    #: one of the decision's nodes (``nodes[].name``, or the entry itself when it is a string)
    node: str | None = None
    #: created at or after
    since: datetime | None = None


@dataclass(frozen=True, slots=True)
class DecisionPage:
    items: Sequence[Decision]
    #: the cursor of the next page; None on the last page
    next_cursor: str | None


def encode_cursor(created_at: datetime, decision_id: str) -> str:
    raw = json.dumps([created_at.isoformat(), decision_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        at, decision_id = json.loads(raw)
        moment = datetime.fromisoformat(at)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise CursorError("not a cursor returned by a previous page") from exc
    if not isinstance(decision_id, str) or moment.tzinfo is None:
        raise CursorError("not a cursor returned by a previous page")
    return moment, decision_id


def _utc(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; the store's times are all UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


class Repository:
    """The store as the decisions-api (and, later, the planner and executor) use it."""

    def __init__(self, engine: AsyncEngine, cluster: str = "default") -> None:
        self.engine = engine
        self.cluster = cluster
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)

    @classmethod
    def from_url(cls, url: str, cluster: str = "default", **engine_options: Any) -> Repository:
        """A repository on a new engine (``postgresql://`` gets asyncpg, ``sqlite://`` aiosqlite).
        Nothing connects until the first query."""
        return cls(create_async_engine(async_url(url), pool_pre_ping=True, **engine_options), cluster)

    async def close(self) -> None:
        await self.engine.dispose()

    async def ping(self) -> None:
        """Raise unless the database answers a trivial query."""
        async with self.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))

    def _session(self) -> AsyncSession:
        return self._sessions()

    # -- holds ---------------------------------------------------------------------------------------------

    async def create_hold(
        self,
        *,
        scope_kind: str,
        scope: str,
        reason: str,
        expires_at: datetime | None,
        now: datetime,
        kind: str = "manual",
        created_by: str | None = None,
        hold_id: str | None = None,
    ) -> Hold:
        hold = Hold(
            id=hold_id or f"hold-{uuid.uuid4().hex}",
            cluster=self.cluster,
            scope_kind=scope_kind,
            scope=scope,
            kind=kind,
            reason=reason,
            created_by=created_by,
            created_at=now,
            expires_at=expires_at,
        )
        async with self._session() as session, session.begin():
            session.add(hold)
        return hold

    async def list_holds(self, now: datetime, *, include_expired: bool = False) -> list[Hold]:
        """Holds of this cluster, oldest first; only those in force at ``now`` unless ``include_expired``."""
        query = select(Hold).where(Hold.cluster == self.cluster)
        if not include_expired:
            query = query.where(or_(Hold.expires_at.is_(None), Hold.expires_at > now))
        query = query.order_by(Hold.created_at, Hold.id)
        async with self._session() as session:
            holds = list((await session.scalars(query)).all())
        for hold in holds:
            hold.created_at = _utc(hold.created_at) or hold.created_at
            hold.expires_at = _utc(hold.expires_at)
        return holds

    async def delete_hold(self, hold_id: str) -> bool:
        """Remove a hold; False when this cluster has no hold with that id."""
        async with self._session() as session, session.begin():
            result = await session.execute(
                delete(Hold).where(Hold.cluster == self.cluster, Hold.id == hold_id).returning(Hold.id)
            )
            return result.first() is not None

    # -- decisions -----------------------------------------------------------------------------------------

    async def add_decision(
        self,
        *,
        decision_id: str,
        method: str,
        reason: str,
        action: str,
        nodes: list[Any],
        replacements: list[Any],
        created_at: datetime,
        state: State | str = State.PROPOSED,
        savings: Decimal | float | None = None,
        explanation: dict[str, Any] | None = None,
    ) -> Decision:
        decision = Decision(
            id=decision_id,
            cluster=self.cluster,
            method=method,
            reason=reason,
            action=action,
            nodes=nodes,
            replacements=replacements,
            savings=None if savings is None else Decimal(str(savings)),
            state=State(state).value,
            explanation=explanation or {},
            created_at=created_at,
            updated_at=created_at,
        )
        async with self._session() as session, session.begin():
            session.add(decision)
        return decision

    async def add_decision_event(
        self,
        *,
        decision_id: str,
        event_id: str,
        type: str,
        at: datetime,
        node: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> DecisionEvent:
        event = DecisionEvent(
            decision_id=decision_id, event_id=event_id, type=type, node=node, at=at, detail=detail or {}
        )
        async with self._session() as session, session.begin():
            session.add(event)
        return event

    def _node_condition(self, key: str, value: str, *, bare_strings: bool) -> ColumnElement[bool]:
        """The decision's ``nodes`` JSON array has an entry whose ``key`` is ``value`` (or, with
        ``bare_strings``, an entry that is the string ``value``)."""
        if self.engine.dialect.name == "postgresql":
            nodes = cast(Decision.nodes, JSONB)
            condition = nodes.contains([{key: value}])
            return or_(condition, nodes.contains([value])) if bare_strings else condition
        # SQLite (embedded mode): json_each over the array
        entries = func.json_each(Decision.nodes).table_valued("value", "type", "fullkey").alias("entry")
        # the path from the array itself (entry.value of a string element is not JSON text)
        matches = func.json_extract(Decision.nodes, entries.c.fullkey.concat(f".{key}")) == value
        if bare_strings:
            matches = or_(matches, and_(entries.c.type == literal_column("'text'"), entries.c.value == value))
        return exists(select(1).select_from(entries).where(matches))

    async def list_decisions(
        self, filters: DecisionFilter | None = None, *, cursor: str | None = None, limit: int = 100
    ) -> DecisionPage:
        """Decisions newest first (``created_at``, then ``id``, descending), one page of ``limit``."""
        if not 1 <= limit <= MAX_PAGE:
            raise ValueError(f"limit must be between 1 and {MAX_PAGE}")
        filters = filters or DecisionFilter()
        query = select(Decision).where(Decision.cluster == self.cluster)
        if filters.state is not None:
            query = query.where(Decision.state == State(filters.state).value)
        if filters.method is not None:
            query = query.where(Decision.method == filters.method)
        if filters.reason is not None:
            query = query.where(Decision.reason == filters.reason)
        if filters.since is not None:
            query = query.where(Decision.created_at >= filters.since)
        if filters.nodepool is not None:
            query = query.where(self._node_condition("nodePool", filters.nodepool, bare_strings=False))
        if filters.node is not None:
            query = query.where(self._node_condition("name", filters.node, bare_strings=True))
        if cursor is not None:
            at, last_id = decode_cursor(cursor)
            query = query.where(
                or_(Decision.created_at < at, and_(Decision.created_at == at, Decision.id < last_id))
            )
        query = query.order_by(Decision.created_at.desc(), Decision.id.desc()).limit(limit + 1)
        async with self._session() as session:
            rows = list((await session.scalars(query)).all())
        for row in rows:
            _normalise(row)
        if len(rows) > limit:
            last = rows[limit - 1]
            return DecisionPage(rows[:limit], encode_cursor(last.created_at, last.id))
        return DecisionPage(rows, None)

    async def get_decision(self, decision_id: str) -> tuple[Decision, list[DecisionEvent]] | None:
        """A decision and its timeline (oldest event first), or None."""
        async with self._session() as session:
            decision = await session.scalar(
                select(Decision).where(Decision.cluster == self.cluster, Decision.id == decision_id)
            )
            if decision is None:
                return None
            events = list(
                (
                    await session.scalars(
                        select(DecisionEvent)
                        .where(DecisionEvent.decision_id == decision_id)
                        .order_by(DecisionEvent.at, DecisionEvent.id)
                    )
                ).all()
            )
        _normalise(decision)
        for event in events:
            event.at = _utc(event.at) or event.at
        return decision, events


def _normalise(decision: Decision) -> None:
    for name in ("created_at", "updated_at", "approved_at", "started_at", "finished_at"):
        setattr(decision, name, _utc(getattr(decision, name)))

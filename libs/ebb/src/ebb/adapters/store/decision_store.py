"""The one way into the store (docs/architecture.md#store): ``DecisionStore`` reads and writes decisions, their
timelines, the budget ledger, holds and applied message ids, for the consolidation-planner, the
termination-executor and the decisions-api alike (and for the embedded mode, which gives all three one
instance on its SQLite database).

One store serves one cluster: every row it writes carries that cluster's name and every query it runs is
limited to it, so several clusters (or several test runs) can share one database. Rows come back as
detached ORM objects (``expire_on_commit=False``) with their times in UTC (SQLite hands back naive ones):
read their attributes freely, but no session tracks them. Every decision row is made by
``ebb.adapters.store.decisions.create`` (born proposed, moved through the lifecycle to the state it is written in)
and every state change goes through ``ebb.adapters.store.decisions.move``, i.e. the lifecycle's
``ebb.core.decision.transition``.

**A decision's state where the next actor sees it.** A change of a decision, its timeline rows (``decision_events``)
and the messages it sends (its command on ebb.disruption.commands, its steps on ebb.disruption.events, each under
the id its timeline row has) are written in one transaction: the messages into the ``outbox`` table under the
writer's origin (``PLANNER``, ``EXECUTOR``), which that service's relay (``ebb.adapters.store.outbox``, through
``relay``) publishes in order and marks sent. A proposal carries the moment it is due for validation
(``approve_at``); ``due`` and ``next_due`` are how whichever planner leads finds it. A ``private`` store (the
embedded mode: one process, whose in-memory bus dies with it) writes no outbox rows: what a transaction sends is
handed to the relay in memory once it committed.

What each writer relies on:

- **propose** (planner) writes a proposal with its ``approve_at`` and its Proposed steps; **reject** and
  **approve** decide it (with their Rejected / Approved steps, and the command).
- **approve** (planner) is the one place budget is taken. In one transaction it locks the command's
  NodePools (a PostgreSQL transaction-scoped advisory lock per ``(cluster, nodepool)``, taken in name order
  so two planners never deadlock; on SQLite, whose writers are serialised anyway, a process-wide lock),
  frees ledger rows whose decision ended or whose lease ran out, refuses a node that another live decision
  or ledger row already holds, counts the pool's ledger rows against the budget the fresh snapshot allows,
  and only then inserts the command's rows and marks the decision approved. No two planners can therefore
  approve more than a budget allows, even when both believe they are the leader.
- **interrupt** (planner) writes an interruption's decision straight as approved (no validation, no
  budget, no ledger rows: interruption ignores budgets) under the same per-NodePool lock, after checking in
  the same transaction that the message was not applied before (``processed_messages``, recorded in that
  transaction) and that no other live decision holds the node: a *proposed* one is rejected to make room,
  an approved or executing one already takes the node away and the interruption adds nothing.
- **start** (executor) moves the decision to ``executing`` (writing it from the command when the planner
  has not written it); **record_steps** adds steps to the timeline and the outbox, each once; **finish** moves it
  to ``succeeded``, ``rolled_back`` or ``failed`` with its last steps, records the command id in
  ``processed_messages`` under the store's ``consumer`` and deletes the decision's ``budget_ledger`` rows, in one
  transaction: a command that was applied is never applied again, one whose
  execution was interrupted (crash, stop) is resumed when it is delivered again, and the nodes it disrupted
  stop consuming their NodePool's budget the moment the decision ends (the planner would otherwise free them
  only lazily, at its next approval in the pool, or when their lease runs out).
- **create_hold / delete_hold** (API) and the automatic holds ``finish`` leaves behind; **list_holds** is
  what the planner plans with and the API shows.
- **list_decisions** (API) lists newest first with keyset pagination: the cursor is an opaque, URL-safe
  encoding of the last row's ``(created_at, id)``, so pages stay stable while new decisions are inserted.

**Shadow mode** (docs/shadow.md). A store made with ``shadow=True`` (the planner's in shadow mode) writes its
decisions marked ``shadow`` and reads only those back into the lifecycle (``due``, ``next_due``, ``live_nodes``,
``approved``): it proposes, validates and approves exactly as a real one, but **sends nothing** (``_send`` puts no
message in the outbox, so no command ever reaches the executor) and takes no budget in the ledger. A real store
never sees a shadow decision as live. ``record_removal`` and ``shadow_facts`` keep and read what the shadow report
compares with: the removals another disrupter made, with ebb's verdict on each node.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import dataclasses
import itertools
import json
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Final

from sqlalchemy import ColumnElement, and_, cast, delete, exists, func, literal_column, or_, select, text, update
from sqlalchemy import event as sa_event
from sqlalchemy import insert as sa_insert
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session

from ebb.adapters.store import decisions
from ebb.adapters.store.decisions import utc
from ebb.adapters.store.migrate import async_url
from ebb.adapters.store.models import (
    BudgetLedgerEntry,
    DecisionEvent,
    Hold,
    OutboxMessage,
    ProcessedMessage,
    ShadowRemoval,
)
from ebb.adapters.store.models import Decision as DecisionRow
from ebb.adapters.store.models import DemandSample as DemandRow
from ebb.adapters.store.port import (
    ENDS,
    EXECUTOR,
    EXECUTOR_CONSUMER,
    PLANNER,
    SAME_REMOVAL,
    Approval,
    Interrupted,
    Publish,
    Start,
    automatic_hold_id,
    automatic_hold_reason,
    command_id,
    ledger_refusal,
    relay_committed,
)
from ebb.adapters.store.shapes import interruptions_to_write, with_noted
from ebb.contracts import (
    TOPIC_DISRUPTION_COMMANDS,
    TOPIC_DISRUPTION_EVENTS,
    TOPIC_INTERRUPTIONS,
    DisruptionCommand,
    DisruptionEvent,
    Message,
)
from ebb.contracts.messages import Phase
from ebb.core import decision as lifecycle
from ebb.core.decision import FINISHED, LIVE, State
from ebb.core.model import DemandSample
from ebb.core.shadow import Removal, ShadowReport, compare

#: the most decisions one page of :meth:`DecisionStore.list_decisions` holds
MAX_PAGE: Final = 500
__all__ = ["ENDS", "EXECUTOR", "EXECUTOR_CONSUMER", "MAX_PAGE", "PLANNER", "Approval", "CursorError", "DecisionFilter",
           "DecisionPage", "DecisionStore", "Interrupted", "Publish", "Start", "automatic_hold", "command_id",
           "decode_cursor", "encode_cursor", "removal_of"]

#: the message model of each topic the outbox sends on
_MESSAGE_OF_TOPIC: Final[Mapping[str, type[Message]]] = {TOPIC_DISRUPTION_COMMANDS: DisruptionCommand,
                                                         TOPIC_DISRUPTION_EVENTS: DisruptionEvent}

#: SQLite has no advisory locks; its writers are serialised, and these serialise approvals in the process (one
#: lock per event loop: an asyncio lock belongs to the loop it first waited on)
_SQLITE_APPROVALS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()
#: one relay per (loop, cluster, origin) at a time on SQLite
_SQLITE_RELAYS: dict[tuple[asyncio.AbstractEventLoop, str, str], asyncio.Lock] = {}


class CursorError(ValueError):
    """A pagination cursor this store did not make."""


@dataclass(frozen=True, slots=True)
class DecisionFilter:
    """Filters of :meth:`DecisionStore.list_decisions`; None means "any"."""

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
    #: shadow decisions only (True), real ones only (False)
    shadow: bool | None = None


@dataclass(frozen=True, slots=True)
class DecisionPage:
    items: Sequence[DecisionRow]
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


class DecisionStore:
    """The store of one cluster, as the planner, the executor and the decisions-api read and write it."""

    def __init__(self, engine: AsyncEngine, cluster: str = "default", *, consumer: str = EXECUTOR_CONSUMER,
                 ledger_ttl: float = 3600.0, private: bool = False, shadow: bool = False) -> None:
        self.engine = engine
        self.cluster = cluster
        #: a shadow store (docs/shadow.md): its decisions are marked shadow, the lifecycle reads only those, and it
        #: sends no message and takes no ledger row
        self.shadow = shadow
        #: the ``processed_messages`` consumer :meth:`start` and :meth:`finish` record commands under
        self.consumer = consumer
        #: seconds a budget_ledger row taken by :meth:`approve` is leased for (reclaimable after)
        self.ledger_ttl = ledger_ttl
        self._sessions = async_sessionmaker(engine, expire_on_commit=False, sync_session_class=_OutboxSession)
        #: this process is the store's only user and its bus dies with it (the embedded mode): the messages a
        #: transaction sends are handed to the relay in memory once it committed, and no outbox rows are written
        self.private = private
        #: origin -> the messages committed and not yet relayed (``private``)
        self._committed: dict[str, list[tuple[str, Message]]] = {}
        #: origin -> the event its relay waits on (``outbox_signal``)
        self._signals: dict[str, asyncio.Event] = {}

    @classmethod
    def from_url(cls, url: str, cluster: str = "default", *, consumer: str = EXECUTOR_CONSUMER,
                 ledger_ttl: float = 3600.0, shadow: bool = False, **engine_options: Any) -> DecisionStore:
        """A store on a new engine (``postgresql://`` gets asyncpg, ``sqlite://`` aiosqlite). Nothing
        connects until the first query."""
        return cls(create_async_engine(async_url(url), pool_pre_ping=True, **engine_options), cluster,
                   consumer=consumer, ledger_ttl=ledger_ttl, shadow=shadow)

    async def close(self) -> None:
        await self.engine.dispose()

    async def ping(self) -> None:
        """Raise unless the database answers a trivial query."""
        async with self.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))

    @property
    def _postgres(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    # -- the planner's demand record -----------------------------------------------------------------------

    async def save_demand(self, samples: Iterable[DemandSample]) -> None:
        """Make ``samples`` this cluster's demand record (``ebb.core.demand``: one sample per NodePool and moment),
        replacing the one before in one transaction."""
        rows = [DemandRow(cluster=self.cluster, nodepool=s.pool, at=s.at, cpu=s.cpu, memory=s.memory)
                for s in samples]
        async with self._sessions() as session, session.begin():
            await session.execute(delete(DemandRow).where(DemandRow.cluster == self.cluster))
            session.add_all(rows)

    async def load_demand(self) -> tuple[DemandSample, ...]:
        """This cluster's demand record, oldest first (empty when none was saved)."""
        query = select(DemandRow).where(DemandRow.cluster == self.cluster).order_by(DemandRow.at, DemandRow.nodepool)
        async with self._sessions() as session:
            rows = (await session.scalars(query)).all()
        return tuple(DemandSample(r.nodepool, utc(r.at) or r.at, r.cpu, r.memory) for r in rows)

    # -- holds ---------------------------------------------------------------------------------------------

    async def create_hold(self, *, scope_kind: str, scope: str, reason: str, expires_at: datetime | None,
                          now: datetime, kind: str = "manual", created_by: str | None = None,
                          hold_id: str | None = None) -> Hold:
        hold = Hold(id=hold_id or f"hold-{uuid.uuid4().hex}", cluster=self.cluster, scope_kind=scope_kind,
                    scope=scope, kind=kind, reason=reason, created_by=created_by, created_at=now,
                    expires_at=expires_at)
        async with self._sessions() as session, session.begin():
            session.add(hold)
        return hold

    async def list_holds(self, now: datetime, *, include_expired: bool = False) -> list[Hold]:
        """Holds of this cluster, oldest first; only those in force at ``now`` unless ``include_expired``."""
        query = select(Hold).where(Hold.cluster == self.cluster)
        if not include_expired:
            query = query.where(or_(Hold.expires_at.is_(None), Hold.expires_at > now))
        async with self._sessions() as session:
            holds = list((await session.scalars(query.order_by(Hold.created_at, Hold.id))).all())
        for hold in holds:
            hold.created_at = utc(hold.created_at) or hold.created_at
            hold.expires_at = utc(hold.expires_at)
        return holds

    async def delete_hold(self, hold_id: str) -> bool:
        """Remove a hold; False when this cluster has no hold with that id."""
        async with self._sessions() as session, session.begin():
            result = await session.execute(
                delete(Hold).where(Hold.cluster == self.cluster, Hold.id == hold_id).returning(Hold.id))
            return result.first() is not None

    # -- reading decisions ---------------------------------------------------------------------------------

    async def decision_counts(self) -> dict[tuple[str, str], int]:
        """(state, method) -> how many decisions of this cluster are in that state and of that method."""
        async with self.engine.connect() as connection:
            rows = await connection.execute(
                select(DecisionRow.state, DecisionRow.method, func.count()).where(DecisionRow.cluster == self.cluster)
                .group_by(DecisionRow.state, DecisionRow.method))
            return {(str(state), str(method)): int(n) for state, method, n in rows}

    async def top_savings(self, limit: int, states: Iterable[str]) -> list[lifecycle.Decision]:
        """The ``limit`` decisions of this cluster in ``states`` that save the most per hour (ties: the earlier
        first, then by id)."""
        if limit <= 0:
            return []
        async with self._sessions() as session:
            rows = await session.scalars(
                select(DecisionRow).where(DecisionRow.cluster == self.cluster, DecisionRow.state.in_(list(states)))
                .order_by(DecisionRow.savings.desc(), DecisionRow.created_at, DecisionRow.id).limit(limit))
            return [decisions.decision_of(row) for row in rows]

    async def state(self, decision_id: str) -> State | None:
        """Where the decision stands; None when this cluster has no such decision."""
        async with self._sessions() as session:
            state = await session.scalar(select(DecisionRow.state).where(
                DecisionRow.cluster == self.cluster, DecisionRow.id == decision_id))
        return None if state is None else State(state)

    async def live_nodes(self, exclude: str | None = None, states: Iterable[State] = LIVE) -> dict[str, str]:
        """node -> id of the live decision (``ebb.core.decision.LIVE``, or those ``states``) that holds it."""
        async with self._sessions() as session:
            return await decisions.live_nodes(session, self.cluster, exclude=exclude, states=states,
                                              shadow=self.shadow)

    async def live_replacements(self, exclude: str | None = None,
                                states: Iterable[State] = LIVE) -> dict[str, str]:
        """replacement name -> id of the live decision (or one in ``states``) that launches it."""
        async with self._sessions() as session:
            return await decisions.live_replacements(session, self.cluster, exclude=exclude, states=states,
                                                     shadow=self.shadow)

    async def approved(self) -> list[DecisionRow]:
        """The decisions of this cluster that are approved and not yet picked up by the executor, oldest
        approval first."""
        async with self._sessions() as session:
            rows = list((await session.scalars(select(DecisionRow).where(
                DecisionRow.cluster == self.cluster, DecisionRow.state == State.APPROVED,
                DecisionRow.shadow.is_(self.shadow)).order_by(
                DecisionRow.approved_at, DecisionRow.id))).all())
        for row in rows:
            _normalise(row)
        return rows

    async def ledger(self) -> list[BudgetLedgerEntry]:
        """This cluster's budget_ledger rows, by node."""
        async with self._sessions() as session:
            return list((await session.scalars(select(BudgetLedgerEntry).where(
                BudgetLedgerEntry.cluster == self.cluster).order_by(BudgetLedgerEntry.node))).all())

    def _node_condition(self, key: str, value: str, *, bare_strings: bool) -> ColumnElement[bool]:
        """The decision's ``nodes`` JSON array has an entry whose ``key`` is ``value`` (or, with
        ``bare_strings``, an entry that is the string ``value``)."""
        if self._postgres:
            nodes = cast(DecisionRow.nodes, JSONB)
            condition = nodes.contains([{key: value}])
            return or_(condition, nodes.contains([value])) if bare_strings else condition
        # SQLite (embedded mode): json_each over the array
        entries = func.json_each(DecisionRow.nodes).table_valued("value", "type", "fullkey").alias("entry")
        # the path from the array itself (entry.value of a string element is not JSON text)
        matches = func.json_extract(DecisionRow.nodes, entries.c.fullkey.concat(f".{key}")) == value
        if bare_strings:
            matches = or_(matches, and_(entries.c.type == literal_column("'text'"), entries.c.value == value))
        return exists(select(1).select_from(entries).where(matches))

    async def list_decisions(self, filters: DecisionFilter | None = None, *, cursor: str | None = None,
                             limit: int = 100) -> DecisionPage:
        """Decisions newest first (``created_at``, then ``id``, descending), one page of ``limit``."""
        if not 1 <= limit <= MAX_PAGE:
            raise ValueError(f"limit must be between 1 and {MAX_PAGE}")
        filters = filters or DecisionFilter()
        query = select(DecisionRow).where(DecisionRow.cluster == self.cluster)
        if filters.state is not None:
            query = query.where(DecisionRow.state == State(filters.state).value)
        if filters.method is not None:
            query = query.where(DecisionRow.method == filters.method)
        if filters.reason is not None:
            query = query.where(DecisionRow.reason == filters.reason)
        if filters.since is not None:
            query = query.where(DecisionRow.created_at >= filters.since)
        if filters.shadow is not None:
            query = query.where(DecisionRow.shadow.is_(filters.shadow))
        if filters.nodepool is not None:
            query = query.where(self._node_condition("nodePool", filters.nodepool, bare_strings=False))
        if filters.node is not None:
            query = query.where(self._node_condition("name", filters.node, bare_strings=True))
        if cursor is not None:
            at, last_id = decode_cursor(cursor)
            query = query.where(or_(DecisionRow.created_at < at,
                                    and_(DecisionRow.created_at == at, DecisionRow.id < last_id)))
        query = query.order_by(DecisionRow.created_at.desc(), DecisionRow.id.desc()).limit(limit + 1)
        async with self._sessions() as session:
            rows = list((await session.scalars(query)).all())
        for row in rows:
            _normalise(row)
        if len(rows) > limit:
            last = rows[limit - 1]
            return DecisionPage(rows[:limit], encode_cursor(last.created_at, last.id))
        return DecisionPage(rows, None)

    async def get_decision(self, decision_id: str) -> tuple[DecisionRow, list[DecisionEvent]] | None:
        """A decision and its timeline (oldest event first), or None."""
        async with self._sessions() as session:
            decision = await session.scalar(select(DecisionRow).where(
                DecisionRow.cluster == self.cluster, DecisionRow.id == decision_id))
            if decision is None:
                return None
            events = list((await session.scalars(select(DecisionEvent).where(
                DecisionEvent.decision_id == decision_id).order_by(DecisionEvent.at, DecisionEvent.id))).all())
        _normalise(decision)
        for event in events:
            event.at = utc(event.at) or event.at
        return decision, events

    # -- writing rows as given (fixtures, imports) ---------------------------------------------------------

    async def add_decision(self, *, decision_id: str, method: str, reason: str, action: str, nodes: list[Any],
                           replacements: list[Any], created_at: datetime, state: State | str = State.PROPOSED,
                           savings: Decimal | float | None = None,
                           explanation: dict[str, Any] | None = None) -> DecisionRow:
        """A decision written as given (fixtures, imports): born proposed and moved to ``state`` through the lifecycle
        at ``created_at`` (``decisions.create``), with ``nodes`` and ``replacements`` kept in the JSON given (an
        import may hold the older shapes)."""
        proposal = lifecycle.Decision(
            id=decision_id, method=method, reason=reason, action=action,
            nodes=tuple(decisions.decision_node(n) for n in nodes), replacements=(),
            savings=float(savings or 0), state=State.PROPOSED, created_at=created_at, updated_at=created_at,
            explanation=explanation or {})
        async with self._sessions() as session, session.begin():
            row, _ = decisions.create(session, self.cluster, proposal, State(state))
            row.nodes, row.replacements = nodes, replacements
            row.savings = None if savings is None else Decimal(str(savings))
        _normalise(row)
        return row

    async def add_decision_event(self, *, decision_id: str, event_id: str, type: str, at: datetime,
                                 node: str | None = None, detail: dict[str, Any] | None = None) -> DecisionEvent:
        event = DecisionEvent(decision_id=decision_id, event_id=event_id, type=type, node=node, at=at,
                              detail=detail or {})
        async with self._sessions() as session, session.begin():
            session.add(event)
        return event

    # -- the outbox ----------------------------------------------------------------------------------------

    def _send(self, session: AsyncSession, topic: str, message: Message, origin: str, now: datetime) -> None:
        """Add ``message`` to the outbox in ``session``'s transaction, for ``origin``'s relay to publish (``private``:
        handed to the relay when the transaction commits). A shadow store sends nothing: its decisions are never
        published, so no command of one can reach the executor."""
        if self.shadow:
            return
        if self.private:
            staged = session.info.setdefault(_STAGED, [])
            staged.append((origin, topic, message))
            session.info[_DELIVER] = self._deliver
            return
        session.add(OutboxMessage(**_outbox_row(self.cluster, topic, message, origin, now)))

    def _deliver(self, staged: Iterable[tuple[str, str, Message]]) -> None:
        """A private store's committed messages, for their relays."""
        for origin, topic, message in staged:
            self._committed.setdefault(origin, []).append((topic, message))

    def _step(self, session: AsyncSession, decision_id: str, nodes: Iterable[str], phase: Phase, at: datetime, *,
              message: str, detail: dict[str, Any], origin: str) -> None:
        """One step of a decision per node: its timeline entry and its ``DisruptionEvent`` in the outbox, under
        one id (``ebb.contracts.messages.event_id``)."""
        for node in nodes:
            event = DisruptionEvent.step(decision_id, node, phase, message, at)
            session.add(DecisionEvent(decision_id=decision_id, event_id=str(event.id), type=phase, node=node, at=at,
                                      detail=detail))
            self._send(session, TOPIC_DISRUPTION_EVENTS, event, origin, at)

    def outbox_signal(self, origin: str) -> asyncio.Event:
        """An event set after every commit that put a message of ``origin`` in the outbox (by this instance): its
        relay waits on it instead of polling for what this process wrote."""
        return self._signals.setdefault(origin, asyncio.Event())

    def _written(self, origin: str) -> None:
        """Wake the relay of ``origin``: a transaction that may have put messages of it in the outbox committed."""
        signal = self._signals.get(origin)
        if signal is not None:
            signal.set()

    @contextlib.asynccontextmanager
    async def _relay_lock(self, origin: str) -> AsyncIterator[bool]:
        """One relay of ``origin`` at a time per cluster, so that messages go out in their order: a PostgreSQL
        session-level advisory lock (released when the connection closes: a relay that dies frees it), or on SQLite
        a lock of the process (its only writer). Yields False when another relay holds it."""
        if not self._postgres:
            lock = _SQLITE_RELAYS.setdefault((asyncio.get_running_loop(), self.cluster, origin), asyncio.Lock())
            async with lock:
                yield True
            return
        key = f"ebb.outbox/{self.cluster}/{origin}"
        async with self.engine.connect() as connection:
            got = bool(await connection.scalar(text("SELECT pg_try_advisory_lock(hashtext(:key))"), {"key": key}))
            await connection.commit()
            try:
                yield got
            finally:
                if got:
                    await connection.execute(text("SELECT pg_advisory_unlock(hashtext(:key))"), {"key": key})
                    await connection.commit()

    async def relay(self, origin: str, publish: Publish, now: Callable[[], datetime], *, limit: int = 500) -> int:
        """Publish up to ``limit`` unsent messages of ``origin`` in the order they were written (``publish`` a run of
        one topic at a time) and mark them sent; returns how many were sent (0 also when another relay of
        ``origin`` is at work). A failed publish marks the runs before it sent and raises: the rest go out at the
        next call. A relay that dies after a publish and before its mark sends those messages again (at least
        once, under the same ids)."""
        if self.private:
            return await relay_committed(self._committed, origin, publish)
        async with self._relay_lock(origin) as mine:
            if not mine:
                return 0
            # plain connections, not ORM sessions: a relay runs after every write of its origin
            async with self.engine.connect() as connection:
                rows = (await connection.execute(
                    select(OutboxMessage.id, OutboxMessage.topic, OutboxMessage.payload).where(
                        OutboxMessage.cluster == self.cluster, OutboxMessage.origin == origin,
                        OutboxMessage.sent_at.is_(None)).order_by(OutboxMessage.id).limit(limit))).all()
            sent: list[int] = []
            failure: Exception | None = None
            for topic, run in itertools.groupby(rows, key=lambda r: str(r.topic)):
                batch = list(run)
                model = _MESSAGE_OF_TOPIC[topic]
                try:
                    await publish(topic, [model.model_validate(r.payload) for r in batch])
                except Exception as e:
                    failure = e
                    break
                sent += [r.id for r in batch]
            if sent:
                async with self.engine.begin() as connection:
                    await connection.execute(update(OutboxMessage).where(OutboxMessage.id.in_(sent)).values(
                        sent_at=now()))
        if failure is not None:
            raise failure
        return len(sent)

    async def outbox(self, *, unsent: bool = False) -> list[OutboxMessage]:
        """This cluster's outbox, in the order it was written (only what is not sent yet with ``unsent``)."""
        query = select(OutboxMessage).where(OutboxMessage.cluster == self.cluster)
        if unsent:
            query = query.where(OutboxMessage.sent_at.is_(None))
        async with self._sessions() as session:
            return list((await session.scalars(query.order_by(OutboxMessage.id))).all())

    async def purge_outbox(self, sent_before: datetime) -> int:
        """Remove the messages sent before ``sent_before``; returns how many."""
        async with self._sessions() as session, session.begin():
            result = await session.execute(delete(OutboxMessage).where(
                OutboxMessage.cluster == self.cluster, OutboxMessage.sent_at < sent_before))
        return int(getattr(result, "rowcount", 0) or 0)

    # -- the planner's writes ------------------------------------------------------------------------------

    async def propose(self, decision: lifecycle.Decision) -> None:
        """Insert the (proposed) decision, due for validation at its ``approve_at``, with its Proposed step per node
        (timeline and event)."""
        if decision.state is not State.PROPOSED:
            raise lifecycle.IllegalTransition(decision.id, decision.state, State.PROPOSED)
        async with self._sessions() as session, session.begin():
            decisions.create(session, self.cluster, decision, shadow=self.shadow)
            await session.flush()
            self._step(session, decision.id, decision.node_names, "Proposed", decision.created_at,
                       message=decision.text or "proposed", detail={"explanation": decision.text}, origin=PLANNER)
        self._written(PLANNER)

    async def due(self, now: datetime) -> list[lifecycle.Decision]:
        """The proposals of this cluster due for validation at ``now`` (``approve_at`` not after it; a proposal
        without one is due at once), the earliest first, then by id."""
        async with self._sessions() as session:
            rows = list((await session.scalars(select(DecisionRow).where(
                DecisionRow.cluster == self.cluster, DecisionRow.state == State.PROPOSED,
                DecisionRow.shadow.is_(self.shadow),
                or_(DecisionRow.approve_at.is_(None), DecisionRow.approve_at <= now)).order_by(
                DecisionRow.approve_at, DecisionRow.id))).all())
        return [decisions.decision_of(r) for r in rows]

    async def next_due(self) -> datetime | None:
        """When the earliest proposal of this cluster is due for validation (None: there is none)."""
        async with self._sessions() as session:
            rows = (await session.execute(select(DecisionRow.approve_at).where(
                DecisionRow.cluster == self.cluster, DecisionRow.state == State.PROPOSED,
                DecisionRow.shadow.is_(self.shadow)).order_by(
                DecisionRow.approve_at).limit(1))).all()
        if not rows:
            return None
        return utc(rows[0][0]) or datetime.min.replace(tzinfo=UTC)

    async def reject(self, decision_id: str, reason: str, now: datetime) -> bool:
        """proposed -> rejected with ``reason`` and its Rejected step per node (False when the decision was no longer
        proposed)."""
        if self._postgres:  # the row lock (FOR UPDATE) orders it with an approval of the same decision
            async with self._sessions() as session, session.begin():
                done = await self._reject(session, decision_id, reason, now)
        else:  # no row locks: the approvals' lock of the process
            lock = _SQLITE_APPROVALS.setdefault(asyncio.get_running_loop(), asyncio.Lock())
            async with lock, self._sessions() as session, session.begin():
                done = await self._reject(session, decision_id, reason, now)
        self._written(PLANNER)
        return done

    async def _reject(self, session: AsyncSession, decision_id: str, reason: str, now: datetime) -> bool:
        decision = await session.scalar(select(DecisionRow).where(
            DecisionRow.cluster == self.cluster, DecisionRow.id == decision_id).with_for_update())
        if decision is None or not lifecycle.allowed(decisions.state_of(decision), State.REJECTED):
            return False
        decisions.move(decision, State.REJECTED, now, rejected=reason)
        self._step(session, decision_id, decisions.node_names(decision.nodes), "Rejected", now, message=reason,
                   detail={"reason": reason}, origin=PLANNER)
        return True

    async def _lock(self, session: AsyncSession, pools: Iterable[str]) -> None:
        for pool in sorted(set(pools)):
            await session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
                                  {"key": f"ebb.budget_ledger/{self.cluster}/{pool}"})

    async def approve(self, decision_id: str, *, node_pools: Mapping[str, str], reason: str,
                      allowed: Mapping[str, int], counted: Iterable[str], now: datetime) -> Approval:
        """Take budget for the decision's nodes and mark it approved, with its command and its Approved step per
        node in the outbox; or reject it (its Rejected step per node).

        ``node_pools``: node -> NodePool of the command; ``allowed``: NodePool -> disruptions the fresh
        snapshot's budget allows for ``reason``; ``counted``: nodes the snapshot already counts as being
        disrupted (tainted or deleting), whose ledger rows the budget has subtracted already.
        """
        if self._postgres:
            approval = await self._approve(decision_id, node_pools=node_pools, reason=reason, allowed=allowed,
                                           counted=set(counted), now=now)
        else:
            lock = _SQLITE_APPROVALS.setdefault(asyncio.get_running_loop(), asyncio.Lock())
            async with lock:
                approval = await self._approve(decision_id, node_pools=node_pools, reason=reason,
                                               allowed=allowed, counted=set(counted), now=now)
        self._written(PLANNER)
        return approval

    async def _approve(self, decision_id: str, *, node_pools: Mapping[str, str], reason: str,
                       allowed: Mapping[str, int], counted: set[str], now: datetime) -> Approval:
        pools = sorted(set(node_pools.values()))
        async with self._sessions() as session, session.begin():
            if self._postgres:
                await self._lock(session, pools)
            decision = await session.scalar(select(DecisionRow).where(
                DecisionRow.cluster == self.cluster, DecisionRow.id == decision_id).with_for_update())
            if decision is None or not lifecycle.allowed(decisions.state_of(decision), State.APPROVED):
                return Approval(False, f"the decision is {decision.state if decision else 'gone'}")
            why = await self._refusal(session, decision_id, node_pools=node_pools, reason=reason, allowed=allowed,
                                      counted=counted, now=now)
            if why is not None:
                await self._reject(session, decision_id, why, now)
                return Approval(False, why, rejected=True)
            for node, pool in sorted(node_pools.items()) if not self.shadow else ():
                session.add(BudgetLedgerEntry(cluster=self.cluster, nodepool=pool, node=node, decision_id=decision_id,
                                              reason=reason, acquired_at=now,
                                              expires_at=now + timedelta(seconds=self.ledger_ttl)))
            approved = decisions.move(decision, State.APPROVED, now)
            self._send(session, TOPIC_DISRUPTION_COMMANDS,
                       DisruptionCommand.of_decision(approved, id=command_id(decision_id)), PLANNER, now)
            self._step(session, decision_id, approved.node_names, "Approved", now, message="validated and approved",
                       detail={}, origin=PLANNER)
        return Approval(True, decision=approved)

    async def _refusal(self, session: AsyncSession, decision_id: str, *, node_pools: Mapping[str, str], reason: str,
                       allowed: Mapping[str, int], counted: set[str], now: datetime) -> str | None:
        pools = sorted(set(node_pools.values()))
        live = await decisions.live_nodes(session, self.cluster, exclude=decision_id, shadow=self.shadow)
        for node in sorted(node_pools):
            if node in live:
                return f"node {node} already has a live decision {live[node]}"
        # free the rows of ended decisions and of leases that ran out
        finished = select(DecisionRow.id).where(DecisionRow.cluster == self.cluster,
                                                DecisionRow.state.not_in([s.value for s in LIVE]))
        await session.execute(delete(BudgetLedgerEntry).where(
            BudgetLedgerEntry.cluster == self.cluster, BudgetLedgerEntry.nodepool.in_(pools),
            or_(BudgetLedgerEntry.decision_id.in_(finished), BudgetLedgerEntry.decision_id.is_(None),
                BudgetLedgerEntry.expires_at <= now)))
        rows = list((await session.scalars(select(BudgetLedgerEntry).where(
            BudgetLedgerEntry.cluster == self.cluster, BudgetLedgerEntry.nodepool.in_(pools)
        ).with_for_update())).all())
        return ledger_refusal(rows, decision_id=decision_id, node_pools=node_pools, pools=pools, counted=counted,
                              reason=reason, allowed=allowed)

    async def interrupt(self, *, message_id: str, consumer: str, decision: lifecycle.Decision,
                        now: datetime) -> Interrupted:
        """Apply an interruption message once: the node's ``decision`` (method interruption, reason Interrupted,
        action delete, one node; handed over proposed, written approved at once) with its Proposed and Approved
        steps, its command in the outbox and the message id in ``processed_messages`` under ``consumer`` (the
        planner's interruption consumer), in one transaction; a proposal that held the node is rejected in it."""
        if decision.state is not State.PROPOSED or len(decision.nodes) != 1:
            raise ValueError(f"an interruption's decision is handed over proposed and has one node: {decision}")
        if self._postgres:
            outcome = await self._interrupt(message_id=message_id, consumer=consumer, decision=decision, now=now)
        else:
            lock = _SQLITE_APPROVALS.setdefault(asyncio.get_running_loop(), asyncio.Lock())
            async with lock:
                outcome = await self._interrupt(message_id=message_id, consumer=consumer, decision=decision, now=now)
        self._written(PLANNER)
        return outcome

    async def _interrupt(self, *, message_id: str, consumer: str, decision: lifecycle.Decision,
                         now: datetime) -> Interrupted:
        decision_id, [target] = decision.id, decision.nodes
        node, nodepool, explanation = target.name, target.nodepool, decision.explanation
        mark = ProcessedMessage(consumer=consumer, message_id=message_id, topic=TOPIC_INTERRUPTIONS, processed_at=now)
        try:
            async with self._sessions() as session, session.begin():
                if self._postgres:
                    await self._lock(session, [nodepool])
                if (await session.scalar(select(ProcessedMessage.message_id).where(
                        ProcessedMessage.consumer == consumer, ProcessedMessage.message_id == message_id))) is not None:
                    return Interrupted("duplicate")
                if (await session.scalar(select(DecisionRow.id).where(DecisionRow.id == decision_id))) is not None:
                    session.add(mark)
                    return Interrupted("duplicate")
                rejected: list[tuple[str, tuple[str, ...]]] = []
                held = list((await session.scalars(select(DecisionRow).where(
                    DecisionRow.cluster == self.cluster,
                    DecisionRow.id.in_(await decisions.holders(session, self.cluster, node, shadow=self.shadow))
                ).order_by(DecisionRow.created_at, DecisionRow.id).with_for_update())).all())
                for row in held:
                    if not lifecycle.allowed(decisions.state_of(row), State.REJECTED):
                        # the holder removes the node; kept on it, the interruption gets its own decision if the
                        # holder ends without the node gone (``finish``)
                        row.explanation = with_noted(row.explanation or {}, decision)
                        session.add(mark)
                        return Interrupted("busy", holder=row.id)
                for row in held:
                    names = tuple(decisions.node_names(row.nodes))
                    await self._reject(session, row.id, f"node {node} is being interrupted: "
                                       f"{explanation.get('text', '')}"[:1000], now)
                    rejected.append((row.id, names))
                approved = await self._approve_interruption(session, decision, now, PLANNER)
                session.add(mark)
        except IntegrityError:  # another replica applied the same message meanwhile
            return Interrupted("duplicate")
        return Interrupted("created", rejected=tuple(rejected), decision=approved)

    async def _approve_interruption(self, session: AsyncSession, decision: lifecycle.Decision, now: datetime,
                                    origin: str) -> lifecycle.Decision:
        """Write the interruption's ``decision`` (handed over proposed) approved at ``now``, with its Proposed and
        Approved steps and its command in ``origin``'s outbox; the decision as written."""
        [node] = decision.node_names
        _, approved = decisions.create(session, self.cluster, decision, State.APPROVED, now, shadow=self.shadow)
        await session.flush()
        text_ = str(decision.explanation.get("text", ""))
        self._step(session, decision.id, (node,), "Proposed", now, message=text_ or "proposed",
                   detail={"explanation": text_}, origin=origin)
        self._send(session, TOPIC_DISRUPTION_COMMANDS,
                   DisruptionCommand.of_decision(approved, id=command_id(decision.id)), origin, now)
        self._step(session, decision.id, (node,), "Approved", now, message="interruption: approved at once",
                   detail={"interruption": True}, origin=origin)
        return approved

    # -- shadow mode -----------------------------------------------------------------------------------------

    async def record_removal(self, removal: ShadowRemoval) -> bool:
        """Keep a removal a planner in shadow mode saw, once: False when a removal of the same node within
        ``SAME_REMOVAL`` of it is kept already (each replica sees the removal at its own moment, and a new leader
        tells again what the last one wrote; a node's name is not reused that soon)."""
        removal.cluster = self.cluster
        at = removal.removed_at
        try:
            async with self._sessions() as session, session.begin():
                if (await session.scalar(select(ShadowRemoval.node).where(
                        ShadowRemoval.cluster == self.cluster, ShadowRemoval.node == removal.node,
                        ShadowRemoval.removed_at >= at - SAME_REMOVAL,
                        ShadowRemoval.removed_at <= at + SAME_REMOVAL).limit(1))) is not None:
                    return False
                session.add(removal)
        except IntegrityError:  # another replica kept it meanwhile
            return False
        return True

    async def shadow_facts(self, since: datetime, until: datetime) -> tuple[list[lifecycle.Decision],
                                                                           list[ShadowRemoval]]:
        """What the shadow report compares (``ebb.core.shadow``): the shadow decisions created from ``since`` to
        ``until``, and the removals kept in that time, oldest first."""
        async with self._sessions() as session:
            rows = list((await session.scalars(select(DecisionRow).where(
                DecisionRow.cluster == self.cluster, DecisionRow.shadow.is_(True), DecisionRow.created_at >= since,
                DecisionRow.created_at <= until).order_by(DecisionRow.created_at, DecisionRow.id))).all())
            removals = list((await session.scalars(select(ShadowRemoval).where(
                ShadowRemoval.cluster == self.cluster, ShadowRemoval.removed_at >= since,
                ShadowRemoval.removed_at <= until).order_by(ShadowRemoval.removed_at, ShadowRemoval.node))).all())
        for removal in removals:
            removal.removed_at = utc(removal.removed_at) or removal.removed_at
            removal.verdict_at = utc(removal.verdict_at)
        return [decisions.decision_of(r) for r in rows], removals

    async def shadow_report(self, since: datetime, until: datetime) -> ShadowReport:
        """The shadow report of the period (``ebb.core.shadow.compare`` over `shadow_facts`)."""
        decided, removals = await self.shadow_facts(since, until)
        return compare(decided, [removal_of(r) for r in removals], since=since, until=until)

    # -- the executor's writes -----------------------------------------------------------------------------

    def _processed(self, command: DisruptionCommand) -> Any:
        return select(ProcessedMessage.message_id).where(
            ProcessedMessage.consumer == self.consumer, ProcessedMessage.message_id == str(command.id))

    def _mark(self, command: DisruptionCommand, now: datetime) -> ProcessedMessage:
        return ProcessedMessage(consumer=self.consumer, message_id=str(command.id), topic=TOPIC_DISRUPTION_COMMANDS,
                                processed_at=now)

    async def start(self, command: DisruptionCommand, now: datetime) -> tuple[Start, State | None]:
        """Begin executing ``command``; returns what to do and the decision's state (None when the command
        was applied before). A decision the store has no row of (its planner's store is another) is written from
        the command, proposed, approved when the command says and executing now (``decisions.create``)."""
        async with self._sessions() as session, session.begin():
            if (await session.scalar(self._processed(command))) is not None:
                return Start.DUPLICATE, None
            decision = await session.scalar(select(DecisionRow).where(
                DecisionRow.cluster == self.cluster, DecisionRow.id == command.decision_id).with_for_update())
            if decision is None:
                proposal = dataclasses.replace(command.decision(now), state=State.PROPOSED, approved_at=None)
                decisions.create(session, self.cluster, proposal, State.EXECUTING, now,
                                 approved_at=command.approved_at)
                return Start.EXECUTE, State.EXECUTING
            state = decisions.state_of(decision)
            if state in FINISHED:
                session.add(self._mark(command, now))
                return Start.FINISHED, state
            if state is State.EXECUTING:  # resumed after a crash or a retry
                return Start.RESUME, state
            if decision.approved_at is None:
                decision.approved_at = command.approved_at
            decisions.move(decision, State.EXECUTING, now)  # IllegalTransition from proposed: not approved
            return Start.EXECUTE, State.EXECUTING

    async def _new_steps(self, connection: AsyncSession | AsyncConnection,
                         events: Sequence[DisruptionEvent]) -> list[DisruptionEvent]:
        """The executor's ``events`` (steps of a decision it executes) added to the timeline and the outbox, each
        once: a step recorded already (a resumed command reports its steps again, under the same ids) is left
        out of both (``INSERT ... ON CONFLICT DO NOTHING`` on the timeline's unique event id)."""
        if not events:
            return []
        insert = pg_insert if self._postgres else sqlite_insert
        # one statement for any number of steps (executemany: compiled once and cached)
        added = set((await connection.execute(
            insert(DecisionEvent).on_conflict_do_nothing(index_elements=[DecisionEvent.event_id]).returning(
                DecisionEvent.event_id),
            [{"decision_id": e.decision_id, "event_id": str(e.id), "type": e.phase, "node": e.node, "at": e.at,
              "detail": {"message": e.message}} for e in events])).scalars().all())
        new = [e for e in events if str(e.id) in added]
        if new and not self.private:
            await connection.execute(sa_insert(OutboxMessage), [
                _outbox_row(self.cluster, TOPIC_DISRUPTION_EVENTS, e, EXECUTOR, e.at) for e in new])
        return new

    async def record_steps(self, events: Sequence[DisruptionEvent]) -> None:
        """Record the executor's ``events`` (the steps of a decision it executes): each, once, in the decision's
        timeline and in the outbox, in one transaction."""
        async with self.engine.begin() as connection:
            new = await self._new_steps(connection, events)
        if self.private:
            self._deliver((EXECUTOR, TOPIC_DISRUPTION_EVENTS, e) for e in new)
        self._written(EXECUTOR)

    async def finish(self, command: DisruptionCommand, state: State, now: datetime, *,
                     hold_for: float = 0.0, why: str = "", events: Sequence[DisruptionEvent] = ()) -> bool:
        """End the decision in ``state`` (succeeded, rolled_back or failed) with its last steps (``events``: timeline
        and outbox), release its budget_ledger rows and record the command as applied, in one transaction; False
        when the command had been recorded meanwhile (nothing changed). A rolled back or failed decision with
        ``hold_for`` > 0 also puts an automatic hold on each of its nodes for that many seconds, saying ``why``:
        the planner leaves them alone instead of proposing the same failing disruption again at its next pass."""
        state = State(state)
        if state not in ENDS:
            raise ValueError(f"an executed command ends succeeded, rolled_back or failed, not {state}")
        try:
            async with self._sessions() as session, session.begin():
                session.add(self._mark(command, now))
                await session.flush()
                decision = await session.scalar(select(DecisionRow).where(
                    DecisionRow.cluster == self.cluster, DecisionRow.id == command.decision_id).with_for_update())
                if decision is not None and decisions.state_of(decision) not in FINISHED:
                    decisions.move(decision, state, now)
                if decision is not None:
                    for step in await self._new_steps(session, events):
                        if self.private:  # (otherwise in the outbox already)
                            self._send(session, TOPIC_DISRUPTION_EVENTS, step, EXECUTOR, step.at)
                await session.execute(delete(BudgetLedgerEntry).where(
                    BudgetLedgerEntry.cluster == self.cluster, BudgetLedgerEntry.decision_id == command.decision_id))
                if state is not State.SUCCEEDED and hold_for > 0:
                    for node in command.nodes:
                        session.add(automatic_hold(self.cluster, command.decision_id, node, why=why, now=now,
                                                   seconds=hold_for, ended=state))
                if state is not State.SUCCEEDED and decision is not None:
                    # the interruptions that came while it held their nodes: theirs to remove now
                    for interruption in interruptions_to_write(decision.explanation or {}):
                        if (await session.scalar(select(DecisionRow.id).where(
                                DecisionRow.id == interruption.id))) is None:
                            await self._approve_interruption(session, interruption, now, EXECUTOR)
        except IntegrityError:
            return False
        self._written(EXECUTOR)
        return True


#: ``Session.info`` keys of a private store's messages of the transaction, and where they go once it committed
_STAGED: Final = "ebb.outbox.staged"
_DELIVER: Final = "ebb.outbox.deliver"


class _OutboxSession(Session):
    """The store's ORM session: a private store's messages go to its relays once their transaction committed."""


@sa_event.listens_for(_OutboxSession, "after_commit")
def _committed(session: Session) -> None:
    staged = session.info.pop(_STAGED, None)
    deliver = session.info.pop(_DELIVER, None)
    if staged and deliver is not None:
        deliver(staged)


@sa_event.listens_for(_OutboxSession, "after_rollback")
def _rolled_back(session: Session) -> None:
    session.info.pop(_STAGED, None)


def _outbox_row(cluster: str, topic: str, message: Message, origin: str, now: datetime) -> dict[str, Any]:
    """The ``outbox`` row of ``message``, to be published on ``topic`` by ``origin``'s relay."""
    return {"cluster": cluster, "origin": origin, "topic": topic, "message_id": str(message.id),
            "decision_id": getattr(message, "decision_id", None), "payload": message.model_dump(mode="json"),
            "created_at": now}


def removal_of(row: ShadowRemoval) -> Removal:
    """The core's `Removal` of a ``shadow_removals`` row."""
    return Removal(node=row.node, at=utc(row.removed_at) or row.removed_at, by=row.removed_by, reason=row.reason,
                   detail=row.detail, nodepool=row.nodepool, instance_type=row.instance_type, verdict=row.verdict,
                   verdict_inner=row.verdict_inner, verdict_text=row.verdict_text, verdict_at=utc(row.verdict_at),
                   price=None if row.price is None else float(row.price))


def automatic_hold(cluster: str, decision_id: str, node: str, *, why: str, now: datetime, seconds: float,
                   ended: State = State.FAILED) -> Hold:
    """The automatic node hold a failed or rolled back decision leaves behind (its id is derived from decision
    and node)."""
    return Hold(
        id=automatic_hold_id(decision_id, node),
        cluster=cluster,
        scope_kind="node",
        scope=node,
        kind="automatic",
        reason=automatic_hold_reason(decision_id, why, ended),
        created_by="ebb-termination-executor",
        created_at=now,
        expires_at=now + timedelta(seconds=seconds),
    )


def _normalise(row: DecisionRow) -> None:
    """The row's times in UTC (SQLite hands them back naive)."""
    for name in ("created_at", "updated_at", "approved_at", "started_at", "finished_at", "approve_at"):
        setattr(row, name, utc(getattr(row, name)))

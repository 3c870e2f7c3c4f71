"""The one way into the store (docs/architecture.md#store): ``DecisionStore`` reads and writes decisions, their
timelines, the budget ledger, holds and applied message ids, for the consolidation-planner, the
termination-executor and the decisions-api alike (and for the embedded mode, which gives all three one
instance on its SQLite database).

One store serves one cluster: every row it writes carries that cluster's name and every query it runs is
limited to it, so several clusters (or several test runs) can share one database. Rows come back as
detached ORM objects (``expire_on_commit=False``) with their times in UTC (SQLite hands back naive ones):
read their attributes freely, but no session tracks them. Every state change goes through
``ebb.adapters.store.decisions.move``, i.e. the lifecycle's ``ebb.core.decision.transition``.

What each writer relies on:

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
- **start** (executor) moves the decision to ``executing`` (inserting it from the command when the planner
  has not written it); **finish** moves it to ``succeeded``, ``rolled_back`` or ``failed``, records the
  command id in ``processed_messages`` under the store's ``consumer`` and deletes the decision's
  ``budget_ledger`` rows, in one transaction: a command that was applied is never applied again, one whose
  execution was interrupted (crash, stop) is resumed when it is delivered again, and the nodes it disrupted
  stop consuming their NodePool's budget the moment the decision ends (the planner would otherwise free them
  only lazily, at its next approval in the pool, or when their lease runs out).
- **create_hold / delete_hold** (API) and the automatic holds ``finish`` leaves behind; **list_holds** is
  what the planner plans with and the API shows.
- **list_decisions** (API) lists newest first with keyset pagination: the cursor is an opaque, URL-safe
  encoding of the last row's ``(created_at, id)``, so pages stay stable while new decisions are inserted.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import enum
import json
import uuid
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Final, Literal

from sqlalchemy import ColumnElement, and_, cast, delete, exists, func, literal_column, or_, select, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from ebb.adapters.store import decisions
from ebb.adapters.store.decisions import utc
from ebb.adapters.store.migrate import async_url
from ebb.adapters.store.models import BudgetLedgerEntry, DecisionEvent, Hold, ProcessedMessage
from ebb.adapters.store.models import Decision as DecisionRow
from ebb.adapters.store.models import DemandSample as DemandRow
from ebb.contracts import TOPIC_DISRUPTION_COMMANDS, TOPIC_INTERRUPTIONS, DisruptionCommand, DisruptionEvent
from ebb.contracts.messages import Phase, event_id
from ebb.core import decision as lifecycle
from ebb.core.decision import FINISHED, LIVE, State
from ebb.core.model import DemandSample

#: the most decisions one page of :meth:`DecisionStore.list_decisions` holds
MAX_PAGE: Final = 500
#: how an executed command can end (``ebb.core.decision``; docs/services/termination-executor.md)
ENDS: Final = frozenset({State.SUCCEEDED, State.ROLLED_BACK, State.FAILED})
#: the ``processed_messages`` consumer the executor's commands are recorded under, unless told otherwise
EXECUTOR_CONSUMER: Final = "ebb-termination-executor"

#: SQLite has no advisory locks; its writers are serialised, and these serialise approvals in the process (one
#: lock per event loop: an asyncio lock belongs to the loop it first waited on)
_SQLITE_APPROVALS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


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


@dataclass(frozen=True, slots=True)
class DecisionPage:
    items: Sequence[DecisionRow]
    #: the cursor of the next page; None on the last page
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class Approval:
    approved: bool
    #: why not (when not approved)
    reason: str = ""
    #: the decision was rejected by this call (False when it had left the proposed state before)
    rejected: bool = False
    #: the approved decision (when approved)
    decision: lifecycle.Decision | None = None


@dataclass(frozen=True, slots=True)
class Interrupted:
    #: created: the decision was written approved; duplicate: the message was applied before; busy: an
    #: approved or executing decision already takes the node away
    outcome: Literal["created", "duplicate", "busy"]
    #: the live decision holding the node (busy)
    holder: str = ""
    #: proposals rejected to make room: (decision id, its nodes)
    rejected: tuple[tuple[str, tuple[str, ...]], ...] = ()


class Start(enum.Enum):
    #: the command was applied before: do nothing
    DUPLICATE = "duplicate"
    #: the decision is finished already (another command of it ran, or it was rejected): recorded, nothing done
    FINISHED = "finished"
    #: the decision is executing: go ahead
    EXECUTE = "execute"


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
                 ledger_ttl: float = 3600.0) -> None:
        self.engine = engine
        self.cluster = cluster
        #: the ``processed_messages`` consumer :meth:`start` and :meth:`finish` record commands under
        self.consumer = consumer
        #: seconds a budget_ledger row taken by :meth:`approve` is leased for (reclaimable after)
        self.ledger_ttl = ledger_ttl
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)

    @classmethod
    def from_url(cls, url: str, cluster: str = "default", *, consumer: str = EXECUTOR_CONSUMER,
                 ledger_ttl: float = 3600.0, **engine_options: Any) -> DecisionStore:
        """A store on a new engine (``postgresql://`` gets asyncpg, ``sqlite://`` aiosqlite). Nothing
        connects until the first query."""
        return cls(create_async_engine(async_url(url), pool_pre_ping=True, **engine_options), cluster,
                   consumer=consumer, ledger_ttl=ledger_ttl)

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

    async def state(self, decision_id: str) -> State | None:
        """Where the decision stands; None when this cluster has no such decision."""
        async with self._sessions() as session:
            state = await session.scalar(select(DecisionRow.state).where(
                DecisionRow.cluster == self.cluster, DecisionRow.id == decision_id))
        return None if state is None else State(state)

    async def live_nodes(self, exclude: str | None = None, states: Iterable[State] = LIVE) -> dict[str, str]:
        """node -> id of the live decision (``ebb.core.decision.LIVE``, or those ``states``) that holds it."""
        async with self._sessions() as session:
            return await decisions.live_nodes(session, self.cluster, exclude=exclude, states=states)

    async def live_replacements(self, exclude: str | None = None,
                                states: Iterable[State] = LIVE) -> dict[str, str]:
        """replacement name -> id of the live decision (or one in ``states``) that launches it."""
        async with self._sessions() as session:
            return await decisions.live_replacements(session, self.cluster, exclude=exclude, states=states)

    async def approved(self) -> list[DecisionRow]:
        """The decisions of this cluster that are approved and not yet picked up by the executor, oldest
        approval first."""
        async with self._sessions() as session:
            rows = list((await session.scalars(select(DecisionRow).where(
                DecisionRow.cluster == self.cluster, DecisionRow.state == State.APPROVED).order_by(
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

    # -- writing rows as given (fixtures, imports: no lifecycle check) -------------------------------------

    async def add_decision(self, *, decision_id: str, method: str, reason: str, action: str, nodes: list[Any],
                           replacements: list[Any], created_at: datetime, state: State | str = State.PROPOSED,
                           savings: Decimal | float | None = None,
                           explanation: dict[str, Any] | None = None) -> DecisionRow:
        decision = DecisionRow(
            id=decision_id, cluster=self.cluster, method=method, reason=reason, action=action, nodes=nodes,
            replacements=replacements, savings=None if savings is None else Decimal(str(savings)),
            state=State(state).value, explanation=explanation or {}, created_at=created_at, updated_at=created_at)
        async with self._sessions() as session, session.begin():
            session.add(decision)
        return decision

    async def add_decision_event(self, *, decision_id: str, event_id: str, type: str, at: datetime,
                                 node: str | None = None, detail: dict[str, Any] | None = None) -> DecisionEvent:
        event = DecisionEvent(decision_id=decision_id, event_id=event_id, type=type, node=node, at=at,
                              detail=detail or {})
        async with self._sessions() as session, session.begin():
            session.add(event)
        return event

    # -- the planner's writes ------------------------------------------------------------------------------

    async def propose(self, decision: lifecycle.Decision) -> None:
        """Insert the (proposed) decision with a Proposed entry per node in its timeline."""
        if decision.state is not State.PROPOSED:
            raise lifecycle.IllegalTransition(decision.id, decision.state, State.PROPOSED)
        async with self._sessions() as session, session.begin():
            session.add(decisions.row_of(decision, self.cluster))
            await session.flush()
            session.add_all(_events(decision.id, decision.node_names, "Proposed", decision.created_at,
                                    {"explanation": decision.text}))

    async def reject(self, decision_id: str, reason: str, now: datetime) -> bool:
        """proposed -> rejected with ``reason`` (False when the decision was no longer proposed)."""
        async with self._sessions() as session, session.begin():
            return await self._reject(session, decision_id, reason, now)

    async def _reject(self, session: AsyncSession, decision_id: str, reason: str, now: datetime) -> bool:
        decision = await session.scalar(select(DecisionRow).where(
            DecisionRow.cluster == self.cluster, DecisionRow.id == decision_id).with_for_update())
        if decision is None or not lifecycle.allowed(decisions.state_of(decision), State.REJECTED):
            return False
        decisions.move(decision, State.REJECTED, now, rejected=reason)
        session.add_all(_events(decision_id, decisions.node_names(decision.nodes), "Rejected", now,
                                {"reason": reason}))
        return True

    async def reject_orphans(self, reason: str, now: datetime, keep: Iterable[str] = ()) -> list[str]:
        """Reject the proposed decisions of this cluster other than ``keep`` (a new leader's clean-up of
        proposals whose planner stopped before validating them)."""
        kept = set(keep)
        async with self._sessions() as session, session.begin():
            ids = [i for i in (await session.scalars(select(DecisionRow.id).where(
                DecisionRow.cluster == self.cluster, DecisionRow.state == State.PROPOSED))).all() if i not in kept]
            for decision_id in ids:
                await self._reject(session, decision_id, reason, now)
        return ids

    async def _lock(self, session: AsyncSession, pools: Iterable[str]) -> None:
        for pool in sorted(set(pools)):
            await session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
                                  {"key": f"ebb.budget_ledger/{self.cluster}/{pool}"})

    async def approve(self, decision_id: str, *, node_pools: Mapping[str, str], reason: str,
                      allowed: Mapping[str, int], counted: Iterable[str], now: datetime) -> Approval:
        """Take budget for the decision's nodes and mark it approved, or reject it.

        ``node_pools``: node -> NodePool of the command; ``allowed``: NodePool -> disruptions the fresh
        snapshot's budget allows for ``reason``; ``counted``: nodes the snapshot already counts as being
        disrupted (tainted or deleting), whose ledger rows the budget has subtracted already.
        """
        if self._postgres:
            return await self._approve(decision_id, node_pools=node_pools, reason=reason, allowed=allowed,
                                       counted=set(counted), now=now)
        lock = _SQLITE_APPROVALS.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        async with lock:
            return await self._approve(decision_id, node_pools=node_pools, reason=reason, allowed=allowed,
                                       counted=set(counted), now=now)

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
            for node, pool in sorted(node_pools.items()):
                session.add(BudgetLedgerEntry(cluster=self.cluster, nodepool=pool, node=node, decision_id=decision_id,
                                              reason=reason, acquired_at=now,
                                              expires_at=now + timedelta(seconds=self.ledger_ttl)))
            approved = decisions.move(decision, State.APPROVED, now)
            session.add_all(_events(decision_id, approved.node_names, "Approved", now, {}))
        return Approval(True, decision=approved)

    async def _refusal(self, session: AsyncSession, decision_id: str, *, node_pools: Mapping[str, str], reason: str,
                       allowed: Mapping[str, int], counted: set[str], now: datetime) -> str | None:
        pools = sorted(set(node_pools.values()))
        live = await decisions.live_nodes(session, self.cluster, exclude=decision_id)
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
        for row in rows:
            if row.node in node_pools and row.decision_id != decision_id:
                return f"node {row.node} is already in the budget ledger for decision {row.decision_id}"
        for pool in pools:
            used = sum(1 for r in rows if r.nodepool == pool and r.node not in counted)
            need = sum(1 for p in node_pools.values() if p == pool)
            if used + need > allowed.get(pool, 0):
                return (f"the {reason} budget of NodePool {pool} allows {allowed.get(pool, 0)} disruptions; "
                        f"{used} are reserved in the budget ledger and the command needs {need}")
        return None

    async def interrupt(self, *, message_id: str, consumer: str, decision: lifecycle.Decision,
                        now: datetime) -> Interrupted:
        """Apply an interruption message once: the node's ``decision`` (method interruption, reason
        Interrupted, action delete, one node; approved at once) written, with the message id in
        ``processed_messages`` under ``consumer`` (the planner's interruption consumer), in one transaction."""
        if decision.state is not State.APPROVED or len(decision.nodes) != 1:
            raise ValueError(f"an interruption's decision is approved and has one node: {decision}")
        if self._postgres:
            return await self._interrupt(message_id=message_id, consumer=consumer, decision=decision, now=now)
        lock = _SQLITE_APPROVALS.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        async with lock:
            return await self._interrupt(message_id=message_id, consumer=consumer, decision=decision, now=now)

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
                holder = (await decisions.live_nodes(session, self.cluster)).get(node)
                if holder is not None:
                    held = await session.scalar(select(DecisionRow).where(
                        DecisionRow.cluster == self.cluster, DecisionRow.id == holder).with_for_update())
                    if held is not None and not lifecycle.allowed(decisions.state_of(held), State.REJECTED):
                        session.add(mark)
                        return Interrupted("busy", holder=holder)
                    if held is not None:
                        names = tuple(decisions.node_names(held.nodes))
                        await self._reject(session, holder, f"node {node} is being interrupted: "
                                           f"{explanation.get('text', '')}"[:1000], now)
                        rejected.append((holder, names))
                session.add(decisions.row_of(decision, self.cluster))
                await session.flush()
                session.add_all(_events(decision_id, (node,), "Proposed", now,
                                        {"explanation": explanation.get("text", "")}))
                session.add_all(_events(decision_id, (node,), "Approved", now, {"interruption": True}))
                session.add(mark)
        except IntegrityError:  # another replica applied the same message meanwhile
            return Interrupted("duplicate")
        return Interrupted("created", rejected=tuple(rejected))

    # -- the executor's writes -----------------------------------------------------------------------------

    def _processed(self, command: DisruptionCommand) -> Any:
        return select(ProcessedMessage.message_id).where(
            ProcessedMessage.consumer == self.consumer, ProcessedMessage.message_id == str(command.id))

    def _mark(self, command: DisruptionCommand, now: datetime) -> ProcessedMessage:
        return ProcessedMessage(consumer=self.consumer, message_id=str(command.id), topic=TOPIC_DISRUPTION_COMMANDS,
                                processed_at=now)

    async def start(self, command: DisruptionCommand, now: datetime) -> tuple[Start, State | None]:
        """Begin executing ``command``; returns what to do and the decision's state (None when the command
        was applied before)."""
        async with self._sessions() as session, session.begin():
            if (await session.scalar(self._processed(command))) is not None:
                return Start.DUPLICATE, None
            decision = await session.scalar(select(DecisionRow).where(
                DecisionRow.cluster == self.cluster, DecisionRow.id == command.decision_id).with_for_update())
            if decision is None:
                executing = lifecycle.transition(command.decision(now), State.EXECUTING, now)
                session.add(decisions.row_of(executing, self.cluster))
                return Start.EXECUTE, State.EXECUTING
            state = decisions.state_of(decision)
            if state in FINISHED:
                session.add(self._mark(command, now))
                return Start.FINISHED, state
            if state is State.EXECUTING:  # resumed after a crash or a retry
                return Start.EXECUTE, state
            if decision.approved_at is None:
                decision.approved_at = command.approved_at
            decisions.move(decision, State.EXECUTING, now)  # IllegalTransition from proposed: not approved
            return Start.EXECUTE, State.EXECUTING

    async def finish(self, command: DisruptionCommand, state: State, now: datetime, *,
                     hold_for: float = 0.0, why: str = "") -> bool:
        """End the decision in ``state`` (succeeded, rolled_back or failed), release its budget_ledger rows and
        record the command as applied, in one transaction; False when the command had been recorded meanwhile
        (nothing changed). A rolled back or failed decision with ``hold_for`` > 0 also puts an automatic hold
        on each of its nodes for that many seconds, saying ``why``: the planner leaves them alone instead of
        proposing the same failing disruption again at its next pass."""
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
                await session.execute(delete(BudgetLedgerEntry).where(
                    BudgetLedgerEntry.cluster == self.cluster, BudgetLedgerEntry.decision_id == command.decision_id))
                if state is not State.SUCCEEDED and hold_for > 0:
                    for node in command.nodes:
                        session.add(automatic_hold(self.cluster, command.decision_id, node, why=why, now=now,
                                                   seconds=hold_for, ended=state))
        except IntegrityError:
            return False
        return True

    async def record_event(self, event: DisruptionEvent) -> None:
        """Add ``event`` to its decision's timeline (once per event id; an event recorded already, or one of a
        decision that is gone, is left out: the timeline is best effort)."""
        with contextlib.suppress(IntegrityError):
            await self.add_decision_event(decision_id=event.decision_id, event_id=str(event.id), type=event.phase,
                                          node=event.node, at=event.at, detail={"message": event.message})


def automatic_hold(cluster: str, decision_id: str, node: str, *, why: str, now: datetime, seconds: float,
                   ended: State = State.FAILED) -> Hold:
    """The automatic node hold a failed or rolled back decision leaves behind (its id is derived from decision
    and node)."""
    words = "rolled back" if ended is State.ROLLED_BACK else "failed"
    return Hold(
        id=f"auto-{uuid.uuid5(uuid.NAMESPACE_URL, f'ebb:{decision_id}:{node}').hex}",
        cluster=cluster,
        scope_kind="node",
        scope=node,
        kind="automatic",
        reason=f"decision {decision_id} {words}: {why}"[:2000] if why else f"decision {decision_id} {words}",
        created_by="ebb-termination-executor",
        created_at=now,
        expires_at=now + timedelta(seconds=seconds),
    )


def _events(decision_id: str, nodes: Iterable[str], phase: Phase, at: datetime,
            detail: dict[str, Any]) -> list[DecisionEvent]:
    """The timeline entries of one step: one per node, each under the id of the ``DisruptionEvent`` the planner
    publishes for it (``ebb.contracts.messages.event_id``)."""
    return [DecisionEvent(decision_id=decision_id, event_id=str(event_id(decision_id, node, phase)), type=phase,
                          node=node, at=at, detail=detail) for node in nodes]


def _normalise(row: DecisionRow) -> None:
    """The row's times in UTC (SQLite hands them back naive)."""
    for name in ("created_at", "updated_at", "approved_at", "started_at", "finished_at"):
        setattr(row, name, utc(getattr(row, name)))

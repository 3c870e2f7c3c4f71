"""The planner's side of the store (docs/architecture.md#store): decisions, their timelines and the budget ledger.

``approve`` is the one place budget is taken. In one transaction it locks the command's NodePools (a
PostgreSQL transaction-scoped advisory lock per ``(cluster, nodepool)``, taken in name order so two
planners never deadlock; on SQLite, whose writers are serialised anyway, a process-wide lock), frees
ledger rows whose decision ended or whose lease ran out, refuses a node that another live decision or
ledger row already holds, counts the pool's ledger rows against the budget the fresh snapshot allows,
and only then inserts the command's rows and marks the decision approved. No two planners can therefore
approve more than a budget allows, even when both believe they are the leader.

``interrupt`` writes an interruption's decision straight as approved (no validation, no budget, no ledger
rows: interruption ignores budgets) under the same per-NodePool lock, after checking in the same
transaction that the message was not applied before (``processed_messages``, recorded in that transaction)
and that no other live decision holds the node: a *proposed* one is rejected to make room, an approved or
executing one already takes the node away and the interruption adds nothing. ``approved`` lists the
decisions waiting for the executor, for republishing their commands.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import delete, or_, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from ebb.adapters.store import decisions
from ebb.adapters.store.migrate import async_url
from ebb.adapters.store.models import BudgetLedgerEntry, Decision, DecisionEvent, Hold, ProcessedMessage
from ebb.contracts import TOPIC_INTERRUPTIONS
from ebb.contracts.messages import Phase, event_id
from ebb.core import decision as lifecycle
from ebb.core.decision import LIVE, State

#: SQLite has no advisory locks; its writers are serialised, and these serialise approvals in the process (one
#: lock per event loop: an asyncio lock belongs to the loop it first waited on)
_SQLITE_APPROVALS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


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


class PlannerStore:
    """Decisions and budget ledger of one cluster, as the planner writes them."""

    def __init__(self, engine: AsyncEngine, *, cluster: str = "default", ledger_ttl: float = 3600.0) -> None:
        self.engine = engine
        self.cluster = cluster
        self.ledger_ttl = ledger_ttl
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)


    @classmethod
    def from_url(cls, url: str, *, cluster: str = "default", ledger_ttl: float = 3600.0,
                 **engine_options: Any) -> PlannerStore:
        return cls(create_async_engine(async_url(url), pool_pre_ping=True, **engine_options), cluster=cluster,
                   ledger_ttl=ledger_ttl)

    async def close(self) -> None:
        await self.engine.dispose()

    @property
    def _postgres(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    # -- reading -------------------------------------------------------------------------------------------

    async def holds(self, now: datetime) -> list[Hold]:
        query = select(Hold).where(Hold.cluster == self.cluster,
                                   or_(Hold.expires_at.is_(None), Hold.expires_at > now))
        async with self._sessions() as session:
            return list((await session.scalars(query.order_by(Hold.created_at, Hold.id))).all())

    async def live_nodes(self, exclude: str | None = None, states: Iterable[State] = LIVE) -> dict[str, str]:
        """node -> id of the live decision (``ebb.core.decision.LIVE``, or those ``states``) that holds it."""
        async with self._sessions() as session:
            return await decisions.live_nodes(session, self.cluster, exclude=exclude, states=states)

    async def state(self, decision_id: str) -> str | None:
        async with self._sessions() as session:
            return await session.scalar(
                select(Decision.state).where(Decision.cluster == self.cluster, Decision.id == decision_id))

    async def approved(self) -> list[Decision]:
        """The decisions of this cluster that are approved and not yet picked up by the executor."""
        async with self._sessions() as session:
            return list((await session.scalars(select(Decision).where(
                Decision.cluster == self.cluster, Decision.state == State.APPROVED).order_by(
                Decision.approved_at, Decision.id))).all())

    async def processed(self, consumer: str, message_id: str) -> bool:
        async with self._sessions() as session:
            return (await session.scalar(select(ProcessedMessage.message_id).where(
                ProcessedMessage.consumer == consumer, ProcessedMessage.message_id == message_id))) is not None

    async def ledger(self) -> list[BudgetLedgerEntry]:
        async with self._sessions() as session:
            return list((await session.scalars(select(BudgetLedgerEntry).where(
                BudgetLedgerEntry.cluster == self.cluster).order_by(BudgetLedgerEntry.node))).all())

    # -- writing -------------------------------------------------------------------------------------------

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
        decision = await session.scalar(select(Decision).where(
            Decision.cluster == self.cluster, Decision.id == decision_id).with_for_update())
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
            ids = [i for i in (await session.scalars(select(Decision.id).where(
                Decision.cluster == self.cluster, Decision.state == State.PROPOSED))).all() if i not in kept]
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
            decision = await session.scalar(select(Decision).where(
                Decision.cluster == self.cluster, Decision.id == decision_id).with_for_update())
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
        finished = select(Decision.id).where(Decision.cluster == self.cluster,
                                             Decision.state.not_in([s.value for s in LIVE]))
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
        ``processed_messages``, in one transaction."""
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
                if (await session.scalar(select(Decision.id).where(Decision.id == decision_id))) is not None:
                    session.add(mark)
                    return Interrupted("duplicate")
                rejected: list[tuple[str, tuple[str, ...]]] = []
                holder = (await decisions.live_nodes(session, self.cluster)).get(node)
                if holder is not None:
                    held = await session.scalar(select(Decision).where(
                        Decision.cluster == self.cluster, Decision.id == holder).with_for_update())
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


def _events(decision_id: str, nodes: Iterable[str], phase: Phase, at: datetime,
            detail: dict[str, Any]) -> list[DecisionEvent]:
    """The timeline entries of one step: one per node, each under the id of the ``DisruptionEvent`` the planner
    publishes for it (``ebb.contracts.messages.event_id``)."""
    return [DecisionEvent(decision_id=decision_id, event_id=str(event_id(decision_id, node, phase)), type=phase,
                          node=node, at=at, detail=detail) for node in nodes]

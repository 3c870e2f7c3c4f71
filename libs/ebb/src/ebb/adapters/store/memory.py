"""The decision store in memory: ``MemoryStore``, for the embedded mode's runs that keep nothing (a back-test, ``ebb
run`` without ``--database``), without SQLAlchemy or SQLite.

It is ``ebb.adapters.store.decision_store.DecisionStore`` as a private store of one cluster sees it (``Store``,
``ebb.adapters.store.port``), method for method: decisions are made and moved through the lifecycle
(``ebb.core.decision.arrive`` and ``transition``) and read back as a row gives them (``shapes.stored``); the budget
ledger, holds, applied message ids and timelines are kept and answered in the orders the SQL store's queries give;
what a write sends goes to the relays in memory once it is done (a private store's outbox); a shadow store sends
nothing and takes no budget. tests/service/test_decision_store.py runs the same tests on both.

A run on it is the run on SQLite, to the last figure, so it also keeps what the embedded mode's course depends on
besides the answers:

- **where a call yields.** A SQL store's call ends by closing its session, which SQLAlchemy does in a task of its
  own: other tasks run meanwhile (``ebb_embedded.store``). Every call here ends the same way (``_session_ends``),
  after its change is made and its messages handed over, and approvals, rejections and interruptions hold the
  process-wide lock the SQL store holds on SQLite.
- **the write count** (``writes``): the embedded mode knows the store unchanged while the count stands
  (``ebb_embedded.store.WriteCount`` counts the statements that may write). A call counts one where the SQL store
  runs a statement that may write, whether it changed something or not (an approval that frees no ledger row
  still ran its DELETE).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

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
from ebb.adapters.store.shapes import interruptions_to_write, stored, stored_explanation, with_noted
from ebb.contracts import (
    TOPIC_DISRUPTION_COMMANDS,
    TOPIC_DISRUPTION_EVENTS,
    DisruptionCommand,
    DisruptionEvent,
    Message,
)
from ebb.contracts.messages import Phase
from ebb.core import decision as lifecycle
from ebb.core.decision import FINISHED, LIVE, State
from ebb.core.launch import replacement_name
from ebb.core.model import DemandSample

#: the approvals' lock of a loop (``DecisionStore``'s on SQLite: an asyncio lock belongs to the loop it waited on)
_APPROVALS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()
#: the earliest moment: a proposal without ``approve_at`` is due first (SQL sorts NULL first)
_EARLIEST: Final = datetime.min.replace(tzinfo=UTC)


class DuplicateError(ValueError):
    """A write that would make a second row under one key (the SQL store's IntegrityError): nothing was changed."""


async def _nothing() -> None:
    return None


async def _session_ends() -> None:
    """Yield to the loop as a SQL store's call does when its session closes (SQLAlchemy closes it in a task of its
    own and waits for it shielded)."""
    await asyncio.shield(asyncio.create_task(_nothing()))


@dataclass
class MemoryHold:
    """A hold (``models.Hold``'s fields)."""

    id: str
    scope_kind: str
    scope: str
    kind: str
    reason: str
    created_by: str | None
    created_at: datetime
    expires_at: datetime | None
    cluster: str = ""

    def in_force(self, now: datetime) -> bool:
        return self.expires_at is None or self.expires_at > now


@dataclass(frozen=True)
class MemoryEvent:
    """A step of a decision's timeline (``models.DecisionEvent``'s fields)."""

    id: int
    decision_id: str
    event_id: str
    type: str
    node: str | None
    at: datetime
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LedgerEntry:
    """A node consuming its NodePool's budget for a decision (``models.BudgetLedgerEntry``'s fields)."""

    nodepool: str
    node: str
    decision_id: str | None
    reason: str
    acquired_at: datetime
    expires_at: datetime | None


@dataclass
class _Row:
    decision: lifecycle.Decision
    shadow: bool

    @property
    def order(self) -> tuple[datetime, str]:
        return self.decision.created_at, self.decision.id


class MemoryStore:
    """The decision store of one cluster, in this process's memory (see the module's docstring)."""

    def __init__(self, cluster: str = "default", *, consumer: str = EXECUTOR_CONSUMER, ledger_ttl: float = 3600.0,
                 shadow: bool = False) -> None:
        self.cluster = cluster
        self.consumer = consumer
        self.ledger_ttl = ledger_ttl
        self.shadow = shadow
        #: always: the messages a write sends go to the relays in memory (there is no outbox table)
        self.private = True
        #: the number of calls that ran what is a write statement on SQL (call ``revision`` to read it)
        self.writes = 0
        self._decisions: dict[str, _Row] = {}
        self._events: dict[str, list[MemoryEvent]] = {}
        self._event_ids: set[str] = set()
        self._event_seq = itertools.count(1)
        self._ledger: dict[tuple[str, str], LedgerEntry] = {}
        self._holds: dict[str, MemoryHold] = {}
        self._processed: set[tuple[str, str]] = set()
        self._demand: tuple[DemandSample, ...] = ()
        self._removals: list[Any] = []
        self._committed: dict[str, list[tuple[str, Message]]] = {}
        self._signals: dict[str, asyncio.Event] = {}

    def revision(self) -> int:
        """The write count (``ebb_embedded.store.WriteCount``'s meaning)."""
        return self.writes

    async def close(self) -> None:
        return None

    async def ping(self) -> None:
        return None

    # -- reading -----------------------------------------------------------------------------------------------

    def _rows(self, states: Iterable[State | str] | None = None, *, shadow: bool | None = None) -> list[_Row]:
        wanted = None if states is None else {State(s) for s in states}
        return [r for r in self._decisions.values()
                if (wanted is None or r.decision.state in wanted) and (shadow is None or r.shadow is shadow)]

    async def state(self, decision_id: str) -> State | None:
        row = self._decisions.get(decision_id)
        await _session_ends()
        return None if row is None else row.decision.state

    async def live_nodes(self, exclude: str | None = None, states: Iterable[State] = LIVE) -> dict[str, str]:
        held = self._live_nodes(exclude, states)
        await _session_ends()
        return held

    async def live_replacements(self, exclude: str | None = None,
                                states: Iterable[State] = LIVE) -> dict[str, str]:
        launched: dict[str, str] = {}
        for row in sorted(self._rows(states, shadow=self.shadow), key=lambda r: r.order):
            if row.decision.id != exclude:
                for index, replacement in enumerate(row.decision.replacements):
                    if replacement.nodepool:
                        launched[replacement_name(row.decision.id, index, replacement.nodepool)] = row.decision.id
        await _session_ends()
        return launched

    async def approved(self) -> list[lifecycle.Decision]:
        rows = sorted(self._rows([State.APPROVED], shadow=self.shadow),
                      key=lambda r: (r.decision.approved_at or _EARLIEST, r.decision.id))
        await _session_ends()
        return [r.decision for r in rows]

    async def due(self, now: datetime) -> list[lifecycle.Decision]:
        rows = [r for r in self._rows([State.PROPOSED], shadow=self.shadow)
                if r.decision.approve_at is None or r.decision.approve_at <= now]
        rows.sort(key=lambda r: (r.decision.approve_at or _EARLIEST, r.decision.id))
        await _session_ends()
        return [r.decision for r in rows]

    async def next_due(self) -> datetime | None:
        moments = [r.decision.approve_at or _EARLIEST for r in self._rows([State.PROPOSED], shadow=self.shadow)]
        await _session_ends()
        return min(moments) if moments else None

    async def get_decision(self, decision_id: str) -> tuple[lifecycle.Decision, list[MemoryEvent]] | None:
        row = self._decisions.get(decision_id)
        events = sorted(self._events.get(decision_id, []), key=lambda e: (e.at, e.id))
        await _session_ends()
        return None if row is None else (row.decision, events)

    async def decision_counts(self) -> dict[tuple[str, str], int]:
        counts: dict[tuple[str, str], int] = {}
        for row in self._decisions.values():
            key = (row.decision.state.value, row.decision.method)
            counts[key] = counts.get(key, 0) + 1
        await _session_ends()
        return counts

    async def top_savings(self, limit: int, states: Iterable[str]) -> list[lifecycle.Decision]:
        if limit <= 0:
            return []
        rows = sorted(self._rows(list(states)), key=lambda r: (-r.decision.savings, *r.order))
        await _session_ends()
        return [r.decision for r in rows[:limit]]

    async def ledger(self) -> list[LedgerEntry]:
        entries = sorted(self._ledger.values(), key=lambda e: (e.node, e.nodepool))
        await _session_ends()
        return entries

    # -- the planner's demand record, holds ------------------------------------------------------------------

    async def save_demand(self, samples: Iterable[DemandSample]) -> None:
        self._demand = tuple(sorted(samples, key=lambda s: (s.at, s.pool)))
        self.writes += 1
        await _session_ends()

    async def load_demand(self) -> tuple[DemandSample, ...]:
        await _session_ends()
        return self._demand

    async def create_hold(self, *, scope_kind: str, scope: str, reason: str, expires_at: datetime | None,
                          now: datetime, kind: str = "manual", created_by: str | None = None,
                          hold_id: str | None = None) -> MemoryHold:
        hold = MemoryHold(id=hold_id or f"hold-{uuid.uuid4().hex}", scope_kind=scope_kind, scope=scope, kind=kind,
                          reason=reason, created_by=created_by, created_at=now, expires_at=expires_at,
                          cluster=self.cluster)
        self.writes += 1
        if hold.id in self._holds:
            await _session_ends()
            raise DuplicateError(f"hold {hold.id} exists")
        self._holds[hold.id] = hold
        await _session_ends()
        return hold

    async def list_holds(self, now: datetime, *, include_expired: bool = False) -> list[MemoryHold]:
        holds = sorted((h for h in self._holds.values() if include_expired or h.in_force(now)),
                       key=lambda h: (h.created_at, h.id))
        await _session_ends()
        return holds

    async def delete_hold(self, hold_id: str) -> bool:
        self.writes += 1
        found = self._holds.pop(hold_id, None) is not None
        await _session_ends()
        return found

    # -- the outbox (in memory) ----------------------------------------------------------------------------------

    def _deliver(self, staged: Iterable[tuple[str, str, Message]]) -> None:
        for origin, topic, message in staged:
            self._committed.setdefault(origin, []).append((topic, message))

    def outbox_signal(self, origin: str) -> asyncio.Event:
        return self._signals.setdefault(origin, asyncio.Event())

    def _written(self, origin: str) -> None:
        signal = self._signals.get(origin)
        if signal is not None:
            signal.set()

    async def relay(self, origin: str, publish: Publish, now: Callable[[], datetime], *, limit: int = 500) -> int:
        """What the writes of ``origin`` sent, in order (a run per topic); a failed publish keeps the rest."""
        return await relay_committed(self._committed, origin, publish)

    async def purge_outbox(self, sent_before: datetime) -> int:
        self.writes += 1
        await _session_ends()
        return 0

    # -- writes: a transaction is its staged messages, delivered when it is done --------------------------------

    def _send(self, staged: list[tuple[str, str, Message]], topic: str, message: Message, origin: str) -> None:
        if not self.shadow:
            staged.append((origin, topic, message))

    def _add_event(self, decision_id: str, event_id: str, phase: str, *, node: str | None, at: datetime,
                   detail: dict[str, Any]) -> None:
        if event_id in self._event_ids:
            raise DuplicateError(f"event {event_id} exists")
        self._event_ids.add(event_id)
        self._events.setdefault(decision_id, []).append(
            MemoryEvent(next(self._event_seq), decision_id, event_id, phase, node, at, stored_explanation(detail)))

    def _step(self, staged: list[tuple[str, str, Message]], decision_id: str, nodes: Iterable[str], phase: Phase,
              at: datetime, *, message: str, detail: dict[str, Any], origin: str) -> None:
        for node in nodes:
            event = DisruptionEvent.step(decision_id, node, phase, message, at)
            self._add_event(decision_id, str(event.id), phase, node=node, at=at, detail=detail)
            self._send(staged, TOPIC_DISRUPTION_EVENTS, event, origin)

    def _create(self, proposal: lifecycle.Decision, to: State = State.PROPOSED, at: datetime | None = None, *,
                approved_at: datetime | None = None) -> lifecycle.Decision:
        """``decisions.create``: the proposal moved to ``to`` and kept as read back; the moved decision."""
        decision = lifecycle.arrive(proposal, to, at or proposal.created_at, approved_at=approved_at)
        self._decisions[decision.id] = _Row(stored(decision), self.shadow)
        return decision

    def _move(self, row: _Row, to: State, at: datetime, **explanation: Any) -> lifecycle.Decision:
        """``decisions.move``: the row's decision moved (IllegalTransition leaves it as it was)."""
        moved = lifecycle.transition(row.decision, to, at, **explanation)
        row.decision = dataclasses.replace(moved, explanation=stored_explanation(moved.explanation))
        return moved

    async def _commit(self, staged: list[tuple[str, str, Message]]) -> None:
        self._deliver(staged)
        await _session_ends()

    def _approvals(self) -> asyncio.Lock:
        return _APPROVALS.setdefault(asyncio.get_running_loop(), asyncio.Lock())

    async def propose(self, decision: lifecycle.Decision) -> None:
        if decision.state is not State.PROPOSED:
            raise lifecycle.IllegalTransition(decision.id, decision.state, State.PROPOSED)
        self.writes += 1
        staged: list[tuple[str, str, Message]] = []
        if decision.id in self._decisions:
            await _session_ends()
            raise DuplicateError(f"decision {decision.id} exists")
        self._create(decision)
        self._step(staged, decision.id, decision.node_names, "Proposed", decision.created_at,
                   message=decision.text or "proposed", detail={"explanation": decision.text}, origin=PLANNER)
        await self._commit(staged)
        self._written(PLANNER)

    def _reject(self, staged: list[tuple[str, str, Message]], decision_id: str, reason: str, now: datetime) -> bool:
        row = self._decisions.get(decision_id)
        if row is None or not lifecycle.allowed(row.decision.state, State.REJECTED):
            return False
        self.writes += 1
        self._move(row, State.REJECTED, now, rejected=reason)
        self._step(staged, decision_id, row.decision.node_names, "Rejected", now, message=reason,
                   detail={"reason": reason}, origin=PLANNER)
        return True

    async def reject(self, decision_id: str, reason: str, now: datetime) -> bool:
        async with self._approvals():
            staged: list[tuple[str, str, Message]] = []
            done = self._reject(staged, decision_id, reason, now)
            await self._commit(staged)
        self._written(PLANNER)
        return done

    async def approve(self, decision_id: str, *, node_pools: Mapping[str, str], reason: str,
                      allowed: Mapping[str, int], counted: Iterable[str], now: datetime) -> Approval:
        async with self._approvals():
            staged: list[tuple[str, str, Message]] = []
            approval = self._approve(staged, decision_id, node_pools=node_pools, reason=reason, allowed=allowed,
                                     counted=set(counted), now=now)
            await self._commit(staged)
        self._written(PLANNER)
        return approval

    def _approve(self, staged: list[tuple[str, str, Message]], decision_id: str, *, node_pools: Mapping[str, str],
                 reason: str, allowed: Mapping[str, int], counted: set[str], now: datetime) -> Approval:
        row = self._decisions.get(decision_id)
        if row is None or not lifecycle.allowed(row.decision.state, State.APPROVED):
            return Approval(False, f"the decision is {row.decision.state.value if row else 'gone'}")
        why = self._refusal(decision_id, node_pools=node_pools, reason=reason, allowed=allowed, counted=counted,
                            now=now)
        if why is not None:
            self._reject(staged, decision_id, why, now)
            return Approval(False, why, rejected=True)
        for node, pool in sorted(node_pools.items()) if not self.shadow else ():
            self._ledger[(pool, node)] = LedgerEntry(pool, node, decision_id, reason, now,
                                                     now + timedelta(seconds=self.ledger_ttl))
        approved = self._move(row, State.APPROVED, now)
        self._send(staged, TOPIC_DISRUPTION_COMMANDS,
                   DisruptionCommand.of_decision(approved, id=command_id(decision_id)), PLANNER)
        self._step(staged, decision_id, approved.node_names, "Approved", now, message="validated and approved",
                   detail={}, origin=PLANNER)
        return Approval(True, decision=approved)

    def _live_nodes(self, exclude: str | None = None, states: Iterable[State] = LIVE) -> dict[str, str]:
        """Node -> the id of the decision of ``states`` (of this store's kind, shadow or not) that holds it, the
        latest written last; ``exclude``'s nodes left out."""
        held: dict[str, str] = {}
        for row in sorted(self._rows(states, shadow=self.shadow), key=lambda r: r.order):
            if row.decision.id != exclude:
                for name in row.decision.node_names:
                    if name:
                        held[name] = row.decision.id
        return held

    def _refusal(self, decision_id: str, *, node_pools: Mapping[str, str], reason: str, allowed: Mapping[str, int],
                 counted: set[str], now: datetime) -> str | None:
        pools = sorted(set(node_pools.values()))
        live = self._live_nodes(exclude=decision_id)
        for node in sorted(node_pools):
            if node in live:
                return f"node {node} already has a live decision {live[node]}"
        self.writes += 1  # the DELETE of the rows of ended decisions and of leases that ran out
        for key, entry in list(self._ledger.items()):
            holder = self._decisions.get(entry.decision_id) if entry.decision_id is not None else None
            ended = entry.decision_id is None or (holder is not None and holder.decision.state not in LIVE)
            if entry.nodepool in pools and (ended or (entry.expires_at is not None and entry.expires_at <= now)):
                del self._ledger[key]
        rows = sorted((e for e in self._ledger.values() if e.nodepool in pools), key=lambda e: (e.nodepool, e.node))
        return ledger_refusal(rows, decision_id=decision_id, node_pools=node_pools, pools=pools, counted=counted,
                              reason=reason, allowed=allowed)

    async def interrupt(self, *, message_id: str, consumer: str, decision: lifecycle.Decision,
                        now: datetime) -> Interrupted:
        if decision.state is not State.PROPOSED or len(decision.nodes) != 1:
            raise ValueError(f"an interruption's decision is handed over proposed and has one node: {decision}")
        async with self._approvals():
            staged: list[tuple[str, str, Message]] = []
            outcome = self._interrupt(staged, message_id=message_id, consumer=consumer, decision=decision, now=now)
            await self._commit(staged)
        self._written(PLANNER)
        return outcome

    def _interrupt(self, staged: list[tuple[str, str, Message]], *, message_id: str, consumer: str,
                   decision: lifecycle.Decision, now: datetime) -> Interrupted:
        decision_id, [target] = decision.id, decision.nodes
        node, explanation = target.name, decision.explanation
        mark = (consumer, message_id)
        if mark in self._processed:
            return Interrupted("duplicate")
        self.writes += 1
        if decision_id in self._decisions:
            self._processed.add(mark)
            return Interrupted("duplicate")
        rejected: list[tuple[str, tuple[str, ...]]] = []
        # every live decision holding the node (two when a pass proposed from a view read before another took it)
        held = [r for r in sorted(self._rows(LIVE, shadow=self.shadow), key=lambda r: r.order)
                if node in r.decision.node_names]
        for row in held:
            if not lifecycle.allowed(row.decision.state, State.REJECTED):
                # kept on the holder: its own decision if the holder ends without the node gone (``finish``)
                row.decision = dataclasses.replace(
                    row.decision, explanation=stored_explanation(with_noted(row.decision.explanation, decision)))
                self._processed.add(mark)
                return Interrupted("busy", holder=row.decision.id)
        for row in held:
            names = tuple(n for n in row.decision.node_names if n)
            self._reject(staged, row.decision.id,
                         f"node {node} is being interrupted: {explanation.get('text', '')}"[:1000], now)
            rejected.append((row.decision.id, names))
        approved = self._approve_interruption(staged, decision, now, PLANNER)
        self._processed.add(mark)
        return Interrupted("created", rejected=tuple(rejected), decision=approved)

    def _approve_interruption(self, staged: list[tuple[str, str, Message]], decision: lifecycle.Decision,
                              now: datetime, origin: str) -> lifecycle.Decision:
        """``DecisionStore._approve_interruption``: the interruption's decision written approved, its steps and
        command staged."""
        [node] = decision.node_names
        approved = self._create(decision, State.APPROVED, now)
        text = str(decision.explanation.get("text", ""))
        self._step(staged, decision.id, (node,), "Proposed", now, message=text or "proposed",
                   detail={"explanation": text}, origin=origin)
        self._send(staged, TOPIC_DISRUPTION_COMMANDS,
                   DisruptionCommand.of_decision(approved, id=command_id(decision.id)), origin)
        self._step(staged, decision.id, (node,), "Approved", now, message="interruption: approved at once",
                   detail={"interruption": True}, origin=origin)
        return approved

    async def record_removal(self, removal: Any) -> bool:
        """Keep a removal a shadow planner saw, once per node within ``SAME_REMOVAL`` of it."""
        at = removal.removed_at
        self.writes += 1
        seen = any(r.node == removal.node and abs(r.removed_at - at) <= SAME_REMOVAL for r in self._removals)
        if not seen:
            removal.cluster = self.cluster
            self._removals.append(removal)
        await _session_ends()
        return not seen

    # -- the executor's writes -------------------------------------------------------------------------------

    async def start(self, command: DisruptionCommand, now: datetime) -> tuple[Start, State | None]:
        mark = (self.consumer, str(command.id))
        answer = self._start(command, now, mark)
        await _session_ends()
        return answer

    def _start(self, command: DisruptionCommand, now: datetime, mark: tuple[str, str]) -> tuple[Start, State | None]:
        if mark in self._processed:
            return Start.DUPLICATE, None
        row = self._decisions.get(command.decision_id)
        if row is None:
            self.writes += 1
            proposal = dataclasses.replace(command.decision(now), state=State.PROPOSED, approved_at=None)
            self._create(proposal, State.EXECUTING, now, approved_at=command.approved_at)
            return Start.EXECUTE, State.EXECUTING
        state = row.decision.state
        if state in FINISHED:
            self.writes += 1
            self._processed.add(mark)
            return Start.FINISHED, state
        if state is State.EXECUTING:
            return Start.RESUME, state
        if row.decision.approved_at is None:
            row.decision = dataclasses.replace(row.decision, approved_at=command.approved_at)
        self._move(row, State.EXECUTING, now)
        self.writes += 1
        return Start.EXECUTE, State.EXECUTING

    def _new_steps(self, events: Sequence[DisruptionEvent]) -> list[DisruptionEvent]:
        if not events:
            return []
        self.writes += 1
        new: list[DisruptionEvent] = []
        for e in events:
            if str(e.id) not in self._event_ids:
                self._add_event(e.decision_id, str(e.id), e.phase, node=e.node, at=e.at, detail={"message": e.message})
                new.append(e)
        return new

    async def record_steps(self, events: Sequence[DisruptionEvent]) -> None:
        new = self._new_steps(events)
        await _session_ends()
        self._deliver((EXECUTOR, TOPIC_DISRUPTION_EVENTS, e) for e in new)
        self._written(EXECUTOR)

    async def finish(self, command: DisruptionCommand, state: State, now: datetime, *,
                     hold_for: float = 0.0, why: str = "", events: Sequence[DisruptionEvent] = ()) -> bool:
        state = State(state)
        if state not in ENDS:
            raise ValueError(f"an executed command ends succeeded, rolled_back or failed, not {state}")
        mark = (self.consumer, str(command.id))
        self.writes += 1
        holds = [MemoryHold(id=automatic_hold_id(command.decision_id, node), scope_kind="node", scope=node,
                            kind="automatic", reason=automatic_hold_reason(command.decision_id, why, state),
                            created_by="ebb-termination-executor", created_at=now,
                            expires_at=now + timedelta(seconds=hold_for), cluster=self.cluster)
                 for node in command.nodes] if state is not State.SUCCEEDED and hold_for > 0 else []
        if mark in self._processed or any(h.id in self._holds for h in holds):
            await _session_ends()
            return False
        self._processed.add(mark)
        staged: list[tuple[str, str, Message]] = []
        row = self._decisions.get(command.decision_id)
        if row is not None and row.decision.state not in FINISHED:
            self._move(row, state, now)
        if row is not None:
            for step in self._new_steps(events):
                self._send(staged, TOPIC_DISRUPTION_EVENTS, step, EXECUTOR)
        for key in [k for k, e in self._ledger.items() if e.decision_id == command.decision_id]:
            del self._ledger[key]
        for hold in holds:
            self._holds[hold.id] = hold
        if state is not State.SUCCEEDED and row is not None:
            # the interruptions that came while it held their nodes: theirs to remove now
            for interruption in interruptions_to_write(row.decision.explanation):
                if interruption.id not in self._decisions:
                    self._approve_interruption(staged, interruption, now, EXECUTOR)
        await self._commit(staged)
        self._written(EXECUTOR)
        return True

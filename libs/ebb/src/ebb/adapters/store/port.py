"""What the services need of the decision store, without a database: ``Store``, the methods the
consolidation-planner, the termination-executor, their outbox relays and the embedded mode call, with the values
its writes answer with and the names and ids every store shares.

Two classes are a ``Store``: ``ebb.adapters.store.decision_store.DecisionStore`` (SQLAlchemy, on PostgreSQL or
SQLite: the distributed mode, ``ebb run --database``, the decisions-api) and ``ebb.adapters.store.memory.MemoryStore``
(the embedded mode's runs that keep nothing: a back-test throws its decisions away). The services import this module
and only their composition roots the SQL store, so the embedded mode imports no SQLAlchemy when it runs on memory.
The two are held to one behaviour by the same tests (tests/service/test_decision_store.py), and a back-test's result
is the same on either (tests/service/test_backtest_stores.py).
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Final, Literal, Protocol

from ebb.contracts import DisruptionCommand, DisruptionEvent, Message
from ebb.core import decision as lifecycle
from ebb.core.decision import LIVE, State
from ebb.core.model import DemandSample

if TYPE_CHECKING:
    from ebb.adapters.store.models import ShadowRemoval

#: how an executed command can end (``ebb.core.decision``; docs/services/termination-executor.md)
ENDS: Final = frozenset({State.SUCCEEDED, State.ROLLED_BACK, State.FAILED})
#: the ``processed_messages`` consumer the executor's commands are recorded under, unless told otherwise
EXECUTOR_CONSUMER: Final = "ebb-termination-executor"
#: the ``outbox.origin`` of the messages the consolidation-planner's writes send (commands, Proposed, Approved,
#: Rejected), published by its relay
PLANNER: Final = "consolidation-planner"
#: the ``outbox.origin`` of the termination-executor's steps (Tainted, ..., Terminated), published by its relay
EXECUTOR: Final = "termination-executor"
#: the namespace of command ids: uuid5(COMMANDS, decision id)
COMMANDS: Final = uuid.UUID("6f1c2e4a-9b1d-5c3e-8a7f-0e6b5d4c3b2a")

#: two removals of one node this close are one removal seen twice (``Store.record_removal``)
SAME_REMOVAL: Final = timedelta(hours=1)

#: publish a run of messages on a topic, in order (``Bus.publish_many``)
Publish = Callable[[str, Sequence[Message]], Awaitable[None]]


async def relay_committed(committed: dict[str, list[tuple[str, Message]]], origin: str, publish: Publish) -> int:
    """``relay`` of a store that keeps its committed messages in memory (the memory store, a private SQL store):
    what the writes of ``origin`` sent, in order, a run per topic; a failed publish keeps the rest, in order,
    ahead of what was committed meanwhile."""
    queue = committed.get(origin)
    if not queue:
        return 0
    committed[origin] = []
    sent = 0
    for topic, run in itertools.groupby(queue, key=lambda item: item[0]):
        batch = [message for _, message in run]
        try:
            await publish(topic, batch)
        except Exception:
            committed[origin] = queue[sent:] + committed[origin]
            raise
        sent += len(batch)
    return sent


def command_id(decision_id: str) -> uuid.UUID:
    """The command id of a decision: the same on every publish, so the executor applies it once."""
    return uuid.uuid5(COMMANDS, decision_id)


def automatic_hold_id(decision_id: str, node: str) -> str:
    """The id of the automatic hold a failed or rolled back decision leaves on one of its nodes."""
    return f"auto-{uuid.uuid5(uuid.NAMESPACE_URL, f'ebb:{decision_id}:{node}').hex}"


def automatic_hold_reason(decision_id: str, why: str, ended: State) -> str:
    """What the automatic hold of a failed or rolled back decision says."""
    words = "rolled back" if ended is State.ROLLED_BACK else "failed"
    return f"decision {decision_id} {words}: {why}"[:2000] if why else f"decision {decision_id} {words}"


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
    #: the decision as written (created)
    decision: lifecycle.Decision | None = None


class Start(enum.Enum):
    #: the command was applied before: do nothing
    DUPLICATE = "duplicate"
    #: the decision is finished already (another command of it ran, or it was rejected): recorded, nothing done
    FINISHED = "finished"
    #: the decision is executing now: go ahead
    EXECUTE = "execute"
    #: the decision was executing already (a crash, a retry or a redelivery cut its command short): go on from where
    #: it stopped
    RESUME = "resume"


class HoldRow(Protocol):
    """A hold as a store gives it back (``models.Hold``, or the memory store's)."""

    @property
    def id(self) -> str: ...
    @property
    def scope_kind(self) -> str: ...
    @property
    def scope(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def created_by(self) -> str | None: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def expires_at(self) -> datetime | None: ...

    def in_force(self, now: datetime) -> bool: ...


class LedgerRow(Protocol):
    """A budget ledger entry as a store reads it (``models.BudgetLedgerEntry``, or the memory store's)."""

    @property
    def nodepool(self) -> str: ...
    @property
    def node(self) -> str: ...
    @property
    def decision_id(self) -> str | None: ...


def ledger_refusal(rows: Iterable[LedgerRow], *, decision_id: str, node_pools: Mapping[str, str],
                   pools: Iterable[str], counted: set[str], reason: str, allowed: Mapping[str, int]) -> str | None:
    """Why the budget ledger's ``rows`` (the live entries of ``pools``, expired and finished ones removed) refuse
    ``decision_id`` its nodes (``node_pools``: node -> NodePool), or None: a node already held for another decision,
    or a NodePool whose ``reason`` budget (``allowed``) the reserved entries (those of nodes not ``counted`` in it
    already) and the command's nodes would exceed. The first refusal in ``rows``' order, then ``pools``'."""
    rows = list(rows)
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


class Store(Protocol):
    """The decision store of one cluster as the planner, the executor, their relays and the embedded mode use it
    (``DecisionStore`` documents each method)."""

    cluster: str
    shadow: bool

    # the planner's reads
    async def live_nodes(self, exclude: str | None = None, states: Iterable[State] = LIVE) -> dict[str, str]: ...
    async def live_replacements(self, exclude: str | None = None,
                                states: Iterable[State] = LIVE) -> dict[str, str]: ...
    async def list_holds(self, now: datetime, *, include_expired: bool = False) -> Sequence[HoldRow]: ...
    async def due(self, now: datetime) -> list[lifecycle.Decision]: ...
    async def next_due(self) -> datetime | None: ...
    async def load_demand(self) -> tuple[DemandSample, ...]: ...
    async def save_demand(self, samples: Iterable[DemandSample]) -> None: ...

    # the planner's writes
    async def propose(self, decision: lifecycle.Decision) -> None: ...
    async def reject(self, decision_id: str, reason: str, now: datetime) -> bool: ...
    async def approve(self, decision_id: str, *, node_pools: Mapping[str, str], reason: str,
                      allowed: Mapping[str, int], counted: Iterable[str], now: datetime) -> Approval: ...
    async def interrupt(self, *, message_id: str, consumer: str, decision: lifecycle.Decision,
                        now: datetime) -> Interrupted: ...
    async def record_removal(self, removal: ShadowRemoval) -> bool: ...

    # the executor's writes
    async def start(self, command: DisruptionCommand, now: datetime) -> tuple[Start, State | None]: ...
    async def record_steps(self, events: Sequence[DisruptionEvent]) -> None: ...
    async def finish(self, command: DisruptionCommand, state: State, now: datetime, *,
                     hold_for: float = 0.0, why: str = "", events: Sequence[DisruptionEvent] = ()) -> bool: ...

    # the outbox's relays
    def outbox_signal(self, origin: str) -> asyncio.Event: ...
    async def relay(self, origin: str, publish: Publish, now: Callable[[], datetime], *, limit: int = 500) -> int: ...
    async def purge_outbox(self, sent_before: datetime) -> int: ...

    # the embedded mode's figures
    async def decision_counts(self) -> dict[tuple[str, str], int]: ...
    async def top_savings(self, limit: int, states: Iterable[str]) -> list[lifecycle.Decision]: ...

"""The executor's side of the store (docs/architecture.md#store): a decision's state and the ids of applied commands.

``start`` moves the decision to ``executing`` (inserting it from the command when the planner has not
written it); ``finish`` moves it to ``succeeded``, ``rolled_back`` or ``failed`` and records the command id in
``processed_messages`` in the same transaction, so a command that was applied is never applied again,
and one whose execution was interrupted (crash, stop) is resumed when it is delivered again. That
transaction also deletes the decision's ``budget_ledger`` rows: the nodes it disrupted stop consuming their
NodePool's budget the moment the decision ends (the planner would otherwise free them only lazily, at its
next approval in the pool, or when their lease runs out).
``record_event`` adds a published event to the decision's timeline (``decision_events``). Every move is
checked against the lifecycle (``ebb.core.decision``) through ``ebb.adapters.store.decisions``.
"""

from __future__ import annotations

import enum
import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

from ebb.adapters.store import decisions
from ebb.adapters.store.migrate import async_url
from ebb.adapters.store.models import BudgetLedgerEntry, Decision, DecisionEvent, Hold, ProcessedMessage
from ebb.contracts import TOPIC_DISRUPTION_COMMANDS, DisruptionCommand, DisruptionEvent
from ebb.core import decision as lifecycle
from ebb.core.decision import FINISHED, State

#: how an executed command can end (``ebb.core.decision``; docs/services/termination-executor.md)
ENDS = frozenset({State.SUCCEEDED, State.ROLLED_BACK, State.FAILED})


class Start(enum.Enum):
    #: the command was applied before: do nothing
    DUPLICATE = "duplicate"
    #: the decision is finished already (another command of it ran, or it was rejected): recorded, nothing done
    FINISHED = "finished"
    #: the decision is executing: go ahead
    EXECUTE = "execute"


class ExecutorStore:
    """Decisions of one cluster, as the termination-executor changes them."""

    def __init__(self, engine: AsyncEngine, *, cluster: str = "default", consumer: str = "ebb-termination-executor"):
        self.engine = engine
        self.cluster = cluster
        self.consumer = consumer
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)

    @classmethod
    def from_url(cls, url: str, *, cluster: str = "default", consumer: str = "ebb-termination-executor",
                 **engine_options: Any) -> ExecutorStore:
        return cls(create_async_engine(async_url(url), pool_pre_ping=True, **engine_options), cluster=cluster,
                   consumer=consumer)

    async def close(self) -> None:
        await self.engine.dispose()

    def _processed(self, command: DisruptionCommand) -> Any:
        return select(ProcessedMessage.message_id).where(
            ProcessedMessage.consumer == self.consumer, ProcessedMessage.message_id == str(command.id)
        )

    def _mark(self, command: DisruptionCommand, now: datetime) -> ProcessedMessage:
        return ProcessedMessage(
            consumer=self.consumer, message_id=str(command.id), topic=TOPIC_DISRUPTION_COMMANDS, processed_at=now
        )

    async def start(self, command: DisruptionCommand, now: datetime) -> tuple[Start, str]:
        """Begin executing ``command``; returns what to do and the decision's state."""
        async with self._sessions() as session, session.begin():
            if (await session.scalar(self._processed(command))) is not None:
                return Start.DUPLICATE, "processed"
            decision = await session.scalar(
                select(Decision)
                .where(Decision.cluster == self.cluster, Decision.id == command.decision_id)
                .with_for_update()
            )
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
                decision = await session.scalar(
                    select(Decision)
                    .where(Decision.cluster == self.cluster, Decision.id == command.decision_id)
                    .with_for_update()
                )
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
        """Add ``event`` to its decision's timeline (once per event id)."""
        try:
            async with self._sessions() as session, session.begin():
                session.add(
                    DecisionEvent(
                        decision_id=event.decision_id,
                        event_id=str(event.id),
                        type=event.phase,
                        node=event.node,
                        at=event.at,
                        detail={"message": event.message},
                    )
                )
        except IntegrityError:
            pass  # recorded already (or the decision is gone): the timeline is best effort

    async def state(self, decision_id: str) -> State | None:
        async with self._sessions() as session:
            state = await session.scalar(
                select(Decision.state).where(Decision.cluster == self.cluster, Decision.id == decision_id)
            )
        return None if state is None else State(state)


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


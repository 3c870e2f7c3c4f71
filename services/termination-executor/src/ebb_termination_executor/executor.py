"""The handler of ``ebb.disruption.commands``: one approved ``DisruptionCommand`` → taint, drain, delete.

For a delete: every node is tainted ``karpenter.sh/disrupted:NoSchedule`` (``Tainted``), then drained
through the Eviction API one node after the other (``Evicted``), and only when all are drained deleted
(``Terminated``); the decision ends ``succeeded``. A node that cannot be drained (a pod that would not
go within the eviction deadline) → ``Failed`` on that node, every tainted node untainted
(``RolledBack``), the decision ends ``failed``. A command with replacements is ``Failed`` at once
("replacement launching not implemented"): nothing is tainted. A failed decision leaves an automatic
hold on its nodes (``failure_hold_seconds``, default 15 min), so the planner does not propose the same
failing disruption at its next pass; the hold is in every explanation of those nodes meanwhile.

Idempotency: the command id goes into ``processed_messages`` in the transaction that ends the decision
(``ExecutorStore.finish``); a redelivered command that was applied does nothing. Other errors (the API
server, the database) propagate, so the bus retries the handler; every step is idempotent, so a retry
or a redelivery after a crash resumes where the previous attempt stopped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import structlog

from ebb.adapters.bus import Bus, Delivery, PoisonMessage
from ebb.adapters.kube.drain import Drainer, DrainFailed
from ebb.contracts import TOPIC_DISRUPTION_EVENTS, DisruptionCommand, DisruptionEvent
from ebb.contracts.messages import Phase
from ebb_termination_executor.metrics import Metrics
from ebb_termination_executor.store import ExecutorStore, Start

log = structlog.get_logger("ebb_termination_executor")

REPLACEMENTS_UNSUPPORTED = "replacement launching not implemented"


def utcnow() -> datetime:
    return datetime.now(UTC)


class Stopped(Exception):
    """The service is stopping: the command is left uncommitted and resumed after the restart."""


def stop_aware_sleep(stop: asyncio.Event) -> Callable[[float], Awaitable[None]]:
    """An ``asyncio.sleep`` that raises ``Stopped`` as soon as ``stop`` is set."""

    async def sleep(delay: float) -> None:
        if stop.is_set():
            raise Stopped
        try:
            await asyncio.wait_for(stop.wait(), timeout=delay)
        except TimeoutError:
            return
        raise Stopped

    return sleep


class Executor:
    """Executes commands; counts what it did."""

    def __init__(
        self,
        bus: Bus,
        store: ExecutorStore,
        drainer: Drainer,
        *,
        clock: Callable[[], datetime] = utcnow,
        failure_hold: float = 0.0,
        metrics: Metrics | None = None,
    ) -> None:
        self.bus = bus
        self.metrics = metrics or Metrics()
        #: seconds a failed decision's nodes are held (an automatic hold; 0: none)
        self.failure_hold = failure_hold
        self.store = store
        self.drainer = drainer
        self.clock = clock
        self.succeeded = 0
        self.failed = 0
        self.duplicates = 0

    async def handle(self, delivery: Delivery) -> None:
        command = delivery.message
        if not isinstance(command, DisruptionCommand):
            raise PoisonMessage(f"not a DisruptionCommand: {type(command).__name__}")
        await self.execute(command)

    async def emit(self, command: DisruptionCommand, node: str, phase: Phase, message: str) -> None:
        event = DisruptionEvent(
            decision_id=command.decision_id, node=node, phase=phase, message=message[:4096], at=self.clock()
        )
        await self.store.record_event(event)
        await self.bus.publish(TOPIC_DISRUPTION_EVENTS, event)
        log.info("disruption event", decision_id=command.decision_id, node=node, phase=phase, message=message)

    async def execute(self, command: DisruptionCommand) -> str:
        """Apply ``command``; returns the outcome: succeeded, failed, duplicate or finished."""
        bound = log.bind(command=str(command.id), decision_id=command.decision_id, nodes=list(command.nodes))
        start, state = await self.store.start(command, self.clock())
        if start is Start.DUPLICATE:
            self.duplicates += 1
            bound.info("command applied before: nothing to do")
            return "duplicate"
        if start is Start.FINISHED:
            bound.info("decision already finished: nothing to do", state=state)
            return "finished"
        bound.info("executing", method=command.method, reason=command.reason, action=command.action)

        if command.replacements:
            for node in command.nodes:
                await self.emit(command, node, "Failed", REPLACEMENTS_UNSUPPORTED)
            return await self._finish(command, "failed", REPLACEMENTS_UNSUPPORTED)

        started = time.monotonic()
        tainted: list[str] = []
        for node in command.nodes:
            added = await self.drainer.taint(node)
            if added is None:
                continue  # already gone: reported Terminated below
            tainted.append(node)
            await self.emit(command, node, "Tainted",
                            "tainted karpenter.sh/disrupted:NoSchedule" if added else "already tainted")
        for node in tainted:
            try:
                report = await self.drainer.drain(node)
            except DrainFailed as e:
                await self.emit(command, node, "Failed", f"drain failed: {e}")
                await self._roll_back(command, tainted)
                return await self._finish(command, "failed", f"drain of {node} failed: {e}")
            skipped = ", ".join(f"{pod} ({why})" for pod, why in sorted(report.skipped.items()))
            await self.emit(
                command, node, "Evicted",
                f"evicted {len(report.evicted)} pod(s) after {report.blocked} refusal(s)"
                + (f"; left alone: {skipped}" if skipped else ""),
            )
        for node in command.nodes:
            existed = await self.drainer.delete_node(node)
            if existed:
                self.metrics.termination_duration.labels(nodepool=command.node_pool).observe(
                    time.monotonic() - started)
            await self.emit(command, node, "Terminated", "node deleted" if existed else "node already gone")
        return await self._finish(command, "succeeded")

    async def _roll_back(self, command: DisruptionCommand, tainted: list[str]) -> None:
        for node in tainted:
            removed = await self.drainer.untaint(node)
            if removed is None:
                continue
            await self.emit(command, node, "RolledBack", "untainted karpenter.sh/disrupted:NoSchedule")

    async def _finish(self, command: DisruptionCommand, state: str, why: str = "") -> str:
        assert state in ("succeeded", "failed")
        recorded = await self.store.finish(command, "succeeded" if state == "succeeded" else "failed", self.clock(),
                                           hold_for=self.failure_hold, why=why)
        self.metrics.commands.labels(method=command.method, outcome=state).inc()
        if state == "succeeded":
            self.succeeded += 1
        else:
            self.failed += 1
        log.info("command finished", command=str(command.id), decision_id=command.decision_id, state=state,
                 recorded=recorded)
        return state

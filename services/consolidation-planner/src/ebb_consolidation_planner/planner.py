"""The planner's handlers: cluster objects in, validated and budgeted disruption commands out.

``Planner.handle`` applies ebb.cluster.objects records to a ``SnapshotStore`` and wakes the loop;
``Planner.run`` runs an engine pass (``ebb.core.engine.run_pass``) at most every ``debounce`` seconds after
a change and at least every ``interval`` seconds, but only while this replica is the leader. Active holds
from the store are merged into the snapshot, so holds made over REST take effect.

Each command of a pass becomes a decision row (state proposed, with explanation, nodes, replacements and
savings) and a Proposed event per node. After ``validation_delay`` seconds the command is re-validated
(``ebb.core.validation.validate``) against the then-current snapshot: a stale command is rejected with the
reason; a valid one takes its budget in the ledger (``PlannerStore.approve``), is approved, published on
ebb.disruption.commands (keyed by NodePool) and announced by an Approved event per node. A node that already
has a live decision (proposed, approved, executing) is never proposed or approved again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import structlog

from ebb.adapters.bus import Bus, Delivery
from ebb.adapters.live import live_snapshot
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.contracts import (
    TOPIC_DISRUPTION_COMMANDS,
    TOPIC_DISRUPTION_EVENTS,
    ClusterObject,
    DisruptionCommand,
    DisruptionEvent,
)
from ebb.core.cluster import ClusterView
from ebb.core.engine import PassResult, run_pass
from ebb.core.methods.base import Command, EngineOptions
from ebb.core.model import REASONS, TAINT_DISRUPTED, Snapshot
from ebb.core.validation import validate
from ebb_consolidation_planner.leader import Leadership
from ebb_consolidation_planner.metrics import Metrics
from ebb_consolidation_planner.store import PlannerStore

log = structlog.get_logger("ebb_consolidation_planner")

ORPHANED = "the planner that proposed it stopped before validating it"


def utcnow() -> datetime:
    return datetime.now(UTC)


class Planner:
    def __init__(
        self,
        bus: Bus,
        objects: SnapshotStore,
        store: PlannerStore,
        leader: Leadership,
        *,
        metrics: Metrics | None = None,
        debounce: float = 1.0,
        interval: float = 10.0,
        validation_delay: float = 15.0,
        options: EngineOptions | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.bus = bus
        self.objects = objects
        self.store = store
        self.leader = leader
        self.metrics = metrics or Metrics()
        self.debounce = debounce
        self.interval = interval
        self.validation_delay = validation_delay
        self.options = options or EngineOptions()
        self.clock = clock
        self.changed = asyncio.Event()
        self._stop = asyncio.Event()
        #: decision id -> its validation task
        self._pending: dict[str, asyncio.Task[None]] = {}
        self._pending_nodes: dict[str, str] = {}
        self.passes = 0
        self.proposed = 0
        self.approved = 0
        self.rejected = 0

    # -- input --------------------------------------------------------------------------------------------

    async def handle(self, delivery: Delivery) -> None:
        """A bus handler for ebb.cluster.objects: apply the object, wake the loop when state changed."""
        if isinstance(delivery.message, ClusterObject) and self.objects.apply(delivery.message):
            self.changed.set()

    # -- the loop -----------------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Plan on changes (debounced) and every ``interval`` seconds while leader, until ``stop``."""
        self._stop = stop
        last = -float("inf")
        leading = False
        tick = min(0.2, self.interval)
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(_first(self.changed, stop), timeout=tick)
                if stop.is_set():
                    break
                if not self.leader.is_leader:
                    if leading:
                        log.info("not the leader any more: planning stopped")
                    leading = False
                    continue
                since = time.monotonic() - last
                if leading and not (self.changed.is_set() and since >= self.debounce) and since < self.interval:
                    continue
                if not leading:
                    leading = True
                    orphans = await self.store.reject_orphans(ORPHANED, self.clock(), keep=self._pending)
                    if orphans:
                        log.info("orphaned proposals rejected", decisions=orphans)
                self.changed.clear()
                last = time.monotonic()
                try:
                    await self.plan_once()
                except Exception as e:  # the database is away, ...: try again on the next pass
                    log.warning("planning pass failed", error=repr(e))
        finally:
            tasks = list(self._pending.values())
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def current_snapshot(self, now: datetime, *, validating: str | None = None) -> Snapshot:
        """The cluster objects' snapshot with the store's active holds merged in, and the nodes of other live
        decisions marked as being disrupted (tainted karpenter.sh/disrupted, as the executor will): they are
        neither candidates nor destinations and count against their pool's budget. For the pass, every live
        decision counts; when ``validating`` a decision, only the approved and executing ones (a proposal
        does not take budget until it is approved: the ledger settles that)."""
        if validating is None:
            busy = set(await self.store.live_nodes()) | set(self._pending_nodes)
        else:
            busy = set(await self.store.live_nodes(exclude=validating, states=("approved", "executing")))
        return live_snapshot(self.objects.snapshot(), holds=await self.store.holds(now), busy=busy)

    async def plan_once(self) -> PassResult | None:
        """One pass: propose the pass's commands whose nodes are free; None when the snapshot is invalid."""
        started = time.perf_counter()
        now = self.clock()
        try:
            snapshot = await self.current_snapshot(now)
        except ValueError as e:  # SnapshotError: an invalid object; plan again once it is fixed
            log.warning("cannot build the snapshot; no pass", error=str(e))
            return None
        view, result = await asyncio.to_thread(self._pass, snapshot, now)
        self.metrics.evaluation_duration.observe(time.perf_counter() - started)
        self._observe(view, result)
        self.passes += 1
        live = await self.store.live_nodes()
        for command in result.commands:
            busy = [n for n in command.nodes if n in live or n in self._pending_nodes]
            if busy:
                log.info("command skipped: its nodes have live decisions", method=command.method, nodes=command.nodes,
                         busy=busy)
                continue
            await self._propose(command, view, now)
        return result

    def _pass(self, snapshot: Snapshot, now: datetime) -> tuple[ClusterView, PassResult]:
        view = ClusterView.build(snapshot, now)
        return view, run_pass(view, self.options)

    def _observe(self, view: ClusterView, result: PassResult) -> None:
        for reason in REASONS:
            consolidation = reason in ("Empty", "Underutilized")
            eligible = sum(1 for name in view.nodes if view.blocked_reason(name, consolidation) is None)
            self.metrics.eligible_nodes.labels(reason=reason).set(eligible)
        for row in result.budgets:
            self.metrics.allowed_disruptions.labels(nodepool=row.nodepool, reason=row.reason).set(row.allowed)

    # -- one command --------------------------------------------------------------------------------------

    async def _propose(self, command: Command, view: ClusterView, now: datetime) -> str:
        decision_id = f"dec-{uuid.uuid4().hex}"
        pools = {n: view.nodes[n].nodepool or "" for n in command.nodes}
        bound = log.bind(decision_id=decision_id)
        await self.store.propose(
            decision_id=decision_id, method=command.method, reason=command.reason, action=command.action,
            nodes=[{"name": n, "nodePool": pools[n], "instanceType": view.nodes[n].instance_type}
                   for n in command.nodes],
            replacements=[{"nodePool": r.nodepool, "instanceTypes": list(r.instance_types),
                           "capacityType": r.capacity_type, "zones": list(r.zones), "price": r.price}
                          for r in command.replacements],
            savings=command.savings, explanation={"text": command.explanation}, now=now)
        self.proposed += 1
        bound.info("decision proposed", method=command.method, reason=command.reason, action=command.action,
                   nodes=list(command.nodes), savings_per_hour=round(command.savings, 6),
                   explanation=command.explanation)
        await self._events(decision_id, command.nodes, phase="Proposed", message=command.explanation or "proposed",
                           now=now, bound=bound)
        for n in command.nodes:
            self._pending_nodes[n] = decision_id
        task = asyncio.create_task(self._validate_later(decision_id, command, pools), name=decision_id)
        self._pending[decision_id] = task
        task.add_done_callback(lambda _t: self._forget(decision_id, command.nodes))
        return decision_id

    def _forget(self, decision_id: str, nodes: tuple[str, ...]) -> None:
        self._pending.pop(decision_id, None)
        for n in nodes:
            if self._pending_nodes.get(n) == decision_id:
                del self._pending_nodes[n]

    async def _validate_later(self, decision_id: str, command: Command, pools: dict[str, str]) -> None:
        bound = log.bind(decision_id=decision_id)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=self.validation_delay)
        if self._stop.is_set():
            return  # left proposed: the next leader rejects it as orphaned
        try:
            await self._decide(decision_id, command, pools, bound)
        except Exception as e:
            bound.error("validating the decision failed", error=repr(e))
            with contextlib.suppress(Exception):
                await self._rejected(decision_id, command, f"validation failed: {e!r}"[:1000], self.clock(), bound)

    async def _decide(self, decision_id: str, command: Command, pools: dict[str, str], bound: Any) -> None:
        now = self.clock()
        if not self.leader.is_leader:
            await self._rejected(decision_id, command, "the planner lost its leadership before validating", now,
                                 bound)
            return
        snapshot = await self.current_snapshot(now, validating=decision_id)
        why = await asyncio.to_thread(validate, command, snapshot, now, self.options)
        if why is not None:
            await self._rejected(decision_id, command, why, now, bound)
            return
        view = ClusterView.build(snapshot, now)
        allowed = {p: view.budgets[(p, command.reason)].allowed for p in set(pools.values())
                   if (p, command.reason) in view.budgets}
        counted = {n.name for n in snapshot.nodes if n.deleting or any(t.key == TAINT_DISRUPTED for t in n.taints)}
        approval = await self.store.approve(decision_id, node_pools=pools, reason=command.reason, allowed=allowed,
                                            counted=counted, now=now)
        if not approval.approved and not approval.rejected:
            bound.info("decision left alone: it is no longer proposed", why=approval.reason)
            return
        if not approval.approved:
            self.rejected += 1
            self.metrics.decided("rejected", command.reason, command.method)
            bound.info("decision rejected", reason=approval.reason)
            await self._events(decision_id, command.nodes, phase="Rejected", message=approval.reason,
                           now=now, bound=bound)
            return
        self.approved += 1
        self.metrics.decided(command.action, command.reason, command.method)
        wire = DisruptionCommand.from_command(command, decision_id=decision_id, node_pool=pools[command.nodes[0]],
                                              approved_at=now)
        await self._publish_command(wire, bound)
        bound.info("decision approved", method=command.method, nodes=list(command.nodes), command_id=str(wire.id))
        await self._events(decision_id, command.nodes, phase="Approved", message="validated and approved",
                           now=now, bound=bound)

    async def _rejected(self, decision_id: str, command: Command, why: str, now: datetime, bound: Any) -> None:
        if await self.store.reject(decision_id, why, now):
            self.rejected += 1
            self.metrics.decided("rejected", command.reason, command.method)
            bound.info("decision rejected", reason=why)
            await self._events(decision_id, command.nodes, phase="Rejected", message=why,
                           now=now, bound=bound)

    async def _publish_command(self, wire: DisruptionCommand, bound: Any) -> None:
        delay = 0.2
        for attempt in range(6):
            try:
                await self.bus.publish(TOPIC_DISRUPTION_COMMANDS, wire)
                return
            except Exception as e:
                bound.warning("publishing the command failed", attempt=attempt + 1, error=repr(e))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        raise RuntimeError("the approved command could not be published")

    async def _events(self, decision_id: str, nodes: tuple[str, ...], *, phase: Any, message: str, now: datetime,
                      bound: Any) -> None:
        for node in nodes:
            try:
                await self.bus.publish(TOPIC_DISRUPTION_EVENTS, DisruptionEvent(
                    decision_id=decision_id, node=node, phase=phase, message=message[:4096], at=now))
            except Exception as e:  # events are for subscribers; the store has the timeline
                bound.warning("publishing an event failed", phase=phase, node=node, error=repr(e))


async def _first(*events: asyncio.Event) -> None:
    waiters = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()

"""The drift-detector's handlers: cluster objects in, finding changes out.

``Detector.handle`` applies ebb.cluster.objects records to a ``SnapshotStore`` and wakes the recompute
loop; ``Detector.run`` recomputes the findings (``ebb.core.findings``) at most every ``debounce``
seconds after a change and at least every ``resync`` seconds (time alone expires nodes and makes them
stable), publishes what changed as NodeFinding / NodeFindingCleared on ebb.node.findings (keyed by
node), and keeps the ``ebb.sh/drifted`` annotation of each Node in line with its Drifted finding.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

import structlog

from ebb.adapters.bus import Bus, Delivery
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.contracts import TOPIC_NODE_FINDINGS, ClusterObject, ContractError, NodeFinding, NodeFindingCleared
from ebb.core.findings import Change, Finding, Findings, diff, findings

log = structlog.get_logger("ebb_drift_detector")

ANNOTATION_DRIFTED = "ebb.sh/drifted"


class NodeAnnotator(Protocol):
    async def set_drifted(self, node: str, reason: str | None) -> None:
        """Set the node's ebb.sh/drifted annotation to ``reason``, or remove it (None); a node that is
        gone is not an error."""
        ...


def utcnow() -> datetime:
    return datetime.now(UTC)


class Detector:
    def __init__(
        self,
        bus: Bus,
        store: SnapshotStore,
        *,
        annotator: NodeAnnotator | None = None,
        debounce: float = 2.0,
        resync: float = 30.0,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.bus = bus
        self.store = store
        self.annotator = annotator
        self.debounce = debounce
        self.resync = resync
        self.clock = clock
        self.changed = asyncio.Event()
        #: the findings last published
        self.current: Findings = {}
        #: when each published finding was first seen, for those the snapshot gives no time
        self._first_seen: dict[tuple[str, str], datetime] = {}
        #: the ebb.sh/drifted value last written per node (None: removed)
        self._annotated: dict[str, str | None] = {}
        self.passes = 0
        self.raised = 0
        self.cleared = 0

    # -- input --------------------------------------------------------------------------------------------

    async def handle(self, delivery: Delivery) -> None:
        """A bus handler for ebb.cluster.objects: apply the object, wake the loop when state changed."""
        if isinstance(delivery.message, ClusterObject) and self.store.apply(delivery.message):
            self.changed.set()

    # -- the loop -----------------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Recompute on changes (debounced) and every ``resync`` seconds until ``stop`` is set."""
        last = -float("inf")
        while not stop.is_set():
            await _wait_any(self.changed, stop, seconds=self.resync)
            if stop.is_set():
                break
            wait = last + self.debounce - time.monotonic()
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=wait)
                if stop.is_set():
                    break
            self.changed.clear()
            last = time.monotonic()
            await self.recompute()

    async def recompute(self) -> list[Change]:
        """One pass: findings of the current snapshot, changes published, annotations updated."""
        try:
            snapshot = self.store.snapshot()
        except Exception as e:  # an invalid object: keep the last findings until it is fixed
            log.warning("cannot build the snapshot; findings unchanged", error=str(e))
            return []
        now = self.clock()
        current = findings(snapshot, now)
        changes = diff(self.current, current)
        published = 0
        try:
            for change in changes:
                await self._publish(change, now)
                published += 1
        except Exception as e:
            # at least once: the unpublished changes are published again on the next pass
            log.warning("publishing findings failed; retrying on the next pass", error=repr(e))
            self.changed.set()
            applied = changes[:published]
            self._apply(applied)
            return applied
        self.current = current
        self.passes += 1
        if changes:
            log.info("findings changed", raised=sum(not c.cleared for c in changes),
                     cleared=sum(c.cleared for c in changes), nodes=len(current))
        await self._annotate(snapshot_nodes={n.name: n.annotations.get(ANNOTATION_DRIFTED)
                                             for n in snapshot.nodes})
        return changes

    def _apply(self, changes: list[Change]) -> None:
        """Record a part of a pass's changes as published."""
        for change in changes:
            f = change.finding
            held = [x for x in self.current.get(f.node, []) if x.kind != f.kind]
            if not change.cleared:
                held.append(f)
            if held:
                self.current[f.node] = held
            else:
                self.current.pop(f.node, None)

    async def _publish(self, change: Change, now: datetime) -> None:
        f = change.finding
        key = (f.node, f.kind)
        try:
            if change.cleared:
                await self.bus.publish(TOPIC_NODE_FINDINGS, NodeFindingCleared(node=f.node, finding=f.kind, at=now))
                self._first_seen.pop(key, None)
                self.cleared += 1
                log.info("finding cleared", node=f.node, finding=f.kind)
            else:
                since = f.since or self._first_seen.setdefault(key, now)
                await self.bus.publish(TOPIC_NODE_FINDINGS,
                                       NodeFinding(node=f.node, finding=f.kind, reason=f.reason[:4096], since=since))
                self.raised += 1
                log.info("finding raised", node=f.node, finding=f.kind, reason=f.reason, since=since.isoformat())
        except (ContractError, ValueError) as e:  # e.g. a node name the contract refuses: never publishable
            log.error("finding not publishable; skipped", node=f.node, finding=f.kind, error=str(e))

    async def _annotate(self, snapshot_nodes: dict[str, str | None]) -> None:
        """Bring ebb.sh/drifted on every node in line with its Drifted finding."""
        if self.annotator is None:
            return
        for node, held in snapshot_nodes.items():
            want = _drift_reason(self.current.get(node, []))
            have = self._annotated.get(node, held)
            if want == have:
                continue
            try:
                await self.annotator.set_drifted(node, want)
            except Exception as e:
                log.warning("cannot annotate the node; retrying on the next pass", node=node, error=repr(e))
                continue
            self._annotated[node] = want
            log.info("node annotated" if want else "node annotation removed", node=node,
                     annotation=ANNOTATION_DRIFTED)
        for gone in set(self._annotated) - set(snapshot_nodes):
            del self._annotated[gone]


def _drift_reason(node_findings: list[Finding]) -> str | None:
    return next((f.reason for f in node_findings if f.kind == "Drifted"), None)


async def _wait_any(event: asyncio.Event, stop: asyncio.Event, *, seconds: float) -> None:
    waiters = [asyncio.create_task(event.wait()), asyncio.create_task(stop.wait())]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()

"""What a planner in shadow mode keeps beside its shadow decisions (docs/shadow.md): the node removals another
disrupter makes, each with ebb's own verdict on the node before the removal began, for the shadow report
(``ebb.core.shadow``).

`ShadowWatch` follows the Nodes and NodeClaims the planner consumes with an ``ebb.core.recording.Recorder`` (who
removed a node and why: the disruption taint, the NodeClaim's ``DisruptionReason``), and after each computed pass
keeps every node's verdict (a command's node: ``disrupt``; else the cause the pass gave, with the cause it
qualifies) as long as nobody is disrupting the node yet, so the verdict kept at a removal is ebb's before
Karpenter's taint. Each removal the recorder tells is written once (``DecisionStore.record_removal``). It reads
only what the planner consumes and writes only to the store: nothing here talks to the cluster.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import structlog

from ebb.adapters.snapshot_store import SnapshotStore
from ebb.adapters.store.port import Store
from ebb.contracts import ClusterObject
from ebb.core.cluster import ClusterView
from ebb.core.engine import PassResult
from ebb.core.recording import Recorder
from ebb.core.shadow import DISRUPT, deciding_inner

log = structlog.get_logger("ebb_consolidation_planner")

#: the kinds whose changes tell a node's removal and who made it
WATCHED = frozenset({"Node", "NodeClaim"})


@dataclass(frozen=True, slots=True)
class Verdict:
    """ebb's verdict on one node at one pass."""

    at: datetime
    kind: str
    inner: str
    text: str
    price: float | None


class ShadowWatch:
    """The removals and verdicts of a planner in shadow mode (see the module)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.recorder: Recorder | None = None
        #: node -> ebb's verdict at the last pass that saw it not being disrupted
        self.verdicts: dict[str, Verdict] = {}
        #: (node, seconds after the recorder's start) of the removals written
        self._written: set[tuple[str, float]] = set()
        #: removals written (a count for the log and tests)
        self.removals = 0

    def observe(self, message: ClusterObject, objects: SnapshotStore, now: datetime) -> None:
        """One record of ebb.cluster.objects, before ``objects`` applies it (the recorder's starting state is the
        objects as they were before the first record it sees)."""
        if message.kind not in WATCHED:
            return
        if self.recorder is None:
            documents = [o for o in objects.objects() if o.get("kind") in WATCHED]
            self.recorder = Recorder(start=now, documents=documents)
        self.recorder.observe(now, message.kind, message.namespace, message.name, message.object)

    def keep_verdicts(self, view: ClusterView, result: PassResult) -> None:
        """The pass's verdict on every node nobody is disrupting yet."""
        commanded: dict[str, str] = {}
        for command in result.commands:
            for name in command.nodes:
                commanded[name] = f"{command.method} ({command.reason}): {command.explanation}"
        blocked = {b.node: b for b in result.blocked}
        for node in view.snapshot.nodes:
            if node.deleting or node.being_disrupted:
                continue
            price = view.price.get(node.name)
            if node.name in commanded:
                self.verdicts[node.name] = Verdict(result.now, DISRUPT, "", commanded[node.name][:1000], price)
            elif node.name in blocked:
                b = blocked[node.name]
                self.verdicts[node.name] = Verdict(result.now, str(b.cause.kind), deciding_inner(b.cause),
                                                   str(b.reason)[:1000], price)

    async def write_removals(self, now: datetime) -> int:
        """Write the removals the recorder told since the last call, each with its node's kept verdict; returns how
        many were written."""
        if self.recorder is None:
            return 0
        from ebb.adapters.store.models import ShadowRemoval  # its row: imported where a shadow planner writes one
        trace = self.recorder.trace(now, name="shadow")
        written = 0
        for change in trace.observed:
            if change.change != "removed" or (change.node, change.at) in self._written:
                continue
            verdict = self.verdicts.get(change.node)
            removal = ShadowRemoval(
                node=change.node, removed_at=self.recorder.start + timedelta(seconds=change.at),
                nodepool=change.nodepool, instance_type=change.instance_type, removed_by=change.by,
                reason=change.reason[:64], detail=change.detail,
                verdict=verdict.kind if verdict else "", verdict_inner=verdict.inner if verdict else "",
                verdict_text=verdict.text if verdict else "", verdict_at=verdict.at if verdict else None,
                price=Decimal(str(round(verdict.price, 6))) if verdict and verdict.price is not None else None)
            if await self.store.record_removal(removal):
                written += 1
                log.info("shadow: a removal by another disrupter", node=change.node, by=change.by,
                         reason=change.reason, ebb_verdict=removal.verdict or None)
            self._written.add((change.node, change.at))
            self.verdicts.pop(change.node, None)
        self.removals += written
        return written


def budgets_of(view: ClusterView, pools: Iterable[str], reason: str) -> list[dict[str, Any]]:
    """The budgets of a command's NodePools for its reason at the pass (a decision's ``explanation["budgets"]``)."""
    rows = []
    for pool in sorted(set(pools)):
        verdict = view.budgets.get((pool, reason))
        if verdict is not None:
            rows.append({"nodePool": pool, "reason": reason, "allowed": verdict.allowed, "limit": verdict.limit,
                         "disrupting": verdict.disrupting, "detail": verdict.detail})
    return rows

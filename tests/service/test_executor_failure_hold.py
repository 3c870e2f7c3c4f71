"""A failed decision leaves an automatic hold on its nodes (``DecisionStore.finish(hold_for=...)``), which
the planner's live snapshot turns into the engine's node hold: the failing disruption is not proposed again
at the next pass, and the explanation says why."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ebb.adapters.live import live_snapshot
from ebb.adapters.store.decision_store import DecisionStore
from ebb.contracts import DisruptionCommand
from ebb.core.cluster import ClusterView
from ebb.core.decision import State
from ebb.core.engine import run_pass
from ebb.core.methods.base import EngineOptions
from ebb.core.snapshot import parse_documents

NOW = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)


def command(decision_id: str, *nodes: str) -> DisruptionCommand:
    return DisruptionCommand(decision_id=decision_id, node_pool="default", method="emptiness", reason="Empty",
                             action="delete", nodes=nodes, replacements=(), savings_per_hour=0.1, explanation="empty",
                             approved_at=NOW)


@pytest.mark.parametrize(("state", "hold_for", "held"), [("failed", 900.0, True), ("failed", 0.0, False),
                                                          ("rolled_back", 900.0, True), ("rolled_back", 0.0, False),
                                                          ("succeeded", 900.0, False)])
async def test_only_a_failed_decision_with_a_hold_time_holds_its_nodes(
        store: DecisionStore, state: str, hold_for: float, held: bool) -> None:
    cmd = command("d1", "n1", "n2")
    await store.start(cmd, NOW)
    assert await store.finish(cmd, state, NOW, hold_for=hold_for, why="drain of n1 failed")  # type: ignore[arg-type]
    holds = await store.list_holds(NOW)
    if not held:
        assert holds == []
        return
    assert sorted(h.scope for h in holds) == ["n1", "n2"]
    assert {(h.scope_kind, h.kind) for h in holds} == {("node", "automatic")}
    ended = "rolled back" if state == "rolled_back" else "failed"
    assert all(h.reason == f"decision d1 {ended}: drain of n1 failed" for h in holds)
    assert await store.list_holds(NOW + timedelta(seconds=901)) == []  # it expires


def empty_cluster() -> list[dict[str, object]]:
    pool: dict[str, object] = {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                                "budgets": [{"nodes": "100%"}]},
                 "template": {"spec": {"requirements": [], "nodeClassRef": {
                     "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}}
    node: dict[str, object] = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "creationTimestamp": "2026-11-20T00:00:00Z",
                     "labels": {"karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true",
                                "karpenter.sh/capacity-type": "on-demand",
                                "node.kubernetes.io/instance-type": "m5.large",
                                "topology.kubernetes.io/zone": "us-east-1a"}},
        "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}
    return [pool, node]


async def test_the_planner_does_not_propose_a_held_node_again_and_says_why(
        store: DecisionStore) -> None:
    from ebb.adapters.catalog import bundled_catalog

    snapshot = parse_documents(empty_cluster(), bundled_catalog)
    before = run_pass(ClusterView.build(live_snapshot(snapshot, holds=await store.list_holds(NOW)), NOW),
                      EngineOptions())
    assert [c.nodes for c in before.commands] == [("n1",)]
    cmd = command("d1", "n1")
    await store.start(cmd, NOW)
    await store.finish(cmd, State.FAILED, NOW, hold_for=900, why="replacement launching not implemented")
    later = NOW + timedelta(minutes=1)
    after = run_pass(ClusterView.build(live_snapshot(snapshot, holds=await store.list_holds(later)), later),
                     EngineOptions())
    assert after.commands == ()
    why = [b.reason for b in after.blocked if b.node == "n1"]
    assert why and all("replacement launching not implemented" in reason for reason in why), why

"""The termination-executor's ``karpenter`` provider against the real Karpenter (KWOK provider,
deploy/local/karpenter.sh) on the test session's Karpenter cluster.

A replace command on a node Karpenter launched: the replacement is a NodeClaim ebb creates and Karpenter
launches and initializes before anything is drained; the old node is tainted ``ebb.sh/disrupted``, drained
through the Eviction API, and retired by deleting its NodeClaim, after which Karpenter removes the Node and
the NodeClaim (the KWOK instance is gone); the decision ends ``succeeded``. Every write ebb sends to a Node
is recorded (``AuditedNodeApi``): none adds or removes a ``karpenter.sh/`` taint or finalizer, and ebb
deletes no Node. The NodePool's budget is ``nodes: "0"``, so Karpenter's own consolidation stays out of it.
The bus is the in-memory one and the store SQLite: the servers under test here are Karpenter's and the API
server's (the executor on Kafka and PostgreSQL is tests/integration/test_termination_executor.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.clock import Clock
from ebb.adapters.kube.karpenter import KarpenterProvider, KubeNodeClaimApi
from ebb.adapters.kube.node_api import KubeNodeApi
from ebb.adapters.store.decision_store import EXECUTOR, DecisionStore
from ebb.adapters.store.migrate import upgrade_async
from ebb.adapters.store.outbox import OutboxRelay
from ebb.contracts import TOPIC_DISRUPTION_EVENTS, DisruptionCommand, from_kafka
from ebb.core.launch import replacement_name
from ebb_termination_executor.app import build_executor
from ebb_termination_executor.settings import Settings
from tests.kit.karpenter_cluster import KarpenterKit, is_ready
from tests.kit.karpenter_fakes import AuditedNodeApi

pytestmark = pytest.mark.integration

#: the replacement's type: one of the KWOK provider's built-in types that is not the old node's
CANDIDATE_TYPES = ("c-4x-amd64-linux", "c-8x-amd64-linux")


def initialized(claim: dict[str, Any]) -> bool:
    conditions = (claim.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Initialized" and c.get("status") == "True" for c in conditions)


async def test_a_replace_next_to_karpenter_goes_through_nodeclaims_and_touches_nothing_of_karpenters(
        karpenter: KarpenterKit, tmp_path: Path) -> None:
    pool = await karpenter.create_nodepool(budgets=[{"nodes": "0"}])
    pods = await karpenter.create_pods(pool, 2, cpu="500m")
    [old_claim] = await karpenter.wait_for_nodeclaims(pool, 1)
    await karpenter.wait_for_pods_running(pods)
    old_node = old_claim["status"]["nodeName"]
    node = await karpenter.node(old_node)
    assert node is not None
    old_type = node.metadata.labels["node.kubernetes.io/instance-type"]
    zone = node.metadata.labels["topology.kubernetes.io/zone"]
    new_type = next(t for t in CANDIDATE_TYPES if t != old_type)

    url = f"sqlite:///{tmp_path / 'ebb.db'}"
    await upgrade_async(url)
    store = DecisionStore.from_url(url, "karpenter-provider", consumer="executor-test")
    bus = InMemoryBus()
    nodes = AuditedNodeApi(KubeNodeApi(karpenter.api))
    provider = KarpenterProvider(nodes, KubeNodeClaimApi(karpenter.api))
    settings = Settings(provider="karpenter", poll_interval_seconds=0.25, eviction_deadline_seconds=60,
                        replacement_ready_timeout_seconds=60, retire_timeout_seconds=90, failure_hold_seconds=0)
    executor = build_executor(settings, nodes, bus, store, asyncio.Event(), clock=Clock(), provider=provider)
    decision = f"karpenter-provider-{karpenter.run}"
    command = DisruptionCommand.model_validate({
        "decision_id": decision, "node_pool": pool, "method": "single-node-consolidation",
        "reason": "Underutilized", "action": "replace", "nodes": [old_node],
        "replacements": [{"node_pool": pool, "instance_types": [new_type], "capacity_type": "on-demand",
                          "zones": [zone], "price": 0.1}],
        "savings_per_hour": 0.1, "explanation": "replaced by a smaller node", "approved_at": Clock().now()})
    try:
        outcome = await asyncio.wait_for(executor.execute(command), 240)
        # what the executor sent: its outbox, relayed to the bus (the service's relay does it in a task of its own)
        await OutboxRelay(store, bus, EXECUTOR, clock=Clock(), poll=None).relay_once()
    finally:
        await store.close()
    phases = [from_kafka(TOPIC_DISRUPTION_EVENTS, r.key, r.value, r.headers)
              for r in bus.records(TOPIC_DISRUPTION_EVENTS)]
    steps = [(e.phase, e.message) for e in phases]  # type: ignore[attr-defined]
    assert outcome == "succeeded", steps
    assert [phase for phase, _ in steps] == ["Tainted", "Launching", "WaitingReadiness", "Evicted", "Terminated"]

    # the replacement: ebb's NodeClaim, launched and initialized by Karpenter, its Node registered
    name = replacement_name(decision, 0, pool)
    claim = await karpenter.nodeclaim(name)
    assert claim is not None and initialized(claim) and is_ready(claim), claim
    assert claim["metadata"]["annotations"]["ebb.sh/decision-id"] == decision
    assert claim["metadata"]["labels"]["karpenter.sh/nodepool"] == pool
    new_node = await karpenter.node(claim["status"]["nodeName"])
    assert new_node is not None
    assert new_node.metadata.labels["node.kubernetes.io/instance-type"] == new_type
    assert new_node.metadata.labels["topology.kubernetes.io/zone"] == zone
    # the old NodeClaim and its Node: gone (Karpenter terminated the instance); ebb's wait saw it
    assert await karpenter.nodeclaim(old_claim["metadata"]["name"]) is None
    assert await karpenter.node(old_node) is None
    assert dict(steps)["Terminated"] == f"NodeClaim {old_claim['metadata']['name']} deleted: node and instance gone"
    # the pods were evicted through the Eviction API (bare pods: nothing brings them back)
    await karpenter.wait_for_pods_gone(pods)

    # ebb's writes to Nodes: its own taint on the old node, nothing of Karpenter's, no Node deleted
    assert nodes.writes, "the old node was tainted"
    assert nodes.karpenter_writes() == []
    assert nodes.taints_written() == {"ebb.sh/disrupted"}
    assert {w.node for w in nodes.writes} == {old_node}

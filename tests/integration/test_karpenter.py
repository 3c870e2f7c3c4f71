"""The real Karpenter (KWOK provider, deploy/local/karpenter.sh) on the test session's Karpenter cluster: the
behaviour ebb relies on when it runs next to Karpenter or drives it.

- it provisions a NodeClaim and its Node for a pending pod, and the pod runs there;
- a NodeClaim deleted by someone else (ebb's executor, in karpenter mode) is drained through the Eviction
  API and removed with its Node: the KWOK "instance" is gone;
- a NodePool whose budget is ``nodes: "0"`` turns Karpenter's own voluntary disruption off: an empty node of
  it stays, while an empty node of a pool with the default budget is consolidated in the same time.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.kit.karpenter_cluster import NODEPOOL_LABEL, KarpenterKit

pytestmark = pytest.mark.integration

DECISIONS = "karpenter_voluntary_disruption_decisions_total"
DECISIONS_BY_POOL = "karpenter_voluntary_disruption_decisions_by_nodepool_total"


async def test_a_pending_pod_gets_a_node_and_a_deleted_nodeclaim_is_drained_and_removed(
    karpenter: KarpenterKit,
) -> None:
    """Provisioning, then the delete ebb's executor asks for in karpenter mode (one test: the node made in
    the first part is the one the second removes)."""
    before = await karpenter.metrics()
    pool = await karpenter.create_nodepool()
    [pod] = await karpenter.create_pods(pool, 1, cpu="1")

    [claim] = await karpenter.wait_for_nodeclaims(pool, 1)
    placed = await karpenter.wait_for_pods_running([pod])

    name, node_name = claim["metadata"]["name"], claim["status"]["nodeName"]
    assert placed[pod] == node_name
    node = await karpenter.node(node_name)
    assert node is not None
    assert node.metadata.labels[NODEPOOL_LABEL] == pool
    assert node.metadata.annotations["kwok.x-k8s.io/node"] == "fake"  # KWOK plays its kubelet
    assert node.spec.provider_id == claim["status"]["providerID"]
    assert node.metadata.labels["node.kubernetes.io/instance-type"] == claim["metadata"]["labels"][
        "node.kubernetes.io/instance-type"]
    assert node.metadata.labels["karpenter.sh/capacity-type"] == "on-demand"
    provisioned = await karpenter.metrics()
    assert provisioned.value("karpenter_nodeclaims_created_total", nodepool=pool) - before.value(
        "karpenter_nodeclaims_created_total", nodepool=pool) == 1

    await karpenter.delete_nodeclaim(name)

    await karpenter.wait_until_gone(nodeclaims=[name], nodes=[node_name], within=60)
    await karpenter.wait_for_pods_gone([pod])  # evicted: a bare pod has nowhere to come back
    after = await karpenter.metrics()
    assert after.value("karpenter_pods_eviction_requests_total") > provisioned.value(
        "karpenter_pods_eviction_requests_total")
    assert after.value("karpenter_nodeclaims_terminated_total", nodepool=pool) - provisioned.value(
        "karpenter_nodeclaims_terminated_total", nodepool=pool) == 1
    # a delete someone else asked for is no voluntary disruption of Karpenter's
    assert after.value(DECISIONS_BY_POOL, nodepool=pool) == 0


async def test_a_zero_budget_keeps_an_empty_node_that_karpenter_would_consolidate(karpenter: KarpenterKit) -> None:
    """Two pools, each with one node emptied at the same moment: the control pool (default budget
    ``nodes: 100%``) shows that Karpenter's consolidation ran in that time and removed its empty node; the
    pool with ``nodes: "0"`` keeps its node and its NodeClaim, and Karpenter counted no decision for it. At
    least 30 s are waited after the nodes became empty (Karpenter polls every 10 s and validates a command
    for 15 s before it acts)."""
    frozen = await karpenter.create_nodepool("frozen", budgets=[{"nodes": "0"}])
    control = await karpenter.create_nodepool("control")
    [frozen_pod] = await karpenter.create_pods(frozen, 1, prefix="frozen")
    [control_pod] = await karpenter.create_pods(control, 1, prefix="control")
    [frozen_claim], [control_claim] = await asyncio.gather(karpenter.wait_for_nodeclaims(frozen, 1),
                                                           karpenter.wait_for_nodeclaims(control, 1))
    await karpenter.wait_for_pods_running([frozen_pod, control_pod])
    before = await karpenter.metrics()
    loop = asyncio.get_running_loop()

    await karpenter.delete_pods([frozen_pod, control_pod])
    await karpenter.wait_for_pods_gone([frozen_pod, control_pod])
    emptied = loop.time()

    control_name = control_claim["metadata"]["name"]
    await karpenter.wait_until_gone(nodeclaims=[control_name], nodes=[control_claim["status"]["nodeName"]],
                                    within=90)
    await asyncio.sleep(max(0.0, emptied + 30 - loop.time()))

    still: Any = await karpenter.nodeclaim(frozen_claim["metadata"]["name"])
    assert still is not None and still["metadata"].get("deletionTimestamp") is None
    assert await karpenter.node(frozen_claim["status"]["nodeName"]) is not None
    after = await karpenter.metrics()
    assert after.value(DECISIONS_BY_POOL, nodepool=frozen) == 0
    control_decisions = after.value(DECISIONS_BY_POOL, nodepool=control) - before.value(DECISIONS_BY_POOL,
                                                                                          nodepool=control)
    assert control_decisions >= 1
    # every decision Karpenter made in that time was the control pool's
    assert after.value(DECISIONS) - before.value(DECISIONS) == control_decisions

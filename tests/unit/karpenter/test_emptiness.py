"""controllers/disruption/emptiness_test.go, translated (Karpenter v1.14.1, paths under ``pkg``).

The suite's NodePool: consolidationPolicy WhenEmpty, consolidateAfter 0s, one budget ``nodes: 100%``; its nodes
have NodeClaims with ``Consolidatable=True``. Karpenter's nodes are 32-cpu ones of its cheapest type; here they are
t3.medium, the cheapest type of the test catalog, so an empty node is only ever deleted. Not translated (counted in
docs/decisions.md, "Karpenter's test suites, translated"): Context("Metrics") (a gauge), "should wait for the node
TTL for empty nodes before consolidating" (the validation wait of a running controller), Context("Buffer pod
protection") (six cases on CapacityBuffer's virtual pods, which ebb's input does not carry).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit.builders import (
    blocked_of,
    budget_of,
    daemonset,
    disrupted,
    ds_pod,
    node,
    nodeclaim,
    nodepool,
    plan_dict,
    pod,
)
from tests.kit.karpenter_suite import DRIFTED, NOT_CONSOLIDATABLE, claimed, claimed_nodes

CHEAPEST = "t3.medium"


def _pool(name: str = "default", budget: str = "100%", consolidate_after: str = "0s") -> dict[str, Any]:
    return nodepool(name, policy="WhenEmpty", consolidate_after=consolidate_after, budgets=[{"nodes": budget}])


def _empty(name: str, **kwargs: Any) -> list[Any]:
    return claimed(name, itype=CHEAPEST, **kwargs)


# -- Describe("Emptiness") / Context("Budgets") ---------------------------------------------------------------------

# (Karpenter's case, budget, allowed disruptions, empty nodes deleted of ten)
BUDGETS = [
    ("should allow all empty nodes to be disrupted", "100%", 10, 10),
    ("should allow no empty nodes to be disrupted", "0%", 0, 0),
    ("should only allow 3 empty nodes to be disrupted", "30%", 3, 3),
]


@pytest.mark.parametrize(("budget", "allowed", "deleted"), [c[1:] for c in BUDGETS], ids=[c[0] for c in BUDGETS])
def test_budgets_empty_nodes(budget: str, allowed: int, deleted: int) -> None:
    """emptiness_test.go, Describe("Emptiness"), Context("Budgets"): ten empty nodes, the budget decides how many
    go (karpenter_nodepools_allowed_disruptions is ebb plan's budget row)."""
    out = plan_dict(_pool(budget=budget), claimed_nodes(10, itype=CHEAPEST))
    assert budget_of(out, "default", "Empty") == allowed
    assert len(disrupted(out)) == deleted
    assert {(c["method"], c["action"]) for c in out["commands"]} <= {("emptiness", "delete")}


# (Karpenter's case, budget of each of the ten NodePools, allowed per pool)
BUDGETS_PER_POOL = [
    ("should allow 2 nodes from each nodePool to be deleted", "50%", 2),  # 1.5 of 3 rounds up
    ("should allow all nodes from each nodePool to be deleted", "100%", 3),
]


@pytest.mark.parametrize(("budget", "allowed"), [c[1:] for c in BUDGETS_PER_POOL], ids=[c[0] for c in BUDGETS_PER_POOL])
def test_budgets_per_nodepool(budget: str, allowed: int) -> None:
    """emptiness_test.go, Describe("Emptiness"), Context("Budgets"): ten NodePools (consolidateAfter 30s, long
    passed) of three empty nodes each; each pool's budget is its own."""
    docs: list[Any] = []
    for p in range(10):
        docs += [_pool(f"pool-{p}", budget=budget, consolidate_after="30s"),
                 claimed_nodes(3, prefix=f"p{p}-", pool=f"pool-{p}", itype=CHEAPEST)]
    out = plan_dict(*docs)
    gone = disrupted(out)
    for p in range(10):
        assert budget_of(out, f"pool-{p}", "Empty") == allowed
        assert sum(1 for n in gone if n.startswith(f"p{p}-")) == allowed
    assert len(gone) == 10 * allowed


# -- Describe("Emptiness") / Context("Emptiness") and the suite's top-level cases --------------------------------

def test_can_delete_empty_nodes() -> None:
    """emptiness_test.go, Describe("Emptiness"), Context("Emptiness"), It("can delete empty nodes")."""
    out = plan_dict(_pool(), _empty("a"))
    assert [(c["method"], c["reason"], c["nodes"]) for c in out["commands"]] == [("emptiness", "Empty", ["a"])]


def test_can_delete_empty_and_drifted_nodes() -> None:
    """emptiness_test.go, Describe("Emptiness"), Context("Emptiness"), It("can delete empty and drifted nodes"):
    the node is empty and its NodeClaim Drifted; drift takes it first (in ebb as in Karpenter, whose comment says
    "Drift runs before Emptiness"), and an empty drifted node is deleted, no replacement."""
    out = plan_dict(_pool(), claimed("a", itype=CHEAPEST, conditions=(DRIFTED,)))
    assert [(c["method"], c["reason"], c["action"], c["nodes"]) for c in out["commands"]] == \
        [("drift", "Drifted", "delete", ["a"])]


# (Karpenter's case, the NodeClaim's conditions) -- deliberate difference: ebb decides consolidatable itself
CONSOLIDATABLE_CONDITION = [
    ("should ignore nodes without the consolidatable status condition", ()),
    ("should ignore nodes with the consolidatable status condition set to false", (NOT_CONSOLIDATABLE,)),
]


@pytest.mark.parametrize("conditions", [c[1] for c in CONSOLIDATABLE_CONDITION],
                         ids=[c[0] for c in CONSOLIDATABLE_CONDITION])
def test_consolidatable_condition_is_computed_not_read(conditions: tuple[dict[str, Any], ...]) -> None:
    """emptiness_test.go, Describe("Emptiness"), Context("Emptiness"): Karpenter's disruption controller waits for
    the NodeClaim's Consolidatable=True, which its NodeClaim disruption controller sets once consolidateAfter has
    passed since the pods last changed. ebb computes that from the snapshot's times (docs/decisions.md, Differences:
    "Consolidatable is computed from the snapshot"), so with consolidateAfter 0s and no recent pod
    change the empty node goes whatever the condition says. The node whose pods changed inside consolidateAfter
    stays (the condition's meaning)."""
    out = plan_dict(_pool(consolidate_after="5m"), _empty("a", conditions=conditions),
                    claimed("fresh", itype=CHEAPEST, zone="us-east-1b", conditions=conditions,
                            created="2026-11-23T18:28:00Z"))
    assert disrupted(out) == {"a"}
    assert blocked_of(out, "fresh")["method"] == "emptiness"


# (Karpenter's case, the node's do-not-disrupt annotation, whether it is deleted)
NODE_DO_NOT_DISRUPT = [
    ("should ignore nodes with the karpenter.sh/do-not-disrupt annotation", "true", False),
    ("should delete nodes with the karpenter.sh/do-not-disrupt annotation set to false", "false", True),
]


@pytest.mark.parametrize(("value", "deleted"), [c[1:] for c in NODE_DO_NOT_DISRUPT],
                         ids=[c[0] for c in NODE_DO_NOT_DISRUPT])
def test_node_do_not_disrupt_annotation(value: str, deleted: bool) -> None:
    """emptiness_test.go, Describe("Emptiness"), Context("Emptiness"): karpenter.sh/do-not-disrupt on the Node."""
    out = plan_dict(_pool(), _empty("a", annotations={"karpenter.sh/do-not-disrupt": value}))
    assert ("a" in disrupted(out)) is deleted
    if not deleted:
        assert out["commands"] == []
        assert "do-not-disrupt" in blocked_of(out, "a")["reason"]


def test_should_ignore_nodes_that_have_pods() -> None:
    """emptiness_test.go, Describe("Emptiness"), Context("Emptiness"), It("should ignore nodes that have pods"):
    under WhenEmpty a node with a pod is no candidate; the empty one next to it goes."""
    out = plan_dict(_pool(), _empty("a"), pod("web", "a"), _empty("b", zone="us-east-1b"))
    assert disrupted(out) == {"b"}
    assert "a" not in disrupted(out)


def test_can_delete_multiple_empty_nodes() -> None:
    """emptiness_test.go, Describe("Emptiness"), It("can delete multiple empty nodes"): both in one command."""
    out = plan_dict(_pool(), _empty("a"), _empty("b", zone="us-east-1b"))
    assert [(c["method"], sorted(c["nodes"])) for c in out["commands"]] == [("emptiness", ["a", "b"])]


# (Karpenter's case, the NodePool's consolidation policy, the pending pods, whether the big node is touched)
PENDING_PODS = [
    ("considers pending pods when consolidating", "WhenEmpty", True, False),
    ("considers pending pods when consolidating (WhenEmptyOrUnderutilized: the pending pod keeps it)",
     "WhenEmptyOrUnderutilized", True, False),
    ("considers pending pods when consolidating (no pending pod: the big node is replaced by a cheaper one)",
     "WhenEmptyOrUnderutilized", False, True),
]


@pytest.mark.parametrize(("policy", "pending", "touched"), [c[1:] for c in PENDING_PODS],
                         ids=[c[0] for c in PENDING_PODS])
def test_considers_pending_pods_when_consolidating(policy: str, pending: bool, touched: bool) -> None:
    """emptiness_test.go, Describe("Emptiness"), It("considers pending pods when consolidating"): a large node (here
    m5.2xlarge, 8 cpu, the test catalog's largest) holds a 1-cpu pod; a pending 6-cpu pod (Karpenter: 62 of 64)
    needs the large node, so it is neither deleted nor replaced. Karpenter's case runs under WhenEmpty, where the
    node is no candidate anyway; the other rows make the pending pod the reason."""
    docs = [nodepool(policy=policy, budgets=[{"nodes": "100%"}]), claimed("big", itype="m5.2xlarge"),
            pod("bound", "big", cpu="1", memory="1Gi")]
    if pending:
        docs.append(pod("unsched", None, cpu="6", memory="1Gi", phase="Pending"))
    out = plan_dict(*docs)
    assert ("big" in disrupted(out)) is touched


def test_will_consider_a_node_with_a_daemonset_pod_as_empty() -> None:
    """emptiness_test.go, Describe("Emptiness"), It("will consider a node with a DaemonSet pod as empty")."""
    out = plan_dict(_pool(), daemonset("agent"), _empty("a"), ds_pod("agent-a", "a"),
                    _empty("b", zone="us-east-1b"), pod("web", "b"))
    assert [(c["method"], c["nodes"]) for c in out["commands"]] == [("emptiness", ["a"])]


# "will consider a node with terminating Deployment pods as empty" and "will not consider a node with a terminating
# StatefulSet pod as empty" are tests/unit/test_karpenter_rules.py::test_emptiness_terminating_pods (issue 11 fixed
# the second).


# -- Describe("Emptiness") / Context("Static NodePool") ---------------------------------------------------------------

def test_static_nodepool_should_not_consolidate_static_nodepool_nodes() -> None:
    """emptiness_test.go, Describe("Emptiness"), Context("Static NodePool"), It("should not consolidate static NodePool
    nodes"): a NodePool with ``spec.replicas`` keeps that many nodes; emptiness and both consolidations take none."""
    static = nodepool("static", budgets=[{"nodes": "100%"}])
    static["spec"]["replicas"] = 2
    out = plan_dict(static, node("s0", pool="static", itype=CHEAPEST), nodeclaim("c-s0", "s0", pool="static"),
                    node("s1", pool="static", itype=CHEAPEST, zone="us-east-1b"),
                    nodeclaim("c-s1", "s1", pool="static"))
    assert out["commands"] == []
    assert ("its NodePool static is static (spec.replicas 2): its nodes are not consolidated (Karpenter removes those "
            "over its replicas)") in \
        blocked_of(out, "s0")["reason"]

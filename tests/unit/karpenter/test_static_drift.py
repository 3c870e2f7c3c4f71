"""controllers/disruption/staticdrift_test.go, translated (Karpenter v1.14.1, paths under ``pkg``).

A static NodePool (``spec.replicas``) keeps its node count through drift: Karpenter's StaticDrift method replaces
each drifted node of it one for one, each in a command of its own, up to the Drifted budget and to what
``limits.nodes`` leaves room for (deleting nodes counted), and not while the pool has more nodes than its replicas.
In ebb this is the drift method's first step (ebb.core.methods.drift). The suite's NodePool: static, budget
``nodes: 100%``; its nodes are of the most expensive type with 32 cpu and a Drifted NodeClaim. Karpenter's cases
count its queue's commands; here they count the pass's drift commands, each one node replaced by one node.
Not expressible: the NodePool-state counters (``ExpectStateNodePoolCount``) and the metrics, which the cases also
check; the loop of "should keep drifting partially ... for each reconcile" is one pass here.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit.builders import blocked_of, nodeclaim, nodepool, plan_dict, pod
from tests.kit.karpenter_suite import DRIFTED, NOT_DRIFTED, ZONES, claimed

MOST_EXPENSIVE = "m5.2xlarge"


def _static(name: str = "default", replicas: int = 1, budget: str = "100%", limit: int | None = None,
            reasons: list[str] | None = None) -> dict[str, Any]:
    budget_doc: dict[str, Any] = {"nodes": budget}
    if reasons is not None:
        budget_doc["reasons"] = reasons
    pool = nodepool(name, budgets=[budget_doc])
    pool["spec"]["replicas"] = replicas
    if limit is not None:
        pool["spec"]["limits"] = {"nodes": str(limit)}
    return pool


def _nodes(count: int, pool: str = "default", prefix: str = "n",
           conditions: tuple[dict[str, Any], ...] = (DRIFTED,), **kwargs: Any) -> list[Any]:
    return [doc for i in range(count)
            for doc in claimed(f"{prefix}{i}", pool=pool, itype=MOST_EXPENSIVE, cpu="32", pods=100, zone=ZONES[i % 3],
                               conditions=conditions, **kwargs)]


def _one_for_one(out: dict[str, Any]) -> list[tuple[str, str]]:
    """(pool, node) of each drift command, after checking each replaces one node by one node of its pool."""
    taken = []
    for command in out["commands"]:
        assert (command["method"], command["action"], len(command["nodes"])) == ("drift", "replace", 1)
        [replacement] = command["replacements"]
        taken.append((replacement["nodePool"], command["nodes"][0]))
    return taken


# -- Context("Budgets") -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("budget", "commands"), [
    pytest.param("2", 2, id="should respect disruption budgets (Nodes Count) for static drift"),
    pytest.param("20%", 1, id="should respect disruption budgets (Nodes Percentage) for static drift"),
])
def test_budgets_for_static_drift(budget: str, commands: int) -> None:
    """staticdrift_test.go, Describe("StaticDrift"), Context("Budgets"): five drifted nodes of a pool of five
    replicas, a Drifted budget of 2 nodes or 20%: that many one-for-one replacements."""
    out = plan_dict(_static(replicas=5, budget=budget, reasons=["Drifted"]), *_nodes(5))
    assert len(_one_for_one(out)) == commands


def test_should_respect_budgets_for_multiple_static_nodepools() -> None:
    """staticdrift_test.go, Describe("StaticDrift"), Context("Budgets"), It("should respect budgets for multiple static
    nodepools"): three static pools of two drifted nodes each, with budgets 1, 2 and 100%: 1 + 2 + 2 commands."""
    out = plan_dict(_static("static-1", replicas=4, budget="1"), *_nodes(2, "static-1", "a"),
                    _static("static-2", replicas=3, budget="2"), *_nodes(2, "static-2", "b"),
                    _static("static-3", replicas=2), *_nodes(2, "static-3", "c"))
    per_pool: dict[str, int] = {}
    for pool, _node in _one_for_one(out):
        per_pool[pool] = per_pool.get(pool, 0) + 1
    assert per_pool == {"static-1": 1, "static-2": 2, "static-3": 2}


# -- Context("Limits and Scaling") ------------------------------------------------------------------------------------

# (Karpenter's case, nodes (all drifted), limits.nodes, commands)
LIMITS = [
    ("should not drift nodes when we cannot acquire limits", 5, 5, 0),
    ("should drift nodes when we can acquire limits", 2, 5, 2),
    ("should drift partially when we can acquire some limits", 5, 7, 2),
    ("should keep drifting partially when we can acquire some limits for each reconcile", 5, 6, 1),
]


@pytest.mark.parametrize(("nodes", "limit", "commands"), [c[1:] for c in LIMITS], ids=[c[0] for c in LIMITS])
def test_limits_and_scaling(nodes: int, limit: int, commands: int) -> None:
    """staticdrift_test.go, Describe("StaticDrift"), Context("Limits and Scaling"): a pool of five replicas; each
    replacement is launched before its node goes, so no more are replaced at once than ``limits.nodes`` leaves room
    for; those left wait, and say why."""
    out = plan_dict(_static(replicas=5, limit=limit), *_nodes(nodes))
    taken = _one_for_one(out)
    assert len(taken) == commands
    waiting = [n for n in (f"n{i}" for i in range(nodes)) if ("default", n) not in taken]
    for name in waiting:
        assert f"would pass its limits.nodes ({limit})" in blocked_of(out, name)["reason"]


def test_should_wait_until_nodes_are_deprovisioned_when_we_are_overscaled() -> None:
    """staticdrift_test.go, Describe("StaticDrift"), Context("Limits and Scaling"), It("should wait until nodes are
    deprovisioned when we are overscaled"): replicas 1, two drifted nodes (one with a pod): no command while the
    pool is above its replicas; once one is gone, the other is replaced."""
    out = plan_dict(_static(replicas=1), *_nodes(2), pod("web", "n0", cpu="1"))
    assert out["commands"] == []
    assert "runs more nodes (2) than its spec.replicas 1" in blocked_of(out, "n0")["reason"]
    out = plan_dict(_static(replicas=1), *_nodes(1), pod("web", "n0", cpu="1"))
    assert _one_for_one(out) == [("default", "n0")]


# -- Context("Multiple NodePools") ------------------------------------------------------------------------------------

def test_should_handle_drift_for_multiple_static_nodepools_independently() -> None:
    """staticdrift_test.go, Describe("StaticDrift"), Context("Multiple NodePools"), It("should handle drift for
    multiple static NodePools independently"): three pools of two drifted nodes, the second at its limits.nodes of
    2: the first and third each get two replacements, the second none."""
    out = plan_dict(_static("nodepool-1", replicas=3), *_nodes(2, "nodepool-1", "a"),
                    _static("nodepool-2", replicas=2, limit=2), *_nodes(2, "nodepool-2", "b"),
                    _static("nodepool-3", replicas=2), *_nodes(2, "nodepool-3", "c"))
    assert sorted(_one_for_one(out)) == [("nodepool-1", "a0"), ("nodepool-1", "a1"), ("nodepool-3", "c0"),
                                         ("nodepool-3", "c1")]


# -- Context("Edge Cases") --------------------------------------------------------------------------------------------

def test_should_handle_zero_replicas() -> None:
    """staticdrift_test.go, Describe("StaticDrift"), Context("Edge Cases"), It("should handle zero replicas"): a
    drifted node of a pool of zero replicas is not replaced (the pool is scaling down to nothing)."""
    out = plan_dict(_static(replicas=0), *_nodes(1))
    assert out["commands"] == []


def test_should_handle_missing_node_limits_gracefully() -> None:
    """staticdrift_test.go, Describe("StaticDrift"), Context("Edge Cases"), It("should handle missing node limits
    gracefully"): no limits, five replicas, five drifted nodes: five commands."""
    out = plan_dict(_static(replicas=5), *_nodes(5))
    assert len(_one_for_one(out)) == 5


@pytest.mark.parametrize(("conditions", "annotations"), [
    pytest.param((), {}, id="should ignore nodes without the drifted status condition"),
    pytest.param((NOT_DRIFTED,), {}, id="should ignore nodes with the drifted status condition set to false"),
    pytest.param((DRIFTED,), {"karpenter.sh/do-not-disrupt": "true"},
                 id="should ignore nodes with the karpenter.sh/do-not-disrupt annotation"),
])
def test_edge_cases_nothing_to_drift(conditions: tuple[dict[str, Any], ...], annotations: dict[str, str]) -> None:
    """staticdrift_test.go, Describe("StaticDrift"), Context("Edge Cases"): a node that is not drifted, or that
    do-not-disrupt protects, is not replaced."""
    out = plan_dict(_static(replicas=1), *_nodes(1, conditions=conditions, annotations=annotations))
    assert out["commands"] == []


def test_a_static_nodes_pods_that_fit_nowhere_else_get_a_replacement_that_holds_them() -> None:
    """ebb's own: when the node's pods fit on no other node, the one-for-one replacement is the node of the pool
    they need (what validation simulates), not merely the pool's cheapest; it costs no more than the node."""
    out = plan_dict(_static(replicas=1), *_nodes(1), pod("big", "n0", cpu="6", memory="1Gi"))
    [command] = out["commands"]
    [replacement] = command["replacements"]
    assert replacement["nodePool"] == "default"
    assert replacement["instanceTypes"][0] == "m5.2xlarge"  # the only 8-cpu type; the pool's cheapest has 2
    out = plan_dict(_static(replicas=1), *_nodes(1))
    [command] = out["commands"]
    assert command["replacements"][0]["instanceTypes"][0] == "t3.medium"  # nothing to hold: the cheapest


def _launching(name: str, pool: str = "default") -> dict[str, Any]:
    """A NodeClaim launched whose Node has not registered yet (no status.nodeName, no Node)."""
    claim = nodeclaim(name, "", pool=pool)
    claim["status"] = {}
    return claim


@pytest.mark.parametrize(("replicas", "limit", "commands"), [
    pytest.param(3, 3, 0, id="replicas 3, limit 3: two drifted nodes and a launching NodeClaim leave no room"),
    pytest.param(2, None, 0, id="replicas 2: two nodes and a launching NodeClaim are over the replicas"),
    pytest.param(3, 4, 1, id="replicas 3, limit 4: room for one replacement"),
])
def test_a_launching_nodeclaim_counts_as_a_node_of_its_pool(replicas: int, limit: int | None, commands: int) -> None:
    """Karpenter's cluster state holds a NodeClaim launched before its Node registers as a node of its NodePool
    (``UpdateNodeClaim`` marks it active; ``ReserveNodeCount`` counts it): static drift counts it against the
    replicas and ``limits.nodes``. ebb counted Nodes only, and replaced past the limit."""
    out = plan_dict(_static(replicas=replicas, limit=limit), *_nodes(2), _launching("launching"))
    assert len(_one_for_one(out)) == commands

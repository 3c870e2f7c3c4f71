"""Why a pod found no node names what held it: the rules that count pods per domain, its own (topology spread, pod
affinity or anti-affinity, host ports) or the required anti-affinity of pods whose terms select it, also when they
ruled out a one-node replacement; and a pod no NodePool can launch a node for is not said to need a bigger type.
"""

from __future__ import annotations

from typing import Any

from tests.kit.builders import blocked_of, node, nodepool, plan_dict, pod

HOSTNAME = "kubernetes.io/hostname"
KEEP = {"karpenter.sh/do-not-disrupt": "true"}


def test_a_pod_kept_off_by_another_pods_anti_affinity_is_told_so() -> None:
    """``web`` has no rules of its own; the guard on the only other node refuses pods labelled ``app: web``."""
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": HOSTNAME, "labelSelector": {"matchLabels": {"app": "web"}}}]}}
    out = plan_dict(nodepool(), node("e1", itype="m5.xlarge"), pod("guard", "e1", affinity=anti, annotations=KEEP),
                    node("n1", itype="t3.medium"), pod("web", "n1", labels={"app": "web"}))
    reason = blocked_of(out, "n1")["reason"]
    assert "ruled out by the pod anti-affinity of pods that select it" in reason, reason
    assert "its topology spread" not in reason and "its pod affinity" not in reason, reason


def test_two_pods_a_hostname_spread_keeps_apart_are_not_on_one_new_node_for_the_spread() -> None:
    """A node with two pods of a hostname spread (maxSkew 1): one new node cannot take both, and the sentence says
    the spread ruled the new node out, not only that no other node takes pods."""
    spread = [{"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]
    out = plan_dict(nodepool(), node("n1", itype="m5.xlarge"),
                    *(pod(f"web-{i}", "n1", labels={"app": "web"}, spread=spread) for i in (1, 2)))
    assert out["commands"] == []
    reason = blocked_of(out, "n1")["reason"]
    assert "the new node, with the pods it took, is ruled out by its topology spread" in reason, reason


def test_a_pod_pinned_to_its_node_is_not_said_to_need_a_bigger_type() -> None:
    """A pod pinned to its node by a hostname nodeSelector, in a pass that replaced another node (so the step's new
    node is open): no NodePool can launch a node it runs on, whatever its size; the reason said no NodePool offers an
    instance type that fits it, though an m5.large does."""
    out = plan_dict(nodepool(), node("big", itype="m5.2xlarge"), pod("web", "big", cpu="500m"),
                    node("f1"), pod("full-f1", "f1", cpu="1900m", memory="7Gi", node_selector={HOSTNAME: "f1"}))
    assert [(c["action"], c["nodes"]) for c in out["commands"]] == [("replace", ["big"])]
    reason = blocked_of(out, "f1")["reason"]
    assert "no NodePool can launch a node it tolerates and matches" in reason, reason
    assert "offers an instance type that fits" not in reason, reason


def test_a_pod_with_no_other_node_left_is_told_so_not_that_its_preferences_hold_it() -> None:
    """The only node: its pod has nowhere else to go, which is the cause; the sentence named the PreferNoSchedule
    taint a new node of the heavier NodePool would carry ("no remaining node takes it with ..."), as if other nodes
    were there."""
    def only(itype: str) -> list[dict[str, object]]:
        return [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [itype]}]

    tainted = nodepool("batch", weight=10, taints=[{"key": "spot-ish", "value": "x", "effect": "PreferNoSchedule"}],
                       requirements=only("t3.medium"))
    only_m5 = nodepool(requirements=only("m5.large"))
    out = plan_dict(only_m5, tainted, node("src"), pod("web-0", "src", cpu="500m", memory="1Gi"))
    reason = blocked_of(out, "src")["reason"]
    assert "(pod default/web-0: no other node can take pods)" in reason, reason


def test_a_nodepool_that_admits_no_instance_type_is_named_as_why_no_node_launches() -> None:
    """suite_test.go ("nodepool requirements filtered out all available instance types"): the NodePool's own
    requirements admit no type of the catalog, so the drifted node's pod, which asks nothing, is not told it is not
    tolerated or matched."""
    none = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["no-such-type"]}]
    out = plan_dict(nodepool(requirements=none, node_hash="h1"), node("a", node_hash="h0"), pod("web", "a"))
    assert out["commands"] == []
    reason = blocked_of(out, "a")["reason"]
    assert "no NodePool can launch a node: the requirements of NodePool default admit no instance type" in reason, \
        reason
    assert "tolerates and matches" not in reason, reason


def test_another_nodepools_limits_are_not_named_where_the_spread_holds_the_pod() -> None:
    """Zone spread (maxSkew 1) over pods in zones a and b (two on b's nodes) and NodePool poolb's zone c, empty and
    at its cpu limit: NodePool default (zones a and b) offers types that fit, so what keeps b2's pod off a new node is
    the spread, not poolb's limits."""
    spread = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "w"}}}]
    on_demand = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
    zones_ab = [on_demand, {"key": "topology.kubernetes.io/zone", "operator": "In",
                            "values": ["us-east-1a", "us-east-1b"]}]
    zone_c = [on_demand, {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1c"]}]
    poolb = nodepool("poolb", requirements=zone_c)
    poolb["spec"]["limits"] = {"cpu": "0"}
    w: dict[str, Any] = {"labels": {"app": "w"}, "spread": spread}
    out = plan_dict(nodepool(requirements=zones_ab), poolb,
                    node("a1", itype="t3.medium"), pod("wa", "a1", annotations=KEEP, **w),
                    node("b1", itype="t3.medium", zone="us-east-1b"), pod("wb", "b1", annotations=KEEP, **w),
                    node("b2", itype="t3.medium", zone="us-east-1b"), pod("w1", "b2", **w))
    reason = blocked_of(out, "b2")["reason"]
    assert "its topology spread or pod affinity/anti-affinity leave no node a NodePool can launch for it" in reason, \
        reason
    assert "limits" not in reason, reason


def test_nodes_with_room_its_node_affinity_rules_out_are_named_beside_its_pod_affinity() -> None:
    """s1 needs zone us-east-1b and a host with a target pod: n0 (zone a) has room but its node affinity rules it out,
    n2 (zone b) has room but no target; the reason names both rules, where it named the pod affinity alone."""
    zone_b = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b"]}]}]}},
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": HOSTNAME, "labelSelector": {"matchLabels": {"app": "target"}}}]}}
    out = plan_dict(nodepool(), node("n0", itype="m5.xlarge"), pod("s0", "n0", annotations=KEEP),
                    node("n2", itype="m5.xlarge", zone="us-east-1b"), pod("f2", "n2", annotations=KEEP),
                    node("n3", zone="us-east-1b"), pod("t", "n3", cpu="1800m", labels={"app": "target"},
                                                       annotations=KEEP),
                    node("c", zone="us-east-1b"), pod("s1", "c", cpu="500m", affinity=zone_b))
    reason = blocked_of(out, "c")["reason"]
    assert ("every remaining node with room for it is ruled out by its nodeSelector, node affinity or tolerations, "
            "or by its pod affinity") in reason, reason


def test_a_static_nodepool_that_would_hold_the_pod_is_named_as_launching_nothing() -> None:
    """provisioning suite_test.go (static NodePools are left out of the scheduler, provisioner.go): the drifted node's
    pod needs zone us-east-1a, which only the static NodePool covers; the reason names it, where it blamed an
    overhead the snapshot does not have."""
    zone = "topology.kubernetes.io/zone"
    static = nodepool("st", requirements=[{"key": zone, "operator": "In", "values": ["us-east-1a"]}])
    static["spec"]["replicas"] = 1
    dyn = nodepool("dyn", requirements=[{"key": zone, "operator": "In", "values": ["us-east-1b"]}])
    out = plan_dict(static, dyn, node("st-1", pool="st"), pod("full", "st-1", cpu="2"),
                    node("old", pool="dyn"), pod("web", "old", node_selector={zone: "us-east-1a"}))
    reason = blocked_of(out, "old")["reason"]
    assert "(NodePool st is static, so it launches no node)" in reason, reason
    assert "overhead" not in reason, reason


def test_the_nodepool_a_replacement_would_come_from_is_the_first_that_can_launch() -> None:
    """provisioning suite_test.go (a NodePool past its limits is skipped, scheduler.go ``filterByRemainingResources``):
    the heavier NodePool new is at its cpu limit, so the replacement would come from old, whose only type is the
    node's own; the reason does not say new's nodes cannot hold the pods."""
    new = nodepool("new", weight=10)
    new["spec"]["limits"] = {"cpu": "0"}
    only_big = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.2xlarge"]}]
    out = plan_dict(new, nodepool("old", requirements=only_big), node("big", pool="old", itype="m5.2xlarge"),
                    pod("web", "big", cpu="500m"))
    reason = blocked_of(out, "big")["reason"]
    assert "from NodePool old, the first by weight (0) that can launch a node holding them" in reason, reason

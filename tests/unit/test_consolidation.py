"""Consolidation (multi-node and single-node): delete, replace, savings and what stops it (docs/decisions.md)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from unittest.mock import patch

import pytest

from ebb.core.causes import Cause
from ebb.core.engine import run_pass
from ebb.core.methods import multi_node, single_node
from ebb.core.methods.base import EngineOptions
from tests.kit.builders import (
    NOW,
    TYPES,
    ZONES,
    ago,
    blocked_of,
    catalog,
    disrupted,
    instance_type,
    node,
    nodepool,
    plan_dict,
    pod,
    snapshot,
)

OD = {t: v[3] for t, v in TYPES.items()}  # on-demand prices
SPOT = {t: v[4] for t, v in TYPES.items()}
SPOT_REQ = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]


def _summary(out: dict[str, Any]) -> list[tuple[str, str, str, list[str]]]:
    return [(c["method"], c["reason"], c["action"], c["nodes"]) for c in out["commands"]]


def test_delete_when_pods_fit_elsewhere() -> None:
    # t3.medium is the cheapest type, so nothing can replace `b` more cheaply: `a` is simply deleted
    out = plan_dict(nodepool(), node("a"), pod("web-a", "a", cpu="500m"),
                    node("b", itype="t3.medium"), pod("web-b", "b", cpu="500m"))
    assert _summary(out) == [("single-node-consolidation", "Underutilized", "delete", ["a"])]
    command = out["commands"][0]
    assert command["replacements"] == []
    assert command["savingsPerHour"] == pytest.approx(OD["m5.large"])
    assert "can't replace with a cheaper node" in blocked_of(out, "b")["reason"]


def test_replace_with_a_cheaper_type() -> None:
    out = plan_dict(nodepool(), node("big", itype="m5.2xlarge"), pod("web-1", "big", cpu="750m", memory="1Gi"),
                    pod("web-2", "big", cpu="750m", memory="2Gi"))
    assert _summary(out) == [("single-node-consolidation", "Underutilized", "replace", ["big"])]
    [rep] = out["commands"][0]["replacements"]
    assert rep["nodePool"] == "default"
    assert rep["capacityType"] == "on-demand"
    assert rep["instanceTypes"][0] == "t3.medium"
    assert rep["price"] == pytest.approx(OD[rep["instanceTypes"][0]])
    prices = [OD[t] for t in rep["instanceTypes"]]
    assert prices == sorted(prices)  # cheapest first
    assert all(p < OD["m5.2xlarge"] for p in prices)  # only options cheaper than the node removed
    assert "m5.2xlarge" not in rep["instanceTypes"]
    assert set(rep["zones"]) <= set(ZONES)
    assert out["commands"][0]["savingsPerHour"] == pytest.approx(OD["m5.2xlarge"] - OD["t3.medium"])


def test_replacement_keeps_only_types_that_fit() -> None:
    # 3Gi + 3Gi of memory: t3.medium and c5.large (4Gi) are too small
    out = plan_dict(nodepool(), node("big", itype="m5.2xlarge"), pod("web-1", "big", cpu="500m", memory="3Gi"),
                    pod("web-2", "big", cpu="500m", memory="3Gi"))
    [rep] = out["commands"][0]["replacements"]
    assert rep["instanceTypes"][0] == "m5.large"
    assert not {"t3.medium", "c5.large"} & set(rep["instanceTypes"])
    assert rep["price"] == pytest.approx(OD["m5.large"])


def test_no_replace_with_the_same_type_at_the_same_price() -> None:
    out = plan_dict(nodepool(), node("a", itype="t3.medium"), pod("web", "a", cpu="1500m", memory="3Gi"))
    assert out["commands"] == []
    reason = blocked_of(out, "a")["reason"]
    assert "can't replace with a cheaper node" in reason


@contextlib.contextmanager
def _evaluations() -> Iterator[list[str]]:
    """`single_node.evaluate` as it is, recording the nodes it simulates."""
    evaluated: list[str] = []
    evaluate = single_node.evaluate

    def counting(ctx: Any, name: str, keep: bool = False, **more: Any) -> Any:
        evaluated.append(name)
        return evaluate(ctx, name, keep, **more)

    with patch.object(single_node, "evaluate", counting):
        yield evaluated


def test_single_node_takes_what_multi_node_found_about_each_node_alone() -> None:
    """Multi-node consolidation's greedy runs simulate each node on its own before they take one, on the very
    state single-node consolidation starts from: single-node consolidation takes those verdicts instead of
    simulating the nodes again, and says the same about them."""
    cluster = (nodepool(), node("a", itype="t3.medium"), pod("web-a", "a", cpu="1500m"),
               node("b", itype="t3.medium", zone="us-east-1b"), pod("web-b", "b", cpu="1500m"))
    with _evaluations() as evaluated:
        taken = plan_dict(*cluster)
        assert evaluated == []  # both nodes were simulated alone by multi-node consolidation
        with patch.object(multi_node, "_remember", lambda *args, **kwargs: None):
            computed = plan_dict(*cluster)
        assert sorted(evaluated) == ["a", "b"]
    assert taken["commands"] == computed["commands"] == []
    assert taken["blocked"] == computed["blocked"]
    assert "can't replace with a cheaper node" in blocked_of(taken, "a")["reason"]


def test_a_node_of_price_zero_whose_pods_fit_elsewhere_is_left_to_single_node_consolidation() -> None:
    """The delete-only greedy run finds the node's pods a place and still does not take it (it saves nothing):
    no verdict on it alone, so single-node consolidation simulates it itself, as without those verdicts."""
    types = [instance_type(n, c, m, p, od, sp) for n, (c, m, p, od, sp) in TYPES.items()]
    cluster = (nodepool(), catalog([*types, instance_type("free.large", "2", "8Gi", 29, 0.0, 0.0)]),
               node("free", itype="free.large"), pod("w", "free", cpu="100m"),
               node("big", itype="m5.xlarge"), pod("p", "big", cpu="1500m"), pod("p2", "big", cpu="1500m"),
               node("c", itype="t3.medium", zone="us-east-1b"), pod("q", "c", cpu="700m"), pod("q2", "c", cpu="700m"))
    with _evaluations() as evaluated:
        taken = plan_dict(*cluster)
        with patch.object(multi_node, "_remember", lambda *args, **kwargs: None):
            computed = plan_dict(*cluster)
    assert evaluated[0] == "free"
    assert taken == computed


def test_the_delete_only_runs_steps_carry_on_with_a_replacement_and_leave_single_node_the_verdicts() -> None:
    """Multi-node consolidation's delete-only run finds each node's first pod without room; carrying on from there
    with one new node allowed is the run with a replacement's step of that node on its own, and single-node
    consolidation's simulation of it: neither simulates the node again (``c``: only spot can launch and
    spot-to-spot is off, ``b``: nothing cheaper than its t3.medium). Without those verdicts single-node computes
    the same causes itself."""
    spot, on_demand = SPOT_REQ, [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
    cluster = snapshot(
        nodepool("spot", requirements=spot, weight=10), nodepool("od", requirements=on_demand),
        node("c", pool="spot", itype="m5.xlarge", capacity_type="spot"), pod("big", "c", cpu="3500m"),
        node("b", pool="od", itype="t3.medium", zone="us-east-1b"),
        pod("web", "b", cpu="1500m", node_selector={"karpenter.sh/capacity-type": "on-demand"}))
    options = EngineOptions(explain=False)
    carried: list[str] = []
    carry_on = multi_node._carry_on

    def recording(ctx: Any, name: str, leaving: Any, first: str, kept: Any) -> bool:
        carried.append(name)
        return carry_on(ctx, name, leaving, first, kept)

    with _evaluations() as evaluated:
        with patch.object(multi_node, "_carry_on", recording):
            quick = run_pass(options.view_of(cluster, NOW), options)
        assert evaluated == []
        assert sorted(carried) == ["b", "c"]
        with patch.object(multi_node, "_remember", lambda *args, **kwargs: None):
            computed = run_pass(options.view_of(cluster, NOW), options)
        assert evaluated == ["c", "b"]
    assert quick.commands == computed.commands == ()
    assert quick.blocked == computed.blocked
    # single-node's verdicts, each with the merge of the two that multi-node's search tried and refused
    alone = {b.node: b.cause.inner for b in quick.blocked if b.cause.kind == Cause.NO_MERGE}
    assert alone["c"] is not None and alone["c"].inner is not None
    assert alone["c"].inner.kind == Cause.SPOT_TO_SPOT_DISABLED
    assert alone["b"] is not None and alone["b"].inner is not None
    assert alone["b"].inner.kind == Cause.NO_CHEAPER_REPLACEMENT


def test_carrying_on_counts_a_pod_the_simulation_moved_onto_the_node() -> None:
    """The pods of a node being disrupted are placed first, here onto ``x`` (the only room), and leave again with
    ``x``: the delete-only run's step of ``x`` finds that pod without room, and carrying on with a replacement
    starts from it although the simulation still has it placed on ``x`` (it was left out, and the step then
    found nothing to place and no new node)."""
    disrupted = [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]
    cluster = snapshot(nodepool(), node("gone", taints=disrupted), pod("m", "gone", cpu="1500m"),
                       node("x"), pod("own", "x", cpu="100m"),
                       node("y", zone="us-east-1b"), pod("web", "y", cpu="1500m"))
    for explain in (False, True):
        options = EngineOptions(explain=explain)
        carried = run_pass(options.view_of(cluster, NOW), options)
        with patch.object(multi_node, "_carry_on", lambda ctx, name, leaving, first, kept: False):
            computed = run_pass(options.view_of(cluster, NOW), options)
        assert carried.commands == computed.commands
        assert carried.blocked == computed.blocked
        # x keeps the moved pod on a smaller node (its own goes to y's replacement's room), y is replaced too
        assert {(c.method, c.action, c.nodes) for c in carried.commands} == {
            ("single-node-consolidation", "replace", ("x",)), ("single-node-consolidation", "replace", ("y",))}


def test_multi_node_delete_of_several_nodes() -> None:
    out = plan_dict(nodepool(), node("a"), node("b", zone="us-east-1b"), node("c", zone="us-east-1c"),
                    node("keep", itype="m5.xlarge"),
                    pod("web-a", "a", cpu="500m"), pod("web-b", "b", cpu="500m"), pod("web-c", "c", cpu="500m"),
                    pod("base", "keep", cpu="2", memory="8Gi"))
    [command] = out["commands"]
    assert (command["method"], command["action"]) == ("multi-node-consolidation", "delete")
    assert set(command["nodes"]) == {"a", "b", "c"}
    assert command["replacements"] == []
    assert command["savingsPerHour"] == pytest.approx(3 * OD["m5.large"])
    assert out["cost"]["after"] == pytest.approx(OD["m5.xlarge"])


def test_multi_node_replace_with_one_node() -> None:
    out = plan_dict(nodepool(), node("a"), node("b"), pod("web-a", "a", cpu="700m"), pod("web-b", "b", cpu="700m"))
    [command] = out["commands"]
    assert (command["method"], command["action"], sorted(command["nodes"])) == (
        "multi-node-consolidation", "replace", ["a", "b"])
    [rep] = command["replacements"]
    assert rep["instanceTypes"][0] == "t3.medium"
    assert command["savingsPerHour"] == pytest.approx(2 * OD["m5.large"] - OD["t3.medium"])


def test_delete_wins_over_replace_on_equal_savings() -> None:
    # Deleting a and b (their pods fit on c) saves 2 x m5.large. Replacing a, b and c by one new t3.medium
    # saves exactly the same (c is a t3.medium), so the delete wins: no launch, fewer pods moved.
    out = plan_dict(nodepool(), node("a"), node("b"), node("c", itype="t3.medium"),
                    pod("web-a", "a", cpu="300m", memory="256Mi"), pod("web-b", "b", cpu="300m", memory="256Mi"),
                    pod("web-c", "c", cpu="300m", memory="256Mi"))
    [command] = out["commands"]
    assert command["method"] == "multi-node-consolidation"
    assert command["action"] == "delete"
    assert command["replacements"] == []
    assert sorted(command["nodes"]) == ["a", "b"]
    assert command["savingsPerHour"] == pytest.approx(2 * OD["m5.large"])


def _spot_catalog(cheaper: int) -> dict[str, Any]:
    types = [instance_type(f"x{i}.large", "2", "8Gi", 29, 0.09, 0.02 + i * 0.001) for i in range(cheaper)]
    c, m, p, od, sp = TYPES["m5.2xlarge"]
    return catalog([*types, instance_type("m5.2xlarge", c, m, p, od, sp)])


@pytest.mark.parametrize(("cheaper", "spot_to_spot", "replaced", "phrase"), [
    (20, False, False, "spot-to-spot consolidation is disabled"),
    (20, True, True, ""),
    (15, True, True, ""),
    (14, True, False, "at least 15 cheaper instance types"),
])
def test_spot_to_spot(cheaper: int, spot_to_spot: bool, replaced: bool, phrase: str) -> None:
    out = plan_dict(nodepool(requirements=SPOT_REQ), node("s", itype="m5.2xlarge", capacity_type="spot"),
                    pod("web", "s", cpu="500m"), _spot_catalog(cheaper), spot_to_spot=spot_to_spot)
    if replaced:
        [command] = out["commands"]
        assert command["action"] == "replace"
        [rep] = command["replacements"]
        assert rep["capacityType"] == "spot"
        assert len(rep["instanceTypes"]) >= 15
        assert rep["instanceTypes"][0] == "x0.large"
        assert rep["price"] == pytest.approx(0.02)
    else:
        assert out["commands"] == []
        assert phrase in blocked_of(out, "s")["reason"]


def _zonal_spot(itype: dict[str, Any], prices: dict[str, float]) -> dict[str, Any]:
    """``itype`` with the spot price of each zone of ``prices`` changed to it."""
    for offering in itype["offerings"]:
        if offering["capacityType"] == "spot" and offering["zone"] in prices:
            offering["price"] = prices[offering["zone"]]
    return itype


# (case, spot types cheaper than the node in every zone, the node's own type's spot price in us-east-1b and -1c (the
# node's, us-east-1a, stays $0.14), types cheaper than the node in us-east-1b only, replaced)
SPOT_COUNTS = [
    ("the node's own type, cheaper in other zones, is no 15th cheaper type", 14, 0.05, 0, False),
    ("nor is another type cheaper in one zone only", 14, None, 1, False),
    ("15 types cheaper in every zone are enough, the node's own type left out of them", 15, 0.05, 1, True),
]


@pytest.mark.parametrize(("everywhere", "own_elsewhere", "one_zone", "replaced"), [c[1:] for c in SPOT_COUNTS],
                         ids=[c[0] for c in SPOT_COUNTS])
def test_spot_to_spot_counts_types_cheaper_in_every_zone(everywhere: int, own_elsewhere: float | None,
                                                         one_zone: int, replaced: bool) -> None:
    """Karpenter's spot-to-spot counts the types whose worst spot launch price over the replacement's zones is below
    the node's (``RemoveInstanceTypeOptionsByPriceAndMinValues``, ``WorstLaunchPrice``), and launches from those: a
    type cheaper in some zones only, the node's own type in another zone among them, is not one."""
    c, m, p, od, sp = TYPES["m5.2xlarge"]
    own = instance_type("m5.2xlarge", c, m, p, od, sp)
    if own_elsewhere is not None:
        own = _zonal_spot(own, {"us-east-1b": own_elsewhere, "us-east-1c": own_elsewhere})
    types = [instance_type(f"x{i}.large", "2", "8Gi", 29, 0.09, 0.06 + i * 0.001) for i in range(everywhere)]
    types += [_zonal_spot(instance_type(f"z{i}.large", "2", "8Gi", 29, 0.09, 0.3), {"us-east-1b": 0.01})
              for i in range(one_zone)]
    out = plan_dict(nodepool(requirements=SPOT_REQ), node("s", itype="m5.2xlarge", capacity_type="spot"),
                    pod("web", "s", cpu="500m"), catalog([own, *types]), spot_to_spot=True)
    if not replaced:
        assert out["commands"] == []
        assert f"only {everywhere} qualify" in blocked_of(out, "s")["reason"]
        return
    [command] = out["commands"]
    [rep] = command["replacements"]
    assert rep["instanceTypes"] == [f"x{i}.large" for i in range(15)]
    assert rep["price"] == pytest.approx(0.06)


SPOT_OR_OD = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}]


def _on_demand_cheaper_catalog(spot_types: int) -> dict[str, Any]:
    """The spot node's m5.2xlarge (8 cpu, $0.14/h spot), on-demand-only types cheaper than it (4 cpu, $0.05/h) and
    than two of it (16 cpu, $0.20/h), and ``spot_types`` spot types dearer than the first but cheaper than the node
    (4 cpu, $0.10/h and up)."""
    c, m, p, od, sp = TYPES["m5.2xlarge"]
    on_demand_only = [instance_type("od.xlarge", "4", "16Gi", 58, 0.05),
                      instance_type("od.4xlarge", "16", "64Gi", 58, 0.2)]
    spot = [instance_type(f"s{i}.xlarge", "4", "16Gi", 58, 0.2, 0.10 + i * 0.001) for i in range(spot_types)]
    return catalog([instance_type("m5.2xlarge", c, m, p, od, sp), *on_demand_only, *spot])


# (case, the NodePool's capacity types, spot-to-spot, spot types cheaper than the node, the replacement expected as
# (first type, capacity type) or None, a phrase of the node's reason when none)
SPOT_REPLACEMENTS = [
    ("a spot node whose replacement may be spot is only deleted without spot-to-spot, though on-demand is cheaper",
     SPOT_OR_OD, False, 0, None, "spot-to-spot consolidation is disabled"),
    ("with spot-to-spot, it is replaced by spot only, not by the cheaper on-demand type",
     SPOT_OR_OD, True, 16, ("s0.xlarge", "spot"), ""),
    ("with spot-to-spot, no spot type holds its pods for less than the node: no replacement",
     SPOT_OR_OD, True, 0, None, "can't replace with a cheaper node"),
    ("with spot-to-spot, fewer than 15 cheaper spot types: no replacement",
     SPOT_OR_OD, True, 3, None, "at least 15 cheaper instance types"),
]


@pytest.mark.parametrize(("requirements", "spot_to_spot", "spot_types", "replacement", "phrase"),
                         [c[1:] for c in SPOT_REPLACEMENTS], ids=[c[0] for c in SPOT_REPLACEMENTS])
def test_spot_nodes_are_replaced_by_spot_or_not_at_all(requirements: list[dict[str, Any]], spot_to_spot: bool,
                                                       spot_types: int, replacement: tuple[str, str] | None,
                                                       phrase: str) -> None:
    """Karpenter's computeConsolidation: candidates that are all spot, whose replacement's requirements have spot,
    go down the spot-to-spot path (spot or nothing), whatever the cheapest offering; a NodePool that cannot launch
    spot takes the normal path, where an on-demand replacement is priced as any other."""
    out = plan_dict(nodepool(requirements=requirements), node("s", itype="m5.2xlarge", capacity_type="spot"),
                    pod("web", "s", cpu="500m"), _on_demand_cheaper_catalog(spot_types), spot_to_spot=spot_to_spot)
    if replacement is None:
        assert out["commands"] == []
        assert phrase in blocked_of(out, "s")["reason"]
        return
    [command] = out["commands"]
    [rep] = command["replacements"]
    assert (command["action"], rep["instanceTypes"][0], rep["capacityType"]) == ("replace", *replacement)


def test_two_spot_nodes_are_not_merged_onto_on_demand_without_spot_to_spot() -> None:
    """Multi-node consolidation follows the same path: two spot nodes whose pods fit together only on a new node
    (16 cpu on demand, cheaper than the two), in a NodePool that may launch spot, are left alone without
    spot-to-spot."""
    out = plan_dict(nodepool(requirements=SPOT_OR_OD),
                    node("s1", itype="m5.2xlarge", capacity_type="spot"), pod("w1", "s1", cpu="5"),
                    node("s2", itype="m5.2xlarge", capacity_type="spot", zone="us-east-1b"),
                    pod("w2", "s2", cpu="5"), _on_demand_cheaper_catalog(0))
    assert out["commands"] == []
    assert "spot-to-spot consolidation is disabled" in blocked_of(out, "s1")["reason"]


@pytest.mark.parametrize(("storage", "replaced"), [
    ("1Gi", True),  # fits a new node's default 17Gi
    ("17Gi", True),
    ("18Gi", False),  # past the default root volume less its overhead
])
def test_a_catalog_type_without_ephemeral_storage_takes_the_default(storage: str, replaced: bool) -> None:
    """The test catalog gives no ephemeral storage: a new node has Karpenter's AWS default (a 20Gi root volume, 17Gi
    allocatable), so a pod that asks for some still fits a replacement (docs/catalog.md)."""
    asking = {"name": "c", "image": "i", "resources": {"requests": {"cpu": "500m", "memory": "1Gi",
                                                                   "ephemeral-storage": storage}}}
    out = plan_dict(nodepool(), node("big", itype="m5.2xlarge"), pod("web", "big", containers=[asking]))
    if replaced:
        [command] = out["commands"]
        assert command["action"] == "replace"
    else:
        assert out["commands"] == []


def test_spot_node_with_room_elsewhere_is_deleted_without_spot_to_spot() -> None:
    out = plan_dict(nodepool(requirements=SPOT_REQ), node("s", itype="m5.2xlarge", capacity_type="spot"),
                    pod("web", "s", cpu="500m"), node("t", itype="t3.medium", capacity_type="spot"),
                    pod("web-t", "t", cpu="500m"))
    assert _summary(out) == [("single-node-consolidation", "Underutilized", "delete", ["s"])]


def _spot_and_on_demand_pools() -> tuple[Any, ...]:
    """Two spot nodes of a spot-only NodePool, each with one pod, and two on-demand nodes of an on-demand NodePool
    whose pods must stay on-demand; spot nodes first in disruption-cost order (one pod each, the others two)."""
    on_demand = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
    stay = {"karpenter.sh/capacity-type": "on-demand"}
    return (nodepool("spot", requirements=SPOT_REQ, weight=10), nodepool("od", requirements=on_demand),
            node("s1", pool="spot", itype="m5.xlarge", capacity_type="spot"), pod("w1", "s1", cpu="1500m"),
            node("s2", pool="spot", itype="m5.xlarge", capacity_type="spot", zone="us-east-1b"),
            pod("w2", "s2", cpu="1500m"),
            node("d1", pool="od", itype="m5.large"), pod("x1", "d1", cpu="600m", node_selector=stay),
            pod("y1", "d1", cpu="600m", node_selector=stay),
            node("d2", pool="od", itype="m5.large", zone="us-east-1b"), pod("x2", "d2", cpu="600m", node_selector=stay),
            pod("y2", "d2", cpu="600m", node_selector=stay))


@pytest.mark.parametrize(("spot_to_spot", "nodes", "replacement", "savings"), [
    # s1 goes by delete (its pod fits on s2); s2 would then take a spot replacement for both pods, which spot-to-spot
    # being off refuses for an all-spot set: the run goes on without s2 and takes d1 with an on-demand t3.medium
    # (the run that took s2 first found no command at all: its set, and every prefix, stayed all spot)
    (False, ["s1", "d1"], ("t3.medium", "on-demand"), SPOT["m5.xlarge"] + OD["m5.large"] - OD["t3.medium"]),
    # with spot-to-spot on, s2 joins with a spot c5.xlarge for both pods, and the on-demand nodes cannot join
    (True, ["s1", "s2"], ("c5.xlarge", "spot"), 2 * SPOT["m5.xlarge"] - SPOT["c5.xlarge"]),
])
def test_multi_node_goes_on_past_a_spot_set_spot_to_spot_would_refuse(
        spot_to_spot: bool, nodes: list[str], replacement: tuple[str, str], savings: float) -> None:
    out = plan_dict(*_spot_and_on_demand_pools(), spot_to_spot=spot_to_spot)
    [command] = out["commands"]
    assert (command["method"], command["action"], command["nodes"]) == ("multi-node-consolidation", "replace", nodes)
    [rep] = command["replacements"]
    assert (rep["instanceTypes"][0], rep["capacityType"]) == replacement
    assert command["savingsPerHour"] == pytest.approx(savings)


def test_a_nodepools_spot_to_spot_lets_multi_node_keep_an_all_spot_set() -> None:
    """ebb's per-NodePool spot-to-spot annotation counts as the option does."""
    docs = list(_spot_and_on_demand_pools())
    docs[0] = nodepool("spot", requirements=SPOT_REQ, weight=10,
                       annotations={"ebb.sh/spot-to-spot-consolidation": "true"})
    [command] = plan_dict(*docs)["commands"]
    assert command["nodes"] == ["s1", "s2"]


def test_when_empty_policy_blocks_underutilized_nodes() -> None:
    out = plan_dict(nodepool(policy="WhenEmpty"), node("big", itype="m5.2xlarge"), pod("web", "big"))
    assert out["commands"] == []
    assert "WhenEmpty" in blocked_of(out, "big")["reason"]


def test_when_empty_policy_still_deletes_empty_nodes() -> None:
    out = plan_dict(nodepool(policy="WhenEmpty"), node("big", itype="m5.2xlarge"), pod("web", "big"),
                    node("idle"))
    assert _summary(out) == [("emptiness", "Empty", "delete", ["idle"])]


@pytest.mark.parametrize(("consolidate_after", "started", "consolidated"), [
    ("10m", ago(minutes=2), False),  # a pod arrived 2 minutes ago: not stable yet
    ("10m", ago(hours=1), True),
    ("0s", ago(seconds=1), True),
    ("Never", ago(days=3), False),
])
def test_consolidate_after_stability(consolidate_after: str, started: str, consolidated: bool) -> None:
    out = plan_dict(nodepool(consolidate_after=consolidate_after), node("big", itype="m5.2xlarge"),
                    pod("old", "big"), pod("new", "big", started=started))
    if consolidated:
        assert _summary(out) == [("single-node-consolidation", "Underutilized", "replace", ["big"])]
    else:
        assert out["commands"] == []
        assert "consolidateAfter" in blocked_of(out, "big")["reason"]


def test_nothing_to_do_is_explained() -> None:
    out = plan_dict(nodepool(), node("a", itype="t3.medium"), pod("web", "a", cpu="1500m"))
    assert out["commands"] == []
    assert blocked_of(out, "a")["reason"]


def test_underutilized_budget_caps_single_node_commands() -> None:
    out = plan_dict(nodepool(budgets=[{"nodes": "1"}]), *[node(f"n{i}", itype="m5.2xlarge") for i in range(3)],
                    *[pod(f"web-{i}", f"n{i}", cpu="1500m", memory="6Gi") for i in range(3)])
    assert len(out["commands"]) == 1
    assert len(disrupted(out)) == 1


@pytest.mark.parametrize("spot_first", [True, False])
def test_a_merge_drops_copies_of_its_cheapest_node_of_a_type_whatever_the_order(spot_first: bool) -> None:
    """A spot and an on-demand c5.large merged: an option of type c5.large is dropped at the spot node's price or
    more (the cheaper of the two), in whichever order the set holds them; without the rule the merge relaunched a
    copy of the spot node, 3 pods evicted for what deleting the on-demand node alone saves. (Such a merge now also
    saves less than its on-demand node alone, which the greedy runs no longer take: in either order the pass saves at
    least what that delete does, a single node's spot c5.large replacing the on-demand one being a cheaper offering.)"""
    both = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large", "r5.large"]}]
    spot_pods, od_pods = (1, 2) if spot_first else (2, 1)  # fewer pods: earlier in the disruption order
    docs = [nodepool(requirements=both), node("s", itype="c5.large", capacity_type="spot"), node("o", itype="c5.large"),
            *(pod(f"s-{i}", "s", cpu="500m" if spot_pods == 1 else "250m") for i in range(spot_pods)),
            *(pod(f"o-{i}", "o", cpu="400m") for i in range(od_pods))]
    out = plan_dict(*docs)
    for command in out["commands"]:
        if command["method"] != "multi-node-consolidation":
            continue
        for replacement in command["replacements"]:
            assert "c5.large" not in replacement["instanceTypes"], command
    assert sum(c["savingsPerHour"] for c in out["commands"]) >= 0.085 - 1e-9, out["commands"]


def test_a_refused_merge_names_the_rule_that_dropped_its_only_cheaper_option() -> None:
    """Two m5.xlarge whose pods fit together on one m5.xlarge: that option is a copy of a removed node, dropped, and
    the next (an m5.2xlarge) costs what both do. The reason names the rule that dropped the cheaper option (keeping
    that node does as well), not a price the pods do not need."""
    docs = [nodepool(), node("x", itype="m5.xlarge", cpu="2"), node("y", itype="m5.xlarge", cpu="2"),
            pod("p1", "x", cpu="1500m", memory="5Gi"), pod("p2", "y", cpu="1500m", memory="5Gi"),
            catalog([instance_type("m5.xlarge", "4", "16Gi", 58, 0.192),
                     instance_type("m5.2xlarge", "8", "32Gi", 58, 0.384)])]
    out = plan_dict(*docs)
    assert out["commands"] == []
    reason = blocked_of(out, "y")["reason"]
    assert "a merge of the first 2 candidates" in reason
    assert reason.endswith("can't replace with a cheaper node of another type: its pods fit type m5.xlarge "
                           "($0.1920/h against $0.3840/h), the same type as x, which it would remove: keeping x and "
                           "deleting the others does as well, so the option is left out, as Karpenter leaves it "
                           "out"), reason


def test_a_node_whose_pod_a_moved_pod_requires_affinity_to_waits_for_the_next_pass() -> None:
    """dep-0 requires zone affinity to part-0. One command replaces b and moves dep-0 to a new node beside part-0; a
    second command of the same pass moving part-0 (its node a replaced too, in whichever zone is cheapest) could
    leave dep-0, scheduled after part-0 left, with no zone holding a part pod: the commands run at once. a waits."""
    zones = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
             {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b", "us-east-1c"]}]
    near_part = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "part"}}, "topologyKey": "topology.kubernetes.io/zone"}]}}
    docs = [nodepool(requirements=zones), node("a", itype="m5.large", zone="us-east-1c"),
            node("b", itype="r5.large", zone="us-east-1c"),
            pod("part-0", "a", cpu="1000m", memory="1Gi", labels={"app": "part"}),
            pod("dep-0", "b", cpu="1500m", memory="1Gi", labels={"app": "dep"}, affinity=near_part)]
    out = plan_dict(*docs)
    assert [(c["method"], c["nodes"]) for c in out["commands"]] == [("single-node-consolidation", ["b"])]
    assert blocked_of(out, "a")["reason"] == (
        "pod default/dep-0, which a command of this pass moves to a new node, requires pod affinity to its pod "
        "default/part-0; moving both at once could leave default/dep-0 with nowhere to go, so it is considered "
        "again next pass")


def test_a_pod_no_type_fits_is_named_so_in_the_new_node_part_of_the_reason() -> None:
    """One node: its big pod opens the one new node a step allows, and its other pod asks an extended resource no
    instance type has. The reason's new-node part names that (no type fits it, with what it asks), where it said only
    "no other node can take pods", which is true of the nodes and not of the new one."""
    foo = pod("w-foo", "a", cpu="100m", memory="128Mi")
    foo["spec"]["containers"][0]["resources"]["requests"]["example.com/foo"] = "1"
    a = node("a")
    a["status"]["allocatable"]["example.com/foo"] = "1"
    a["status"]["capacity"]["example.com/foo"] = "1"
    out = plan_dict(catalog(), nodepool(), a, pod("w-big", "a", cpu="1500m"), foo)
    reason = blocked_of(out, "a")["reason"]
    assert "not on one new node either (pod default/w-foo: no other node can take pods, and no NodePool offers an " \
           "instance type that fits it (" in reason and "example.com/foo 1" in reason, reason


def test_a_types_huge_pages_are_not_memory_for_pods() -> None:
    """A type whose capacity lists huge pages has that much less memory for pods (Karpenter's ``computeAllocatable``):
    hp.large's 8Gi of memory, 4Gi of it huge pages, does not take a pod that asks for 6Gi, though it is cheap."""
    types = [instance_type(n, c, m, p, od, sp) for n, (c, m, p, od, sp) in TYPES.items() if n != "m5.large"]
    huge = instance_type("hp.large", "2", "8Gi", 29, 0.05)
    huge["capacity"]["hugepages-2Mi"] = "4Gi"
    plain = instance_type("hp.large", "2", "8Gi", 29, 0.05)
    pods = (nodepool(), node("a", itype="m5.xlarge"), pod("app", "a", cpu="500m", memory="6Gi"))
    cheap = plan_dict(*pods, catalog([*types, plain]))["commands"]
    assert [r["instanceTypes"][0] for c in cheap for r in c["replacements"]] == ["hp.large"]
    out = plan_dict(*pods, catalog([*types, huge]))["commands"]
    assert [r["instanceTypes"] for c in out for r in c["replacements"]] == [["r5.large", "c5.xlarge"]]


@pytest.mark.parametrize(("heavy_pool", "pool_of_replacement"), [
    ({}, "heavy"),
    ({"metadata": {"deletionTimestamp": "2026-11-23T18:00:00Z"}}, "light"),  # being deleted: no new node there
    ({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}, "light"),  # not Ready: none either
    ({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, "heavy"),
])
def test_a_nodepool_being_deleted_or_not_ready_opens_no_replacement(heavy_pool: dict[str, Any],
                                                                    pool_of_replacement: str) -> None:
    """Karpenter's ``NewScheduler`` leaves out a NodePool being deleted or whose Ready condition is not True: a
    replacement comes from the next NodePool by weight. Its nodes are still candidates."""
    heavy = nodepool("heavy", weight=50)
    for part, value in heavy_pool.items():
        heavy.setdefault(part, {}).update(value)
    out = plan_dict(heavy, nodepool("light"), node("big", pool="heavy", itype="m5.2xlarge"),
                    pod("app", "big", cpu="1500m"))
    assert [(c["nodes"], [r["nodePool"] for r in c["replacements"]]) for c in out["commands"]] == [
        (["big"], [pool_of_replacement])]


NOT_READY = {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}


@pytest.mark.parametrize(("other_pool", "acts"), [
    (None, False),  # the only NodePool is not Ready: Karpenter's scheduler has no NodePool, nothing is simulated
    (nodepool("spare", taints=[{"key": "gpu", "effect": "NoSchedule"}]), True),  # another may launch (not for them)
    ({**nodepool("static"), "spec": {**nodepool("static")["spec"], "replicas": 1}}, False),  # a static one may not
])
def test_no_move_is_simulated_while_no_nodepool_can_launch(other_pool: dict[str, Any] | None, acts: bool) -> None:
    """Karpenter's ``NewScheduler`` drops NodePools that are not Ready, being deleted or static, and with none left
    returns ``ErrNodePoolsNotFound``: its consolidation and drift propose nothing, even deletes whose pods fit on other
    nodes. Its emptiness, which simulates nothing, still acts. ebb deleted a and drifted d."""
    pool = nodepool(node_hash="h2")
    pool.update(NOT_READY)
    docs = [pool, *([other_pool] if other_pool else []),
            node("a", itype="m5.large"), pod("light", "a", cpu="100m"),
            node("b", itype="m5.large"), pod("busy", "b", cpu="1"),
            node("d", itype="m5.large", node_hash="h1", annotations={"karpenter.sh/do-not-consolidate": "true"}),
            pod("drifting", "d", cpu="100m"),
            node("e", itype="m5.large")]
    out = plan_dict(*docs)
    assert disrupted(out) == ({"d"} if acts else {"e"})  # drift first, else emptiness: it moves no pod
    out = plan_dict(*docs[:-1])
    if acts:
        assert disrupted(out), out["blocked"]
    else:
        assert not out["commands"]
        reasons = [blocked_of(out, name)["reason"] for name in ("a", "d")]
        assert all("no NodePool can launch a node now (NodePool default is not Ready" in r for r in reasons), reasons


def test_a_pod_is_told_which_nodepool_launches_nothing() -> None:
    """A pod that no node takes names the NodePool that would hold it but launches no node, and why."""
    pool = nodepool(expire_after="24h")
    pool.update(NOT_READY)
    out = plan_dict(pool, node("a", itype="m5.large"), pod("app", "a", cpu="1500m"))
    assert "(NodePool default is not Ready, so it launches no node)" in blocked_of(out, "a")["reason"]


def _namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


@pytest.mark.parametrize(("ns_selector", "namespaces", "moved"), [
    # the selector picks namespace data, whose db is on n2: web and db may not share a node, so both stay
    # (kube-scheduler would leave the one moved Pending)
    ({"matchLabels": {"team": "data"}}, [_namespace("data", team="data")], False),
    # an empty matchLabels selects every namespace
    ({"matchLabels": {}}, [_namespace("data", team="data")], False),
    # it selects no namespace: not even web's own, and nothing keeps web away
    ({"matchLabels": {"team": "nobody"}}, [_namespace("data", team="data"), _namespace("default")], True),
    # without Namespace objects in the input the selector cannot be read: the term is taken as the pod's own
    # namespace's, where nothing keeps web from n2 (docs/simulator.md)
    ({"matchLabels": {"team": "data"}}, [], True),
])
def test_a_namespace_selector_selects_the_namespaces_its_labels_match(ns_selector: dict[str, Any],
                                                                      namespaces: list[dict[str, Any]],
                                                                      moved: bool) -> None:
    """A pod affinity term's ``namespaceSelector`` selects the Namespaces whose labels it matches, and only those
    (Karpenter's ``buildNamespaceList``)."""
    away = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname",
        "namespaceSelector": ns_selector}]}}
    out = plan_dict(nodepool(), *namespaces, node("n1", itype="t3.medium"),
                    pod("web", "n1", cpu="500m", affinity=away), node("n2", itype="t3.medium"),
                    pod("db", "n2", ns="data", cpu="500m"), pod("x", "n2", cpu="500m"))
    # the cheapest type, no replacement saves: one node goes when web and db may share one, none otherwise
    assert [(len(c["nodes"]), c["replacements"]) for c in out["commands"]] == ([(1, [])] if moved else [])


@pytest.mark.parametrize("inverse", [False, True])
def test_a_selector_without_namespaces_to_read_it_still_selects_the_pods_own_namespace(inverse: bool) -> None:
    """Without Namespace objects, a term with a labelled ``namespaceSelector`` and a ``namespaces`` list is read as
    the listed namespaces and the pod's own (as a term without the list is): the selector may select it, and every
    namespace has ``kubernetes.io/metadata.name``. ebb read the list only, so web moved next to the db of its own
    namespace, which its anti-affinity keeps away (Karpenter's ``buildNamespaceList``). The same holds for db's
    term against web, the other way round."""
    away = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": "web" if inverse else "db"}},
        "topologyKey": "kubernetes.io/hostname", "namespaces": ["data"],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "default"}}}]}}
    out = plan_dict(nodepool(), node("n1", itype="t3.medium"),
                    pod("web", "n1", cpu="500m", labels={"app": "web"}, affinity=None if inverse else away),
                    node("n2", itype="t3.medium"),
                    pod("db", "n2", cpu="500m", labels={"app": "db"}, affinity=away if inverse else None),
                    pod("x", "n2", cpu="500m", labels={"app": "x"}))
    assert out["commands"] == [], out["commands"]


@pytest.mark.parametrize(("closed_how", "said"), [
    ({"spec": {"unschedulable": True}}, "dest: it is cordoned"),
    ({"metadata": {"deletionTimestamp": "2026-11-23T18:00:00Z"}}, "dest: it is being deleted"),
])
def test_no_other_node_names_why_the_others_take_no_pod(closed_how: dict[str, Any], said: str) -> None:
    """"No other node can take pods" names the nodes that would have room and why they take none, so a cordoned
    destination is not mistaken for a full one."""
    dest = node("dest", annotations={"karpenter.sh/do-not-disrupt": "true"})
    for part, value in closed_how.items():
        dest.setdefault(part, {}).update(value)
    out = plan_dict(nodepool(), node("src", itype="t3.medium"), pod("web", "src", cpu="1"), dest)
    assert f"no other node can take pods ({said})" in blocked_of(out, "src")["reason"]


ANY = [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]  # no capacity-type requirement: no drift


@pytest.mark.parametrize(("pool", "said"), [
    (nodepool(policy="WhenEmpty", requirements=ANY), "consolidationPolicy is WhenEmpty"),
    (nodepool(consolidate_after="Never", requirements=ANY), "consolidateAfter is Never"),
    (nodepool(requirements=ANY), "it has no karpenter.sh/capacity-type label, so its price is unknown"),
])
def test_a_nodepool_policy_that_keeps_every_node_is_said_before_what_a_node_lacks(pool: dict[str, Any],
                                                                                  said: str) -> None:
    """A node whose price ebb cannot read is kept by its NodePool's policy first: that is the reason to give (the price
    would not matter)."""
    unpriced = node("a")
    del unpriced["metadata"]["labels"]["karpenter.sh/capacity-type"]
    out = plan_dict(pool, unpriced, pod("web", "a", cpu="100m"))
    assert said in blocked_of(out, "a")["reason"], blocked_of(out, "a")


def test_a_delete_counts_the_pods_expected_on_its_node_apart() -> None:
    """A pending pod the simulation placed on the candidate first leaves it too, but it is not the node's pod and it
    is not evicted: the explanation counts it apart ("its 2 pods fit" for a node that holds one)."""
    out = plan_dict(nodepool(), node("cand", itype="m5.large"), pod("web", "cand", cpu="1200m"),
                    node("other", itype="m5.xlarge", annotations={"karpenter.sh/do-not-disrupt": "true"}),
                    pod("big", "other", cpu="2"), pod("pend", None, cpu="800m", phase="Pending"))
    [command] = [c for c in out["commands"] if c["nodes"] == ["cand"]]
    assert command["explanation"].startswith(
        "cand: its 1 pods, and the 1 expected on it (pending or leaving a node), fit on other nodes; it evicts 1 pod")

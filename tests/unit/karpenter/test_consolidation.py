"""controllers/disruption/consolidation_test.go, translated in part (Karpenter v1.14.1, paths under ``pkg``).

The suite's NodePool: WhenEmptyOrUnderutilized, consolidateAfter 0s, one budget ``nodes: 100%``; spot-to-spot on.
Every context is translated here except what docs/decisions.md ("Karpenter's test suites, translated") counts as
not expressible (Metrics, TTL waits, the consolidated-state cache, buffer pods, capacity reservations, Karpenter's
preference policy, NodeClasses). The
Unconsolidatable event's counterpart is the node's blocked reason, which ebb also emits as an Event. Already in
tests/unit/test_karpenter_rules.py: "won't delete node if it would require pods to schedule on an uninitialized
node", the three consolidateAfter destination cases, "can replace nodes, considers PDB policy", "can merge 3 nodes
into 1 if the candidates have both spot and on-demand" and "can merge 3 nodes into 1 (if the candidate is spot
node)", and Context("Parallelization")'s "should not consolidate a node that is launched for pods on a deleting
node".
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.kit.builders import (
    NOW,
    blocked_of,
    budget_of,
    catalog,
    disrupted,
    instance_type,
    node,
    nodeclaim,
    nodepool,
    pdb,
    plan_dict,
    pod,
    ts,
)
from tests.kit.karpenter_suite import ZONES, claimed

MOST_EXPENSIVE = "m5.2xlarge"
LEAST_EXPENSIVE = "t3.medium"
DND = {"karpenter.sh/do-not-disrupt": "true"}


def _pool(name: str = "default", **kwargs: Any) -> dict[str, Any]:
    kwargs = {"consolidate_after": "0s", "budgets": [{"nodes": "100%"}], **kwargs}
    return nodepool(name, **kwargs)


def _commands(out: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    return [(c["method"], c["action"], sorted(c["nodes"])) for c in out["commands"]]


# -- Context("Events") ------------------------------------------------------------------------------------------------

# (Karpenter's case, NodePool settings, labels removed from the node, a phrase of the node's reason or None)
EVENTS = [
    ("should not fire an event for ConsolidationDisabled when the NodePool has consolidation set to "
     "WhenEmptyOrUnderutilized", {}, (), None),
    ("should fire an event for ConsolidationDisabled when the NodePool has consolidation set to WhenEmpty",
     {"policy": "WhenEmpty", "consolidate_after": "1m"}, (),
     "NodePool default's consolidationPolicy is WhenEmpty: only empty nodes are consolidated"),
    ("should fire an event for ConsolidationDisabled when the NodePool has consolidateAfter set to 'Never'",
     {"consolidate_after": "Never"}, (), "NodePool default's consolidateAfter is Never"),
]


@pytest.mark.parametrize(("settings", "removed", "phrase"), [c[1:] for c in EVENTS], ids=[c[0] for c in EVENTS])
def test_events_consolidation_disabled(settings: dict[str, Any], removed: tuple[str, ...], phrase: str | None) -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Events"): the most expensive node with a pod; where
    consolidation is off for its NodePool the node's reason (ebb's Unconsolidatable) says so, else it is replaced."""
    out = plan_dict(_pool(**settings), claimed("a", itype=MOST_EXPENSIVE), pod("web", "a"))
    if phrase is None:
        assert _commands(out) == [("single-node-consolidation", "replace", ["a"])]
    else:
        assert out["commands"] == []
        assert phrase in blocked_of(out, "a")["reason"]


# (Karpenter's case, the label the node lacks, what ebb does instead of consolidating)
UNRESOLVABLE = [
    ("should fire an event when a candidate does not have a resolvable instance type",
     "node.kubernetes.io/instance-type", [("drift", "replace", ["a"])]),
    ("should fire an event when a candidate does not have the capacity type label", "karpenter.sh/capacity-type",
     [("drift", "replace", ["a"])]),
    ("should fire an event when a candidate does not have the zone label", "topology.kubernetes.io/zone", []),
]
@pytest.mark.parametrize(("label", "commands"), [c[1:] for c in UNRESOLVABLE], ids=[c[0] for c in UNRESOLVABLE])
def test_events_candidate_without_a_label_is_not_consolidated(label: str,
                                                              commands: list[tuple[str, str, list[str]]]) -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Events"): a node without an instance type, capacity
    type or zone label is not consolidated (Karpenter: an Unconsolidatable event). Without the instance type or the
    capacity type label the node has drifted, in ebb as in Karpenter's NodeClaim drift (nodeclaim/disruption
    drift_test.go: "should detect stale instance type drift if the instance type label doesn't exist", and a NodePool
    requirement on capacity type the node no longer satisfies), so drift replaces it; no consolidation does. Without
    the zone label nothing takes it, and its reason says why."""
    docs = claimed("a", itype=MOST_EXPENSIVE)
    del docs[0]["metadata"]["labels"][label]
    out = plan_dict(_pool(), docs, pod("web", "a"))
    assert _commands(out) == commands
    assert not any(c["method"].endswith("consolidation") for c in out["commands"])
    if not commands:
        assert blocked_of(out, "a")["reason"] == (f"it has no {label} label, so its price is unknown and "
                                                  "consolidation cannot compare it")


# -- Context("Budgets") -----------------------------------------------------------------------------------------------

def _budget_nodes(count: int, *, prefix: str = "n", pool: str = "default", itype: str = MOST_EXPENSIVE,
                  pod_cpu: str | None = None) -> list[Any]:
    """``count`` nodes of 32 cpu, each with one pod of ``pod_cpu`` (None: empty)."""
    docs: list[Any] = []
    for i in range(count):
        docs += claimed(f"{prefix}{i}", pool=pool, itype=itype, cpu="32", pods=100,
                        zone=("us-east-1a", "us-east-1b", "us-east-1c")[i % 3])
        if pod_cpu is not None:
            docs.append(pod(f"{prefix}pod{i}", f"{prefix}{i}", cpu=pod_cpu, memory="128Mi", labels={"app": "test"}))
    return docs


# (Karpenter's case, budget, pods' cpu (None: empty nodes), nodes taken of ten)
BUDGETS = [
    ("should only allow 3 empty nodes to be disrupted", "30%", None, 3),
    ("should allow all empty nodes to be disrupted", "100%", None, 10),
    ("should allow no empty nodes to be disrupted", "0%", None, 0),
    ("should only allow 3 nodes to be deleted in multi node consolidation delete", "30%", "100m", 3),
    ("should only allow 3 nodes to be deleted in single node consolidation delete", "30%", "15", 3),
]


@pytest.mark.parametrize(("budget", "pod_cpu", "taken"), [c[1:] for c in BUDGETS], ids=[c[0] for c in BUDGETS])
def test_budgets(budget: str, pod_cpu: str | None, taken: int) -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Budgets"): ten 32-cpu nodes of the most expensive
    type. Karpenter reaches 3 of the single-node deletes over five reconciles; ebb's single-node consolidation takes
    them in one pass (docs/decisions.md, Differences: "Single-node consolidation takes every candidate that
    consolidates on its own in one pass, up to the budget"). Every command deletes: the pods fit on the nodes that
    stay."""
    out = plan_dict(_pool(budgets=[{"nodes": budget}]), _budget_nodes(10, pod_cpu=pod_cpu))
    assert len(disrupted(out)) == taken
    assert {c["action"] for c in out["commands"]} <= {"delete"}
    reason = "Empty" if pod_cpu is None else "Underutilized"
    assert budget_of(out, "default", reason) == {"30%": 3, "100%": 10, "0%": 0}[budget]


# (Karpenter's case, budget of each of the ten NodePools, nodes taken per pool)
BUDGETS_PER_POOL = [
    ("should allow 2 nodes from each nodePool to be deleted", "50%", 2),
    ("should allow all nodes from each nodePool to be deleted", "100%", 3),
    ("should allow no nodes from each nodePool to be deleted", "0%", 0),
]


@pytest.mark.parametrize(("budget", "taken"), [c[1:] for c in BUDGETS_PER_POOL], ids=[c[0] for c in BUDGETS_PER_POOL])
def test_budgets_per_nodepool(budget: str, taken: int) -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Budgets"): ten NodePools (consolidateAfter 30s,
    long passed) of three empty nodes each; each pool's budget is its own."""
    docs: list[Any] = []
    for p in range(10):
        docs += [_pool(f"pool-{p}", consolidate_after="30s", budgets=[{"nodes": budget}]),
                 _budget_nodes(3, prefix=f"p{p}-", pool=f"pool-{p}")]
    out = plan_dict(*docs)
    gone = disrupted(out)
    for p in range(10):
        assert sum(1 for n in gone if n.startswith(f"p{p}-")) == taken
    assert len(gone) == 10 * taken


# -- Context("Delete") ------------------------------------------------------------------------------------------------

def _delete_cluster(*, p2: dict[str, Any] | None = None, n1: dict[str, Any] | None = None,
                    pods: dict[str, Any] | None = None) -> list[Any]:
    """The Delete context: two 32-cpu nodes of the cheapest type, n0 with pods p0 and p1, n1 with p2 (``p2``, ``n1``
    and ``pods`` are keyword arguments for p2, n1 and every pod)."""
    common = {"cpu": "100m", "memory": "128Mi", "labels": {"app": "test"}, **(pods or {})}
    return [claimed("n0", itype=LEAST_EXPENSIVE, cpu="32", pods=100),
            claimed("n1", itype=LEAST_EXPENSIVE, cpu="32", pods=100, zone="us-east-1b", **(n1 or {})),
            pod("p0", "n0", **common), pod("p1", "n0", **common), pod("p2", "n1", **{**common, **(p2 or {})})]


def _started_now() -> dict[str, Any]:
    return {"started": ts(NOW), "annotations": {"karpenter.sh/do-not-disrupt": "2m"}}


def _no_owner_pool() -> dict[str, Any]:
    other = _pool("no-template")
    del other["spec"]["template"]["spec"]["nodeClassRef"]
    return other


# "can delete nodes while an invalid node pool exists" is not expressible: the NodePool is invalid by its NodeClass,
# which does not exist, and ebb's input says nothing of NodeClasses (a NodePool without requirements would be a
# valid, cheaper place for a replacement).


# (Karpenter's case, extra documents, the cluster, the nodes deleted)
DELETE = [
    ("can delete nodes", [], _delete_cluster(), ["n1"]),
    ("can delete nodes if another nodePool has no node template", [_no_owner_pool()], _delete_cluster(), ["n1"]),
    ("can delete nodes, considers PDB", [pdb("p2", {"app": "p2"}, max_unavailable=0)],
     _delete_cluster(p2={"labels": {"app": "p2"}}), ["n0"]),
    ("can delete nodes, considers karpenter.sh/do-not-disrupt set to true on nodes", [],
     _delete_cluster(n1={"annotations": DND}), ["n0"]),
    ("can delete nodes, considers karpenter.sh/do-not-disrupt set to true on pods", [],
     _delete_cluster(p2={"annotations": DND}), ["n0"]),
    ("does not consolidate nodes with karpenter.sh/do-not-disrupt set to true on pods when the NodePool's "
     "TerminationGracePeriod is not nil", [], _delete_cluster(pods={"annotations": DND}), []),
    ("does not consolidate nodes with pods with blocking PDBs when the NodePool's TerminationGracePeriod is not nil",
     [pdb("all", {"app": "test"}, max_unavailable=0)], _delete_cluster(), []),
    ("does not consolidate nodes with pods that have a duration-based do-not-disrupt annotation that is still active",
     [], _delete_cluster(p2=_started_now()), ["n0"]),
    ("can consolidate nodes after duration-based do-not-disrupt annotation expires (not yet)", [],
     _delete_cluster(pods=_started_now()), []),
    ("can delete nodes, considers invalid do-not-disrupt annotation format as not blocking", [],
     _delete_cluster(p2={"annotations": {"karpenter.sh/do-not-disrupt": "invalid-format"}}), ["n1"]),
    ("can delete nodes, evicts pods without an ownerRef", [], _delete_cluster(pods={"owner": None}), ["n1"]),
    ("can delete nodes with a permanently pending pod", [pod("pending", None, cpu="100", phase="Pending")],
     _delete_cluster(), ["n1"]),
    ("won't delete nodes if it would make a non-pending pod go pending", [],
     _delete_cluster(pods={"cpu": "11"}, p2={"cpu": "20"}), []),
]


@pytest.mark.parametrize(("extra", "cluster", "deleted"), [c[1:] for c in DELETE], ids=[c[0] for c in DELETE])
def test_delete(extra: list[Any], cluster: list[Any], deleted: list[str]) -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Delete"): the node whose pods fit on the other is
    deleted, no replacement (both are of the cheapest type); what protects one node makes the other go. ebb ignores
    terminationGracePeriod (docs/decisions.md, Differences), which in these cases changes nothing in Karpenter."""
    out = plan_dict(_pool(), *cluster, *extra)
    assert [(c["action"], c["nodes"]) for c in out["commands"]] == [("delete", [n]) for n in deleted]


def test_should_consider_initialized_nodes_before_uninitialized_nodes() -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Delete"), It("should consider initialized nodes before
    uninitialized nodes"): many 3-cpu nodes each holding a 2-cpu pod, only one of them initialized (Karpenter: 100,
    here 10), and a 1-cpu node whose 1-cpu pod fits in the 1 cpu left on any of them; it is deleted, its pod counted
    on the initialized node."""
    types = catalog([instance_type("default-instance-type", "3", "3Gi", 110, 0.3),
                     instance_type("small-instance-type", "1", "1Gi", 10, 0.1)])
    docs: list[Any] = [types, _pool()]
    for i in range(10):
        initialized = i == 6
        docs += [node(f"d{i}", itype="default-instance-type", cpu="3", memory="3Gi", pods=100,
                      initialized=initialized),
                 nodeclaim(f"claim-d{i}", f"d{i}", initialized=initialized),
                 pod(f"p{i}", f"d{i}", cpu="2", memory="2Gi")]
    docs += [*claimed("small", itype="small-instance-type", cpu="1", memory="1Gi", pods=100),
             pod("consolidatable", "small", cpu="1", memory="1Gi")]
    out = plan_dict(*docs)
    assert [(c["action"], c["nodes"]) for c in out["commands"]] == [("delete", ["small"])]


def test_can_consolidate_nodes_after_duration_based_do_not_disrupt_annotation_expires() -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Delete"), It("can consolidate nodes after
    duration-based do-not-disrupt annotation expires"): every pod has do-not-disrupt 2m from NOW; three minutes
    later n1 goes."""
    out = plan_dict(_pool(), *_delete_cluster(pods=_started_now()), now=NOW + timedelta(minutes=3))
    assert [(c["action"], c["nodes"]) for c in out["commands"]] == [("delete", ["n1"])]


def test_can_delete_nodes_when_non_karpenter_capacity_can_fit_pods() -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Delete"), It("can delete nodes, when non-Karpenter
    capacity can fit pods"): n0's three pods fit on a node no NodePool owns; n0 is deleted."""
    out = plan_dict(_pool(), claimed("n0", itype=LEAST_EXPENSIVE, cpu="32", pods=100),
                    *[pod(f"p{i}", "n0", cpu="100m", memory="128Mi") for i in range(3)],
                    node("unmanaged", pool=None, cpu="32", pods=100, zone="us-east-1b"))
    assert [(c["action"], c["nodes"]) for c in out["commands"]] == [("delete", ["n0"])]


# -- Context("Replace") -----------------------------------------------------------------------------------------------

def _assorted(count: int = 20) -> dict[str, Any]:
    """A catalog of ``count`` 8-cpu types c00.large... in every zone, each dearer than the last (on-demand 0.05/h per
    step, spot 0.02/h), as Karpenter's ``fake.InstanceTypesAssorted``: the last is the most expensive."""
    return catalog([instance_type(f"c{i:02d}.large", "8", "32Gi", 110, round(0.05 * (i + 1), 2),
                                  spot=round(0.02 * (i + 1), 2)) for i in range(count)])


def _replace_cluster(capacity_type: str, *, types: int = 20, itype: str | None = None,
                     node_ann: dict[str, str] | None = None, pod_ann: dict[str, str] | None = None) -> list[Any]:
    """The Replace context: one node of the most expensive type (or ``itype``) with one pod labelled app=test, in a
    NodePool that allows spot and on-demand."""
    return [_assorted(types), claimed("a", itype=itype or f"c{types - 1:02d}.large", capacity_type=capacity_type,
                                      annotations=node_ann or {}),
            pod("web", "a", labels={"app": "test"}, annotations=pod_ann or {})]


REPLACE_POOL = _pool(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In",
                                    "values": ["spot", "on-demand"]}])
CAPACITY_TYPES = [pytest.param("on-demand", id="if the candidate is on-demand node"),
                  pytest.param("spot", id="if the candidate is spot node")]


@pytest.mark.parametrize("capacity_type", CAPACITY_TYPES)
def test_replace_can_replace_node(capacity_type: str) -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Replace"), DescribeTable("can replace node"): the
    pod fits a cheaper type; the replacement costs less than the node, and a spot node is replaced by spot
    (spot-to-spot on, 19 cheaper types to choose from) without its own type among the options."""
    out = plan_dict(REPLACE_POOL, *_replace_cluster(capacity_type), spot_to_spot=True)
    [command] = out["commands"]
    assert (command["method"], command["action"], command["nodes"]) == ("single-node-consolidation", "replace", ["a"])
    [replacement] = command["replacements"]
    assert replacement["price"] < {"on-demand": 1.0, "spot": 0.4}[capacity_type]
    if capacity_type == "spot":  # the node's own type costs as much: not an option (its on-demand node's spot
        assert replacement["capacityType"] == "spot"  # offering is cheaper, so there it may be)
        assert "c19.large" not in replacement["instanceTypes"]


# (Karpenter's case, the catalog's size, the node's type, spot-to-spot, a phrase of the node's reason)
SPOT_TO_SPOT = [
    ("cannot replace spot with spot if less than minimum InstanceTypes flexibility", 5, "c04.large", True,
     "spot-to-spot replacement needs at least 15 cheaper instance types to choose from; only 4 qualify"),
    ("cannot replace spot with spot if the spotToSpotConsolidation is disabled", 20, "c19.large", False,
     "spot-to-spot consolidation is disabled"),
    ("cannot replace spot with spot if it is part of the 15 cheapest instance types.", 20, "c01.large", True,
     "spot-to-spot replacement needs at least 15 cheaper instance types to choose from; only 1 qualify"),
]


@pytest.mark.parametrize(("types", "itype", "spot_to_spot", "phrase"), [c[1:] for c in SPOT_TO_SPOT],
                         ids=[c[0] for c in SPOT_TO_SPOT])
def test_replace_spot_to_spot_rules(types: int, itype: str, spot_to_spot: bool, phrase: str) -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Replace"): a spot node is replaced by spot only with
    spot-to-spot on and at least 15 cheaper types to choose from; otherwise it stays and its reason (Karpenter's
    Unconsolidatable event) says which rule held it."""
    out = plan_dict(REPLACE_POOL, *_replace_cluster("spot", types=types, itype=itype), spot_to_spot=spot_to_spot)
    assert out["commands"] == []
    assert phrase in blocked_of(out, "a")["reason"]


def test_replace_spot_to_spot_should_order_the_instance_types_by_price_before_enforcing_minimum_flexibility() -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Replace"), It("spot to spot consolidation should order
    the instance types by price before enforcing minimum flexibility"): 18 spot types priced 1.00, 1.10, ... in list
    order, except that the 17th costs 0.001; the node is of the 18th (the dearest). The replacement's options are
    taken by price, so they include the 17th and not the node's own type."""
    prices = [1.00 + i * 0.1 for i in range(18)]
    prices[16] = 0.001
    types = catalog([_offered(f"s{i:02d}.large", "8", [(z, "spot", round(p, 3)) for z in ZONES])
                     for i, p in enumerate(prices)])
    pool = _pool(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}])
    out = plan_dict(types, pool, claimed("a", itype="s17.large", capacity_type="spot"), pod("web", "a"),
                    spot_to_spot=True)
    [command] = out["commands"]
    [replacement] = command["replacements"]
    assert replacement["instanceTypes"][0] == "s16.large"
    assert "s17.large" not in replacement["instanceTypes"]


# (Karpenter's case, extra documents, node annotations, pod annotations, replaced)
REPLACE_PROTECTED = [
    ("can replace nodes if another nodePool returns no instance types",
     [_pool("nothing-fits", requirements=[{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                           "values": ["no-such-type"]}])], {}, {}, True),
    ("can replace nodes, considers PDB", [pdb("web", {"app": "test"}, max_unavailable=0)], {}, {}, False),
    ("can replace nodes, PDB namespace must match", [pdb("web", {"app": "test"}, max_unavailable=0, ns="other")],
     {}, {}, True),
    ("can replace nodes, considers karpenter.sh/do-not-disrupt set to true on nodes", [], DND, {}, False),
    ("can replace nodes, considers karpenter.sh/do-not-disrupt set to true on pods", [], {}, DND, False),
]


@pytest.mark.parametrize("capacity_type", CAPACITY_TYPES)
@pytest.mark.parametrize(("extra", "node_ann", "pod_ann", "replaced"), [c[1:] for c in REPLACE_PROTECTED],
                         ids=[c[0] for c in REPLACE_PROTECTED])
def test_replace_protected(extra: list[Any], node_ann: dict[str, str], pod_ann: dict[str, str], replaced: bool,
                           capacity_type: str) -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Replace"), each a DescribeTable over the candidate's
    capacity type: what protects the node (a PDB over its pod in its namespace, do-not-disrupt on it or its pod)
    keeps it; a NodePool that offers no type does not stop the replacement."""
    out = plan_dict(REPLACE_POOL, *_replace_cluster(capacity_type, node_ann=node_ann, pod_ann=pod_ann), *extra,
                    spot_to_spot=True)
    assert _commands(out) == ([("single-node-consolidation", "replace", ["a"])] if replaced else [])


def _offered(name: str, cpu: str, offerings: list[tuple[str, str, float]]) -> dict[str, Any]:
    """An instance type with the given (zone, capacity type, price) offerings."""
    return {"name": name, "capacity": {"cpu": cpu, "memory": "64Gi", "pods": "110"},
            "overhead": {"cpu": "0", "memory": "0"},
            "offerings": [{"zone": z, "capacityType": ct, "price": p} for z, ct, p in offerings]}


# (Karpenter's case, the replacement type's offerings, the NodePool's capacity types)
DEARER_REPLACEMENT = [
    pytest.param([("us-east-1a", "on-demand", 0.6), ("us-east-1b", "on-demand", 0.6), ("us-east-1b", "spot", 0.2),
                  ("us-east-1c", "spot", 0.3)], ["on-demand"],
                 id="won't replace on-demand node if on-demand replacement is more expensive"),
]


@pytest.mark.parametrize(("offerings", "capacity_types"), DEARER_REPLACEMENT)
def test_replace_wont_replace_with_a_dearer_node(offerings: list[tuple[str, str, float]],
                                                  capacity_types: list[str]) -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Replace"): the node is on-demand at 0.5/h in
    us-east-1a; the only other type is dearer where the node's NodePool may launch it."""
    types = catalog([_offered("current-on-demand", "32", [("us-east-1a", "on-demand", 0.5)]),
                     _offered("replacement", "32", offerings)])
    pool = _pool(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity_types}])
    out = plan_dict(types, pool, claimed("a", itype="current-on-demand", cpu="32"), pod("web", "a"))
    assert out["commands"] == []


def test_replace_wont_replace_node_if_any_spot_replacement_is_more_expensive() -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Replace"), It("won't replace node if any spot
    replacement is more expensive"): the node is on-demand at 0.5/h; the other type is offered as spot at 1.0/h in
    us-east-1a, 0.2/h in us-east-1b and 0.4/h in us-east-1c. Karpenter prices a replacement at its worst launch price
    (1.0: the spot allocation strategy may pick any zone) and keeps the node. Kept different on purpose
    (docs/decisions.md, Differences: "A replacement is priced at its cheapest offering"): ebb prices it at its
    cheapest launch price, 0.2/h in us-east-1b, as its plan contract states, and replaces the node there."""
    types = catalog([_offered("current-on-demand", "32", [("us-east-1a", "on-demand", 0.5)]),
                     _offered("replacement", "32", [("us-east-1a", "spot", 1.0), ("us-east-1b", "spot", 0.2),
                                                    ("us-east-1c", "spot", 0.4)])])
    out = plan_dict(types, REPLACE_POOL, claimed("a", itype="current-on-demand", cpu="32"), pod("web", "a"))
    [command] = out["commands"]
    [replacement] = command["replacements"]
    assert (command["action"], replacement["instanceTypes"], replacement["capacityType"], replacement["price"]) == (
        "replace", ["replacement"], "spot", 0.2)


# -- Context("Replace"), the minValues cases --------------------------------------------------------------------------

def _eighteen(capacity_type: str, cheapest_at: int | None = 16) -> dict[str, Any]:
    """18 types s00.large... of ``capacity_type`` in every zone, priced 1.00, 1.10, ... in list order, except that
    the one at ``cheapest_at`` costs 0.001 (the suite's spot instances with "an instancetype that is outside the
    bound of 15 instances" made the cheapest)."""
    prices = [1.00 + i * 0.1 for i in range(18)]
    if cheapest_at is not None:
        prices[cheapest_at] = 0.001
    return catalog([_offered(f"s{i:02d}.large", "8", [(z, capacity_type, round(p, 3)) for z in ZONES])
                    for i, p in enumerate(prices)])


def _instance_type_floor(min_values: int, capacity_type: str = "spot") -> dict[str, Any]:
    return _pool(requirements=[
        {"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": min_values},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]}])


@pytest.mark.parametrize(("min_values", "expected_types"), [
    pytest.param(16, 16, id="spot to spot consolidation should consider the max of default and minimum number of "
                            "instanceTypeOptions from minValues in requirement for truncation if minimum number of "
                            "instanceTypeOptions from minValues in requirement is greater than 15."),
    pytest.param(10, 15, id="spot to spot consolidation should consider the default for truncation if minimum number "
                            "of instanceTypeOptions from minValues in requirement is less than 15."),
])
def test_replace_spot_to_spot_truncation_with_min_values(min_values: int, expected_types: int) -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Replace"), the two truncation cases: the NodePool
    asks ``minValues`` distinct instance types; 18 spot types priced up from 1.00 except the 17th at 0.001; the node
    is of the 18th (the dearest). The replacement is launched from the cheapest ``max(15, minValues)`` types, the
    17th among them and the node's own type not."""
    out = plan_dict(_eighteen("spot"), _instance_type_floor(min_values),
                    claimed("a", itype="s17.large", capacity_type="spot"), pod("web", "a"), spot_to_spot=True)
    [command] = out["commands"]
    assert (command["action"], command["nodes"]) == ("replace", ["a"])
    [replacement] = command["replacements"]
    cheapest_first = ["s16.large", *[f"s{i:02d}.large" for i in range(16)]]
    assert replacement["instanceTypes"] == cheapest_first[:expected_types]
    assert "s17.large" not in replacement["instanceTypes"]


@pytest.mark.parametrize("capacity_type", [pytest.param("on-demand", id="if the candidate is on-demand node"),
                                           pytest.param("spot", id="if the candidate is spot node")])
def test_replace_consolidation_should_fail_if_filter_by_price_breaks_the_minimum_requirement(
        capacity_type: str) -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Replace"), DescribeTable("Consolidation should fail
    if filterByPrice breaks the minimum requirement from the NodePools."): the NodePool asks 16 distinct instance
    types; the node is of the 16th cheapest of 18, so 15 are cheaper: enough for spot-to-spot, not for minValues.
    The node stays, and its reason says which label fell short (Karpenter's "Filtering by price: minValues
    requirement is not met for label(s)")."""
    out = plan_dict(_eighteen(capacity_type, cheapest_at=None), _instance_type_floor(16, capacity_type),
                    claimed("a", itype="s15.large", capacity_type=capacity_type), pod("web", "a"), spot_to_spot=True)
    assert out["commands"] == []
    reason = blocked_of(out, "a")["reason"]
    assert "minValues requirement is not met for label(s) (label(s)=[node.kubernetes.io/instance-type])" in reason
    assert "15 value(s) of node.kubernetes.io/instance-type where minValues is 16" in reason


def test_replace_should_handle_failing_filter_out_same_instance_type_when_min_values_isnt_satisfied() -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Replace"), It("should handle failing
    filterOutSameInstanceType correctly (without a panic) when minValues isn't satisfied"): an on-demand NodePool
    asking 2 distinct instance types; two types, current-on-demand (5 cpu, 0.5/h) and other-on-demand (5 cpu, 0.4/h);
    three nodes of the first with 4 allocatable cpu, pods of 2 cpu: one on n0, one on n1, two on n2. Merging n0 and
    n1 into one new node leaves one option once the nodes' own type is filtered out, short of minValues; what
    consolidation does instead is delete one of n0 and n1 (its pod moves to the other), leaving two nodes."""
    types = catalog([_offered("current-on-demand", "5", [("us-east-1a", "on-demand", 0.5)]),
                     _offered("other-on-demand", "5", [("us-east-1a", "on-demand", 0.4)])])
    pool = _pool(requirements=[
        {"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 2},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}])
    nodes = [doc for i in range(3) for doc in claimed(f"n{i}", itype="current-on-demand", cpu="4", pods=100,
                                                      zone="us-east-1a")]
    pods = [pod(f"p{k}", f"n{i}", cpu="2", memory=None) for k, i in enumerate((0, 1, 2, 2))]
    out = plan_dict(types, pool, *nodes, *pods)
    commands = _commands(out)
    assert len(commands) == 1
    [(_method, action, taken)] = commands
    assert action == "delete" and len(taken) == 1 and taken[0] in ("n0", "n1")


# -- Context("MinValuesPolicy") ---------------------------------------------------------------------------------------

def test_min_values_policy_should_not_consolidate_a_node_by_relaxing_min_values_when_policy_is_best_effort() -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("MinValuesPolicy"), It("should not consolidate a node
    by relaxing min values when policy is set to BestEffort"): the NodePool asks 3 distinct instance types of the
    two the cloud offers; the node is of the dearer with one pod. Karpenter's BestEffort relaxes minValues when it
    provisions for pending pods, never to consolidate (ebb has no such policy: consolidation never relaxes it): the
    node stays, Unconsolidatable for the minValues violation."""
    types = catalog([instance_type(MOST_EXPENSIVE, "8", "32Gi", 110, 0.384),
                     instance_type(LEAST_EXPENSIVE, "2", "4Gi", 110, 0.0416)])
    pool = _pool(requirements=[{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                "values": [MOST_EXPENSIVE, LEAST_EXPENSIVE, "m5.large"], "minValues": 3}])
    out = plan_dict(types, pool, claimed("a", itype=MOST_EXPENSIVE, cpu="5", pods=100), pod("web", "a"))
    assert out["commands"] == []
    assert ("minValues requirement is not met for label(s) (label(s)=[node.kubernetes.io/instance-type])"
            in blocked_of(out, "a")["reason"])


# -- Context("Multi-NodeClaim") ---------------------------------------------------------------------------------------

def _multi_nodes(count: int, capacity_type: str, itype: str, pods_on: tuple[int, ...]) -> list[Any]:
    """``count`` 32-cpu nodes m0... of ``itype``, and one small pod on the node of each index in ``pods_on``."""
    docs: list[Any] = []
    for i in range(count):
        docs += claimed(f"m{i}", itype=itype, capacity_type=capacity_type, cpu="32", pods=100,
                        zone=("us-east-1a", "us-east-1b", "us-east-1c")[i % 3])
    docs += [pod(f"p{k}", f"m{i}", labels={"app": "test"}) for k, i in enumerate(pods_on)]
    return docs


def test_multi_nodeclaim_can_merge_3_nodes_into_1_if_the_candidate_is_on_demand_node() -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Multi-NodeClaim"), DescribeTable("can merge 3 nodes
    into 1"), Entry("if the candidate is on-demand node"): three of the most expensive nodes with a pod each become
    one cheaper node (the spot entry is tests/unit/test_karpenter_rules.py::test_consolidation_multi_nodeclaim_...)."""
    out = plan_dict(_pool(), *_multi_nodes(3, "on-demand", MOST_EXPENSIVE, (0, 1, 2)))
    assert _commands(out) == [("multi-node-consolidation", "replace", ["m0", "m1", "m2"])]
    assert len(out["commands"][0]["replacements"]) == 1


@pytest.mark.parametrize("capacity_type", CAPACITY_TYPES)
def test_multi_nodeclaim_wont_merge_2_nodes_into_1_of_the_same_type(capacity_type: str) -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Multi-NodeClaim"), DescribeTable("won't merge 2
    nodes into 1 of the same type"): two nodes of the cheapest type, one pod on m0 and two on m1; replacing both with
    one of the same type saves nothing, so m0 is deleted (its pod moves to m1). The on-demand nodes' NodePool offers
    on-demand only (with spot allowed, one spot node of the same type would be cheaper than two on-demand ones)."""
    pool = REPLACE_POOL if capacity_type == "spot" else _pool()
    out = plan_dict(pool, *_multi_nodes(2, capacity_type, LEAST_EXPENSIVE, (0, 1, 1)), spot_to_spot=True)
    assert [(c["action"], c["nodes"]) for c in out["commands"]] == [("delete", ["m0"])]


@pytest.mark.parametrize("capacity_type", CAPACITY_TYPES)
def test_multi_nodeclaim_should_consolidate_multiple_empty_nodes(capacity_type: str) -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Multi-NodeClaim"), DescribeTable("should consolidate
    multiple empty nodes via multi-nodeclaim consolidation"): three empty nodes go in one command (Emptiness's, in
    ebb as in Karpenter v1.14, whose consolidation leaves empty nodes to Emptiness)."""
    out = plan_dict(REPLACE_POOL, *_multi_nodes(3, capacity_type, MOST_EXPENSIVE, ()), spot_to_spot=True)
    assert _commands(out) == [("emptiness", "delete", ["m0", "m1", "m2"])]


# -- Context("Node Lifetime Consideration") ---------------------------------------------------------------------------

def test_node_lifetime_should_consolidate_the_node_with_best_savings_ratio_first() -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Node Lifetime Consideration"), It("should consolidate
    the node with best savings ratio first"): two nodes of the cheapest type under expireAfter 3s, n0 older with two
    pods, n1 with one; Karpenter's disruption controller (its expiration controller is not running in the suite)
    deletes n1. In ebb the NodePool's expireAfter makes both expired, and expiration acts first, as a budgeted method
    (docs/decisions.md, Differences: "Expiration is a disruption method with the reason Expired" and the method
    order); without expireAfter, consolidation deletes n1, the node with fewer pods to move."""
    def cluster(expire_after: str | None) -> list[Any]:
        return [_pool(expire_after=expire_after), claimed("n0", itype=LEAST_EXPENSIVE, cpu="32", pods=100),
                claimed("n1", itype=LEAST_EXPENSIVE, cpu="32", pods=100, zone="us-east-1b"),
                *[pod(f"p{i}", n, labels={"app": "test"}) for i, n in enumerate(("n0", "n0", "n1"))]]

    expiring = plan_dict(*cluster("3s"))
    assert {c["method"] for c in expiring["commands"]} == {"expiration"}
    assert {n for c in expiring["commands"] for n in c["nodes"]} == {"n0", "n1"}
    consolidating = plan_dict(*cluster(None))
    assert [(c["action"], c["nodes"]) for c in consolidating["commands"]] == [("delete", ["n1"])]


# -- Context("Topology Consideration") ---------------------------------------------------------------------------------

def test_topology_can_replace_node_maintaining_zonal_topology_spread() -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Topology Consideration"), It("can replace node
    maintaining zonal topology spread"): three full 1-cpu nodes, one per zone, b of the most expensive type, a
    1-cpu pod on each spread over zones with maxSkew 1; b is replaced by a cheaper node in b's own zone."""
    labels = {"app": "test-zonal-spread"}
    spread = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": labels}}]
    docs: list[Any] = [_pool()]
    for name, zone, itype in (("a", "us-east-1a", LEAST_EXPENSIVE), ("b", "us-east-1b", MOST_EXPENSIVE),
                              ("c", "us-east-1c", LEAST_EXPENSIVE)):
        docs += [*claimed(name, itype=itype, zone=zone, cpu="1"),
                 pod(f"p-{name}", name, cpu="1", memory="128Mi", labels=labels, spread=spread)]
    out = plan_dict(*docs)
    [command] = out["commands"]
    assert (command["action"], command["nodes"]) == ("replace", ["b"])
    assert [r["zones"] for r in command["replacements"]] == [["us-east-1b"]]


def test_topology_wont_delete_node_if_it_would_violate_pod_anti_affinity() -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Topology Consideration"), It("won't delete node if
    it would violate pod anti-affinity"): three nodes of the cheapest type, one 1-cpu pod on each that refuses to
    share a host with the others; nothing can be deleted or replaced cheaper."""
    labels = {"app": "test"}
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}]}}
    docs: list[Any] = [_pool()]
    for name, zone in (("a", "us-east-1a"), ("b", "us-east-1b"), ("c", "us-east-1c")):
        docs += [*claimed(name, itype=LEAST_EXPENSIVE, zone=zone, cpu="32"),
                 pod(f"p-{name}", name, cpu="1", memory="128Mi", labels=labels, affinity=anti)]
    out = plan_dict(*docs)
    assert out["commands"] == []


# -- Context("Preferences") ------------------------------------------------------------------------------------------

def test_preferences_should_consolidate_a_node_through_deletion_when_ignoring_preferences() -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Preferences"), It("should consolidate a node through
    deletion when ignoring preferences"): two 5-cpu nodes of the cheapest type, pods preferring (weight 1) not to
    share a host. Karpenter deletes n1 with PreferencePolicy Ignore, an option ebb does not have; under the default,
    Respect, which ebb follows, the preference is relaxed only when no node, new ones included, would take the pod:
    n1's pod would go to a new node, which costs as much as n1, so nothing is consolidated and n1's explanation says
    why (tests/unit/test_preference_relaxation.py has the rule's table)."""
    foo = {"app": "foo"}
    anti = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"labelSelector": {"matchLabels": foo},
                                          "topologyKey": "kubernetes.io/hostname"}}]}}
    out = plan_dict(_pool(), claimed("n0", itype=LEAST_EXPENSIVE, cpu="5", pods=100),
                    claimed("n1", itype=LEAST_EXPENSIVE, cpu="5", pods=100, zone="us-east-1b"),
                    *[pod(f"p{i}", node_name, labels=foo, affinity=anti)
                      for i, node_name in enumerate(("n0", "n0", "n1"))])
    assert out["commands"] == []
    assert "its preferred pod anti-affinity over kubernetes.io/hostname, and a new node would" in \
        blocked_of(out, "n1")["reason"]


# "should consolidate a node through replacement when ignoring preferences" needs Karpenter's PreferencePolicy
# Ignore: ebb has no such option and, like Karpenter's default (Respect), sizes a replacement by the pod's preferred
# node affinity, so a pod preferring the node's own type keeps it.


# -- Context("Static NodePool") ---------------------------------------------------------------------------------------

def test_static_nodepool_should_not_consolidate_static_nodepool_nodes() -> None:
    """consolidation_test.go, Describe("Consolidation"), Context("Static NodePool"), It("should not consolidate static
    NodePool nodes"): two nodes of a NodePool with ``spec.replicas: 2``, one pod between them; neither consolidation
    takes one."""
    static = _pool("static")
    static["spec"]["replicas"] = 2
    out = plan_dict(static, claimed("s0", pool="static", itype=MOST_EXPENSIVE), pod("web", "s0"),
                    claimed("s1", pool="static", itype=MOST_EXPENSIVE, zone="us-east-1b"))
    assert out["commands"] == []
    assert "is static (spec.replicas 2)" in blocked_of(out, "s0")["reason"]

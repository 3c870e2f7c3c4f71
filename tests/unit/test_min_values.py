"""A NodePool requirement's ``minValues`` on a consolidation's replacement: which values of the key count.

Karpenter v1.14.1 (``pkg/cloudprovider/types.go``, ``InstanceTypes.SatisfiesMinValues``, called by
``RemoveInstanceTypeOptionsByPriceAndMinValues`` in ``pkg/controllers/provisioning/scheduling/nodeclaim.go`` for
single- and multi-node consolidation) counts, over the replacement's instance type options cheapest first, the
values of each instance type's own requirement on the key (``it.Requirements.Get(key).Values()``), not those of the
offerings the NodeClaim may launch: an instance type's zone requirement holds the zones of its available offerings
of every capacity type, and its capacity type requirement their capacity types (the fake cloud provider's
``NewInstanceTypeWithCustomRequirement``, which Karpenter's suites use; the kwok provider's ``newInstanceType``
takes every offering, all available). So a zone counts though the replacement launches as another capacity type
there, though the NodePool launches no such capacity type there, and though the pods narrow the NodeClaim to
another zone; an unavailable offering's zone does not.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from ebb.core.causes import Stale
from ebb.core.validation import validate
from tests.kit.builders import NOW, blocked_of, catalog, instance_type, node, nodepool, plan, plan_dict, pod, snapshot
from tests.kit.karpenter_suite import claimed

A, B = "us-east-1a", "us-east-1b"
ZONE = "topology.kubernetes.io/zone"
CT = "karpenter.sh/capacity-type"
BOTH = {"key": CT, "operator": "In", "values": ["spot", "on-demand"]}
ON_DEMAND = {"key": CT, "operator": "In", "values": ["on-demand"]}
TWO_ZONES = {"key": ZONE, "operator": "Exists", "minValues": 2}
TWO_CAPACITY_TYPES = {"key": CT, "operator": "In", "values": ["spot", "on-demand"], "minValues": 2}


def _type(name: str, cpu: str, offerings: list[tuple[str, str, float, bool]]) -> dict[str, Any]:
    """An instance type with the given (zone, capacity type, price, available) offerings."""
    return {"name": name, "capacity": {"cpu": cpu, "memory": "64Gi", "pods": "110"},
            "overhead": {"cpu": "0", "memory": "0"},
            "offerings": [{"zone": z, "capacityType": ct, "price": p, "available": ok} for z, ct, p, ok in offerings]}


# (case, the cheaper type's offerings, the NodePool's requirements, the pod's nodeSelector, replaced)
CASES = [
    pytest.param([(A, "on-demand", 0.3, True), (B, "on-demand", 0.3, True)], [TWO_ZONES, ON_DEMAND], {}, True,
                 id="two zones of the replacement's capacity type"),
    pytest.param([(A, "on-demand", 0.3, True), (A, "spot", 0.1, True)], [TWO_ZONES, BOTH], {}, False,
                 id="one zone of both capacity types"),
    pytest.param([(A, "on-demand", 0.3, True), (B, "on-demand", 0.3, False)], [TWO_ZONES, ON_DEMAND], {}, False,
                 id="an unavailable offering's zone does not count"),
    pytest.param([(A, "spot", 0.1, True), (B, "on-demand", 0.3, True)], [TWO_ZONES, BOTH], {}, True,
                 id="a zone of the other capacity type counts"),
    pytest.param([(A, "on-demand", 0.3, True), (B, "spot", 0.1, True)], [TWO_ZONES, ON_DEMAND], {}, True,
                 id="a zone of a capacity type the NodePool does not launch counts"),
    pytest.param([(A, "on-demand", 0.3, True), (B, "on-demand", 0.3, True)], [TWO_ZONES, ON_DEMAND], {ZONE: A}, True,
                 id="a zone the pods do not select counts"),
    pytest.param([(A, "on-demand", 0.3, True), (A, "spot", 0.1, True)], [TWO_CAPACITY_TYPES], {}, True,
                 id="every capacity type of the type counts"),
]


@pytest.mark.parametrize(("offerings", "requirements", "selector", "replaced"), CASES)
def test_min_values_counts_the_instance_types_values(offerings: list[tuple[str, str, float, bool]],
                                                     requirements: list[dict[str, Any]], selector: dict[str, str],
                                                     replaced: bool) -> None:
    """An on-demand node of a 32-cpu type at 1.00/h in us-east-1a with one small pod; the only cheaper type, 4 cpu,
    has ``offerings``. The node is replaced by it when its instance type offers ``minValues`` values of the key,
    else it stays with the reason Karpenter's Unconsolidatable event gives."""
    types = catalog([_type("big", "32", [(A, "on-demand", 1.0, True)]), _type("small", "4", offerings)])
    pool = nodepool("default", consolidate_after="0s", budgets=[{"nodes": "100%"}], requirements=requirements)
    out = plan_dict(types, pool, claimed("a", itype="big", cpu="32"), pod("web", "a", node_selector=selector))
    if replaced:
        [command] = out["commands"]
        assert (command["action"], command["nodes"], command["replacements"][0]["instanceTypes"]) == (
            "replace", ["a"], ["small"])
    else:
        assert out["commands"] == []
        assert "minValues requirement is not met for label(s)" in blocked_of(out, "a")["reason"]


def test_a_nodepool_whose_types_cannot_meet_its_min_values_leaves_the_pod_to_the_next_nodepool() -> None:
    """Karpenter's scheduler asks a NodeClaim's remaining types to meet the NodePool's ``minValues`` before it takes
    a pod (``filterInstanceTypesByRequirements``, Strict): the heavier NodePool ``heavy`` asks 3 instance types of the
    2 the catalog has, so a new node for the pod comes from ``light``, and the dearer node is replaced. ebb opened the
    replacement in ``heavy`` and then refused it for minValues."""
    types = catalog([_type("big", "32", [(A, "on-demand", 1.0, True)]),
                     _type("small", "4", [(A, "on-demand", 0.3, True)])])
    heavy = nodepool("heavy", consolidate_after="0s", budgets=[{"nodes": "100%"}], requirements=[
        ON_DEMAND, {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["big", "small", "huge"],
                    "minValues": 3}])
    heavy["spec"]["weight"] = 50
    light = nodepool("light", consolidate_after="0s", budgets=[{"nodes": "100%"}], requirements=[ON_DEMAND])
    out = plan_dict(types, heavy, light, claimed("a", pool="light", itype="big", cpu="32"), pod("web", "a"))
    [command] = out["commands"]
    assert (command["action"], command["nodes"]) == ("replace", ["a"])
    [replacement] = command["replacements"]
    assert (replacement["nodePool"], replacement["instanceTypes"]) == ("light", ["small"])


def test_a_pod_no_nodepool_can_launch_for_within_its_min_values_says_so() -> None:
    """The pod's reason names the NodePool whose minValues no type that holds it meets."""
    types = catalog([_type("big", "32", [(A, "on-demand", 1.0, True)]),
                     _type("small", "4", [(A, "on-demand", 0.3, True)])])
    pool = nodepool("default", consolidate_after="0s", budgets=[{"nodes": "100%"}], requirements=[
        ON_DEMAND, {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["big", "small", "huge"],
                    "minValues": 3}])
    out = plan_dict(types, pool, claimed("a", itype="big", cpu="32"), pod("web", "a"))
    assert out["commands"] == []
    assert ("no NodePool offers an instance type that fits it that meets its minValues (NodePool default: minValues "
            "requirement is not met for label(s) (label(s)=[node.kubernetes.io/instance-type]): the instance types "
            "that hold it offer only 2 value(s) of node.kubernetes.io/instance-type where minValues is 3)"
            ) in blocked_of(out, "a")["reason"]


# -- minValues on drift's and expiration's replacements ----------------------------------------------------------------
# Karpenter's disruption simulation (helpers.go SimulateScheduling, scheduler.go Results.TruncateInstanceTypes) leaves
# the pods of a NodeClaim whose instance type options cannot meet its NodePool's minValues unscheduled
# ("NodePool couldn't meet minValues requirements", MinValuesPolicy Strict), and drift.go makes no command for a
# candidate whose pods do not all schedule. ebb's expiration, simulated with replacements as drift is, does the same.

#: node a's type "mid" (4 cpu) and "large" (8 cpu) hold the 3-cpu pod; "small" (2 cpu) does not: two types hold it
ROTATION_TYPES = catalog([instance_type("small", "2", "8Gi", 29, 0.05), instance_type("mid", "4", "16Gi", 29, 0.10),
                          instance_type("large", "8", "32Gi", 29, 0.20)])


def _types_floor(min_values: int) -> list[dict[str, Any]]:
    return [ON_DEMAND, {"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": min_values}]


def _drifted(min_values: int) -> list[Any]:
    return [nodepool(node_hash="h2", requirements=_types_floor(min_values)), node("a", itype="mid", node_hash="h1")]


def _expired(min_values: int) -> list[Any]:
    return [nodepool(expire_after="24h", requirements=_types_floor(min_values)), node("a", itype="mid")]


def _static_drifted(min_values: int) -> list[Any]:
    pool = nodepool(node_hash="h2", requirements=_types_floor(min_values))
    pool["spec"]["replicas"] = 1
    return [pool, node("a", itype="mid", node_hash="h1")]


# (case, the documents but the pod and the catalog, the method, whether node a is replaced)
ROTATION = [
    ("drift: two types hold the pod, minValues 2", _drifted(2), "drift", True),
    ("drift: two types hold the pod, minValues 3", _drifted(3), "drift", False),
    ("expiration: two types hold the pod, minValues 2", _expired(2), "expiration", True),
    ("expiration: two types hold the pod, minValues 3", _expired(3), "expiration", False),
    ("a static NodePool's drift, one for one: minValues 2", _static_drifted(2), "drift", True),
    ("a static NodePool's drift, one for one: minValues 3", _static_drifted(3), "drift", False),
]


@pytest.mark.parametrize(("docs", "method", "replaced"), [c[1:] for c in ROTATION], ids=[c[0] for c in ROTATION])
def test_rotation_replacement_meets_min_values(docs: list[Any], method: str, replaced: bool) -> None:
    """Node a (mid, the NodePool's only node) has a 3-cpu pod only a new mid or large node holds: its replacement's
    options offer two instance types. Under minValues 3 the node stays, with the minValues reason (the simulation's
    new node refuses the pod, as Karpenter's scheduler does; the replacement filter would refuse the launch too)."""
    out = plan_dict(ROTATION_TYPES, *docs, pod("web", "a", cpu="3"))
    if replaced:
        [command] = out["commands"]
        assert (command["method"], command["action"], command["nodes"]) == (method, "replace", ["a"])
        assert command["replacements"][0]["instanceTypes"] == ["mid", "large"]
    else:
        assert out["commands"] == []
        blocked = blocked_of(out, "a")
        assert blocked["method"] == method
        # the simulation's new node takes the pod only while its types meet minValues: the pod has nowhere to go
        assert ("would have nowhere to go: no other node can take pods, and no NodePool offers an instance type that "
                "fits it that meets its minValues (NodePool default: minValues requirement is not met for label(s) "
                "(label(s)=[node.kubernetes.io/instance-type]): the instance types that hold it offer only 2 value(s) "
                "of node.kubernetes.io/instance-type where minValues is 3)") in blocked["reason"], blocked["reason"]


# -- the NodeClaim's cheapest 600 instance types (Karpenter's MaxInstanceTypes) ----------------------------------------
# Karpenter v1.14.1's disruption simulation (helpers.go SimulateScheduling -> scheduler.go
# Results.TruncateInstanceTypes, scheduling.MaxInstanceTypes = 600) keeps a new NodeClaim's 600 cheapest instance types
# and asks its NodePool's minValues of those (cloudprovider/types.go InstanceTypes.Truncate, Strict): short of them,
# the NodeClaim's pods do not schedule, so consolidation and drift make no command, and validation (which simulates
# the same way) fails.
FAMILY = "karpenter.k8s.aws/instance-family"
TWO_FAMILIES: list[dict[str, Any]] = [ON_DEMAND, {"key": FAMILY, "operator": "Exists", "minValues": 2}]


def _family_type(name: str, family: str, cpu: str, price: float) -> dict[str, Any]:
    return {"name": name, "labels": {FAMILY: family}, "capacity": {"cpu": cpu, "memory": "64Gi", "pods": "110"},
            "overhead": {"cpu": "0", "memory": "0"},
            "offerings": [{"zone": A, "capacityType": "on-demand", "price": price, "available": True}]}


def _many_types(cheap: int) -> dict[str, Any]:
    """``cheap`` types of family "cheap" (from $0.01/h), then "dear" ($0.5/h, family "dear"), then node a's "big"
    ($1/h, family "big"): the NodeClaim's 600 cheapest offer two families when ``cheap`` is 599, one when 600."""
    return catalog([_family_type(f"cheap-{i:03d}", "cheap", "4", 0.01 + i * 1e-5) for i in range(cheap)]
                   + [_family_type("dear", "dear", "4", 0.5), _family_type("big", "big", "32", 1.0)])


def _family_docs(cheap: int, *, drifted: bool) -> list[Any]:
    pool = nodepool("default", consolidate_after="0s", budgets=[{"nodes": "100%"}], requirements=TWO_FAMILIES,
                    node_hash="h2" if drifted else "h1")
    return [_many_types(cheap), pool, claimed("a", itype="big", cpu="32", node_hash="h1", labels={FAMILY: "big"}),
            pod("web", "a")]


@pytest.mark.parametrize(("cheap", "drifted", "replaced"), [
    (599, False, True),  # the cheapest 600: 599 "cheap" and "dear"
    (600, False, False),  # the cheapest 600 are all "cheap"; the 602 together offer three families
    (599, True, True),
    (600, True, False),
])
def test_min_values_are_asked_of_the_cheapest_600_types(cheap: int, drifted: bool, replaced: bool) -> None:
    """ebb asked minValues of every instance type the new node could launch as, and replaced node a in both cases;
    Karpenter's simulation keeps the cheapest 600 and asks it of them. A replacement launches from those 600 at
    most."""
    out = plan_dict(*_family_docs(cheap, drifted=drifted))
    method = "drift" if drifted else "single-node-consolidation"
    if replaced:
        [command] = out["commands"]
        assert (command["method"], command["action"], command["nodes"]) == (method, "replace", ["a"])
        assert len(command["replacements"][0]["instanceTypes"]) == 600
        assert command["replacements"][0]["instanceTypes"][-1] == "dear"
    else:
        assert out["commands"] == []
        blocked = blocked_of(out, "a")
        assert blocked["method"] == method
        assert ("minValues requirement is not met for label(s) (label(s)=[karpenter.k8s.aws/instance-family]): the "
                "600 cheapest instance types") in blocked["reason"], blocked["reason"]


@pytest.mark.parametrize(("cheap_later", "stale"), [(599, False), (600, True)])
def test_validation_asks_min_values_of_the_cheapest_600_types(cheap_later: int, stale: bool) -> None:
    """Node a's replacement was decided while the cheapest 600 types offered two families; by validation a
    cheaper type of the first family came, and the cheapest 600 offer one: Karpenter's validation simulates as its
    decision did (``SimulateScheduling``, ``Truncate`` included), the pod no longer schedules, and the command is
    rejected. ebb's validation asked minValues of every type the new node could launch as and kept it."""
    [command] = plan(*_family_docs(599, drifted=False)).first.commands
    assert (command.action, command.nodes) == ("replace", ("a",))
    found = validate(command, snapshot(*_family_docs(cheap_later, drifted=False)), NOW + timedelta(seconds=15))
    if not stale:
        assert found is None
    else:
        assert found is not None
        assert found.kind is Stale.POD_NO_LONGER_FITS
        assert ("pod default/web would no longer fit: NodePool default couldn't meet minValues requirements: minValues "
                "requirement is not met for label(s) (label(s)=[karpenter.k8s.aws/instance-family]): the 600 cheapest "
                "instance types its replacement could launch as offer only 1 value(s)") in found.text, found.text

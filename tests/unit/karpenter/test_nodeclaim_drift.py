"""controllers/nodeclaim/disruption/drift_test.go, translated (Karpenter v1.14.1, paths under ``pkg``).

Karpenter's NodeClaim disruption controller sets ``Drifted`` from the NodePool's hash, its requirements and the
cloud provider's offerings; ebb computes the same from the snapshot in ``ebb.core.methods.drift.drift_reason``
(docs/decisions.md, Differences: "Drift is computed by ebb ... as well as read from Drifted=True"). Each case is a
node of a WhenEmpty NodePool with one pod (so only drift can take it) and the case asserts whether drift does. ebb
reads the hash annotations from the Node (Karpenter copies the NodeClaim's annotations to its Node at
registration). Not translated, with why (docs/decisions.md, "Karpenter's test suites, translated"): "should detect
drift" and "should ignore drift for NodeClaims not managed by this instance of Karpenter" (the cloud provider's own
IsDrifted, and which NodeClasses it manages); "should remove the status condition ... when the nodeClaim launch
condition is unknown / false" and "... if the nodeClaim is no longer drifted" (the controller clearing a stale
condition; ebb reads a NodeClaim's Drifted=True as given). "should detect stale instance type drift if the instance
type label doesn't exist / the instance type doesn't exist / the offerings aren't compatible" are
tests/unit/test_karpenter_rules.py::test_drift_stale_instance_type.
"""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core.cluster import ClusterView
from ebb.core.methods.drift import drifted_nodes
from tests.kit.builders import (
    NOW,
    catalog,
    instance_type,
    node,
    nodeclaim,
    nodepool,
    plan_dict,
    pod,
    snapshot,
)
from tests.kit.karpenter_suite import DRIFTED

OS = "kubernetes.io/os"
CT = "karpenter.sh/capacity-type"


def _req(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def _drift(pool: dict[str, Any], *docs: Any, claim_conditions: tuple[dict[str, Any], ...] = (),
           **node_kwargs: Any) -> str | None:
    """Why node ``a`` (with one pod, and its NodeClaim) has drifted from ``pool``, or None: what ebb's drift finds,
    the counterpart of the NodeClaim's Drifted condition (whether a command follows depends on where the pod can
    go, which these cases do not ask)."""
    view = ClusterView.build(snapshot(pool, node("a", **node_kwargs),
                                      nodeclaim("claim-a", "a", pool=pool["metadata"]["name"],
                                                conditions=claim_conditions),
                                      pod("web", "a"), *docs), NOW)
    return drifted_nodes(view).get("a")


def _pool(**kwargs: Any) -> dict[str, Any]:
    return nodepool(policy="WhenEmpty", **kwargs)


def test_should_detect_static_drift_before_cloud_provider_drift() -> None:
    """nodeclaim/disruption/drift_test.go, Describe("Drift"), It("should detect static drift before cloud provider
    drift"): the hashes differ (same version) and the NodeClaim is Drifted=True; the reason given is the hash."""
    reason = _drift(_pool(node_hash="test-123456789"), node_hash="test-123", claim_conditions=(DRIFTED,))
    assert reason is not None
    assert "nodepool-hash test-123 differs" in reason


def test_should_detect_node_requirement_drift_before_cloud_provider_drift() -> None:
    """nodeclaim/disruption/drift_test.go, Describe("Drift"), It("should detect node requirement drift before cloud
    provider drift"): the NodePool now requires no instance-type label; the reason given is the requirement."""
    reason = _drift(_pool(requirements=[_req("node.kubernetes.io/instance-type", "DoesNotExist")]),
                    claim_conditions=(DRIFTED,))
    assert reason is not None
    assert "no longer satisfies NodePool default's requirement node.kubernetes.io/instance-type DoesNotExist" in reason


def test_should_not_detect_drift_if_the_nodepool_does_not_exist() -> None:
    """nodeclaim/disruption/drift_test.go, Describe("Drift"), It("should not detect drift if the nodePool does not
    exist"): the node's NodePool is not in the input; nothing is done to it."""
    out = plan_dict(_pool(name="other"), node("a"), nodeclaim("claim-a", "a", conditions=[DRIFTED]), pod("web", "a"))
    assert out["commands"] == []


# -- Context("NodeRequirement Drift") ---------------------------------------------------------------------------------

ON_DEMAND = _req(CT, "In", "on-demand")
LINUX = _req(OS, "In", "linux")

# (Karpenter's case, the old requirements, the new ones, the node's labels, drifted under the new ones)
REQUIREMENT_DRIFT = [
    ("should return drifted if the nodePool node requirement is updated",
     [ON_DEMAND, _req("kubernetes.io/arch", "In", "amd64"), LINUX], [_req(CT, "In", "spot")], {}, True),
    ("should return drifted if a new node requirement is added", [ON_DEMAND, LINUX],
     [ON_DEMAND, LINUX, _req("kubernetes.io/arch", "In", "amd64")], {"kubernetes.io/arch": "arm64"}, True),
    ("should return drifted if a node requirement is reduced", [ON_DEMAND, _req(OS, "In", "linux", "windows")],
     [ON_DEMAND, _req(OS, "In", "windows")], {}, True),
    ("should not return drifted if a node requirement is expanded", [ON_DEMAND, LINUX],
     [ON_DEMAND, _req(OS, "In", "linux", "windows")], {}, False),
    ("should not return drifted if a node requirement set to Exists", [ON_DEMAND, LINUX],
     [ON_DEMAND, _req(OS, "Exists")], {}, False),
    ("should return drifted if a node requirement set to DoesNotExists", [ON_DEMAND, LINUX],
     [ON_DEMAND, _req(OS, "DoesNotExist")], {}, True),
    ("should not return drifted if a nodeClaim is greater then node requirement (it is drifted: 5 > 10 fails)",
     [ON_DEMAND, _req("test-label", "Gt", "2")], [ON_DEMAND, _req("test-label", "Gt", "10")], {"test-label": "5"},
     True),
    ("should not return drifted if a nodeClaim is less then node requirement (it is drifted: 2 < 1 fails)",
     [ON_DEMAND, _req("test-label", "Lt", "5")], [ON_DEMAND, _req("test-label", "Lt", "1")], {"test-label": "2"},
     True),
]


@pytest.mark.parametrize(("old", "new", "labels", "drifted"), [c[1:] for c in REQUIREMENT_DRIFT],
                         ids=[c[0] for c in REQUIREMENT_DRIFT])
def test_node_requirement_drift(old: list[dict[str, Any]], new: list[dict[str, Any]], labels: dict[str, str],
                                drifted: bool) -> None:
    """nodeclaim/disruption/drift_test.go, Describe("Drift"), Context("NodeRequirement Drift"): the node (on-demand,
    linux, amd64) is not drifted under the old requirements; under the new ones as the table says. (In "a new node
    requirement is added" Karpenter's NodeClaim has no arch label; the builders' node has one, so here it is arm64.)"""
    assert _drift(_pool(requirements=old), labels=labels) is None
    assert (_drift(_pool(requirements=new), labels=labels) is not None) is drifted


def test_should_return_drifted_only_on_nodeclaims_that_are_drifted_from_an_updated_nodepool() -> None:
    """nodeclaim/disruption/drift_test.go, Context("NodeRequirement Drift"), It("should return drifted only on
    NodeClaims that are drifted from an updated nodePool"): windows is removed from the NodePool's OS requirement;
    only the windows node drifts."""
    pool = _pool(requirements=[ON_DEMAND, LINUX])
    out = plan_dict(pool, node("linux-node"), nodeclaim("c-linux", "linux-node"), pod("a", "linux-node"),
                    node("windows-node", zone="us-east-1b", labels={OS: "windows"}),
                    nodeclaim("c-windows", "windows-node"), pod("b", "windows-node"))
    assert [(c["method"], c["nodes"]) for c in out["commands"]] == [("drift", ["windows-node"])]


# -- Context("NodePool Static Drift") ---------------------------------------------------------------------------------

def _template_change(field: str) -> dict[str, Any]:
    """The NodePool after a change to one static field of its template; Karpenter's hash controller writes the new
    hash on it, which is what ebb compares (ebb does not compute the hash)."""
    pool = _pool(node_hash="hash-after-the-change")
    spec = pool["spec"]["template"]["spec"]
    meta = pool["spec"]["template"].setdefault("metadata", {})
    changes = {
        "Annoations": lambda: meta.setdefault("annotations", {}).update(keyAnnotationTest="valueAnnotationTest"),
        "Labels": lambda: meta.setdefault("labels", {}).update(keyLabelTest="valueLabelTest"),
        "Taints": lambda: spec.update(taints=[{"key": "keytest2taint", "effect": "NoExecute"}]),
        "StartupTaints": lambda: spec.update(startupTaints=[{"key": "keytest2taint", "effect": "NoExecute"}]),
        "NodeClassRef Name": lambda: spec["nodeClassRef"].update(name="testName"),
        "ExpireAfter": lambda: spec.update(expireAfter="100m"),
        "TerminationGracePeriod": lambda: spec.update(terminationGracePeriod="100s"),
    }
    changes[field]()
    return pool


STATIC_FIELDS = ["Annoations", "Labels", "Taints", "StartupTaints", "NodeClassRef Name", "ExpireAfter",
                 "TerminationGracePeriod"]


@pytest.mark.parametrize("field", STATIC_FIELDS)
def test_should_detect_drift_on_changes_to_the_static_fields(field: str) -> None:
    """nodeclaim/disruption/drift_test.go, Context("NodePool Static Drift"), DescribeTable("should detect drift on
    changes to the static fields"): the node carries the hash of the template it was launched from; the NodePool's
    is the changed template's."""
    assert _drift(_pool(node_hash="hash-before-the-change"), node_hash="hash-before-the-change") is None
    reason = _drift(_template_change(field), node_hash="hash-before-the-change")
    assert reason is not None
    assert "nodepool-hash hash-before-the-change differs" in reason


# (Karpenter's case, the NodePool's hash annotations, the node's)
NO_STATIC_DRIFT = [
    ("should not return drifted if karpenter.sh/nodepool-hash annotation is not present on the NodePool", {},
     {"karpenter.sh/nodepool-hash": "h2", "karpenter.sh/nodepool-hash-version": "v3"}),
    ("should not return drifted if karpenter.sh/nodepool-hash annotation is not present on the NodeClaim",
     {"karpenter.sh/nodepool-hash": "h1", "karpenter.sh/nodepool-hash-version": "v3"},
     {"karpenter.sh/nodepool-hash-version": "v3"}),
    ("should not return drifted if the NodeClaim's karpenter.sh/nodepool-hash-version annotation does not match the "
     "NodePool's",
     {"karpenter.sh/nodepool-hash": "test-hash-1", "karpenter.sh/nodepool-hash-version": "test-version-1"},
     {"karpenter.sh/nodepool-hash": "test-hash-2", "karpenter.sh/nodepool-hash-version": "test-version-2"}),
    ("should not return drifted if karpenter.sh/nodepool-hash-version annotation is not present on the NodeClaim",
     {"karpenter.sh/nodepool-hash": "h1", "karpenter.sh/nodepool-hash-version": "v3"},
     {"karpenter.sh/nodepool-hash": "test-hash-111111111"}),
    ("the same version, different hashes: drifted",
     {"karpenter.sh/nodepool-hash": "h1", "karpenter.sh/nodepool-hash-version": "v3"},
     {"karpenter.sh/nodepool-hash": "h2", "karpenter.sh/nodepool-hash-version": "v3"}),
]


@pytest.mark.parametrize(("pool_ann", "node_ann"), [c[1:] for c in NO_STATIC_DRIFT],
                         ids=[c[0] for c in NO_STATIC_DRIFT])
def test_nodepool_static_drift_needs_both_hashes_at_one_version(pool_ann: dict[str, str],
                                                                node_ann: dict[str, str]) -> None:
    """nodeclaim/disruption/drift_test.go, Context("NodePool Static Drift"): static drift only when both carry a
    hash and the same hash version (the last row, where they do and differ, drifts)."""
    reason = _drift(_pool(annotations=pool_ann), annotations=node_ann)
    assert (reason is not None) is (pool_ann.get("karpenter.sh/nodepool-hash") == "h1" and
                            node_ann.get("karpenter.sh/nodepool-hash") == "h2")


# -- Context("Reserved Capacity") -------------------------------------------------------------------------------------

# (Karpenter's case, the capacity types the node's type is still offered as, drifted)
RESERVED = [
    ("shouldn't drift when a matching instance type exists with reserved and on-demand offerings",
     ("reserved", "on-demand"), False),
    ("shouldn't drift when a matching instance type exists with reserved offerings", ("reserved",), False),
    ("shouldn't drift when a matching instance type exists with on-demand offerings", ("on-demand",), False),
    ("should drift when a matching instance type exists but the only offering is spot", ("spot",), True),
    ("should drift when a matching instance type exists but there are no compatible offerings (here: on-demand in "
     "another zone; ebb's catalog refuses a type with no offering at all)", (), True),
]


@pytest.mark.parametrize(("capacity_types", "drifted"), [c[1:] for c in RESERVED], ids=[c[0] for c in RESERVED])
def test_reserved_capacity_instance_type_not_found(capacity_types: tuple[str, ...], drifted: bool) -> None:
    """nodeclaim/disruption/drift_test.go, Context("Reserved Capacity"), DescribeTable("InstanceTypeNotFound"): a
    reserved node is matched against reserved and on-demand offerings (it may have been demoted to on-demand)."""
    offerings = [{"zone": "us-east-1a", "capacityType": ct, "price": 0.05} for ct in capacity_types] or \
        [{"zone": "us-east-1b", "capacityType": "on-demand", "price": 0.05}]
    types = catalog([{"name": "m5.large", "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                      "overhead": {"cpu": "0", "memory": "0"}, "offerings": offerings},
                     instance_type("m5.xlarge", "4", "16Gi", 58, 0.192, spot=0.07)])
    pool = _pool(requirements=[_req(CT, "In", "reserved", "on-demand", "spot")])
    assert (_drift(pool, types, capacity_type="reserved") is not None) is drifted


def test_an_empty_hash_annotation_is_a_hash_that_differs() -> None:
    """``areStaticFieldsDrifted`` asks whether each annotation is there, not whether it is empty: a NodeClaim whose
    ``karpenter.sh/nodepool-hash`` is ``""`` at the NodePool's hash version has drifted from a NodePool hashed h1."""
    pool = _pool(annotations={"karpenter.sh/nodepool-hash": "h1", "karpenter.sh/nodepool-hash-version": "v3"})
    reason = _drift(pool, annotations={"karpenter.sh/nodepool-hash": "", "karpenter.sh/nodepool-hash-version": "v3"})
    assert reason is not None and "nodepool-hash" in reason


@pytest.mark.parametrize(("capacity_types", "drifted"), [(("spot",), False), (("on-demand",), False)])
def test_a_node_without_a_capacity_type_label_is_matched_against_every_capacity_type(
        capacity_types: tuple[str, ...], drifted: bool) -> None:
    """``instanceTypeNotFound`` builds its requirements from the NodeClaim's labels: without a
    ``karpenter.sh/capacity-type`` label any offering of the type in the node's zone is compatible, so a type offered
    only as spot is still offered (ebb read the missing label as on-demand and drifted the node)."""
    offerings = [{"zone": "us-east-1a", "capacityType": ct, "price": 0.05} for ct in capacity_types]
    types = catalog([{"name": "m5.large", "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                      "overhead": {"cpu": "0", "memory": "0"}, "offerings": offerings},
                     instance_type("m5.xlarge", "4", "16Gi", 58, 0.192, spot=0.07)])
    pool = _pool(requirements=[])  # no capacity-type requirement: a missing label would be requirement drift
    bare = node("a")
    del bare["metadata"]["labels"][CT]
    view = ClusterView.build(snapshot(pool, types, bare, nodeclaim("claim-a", "a"), pod("web", "a")), NOW)
    assert ("a" in drifted_nodes(view)) is drifted

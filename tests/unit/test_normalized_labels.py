"""The older names of well-known labels (Karpenter's ``NormalizedLabels``, ``pkg/apis/v1/labels.go``:
``beta.kubernetes.io/arch``, ``beta.kubernetes.io/os``, ``beta.kubernetes.io/instance-type``,
``failure-domain.beta.kubernetes.io/zone`` and ``.../region``), which Karpenter reads under their current names
wherever it builds a scheduling requirement (``scheduling.NewRequirementWithFlexibility``): a pod's node selector and
node affinity, a NodePool's requirements, a node's labels. Instance types carry only the current names, so without
this a pod that selects an older name fits no new node, and one that excludes a value by an older name gets a new
node with that value."""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core.model import Requirement
from tests.kit.builders import catalog, instance_type, node, nodepool, plan_dict, pod, snapshot

ARCH, BETA_ARCH = "kubernetes.io/arch", "beta.kubernetes.io/arch"
ZONE, BETA_ZONE = "topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone"


def _typed(name: str, cpu: str, memory: str, price: float, arch: str) -> dict[str, Any]:
    it = instance_type(name, cpu, memory, 29, price)
    it["labels"] = {ARCH: arch}
    return it


#: an arm64 type cheaper than the amd64 one, and the large amd64 type the node runs on
CATALOG = catalog([_typed("c6g.medium", "1", "2Gi", 0.034, "arm64"), _typed("t3.medium", "2", "4Gi", 0.0416, "amd64"),
                   _typed("m5.2xlarge", "8", "32Gi", 0.384, "amd64")])


def _replace(**spec: Any) -> dict[str, Any]:
    """The plan for one m5.2xlarge whose one small pod has ``spec`` (node_selector, affinity)."""
    return plan_dict(nodepool(), CATALOG, node("big", itype="m5.2xlarge", cpu="8", memory="32Gi"),
                     pod("web", "big", cpu="500m", memory="512Mi", **spec))


# (the pod's constraint, the replacement's instance types it allows, its zones or None for any)
CASES: list[tuple[str, dict[str, Any], set[str], set[str] | None]] = [
    ("beta arch NotIn arm64", {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": BETA_ARCH, "operator": "NotIn", "values": ["arm64"]}]}]}}}},
     {"t3.medium"}, None),
    ("beta arch nodeSelector amd64", {"node_selector": {BETA_ARCH: "amd64"}}, {"t3.medium"}, None),
    ("beta zone nodeSelector", {"node_selector": {BETA_ZONE: "us-east-1b"}}, {"c6g.medium", "t3.medium"},
     {"us-east-1b"}),
    ("current arch nodeSelector", {"node_selector": {ARCH: "amd64"}}, {"t3.medium"}, None),
]


@pytest.mark.parametrize(("constraint", "allowed", "zones"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_pod_selecting_an_older_label_name_is_replaced_as_by_its_current_one(
        constraint: dict[str, Any], allowed: set[str], zones: set[str] | None) -> None:
    (command,) = _replace(**constraint)["commands"]
    assert command["action"] == "replace"
    (replacement,) = command["replacements"]
    assert set(replacement["instanceTypes"]) <= allowed, replacement
    if zones is not None:
        assert set(replacement["zones"]) == zones


def test_a_pod_naming_one_label_by_both_names_with_two_values_fits_no_node() -> None:
    """Karpenter finds the two requirements on the one key disjoint: no node, existing or new, takes the pod."""
    out = _replace(node_selector={BETA_ARCH: "arm64", ARCH: "amd64"})
    assert out["commands"] == []


def test_the_parser_reads_older_names_under_the_current_ones() -> None:
    snap = snapshot(
        nodepool(requirements=[{"key": BETA_ZONE, "operator": "In", "values": ["us-east-1a"]}]),
        node("old", labels={BETA_ARCH: "arm64", "beta.kubernetes.io/os": "linux"}),
        node("both", labels={BETA_ZONE: "us-east-1c"}),
        pod("web", "old", node_selector={BETA_ARCH: "arm64", "app": "x"},
            affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [
                    {"key": "beta.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]}}]}},
            spread=[{"maxSkew": 1, "topologyKey": BETA_ZONE, "whenUnsatisfiable": "DoNotSchedule",
                     "labelSelector": {"matchExpressions": [{"key": BETA_ARCH, "operator": "Exists"}]}}]))
    (pool,) = snap.nodepools
    assert pool.requirements == (Requirement(ZONE, "In", ("us-east-1a",)),)
    nodes = {n.name: n for n in snap.nodes}
    # an older label the node has without its current name gets the current one too; the older one stays
    assert nodes["old"].labels[ARCH] == "amd64"  # the builder's own current label wins
    assert nodes["old"].labels[BETA_ARCH] == "arm64" and nodes["old"].labels["kubernetes.io/os"] == "linux"
    assert nodes["both"].labels[ZONE] == "us-east-1a"  # present already: kept as it is
    (web,) = snap.pods
    assert dict(web.spec.node_selector) == {ARCH: "arm64", "app": "x"}
    ((_, (preferred,)),) = web.spec.preferred_node_terms
    assert preferred == Requirement("node.kubernetes.io/instance-type", "In", ("m5.large",))
    # a topology key and a label selector over pods' labels are not node requirements: as written
    (spread,) = web.spec.spread
    assert spread.topology_key == BETA_ZONE
    assert spread.selector.match_expressions == (Requirement(BETA_ARCH, "Exists"),)


def test_a_node_with_only_the_older_name_gets_the_current_one() -> None:
    doc = node("legacy")
    labels = doc["metadata"]["labels"]
    labels[BETA_ZONE] = labels.pop(ZONE)
    labels[BETA_ARCH] = labels.pop(ARCH)
    (parsed,) = snapshot(doc).nodes
    assert parsed.labels[ZONE] == "us-east-1a" and parsed.labels[ARCH] == "amd64"
    assert parsed.labels[BETA_ZONE] == "us-east-1a"

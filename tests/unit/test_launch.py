"""What a replacement node is (``ebb.core.launch``): the option launched, its Node object and its name."""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core.launch import LaunchError, launch_spec, node_object, nodeclaim_object, replacement_name
from ebb.core.snapshot import parse_catalog, parse_object
from tests.kit.builders import NOW, catalog, instance_type, nodepool


def types(*docs: dict[str, Any]) -> dict[str, Any]:
    return {it.name: it for item in parse_catalog([catalog(list(docs))]) for it in item.value}


CATALOG = types(
    instance_type("c5.large", "2", "4Gi", 29, 0.085, 0.032),
    instance_type("m5.large", "2", "8Gi", 29, 0.096, 0.035, zones=("us-east-1b",)),
    instance_type("r5.large", "2", "16Gi", 29, 0.126, available=False),
)


@pytest.mark.parametrize(("instance_types", "capacity_type", "zones", "expected"), [
    # the first type (cheapest first) with an available offering in the zones
    (("c5.large", "m5.large"), "on-demand", ("us-east-1a", "us-east-1b"), ("c5.large", "us-east-1a", 0.085)),
    (("m5.large", "c5.large"), "on-demand", ("us-east-1a", "us-east-1b"), ("m5.large", "us-east-1b", 0.096)),
    # m5.large is offered only in us-east-1b: c5.large it is
    (("m5.large", "c5.large"), "on-demand", ("us-east-1a",), ("c5.large", "us-east-1a", 0.085)),
    (("c5.large",), "spot", ("us-east-1c",), ("c5.large", "us-east-1c", 0.032)),
    # an unknown type and an unavailable one are skipped
    (("x9.huge", "r5.large", "c5.large"), "on-demand", ("us-east-1a",), ("c5.large", "us-east-1a", 0.085)),
])
def test_the_cheapest_available_option_is_launched(instance_types: tuple[str, ...], capacity_type: str,
                                                   zones: tuple[str, ...], expected: tuple[str, str, float]) -> None:
    spec = launch_spec("n", nodepool="default", instance_types=instance_types, capacity_type=capacity_type,
                       zones=zones, catalog=CATALOG)
    assert (spec.instance_type, spec.zone, spec.price) == expected
    assert spec.capacity_type == capacity_type


def test_no_available_offering_is_a_launch_error() -> None:
    with pytest.raises(LaunchError, match=r"r5\.large"):
        launch_spec("n", nodepool="default", instance_types=("r5.large",), capacity_type="on-demand",
                    zones=("us-east-1a",), catalog=CATALOG)
    with pytest.raises(LaunchError, match="spot"):
        launch_spec("n", nodepool="default", instance_types=("m5.large",), capacity_type="spot",
                    zones=("us-east-1a",), catalog=CATALOG)


def test_the_node_carries_the_pools_template_hash_and_the_types_capacity_less_overhead() -> None:
    pool_doc = nodepool("general", node_hash="1234", labels={"team": "platform"},
                        taints=[{"key": "dedicated", "value": "web", "effect": "NoSchedule"}])
    pool = parse_object(pool_doc).value
    it = types({**instance_type("c5.large", "2", "4Gi", 29, 0.085), "overhead": {"cpu": "80m", "memory": "512Mi"},
                "labels": {"kubernetes.io/arch": "amd64"}})["c5.large"]
    spec = launch_spec("general-abc", nodepool="general", instance_types=("c5.large",), capacity_type="on-demand",
                       zones=("us-east-1b",), catalog={"c5.large": it})
    node = node_object(spec, pool=pool, instance_type=it, now=NOW)
    labels = node["metadata"]["labels"]
    assert labels["karpenter.sh/nodepool"] == "general" and labels["team"] == "platform"
    assert labels["node.kubernetes.io/instance-type"] == "c5.large"
    assert labels["topology.kubernetes.io/zone"] == "us-east-1b"
    assert labels["karpenter.sh/capacity-type"] == "on-demand"
    assert labels["kubernetes.io/arch"] == "amd64" and labels["kubernetes.io/hostname"] == "general-abc"
    assert "karpenter.sh/initialized" not in labels  # not before it is Ready
    assert labels["karpenter.k8s.aws/ec2nodeclass"] == "default"  # its NodeClass's, as Karpenter's template gives it
    assert node["metadata"]["annotations"]["karpenter.sh/nodepool-hash"] == "1234"
    assert node["spec"]["taints"] == [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}]
    # the catalog entry gives no ephemeral storage: the default root volume, less its default overhead
    assert node["status"]["capacity"] == {"cpu": "2000m", "memory": str(4 * 2**30), "pods": "29",
                                          "ephemeral-storage": str(20 * 2**30)}
    assert node["status"]["allocatable"] == {"cpu": "1920m", "memory": str(4 * 2**30 - 512 * 2**20), "pods": "29",
                                             "ephemeral-storage": str(17 * 2**30)}
    assert node["metadata"]["creationTimestamp"] == "2026-11-23T18:30:00Z"
    # the Node parses back into what the simulation counted on
    parsed = parse_object(node).value
    assert parsed.allocatable["cpu"] == 1920 and parsed.nodepool == "general"


def test_a_type_without_an_architecture_label_is_launched_as_the_simulation_placed_it_amd64() -> None:
    """A catalog entry that names no architecture (and no node of the input told one): the launched node carries
    ``kubernetes.io/arch: amd64``, the default the scheduling simulation gave the new node, or a pod selecting amd64
    that the plan put there would not run on it."""
    pool = parse_object(nodepool("general")).value
    it = CATALOG["c5.large"]
    assert "kubernetes.io/arch" not in it.labels
    spec = launch_spec("general-abc", nodepool="general", instance_types=("c5.large",), capacity_type="on-demand",
                       zones=("us-east-1a",), catalog=CATALOG)
    labels = node_object(spec, pool=pool, instance_type=it, now=NOW)["metadata"]["labels"]
    assert labels["kubernetes.io/arch"] == "amd64" and labels["kubernetes.io/os"] == "linux"


def test_replacement_names_are_stable_per_decision_and_index() -> None:
    assert replacement_name("dec-1", 0, "general") == replacement_name("dec-1", 0, "general")
    assert replacement_name("dec-1", 0, "general") != replacement_name("dec-1", 1, "general")
    assert replacement_name("dec-1", 0, "general") != replacement_name("dec-2", 0, "general")
    assert replacement_name("dec-1", 0, "general").startswith("general-")
    assert len(replacement_name("d", 0, "p" * 100)) <= 63


def karpenter_pool(**template_spec: Any) -> dict[str, Any]:
    spec = {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, **template_spec}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"},
            "spec": {"template": {"spec": spec}}}


@pytest.mark.parametrize(("template_spec", "pool_meta", "requests", "expected_spec", "expected_meta"), [
    # the pool's own instance-type, capacity-type and zone requirements give way to the pinned ones; others stay
    ({"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
                       {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"], "minValues": 1},
                       {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["us-east-1c"]}]},
     {}, {},
     {"requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"], "minValues": 1}]},
     {}),
    # Karpenter copies the template's taints, startupTaints, expireAfter and terminationGracePeriod
    ({"taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
      "startupTaints": [{"key": "agent", "effect": "NoExecute"}], "expireAfter": "720h",
      "terminationGracePeriod": "48h"},
     {}, {},
     {"taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
      "startupTaints": [{"key": "agent", "effect": "NoExecute"}], "expireAfter": "720h",
      "terminationGracePeriod": "48h"},
     {}),
    # the NodePool's uid makes it the owner; its hash is copied; requests become spec.resources
    ({}, {"uid": "u-1", "annotations": {"karpenter.sh/nodepool-hash": "42", "other": "x"}},
     {"cpu": "1930m", "memory": "3Gi"},
     {"resources": {"requests": {"cpu": "1930m", "memory": "3Gi"}}},
     {"ownerReferences": [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "general", "uid": "u-1"}],
      "annotations": {"karpenter.sh/nodepool-hash": "42", "ebb.sh/decision-id": "dec-1"}}),
])
def test_a_nodeclaim_is_written_as_karpenters_provisioner_writes_one(
        template_spec: dict[str, Any], pool_meta: dict[str, Any], requests: dict[str, str],
        expected_spec: dict[str, Any], expected_meta: dict[str, Any]) -> None:
    pool = karpenter_pool(**template_spec)
    pool["metadata"].update(pool_meta)
    claim = nodeclaim_object("general-abc", nodepool=pool, instance_types=("c5.large", "m5.large"),
                             capacity_type="spot", zones=("us-east-1a", "us-east-1b"), decision_id="dec-1",
                             requests=requests)
    pinned = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large", "m5.large"]},
              {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
              {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a", "us-east-1b"]}]
    assert claim["apiVersion"] == "karpenter.sh/v1" and claim["kind"] == "NodeClaim"
    assert claim["spec"] == {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                             **expected_spec, "requirements": [*expected_spec.get("requirements", []), *pinned]}
    meta = claim["metadata"]
    assert meta["name"] == "general-abc"
    assert meta["labels"] == {"karpenter.sh/nodepool": "general", "karpenter.k8s.aws/ec2nodeclass": "default"}
    assert meta["annotations"] == expected_meta.get("annotations", {"ebb.sh/decision-id": "dec-1"})
    assert meta.get("ownerReferences") == expected_meta.get("ownerReferences")


def test_a_nodeclaim_needs_the_pools_nodeclassref() -> None:
    pool = karpenter_pool()
    del pool["spec"]["template"]["spec"]["nodeClassRef"]
    with pytest.raises(LaunchError, match=r"NodePool general has no spec\.template\.spec\.nodeClassRef"):
        nodeclaim_object("general-abc", nodepool=pool, instance_types=("c5.large",), capacity_type="on-demand",
                         zones=("us-east-1a",), decision_id="dec-1")


def test_a_nodeclaim_keeps_the_templates_min_values_on_the_pinned_keys() -> None:
    """A NodePool asking ``minValues`` of the instance type (a pinned key, its values replaced by the options
    chosen) still asks it of the NodeClaim, as Karpenter's provisioner writes one."""
    pool = karpenter_pool(requirements=[{"key": "node.kubernetes.io/instance-type", "operator": "Exists",
                                         "minValues": 2}])
    claim = nodeclaim_object("general-abc", nodepool=pool, instance_types=("c5.large", "m5.large"),
                             capacity_type="on-demand", zones=("us-east-1a",), decision_id="dec-1")
    assert claim["spec"]["requirements"][0] == {"key": "node.kubernetes.io/instance-type", "operator": "In",
                                                "values": ["c5.large", "m5.large"], "minValues": 2}
    assert all("minValues" not in r for r in claim["spec"]["requirements"][1:])


@pytest.mark.parametrize(("key", "values", "asked", "written"), [
    ("topology.kubernetes.io/zone", ["us-east-1a", "us-east-1b"], 2, 2),
    ("topology.kubernetes.io/zone", ["us-east-1a"], 2, 1),
    ("karpenter.sh/capacity-type", ["on-demand"], 1, None),
])
def test_a_nodeclaims_min_values_is_what_its_crd_accepts(key: str, values: list[str], asked: int,
                                                          written: int | None) -> None:
    """The zone keeps the template's ``minValues``, no more than the zones listed (the NodeClaim CRD refuses an `In`
    with fewer values than its ``minValues``, and the zones a replacement may launch in can be fewer than its types
    offer); the capacity type keeps none, as Karpenter's ``NodeClaimTemplate.ToNodeClaim`` writes it."""
    pool = karpenter_pool(requirements=[{"key": key, "operator": "Exists", "minValues": asked}])
    zones = values if key == "topology.kubernetes.io/zone" else ["us-east-1a"]
    claim = nodeclaim_object("general-abc", nodepool=pool, instance_types=("c5.large",), capacity_type="on-demand",
                             zones=zones, decision_id="dec-1")
    requirement = next(r for r in claim["spec"]["requirements"] if r["key"] == key)
    assert requirement.get("minValues") == written
    assert len(requirement["values"]) >= requirement.get("minValues", 0)


TEAM = {"key": "team", "operator": "In", "values": ["a", "b"]}


@pytest.mark.parametrize(("chosen", "team"), [({"team": "b"}, "b"), ({}, "a"), ({"team": "z"}, "a")],
                         ids=["chosen", "first-value", "not-allowed"])
def test_the_node_is_labelled_with_its_nodepools_custom_requirement(chosen: dict[str, str], team: str) -> None:
    """A NodePool requirement ``team In [a, b]`` labels the node: with the value the replacement chose for its pods,
    else the first (a value the requirement does not allow is not taken); the instance type's and the template's
    labels are not overridden."""
    pool = parse_object(nodepool("general", requirements=[TEAM, {"key": "tier", "operator": "In", "values": ["x"]}],
                                 labels={"tier": "y"})).value
    spec = launch_spec("general-abc", nodepool="general", instance_types=("c5.large",), capacity_type="on-demand",
                       zones=("us-east-1a",), catalog=CATALOG)
    node = node_object(spec, pool=pool, instance_type=CATALOG["c5.large"], now=NOW, chosen=chosen)
    labels = node["metadata"]["labels"]
    assert labels["team"] == team and labels["tier"] == "y"


def test_a_nodeclaim_narrows_a_custom_requirement_to_the_chosen_value() -> None:
    """As Karpenter's scheduler narrows ``team In [a, b]`` to the value its pods need and labels the NodeClaim with it
    (``resolveCustomLabelsFromRequirements``)."""
    pool = karpenter_pool(requirements=[{**TEAM, "minValues": 2}])
    claim = nodeclaim_object("general-abc", nodepool=pool, instance_types=("c5.large",), capacity_type="on-demand",
                             zones=("us-east-1a",), decision_id="dec-1", chosen={"team": "b"})
    assert claim["spec"]["requirements"][0] == {"key": "team", "operator": "In", "values": ["b"]}
    assert claim["metadata"]["labels"]["team"] == "b"
    untouched = nodeclaim_object("general-abc", nodepool=pool, instance_types=("c5.large",), capacity_type="on-demand",
                                 zones=("us-east-1a",), decision_id="dec-1")
    assert untouched["spec"]["requirements"][0] == {**TEAM, "minValues": 2}
    assert "team" not in untouched["metadata"]["labels"]


def test_a_types_huge_pages_come_out_of_the_nodes_allocatable_memory() -> None:
    """A kubelet's allocatable memory excludes the huge pages, as Karpenter's ``computeAllocatable`` does."""
    pool = parse_object(nodepool("general")).value
    doc = {**instance_type("hp.large", "2", "8Gi", 29, 0.05), "overhead": {"cpu": "0", "memory": "512Mi"}}
    doc["capacity"]["hugepages-2Mi"] = "2Gi"
    it = types(doc)["hp.large"]
    spec = launch_spec("general-abc", nodepool="general", instance_types=("hp.large",), capacity_type="on-demand",
                       zones=("us-east-1a",), catalog={"hp.large": it})
    node = node_object(spec, pool=pool, instance_type=it, now=NOW)
    assert node["status"]["allocatable"]["memory"] == str(8 * 2**30 - 512 * 2**20 - 2 * 2**30)
    assert node["status"]["allocatable"]["hugepages-2Mi"] == str(2 * 2**30)
    assert node["status"]["capacity"]["memory"] == str(8 * 2**30)

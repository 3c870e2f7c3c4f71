"""The snapshot parser (ebb.core.snapshot.parse_documents): input shapes, defaults and errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ebb.core.model import Budget
from ebb.core.snapshot import SnapshotError, flatten, input_warnings, parse_documents
from tests.kit.builders import (
    NOW,
    ago,
    blocked_of,
    catalog,
    container,
    daemonset,
    disrupted,
    hold,
    node,
    nodeclaim,
    nodepool,
    pdb,
    plan_dict,
    pod,
    snapshot,
)

GI = 2**30
MI = 2**20


def _pod_requests(doc: dict[str, Any]) -> dict[str, int]:
    snap = snapshot(doc)
    assert len(snap.pods) == 1
    return dict(snap.pods[0].spec.requests)


# -- shapes ------------------------------------------------------------------------------------------


def test_kind_list_is_flattened() -> None:
    docs = [
        {"apiVersion": "v1", "kind": "List", "items": [nodepool(), node("a"), pod("web", "a")]},
        {"apiVersion": "v1", "kind": "NodeList", "items": [node("b")]},
        None,  # an empty YAML document
        {"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "List", "items": [pdb("web", {"app": "web"}, min_available=1)]}]},
        catalog(),
    ]
    snap = parse_documents(docs)
    assert sorted(n.name for n in snap.nodes) == ["a", "b"]
    assert [p.key for p in snap.pods] == ["default/web"]
    assert [p.name for p in snap.nodepools] == ["default"]
    assert [p.name for p in snap.pdbs] == ["web"]
    assert snap.catalog_source == "input"
    assert len(list(flatten(docs))) == 6


def test_unknown_kinds_are_skipped_and_both_nodepool_groups_are_read() -> None:
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"}}
    snap = snapshot(svc, nodepool("a"), nodepool("b", api_version="ebb.sh/v1"),
                    nodepool("c", api_version="example.com/v1"))
    assert sorted(p.name for p in snap.nodepools) == ["a", "b"]
    assert snap.ignored == ("Service default/web", "NodePool c")


def _kinds(n: int) -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm{i}", "namespace": "d"}}
            for i in range(n)]


def _without_nodeclassref(pool: dict[str, Any]) -> dict[str, Any]:
    del pool["spec"]["template"]["spec"]["nodeClassRef"]
    return pool


@pytest.mark.parametrize(("docs", "expected"), [
    (lambda: [nodepool("a"), *_kinds(0)], []),
    (lambda: [nodepool("a"), *_kinds(1)], ["ignored 1 document(s) of kinds ebb does not read: ConfigMap d/cm0"]),
    (lambda: [nodepool("a"), *_kinds(7)],
     ["ignored 7 document(s) of kinds ebb does not read: ConfigMap d/cm0, ConfigMap d/cm1, ConfigMap d/cm2, "
      "ConfigMap d/cm3, ConfigMap d/cm4, and 2 more"]),
    (list, ["the input holds no Nodes, Pods or NodePools"]),
    (lambda: [_without_nodeclassref(nodepool("a"))],
     ["1 NodePool(s) have no spec.template.spec.nodeClassRef, which Karpenter's CRD requires: as Karpenter, ebb "
      "launches no node in them and disrupts none of their nodes: NodePool a"]),
    (lambda: _kinds(1), ["ignored 1 document(s)", "the input holds no Nodes, Pods or NodePools"]),
])
def test_input_warnings(docs: Callable[[], list[Any]], expected: list[str]) -> None:
    """An empty input or documents ebb does not read are said, not silently planned as nothing."""
    warnings = input_warnings(parse_documents(docs(), bundled_catalog=[]))
    assert len(warnings) == len(expected)
    for warning, start in zip(warnings, expected, strict=True):
        assert warning.startswith(start), warning


@pytest.mark.parametrize(("zone", "read"), [(0, "0"), (1, "1"), ("0", "0"), ("eastus-1", "eastus-1")])
def test_an_offerings_zone_written_as_a_number_is_read_as_written(zone: object, read: str) -> None:
    """A non-zonal AKS cluster's zone is ``0``, which YAML reads as a number unless quoted: it is the label value
    ``"0"``, as ``1`` was ``"1"`` (0 was refused with a message that said the offering had no zone)."""
    snap = parse_documents([catalog([{"name": "d2", "capacity": {"cpu": "2", "memory": "8Gi"},
                                      "offerings": [{"zone": zone, "price": 0.1}]}])])
    [d2] = snap.instance_types
    assert [o.zone for o in d2.offerings] == [read]


@pytest.mark.parametrize(("offering", "field"), [
    ({"price": 0.1}, "offerings[0].zone"), ({"zone": "", "price": 0.1}, "offerings[0].zone"),
    ({"zone": True, "price": 0.1}, "offerings[0].zone"), ("us-east-1a", "offerings[0]"),
])
def test_an_offering_without_a_zone_names_the_field(offering: object, field: str) -> None:
    with pytest.raises(SnapshotError) as info:
        parse_documents([catalog([{"name": "d2", "capacity": {"cpu": "2", "memory": "8Gi"},
                                   "offerings": [offering]}])])
    assert info.value.field.endswith(field), info.value


@pytest.mark.parametrize("price", [float("nan"), float("inf"), "NaN"])
def test_an_offering_price_that_is_not_finite_names_the_field(price: object) -> None:
    """A NaN price would make every sum it enters NaN (a NodePool's cost, Balanced's score) and every comparison
    false, so no move of its NodePool would ever pass; Karpenter guards its own sums against it
    (balanced_adversarial_test.go). ebb refuses it where it is read, naming the field."""
    with pytest.raises(SnapshotError) as info:
        parse_documents([catalog([{"name": "d2", "capacity": {"cpu": "2", "memory": "8Gi"},
                                   "offerings": [{"zone": "us-east-1a", "price": price}]}])])
    assert info.value.field.endswith("offerings[0].price"), info.value
    assert "is not a finite number" in str(info.value)


def test_own_catalog_replaces_the_bundled_one() -> None:
    snap = parse_documents([node("a"), catalog()], bundled_catalog=[catalog(
        [{"name": "x1.huge", "capacity": {"cpu": "64", "memory": "256Gi"},
          "offerings": [{"zone": "us-east-1a", "capacityType": "on-demand", "price": 9.0}]}])])
    names = {t.name for t in snap.instance_types}
    assert "m5.large" in names
    assert "x1.huge" not in names
    assert snap.catalog_source == "input"


def test_bundled_catalog_used_without_one_in_the_input() -> None:
    bundled = catalog()
    snap = parse_documents([node("a")], bundled_catalog=[bundled])
    assert snap.catalog_source == "bundled"
    assert {t.name for t in snap.instance_types} >= {"t3.medium", "m5.2xlarge"}


# -- errors name the document and the field -------------------------------------------------------------

def _bad_pod_cpu() -> list[Any]:
    return [pod("web", "a", cpu="lots")]


def _bad_node_memory() -> list[Any]:
    return [node("a", memory="8 gigs")]


def _bad_pool_operator() -> list[Any]:
    return [nodepool(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "Equals",
                                    "values": ["spot"]}])]


def _bad_affinity_operator() -> list[Any]:
    return [pod("web", "a", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Is", "values": ["a"]}]}]}}})]


def _missing_name() -> list[Any]:
    doc = node("a")
    del doc["metadata"]["name"]
    return [nodepool(), doc]


def _bad_consolidate_after() -> list[Any]:
    return [nodepool(consolidate_after="soon")]


def _bad_expire_after() -> list[Any]:
    return [nodepool(expire_after="30d")]


def _bad_init_container() -> list[Any]:
    return [pod("web", "a", init_containers=[container("init", cpu="1x")])]


def _bad_limit() -> list[Any]:
    return [pod("web", "a", cpu=None, memory=None, limits={"memory": "1GB"})]


def _bad_pdb() -> list[Any]:
    return [pdb("web", {"app": "web"}, min_available="half")]


def _bad_pdb_policy() -> list[Any]:
    return [pdb("web", {"app": "web"}, min_available=1, unhealthy_pod_eviction_policy="Sometimes")]


def _bad_catalog_price() -> list[Any]:
    return [catalog([{"name": "m5.large", "capacity": {"cpu": "2", "memory": "8Gi"},
                      "offerings": [{"zone": "us-east-1a", "capacityType": "on-demand", "price": "cheap"}]}])]


def _bad_ttl() -> list[Any]:
    return [nodepool(consolidate_after=None, disruption={"ttlSecondsAfterEmpty": "soon"})]


def _bad_min_domains() -> list[Any]:
    return [pod("web", "a", spread=[{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                     "whenUnsatisfiable": "DoNotSchedule", "minDomains": "two",
                                     "labelSelector": {"matchLabels": {"app": "web"}}}])]


def _bad_preferred_weight() -> list[Any]:
    return [pod("web", "a", affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": "heavy", "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}}]}})]


# shapes the parser once trusted (found by tests/property/test_hostile_input.py): each crashed the parser or,
# parsed, the planner with a TypeError, ValueError or OverflowError instead of naming the document and field
def _requests_not_a_mapping() -> list[Any]:
    doc = pod("web", "a")
    doc["spec"]["containers"][0]["resources"]["requests"] = "-1s"
    return [doc]


def _limits_a_list() -> list[Any]:
    doc = pod("web", "a")
    doc["spec"]["containers"][0]["resources"]["limits"] = ["cpu"]
    return [doc]


def _node_name_a_mapping() -> list[Any]:
    doc = pod("web")
    doc["spec"]["nodeName"] = {"": ""}
    return [doc]


def _nodeclaim_node_name_a_list() -> list[Any]:
    doc = nodeclaim("c1", "a")
    doc["status"]["nodeName"] = ["a"]
    return [node("a"), doc]


def _pool_operator_a_mapping() -> list[Any]:
    return [nodepool(requirements=[{"key": "karpenter.sh/capacity-type", "operator": {}, "values": ["spot"]}])]


def _consolidate_after_nan() -> list[Any]:
    doc = nodepool()
    doc["spec"]["disruption"]["consolidateAfter"] = float("nan")
    return [doc]


def _consolidate_after_beyond_any_date() -> list[Any]:
    return [nodepool(consolidate_after="99999999999h")]


def _priority_infinite() -> list[Any]:
    doc = pod("web", "a")
    doc["spec"]["priority"] = float("inf")
    return [doc]


def _weight_infinite() -> list[Any]:
    doc = nodepool()
    doc["spec"]["weight"] = float("-inf")
    return [doc]


def _ttl_infinite() -> list[Any]:
    return [nodepool(consolidate_after=None, disruption={"ttlSecondsAfterEmpty": float("inf")})]


def _ttl_beyond_any_date() -> list[Any]:
    return [nodepool(consolidate_after=None, disruption={"ttlSecondsAfterEmpty": 1e300})]


def _with_pod_spec(**fields: Any) -> Callable[[], list[Any]]:
    def make() -> list[Any]:
        doc = pod("web", "a")
        doc["spec"].update(fields)
        return [doc]
    return make


def _ports_a_bool() -> list[Any]:
    doc = pod("web", "a")
    doc["spec"]["containers"][0]["ports"] = True
    return [doc]


_ANTI = "podAntiAffinity"
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _budget_reasons_a_string() -> list[Any]:  # `reasons: Empty` must not read as "every reason"
    return [nodepool(budgets=[{"nodes": "0", "reasons": "Empty"}])]


@pytest.mark.parametrize(("make", "document", "field"), [
    (_with_pod_spec(affinity={"nodeAffinity": "-4"}), "Pod default/web", "spec.affinity.nodeAffinity"),
    (_with_pod_spec(affinity={"nodeAffinity": {_REQUIRED: "-1s"}}), "Pod default/web",
     f"spec.affinity.nodeAffinity.{_REQUIRED}"),
    (_with_pod_spec(affinity={"nodeAffinity": {_REQUIRED: {"nodeSelectorTerms": [1.5]}}}), "Pod default/web",
     f"spec.affinity.nodeAffinity.{_REQUIRED}.nodeSelectorTerms[0]"),
    (_with_pod_spec(affinity={"nodeAffinity": {_PREFERRED: {"a": "b"}}}), "Pod default/web",
     f"spec.affinity.nodeAffinity.{_PREFERRED}"),
    (_with_pod_spec(affinity={"nodeAffinity": {_PREFERRED: [{"weight": 1, "preference": -1}]}}),
     "Pod default/web", f"spec.affinity.nodeAffinity.{_PREFERRED}[0].preference"),
    (_with_pod_spec(affinity={_ANTI: float("-inf")}), "Pod default/web", f"spec.affinity.{_ANTI}"),
    (_with_pod_spec(affinity={_ANTI: {_REQUIRED: 1.5}}), "Pod default/web", f"spec.affinity.{_ANTI}.{_REQUIRED}"),
    (_with_pod_spec(affinity={_ANTI: {_PREFERRED: ["@daily"]}}), "Pod default/web",
     f"spec.affinity.{_ANTI}.{_PREFERRED}[0]"),
    (_with_pod_spec(affinity={_ANTI: {_REQUIRED: [{"topologyKey": "zone", "namespaces": 7}]}}), "Pod default/web",
     f"spec.affinity.{_ANTI}.required[0].namespaces"),
    (_with_pod_spec(topologySpreadConstraints=[{"topologyKey": "zone", "maxSkew": float("inf")}]),
     "Pod default/web", "spec.topologySpreadConstraints[0].maxSkew"),
    (_ports_a_bool, "Pod default/web", "spec.containers[0].ports"),
], ids=["nodeAffinity-a-string", "required-a-string", "selector-term-a-float", "preferred-a-mapping",
        "preference-an-int", "podAntiAffinity-a-float", "pod-required-a-float", "pod-preferred-a-string",
        "namespaces-an-int", "maxSkew-infinite", "ports-a-bool"])
def test_hostile_affinity_shapes_name_document_and_field(make: Callable[[], list[Any]], document: str,
                                                         field: str) -> None:
    with pytest.raises(SnapshotError) as info:
        parse_documents([*make(), catalog()])
    assert (info.value.document, info.value.field) == (document, field)


@pytest.mark.parametrize(("make", "document", "field"), [
    (_requests_not_a_mapping, "Pod default/web", "spec.containers[0].resources.requests"),
    (_limits_a_list, "Pod default/web", "spec.containers[0].resources.limits"),
    (_node_name_a_mapping, "Pod default/web", "spec.nodeName"),
    (_nodeclaim_node_name_a_list, "NodeClaim c1", "status.nodeName"),
    (_pool_operator_a_mapping, "NodePool default", "spec.template.spec.requirements[0].operator"),
    (_consolidate_after_nan, "NodePool default", "spec.disruption.consolidateAfter"),
    (_consolidate_after_beyond_any_date, "NodePool default", "spec.disruption.consolidateAfter"),
    (_priority_infinite, "Pod default/web", "spec.priority"),
    (_weight_infinite, "NodePool default", "spec.weight"),
    (_ttl_infinite, "NodePool default", "spec.disruption.ttlSecondsAfterEmpty"),
    (_ttl_beyond_any_date, "NodePool default", "spec.disruption.ttlSecondsAfterEmpty"),
], ids=["requests-not-a-mapping", "limits-a-list", "nodeName-a-mapping", "nodeclaim-nodeName-a-list",
        "operator-a-mapping", "consolidateAfter-nan", "consolidateAfter-beyond-any-date", "priority-infinite",
        "weight-infinite", "ttl-infinite", "ttl-beyond-any-date"])
def test_hostile_shapes_name_document_and_field(make: Callable[[], list[Any]], document: str, field: str) -> None:
    with pytest.raises(SnapshotError) as info:
        parse_documents([*make(), catalog()])
    assert (info.value.document, info.value.field) == (document, field)


def _min_values_zero() -> list[Any]:
    return [nodepool(requirements=[{"key": "node.kubernetes.io/instance-type", "operator": "Exists",
                                    "minValues": 0}])]


def _min_values_beyond_values() -> list[Any]:
    return [nodepool(requirements=[{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                    "values": ["m5.large", "c5.large"], "minValues": 3}])]


def _min_values_a_string() -> list[Any]:
    return [nodepool(requirements=[{"key": "node.kubernetes.io/instance-type", "operator": "Exists",
                                    "minValues": "3"}])]


@pytest.mark.parametrize("make", [_min_values_zero, _min_values_beyond_values, _min_values_a_string],
                         ids=["zero", "more-than-values", "a-string"])
def test_a_bad_min_values_names_the_requirement(make: Callable[[], list[Any]]) -> None:
    """Karpenter's CRD takes minValues from 1 to 50, and no more than an In requirement lists."""
    with pytest.raises(SnapshotError) as info:
        parse_documents([*make(), catalog()])
    assert (info.value.document, info.value.field) == ("NodePool default",
                                                       "spec.template.spec.requirements[0].minValues")


def test_min_values_is_read() -> None:
    [pool] = parse_documents([nodepool(requirements=[{"key": "node.kubernetes.io/instance-type",
                                                      "operator": "Exists", "minValues": 5}]),
                              catalog()]).nodepools
    assert [r.min_values for r in pool.requirements] == [5]


@pytest.mark.parametrize(("make", "document", "field"), [
    (_bad_pod_cpu, "Pod default/web", "spec.containers[0].resources.requests.cpu"),
    (_bad_node_memory, "Node a", "status.capacity.memory"),
    (_bad_pool_operator, "NodePool default", "spec.template.spec.requirements[0].operator"),
    (_bad_affinity_operator, "Pod default/web", "operator"),
    (_missing_name, "Node (document 2)", "metadata.name"),
    (_bad_consolidate_after, "NodePool default", "spec.disruption.consolidateAfter"),
    (_bad_expire_after, "NodePool default", "spec.template.spec.expireAfter"),
    (_bad_init_container, "Pod default/web", "spec.initContainers[0].resources.requests.cpu"),
    (_bad_limit, "Pod default/web", "spec.containers[0].resources"),
    (_bad_pdb, "PodDisruptionBudget default/web", "spec.minAvailable"),
    (_bad_pdb_policy, "PodDisruptionBudget default/web", "spec.unhealthyPodEvictionPolicy"),
    (_bad_catalog_price, "InstanceTypeCatalog test", "spec.instanceTypes[0].offerings[0].price"),
    (_bad_ttl, "NodePool default", "ttlSecondsAfterEmpty"),
    (_bad_min_domains, "Pod default/web", "minDomains"),
    (_bad_preferred_weight, "Pod default/web", "weight"),
    (_budget_reasons_a_string, "NodePool default", "spec.disruption.budgets[0].reasons"),
], ids=["pod-cpu", "node-memory", "pool-operator", "affinity-operator", "missing-name", "consolidateAfter",
        "expireAfter", "init-container", "limit", "pdb", "pdb-policy", "catalog-price", "ttlSecondsAfterEmpty",
        "minDomains", "preferred-weight", "budget-reasons"])
def test_bad_input_names_document_and_field(make: Callable[[], list[Any]], document: str, field: str) -> None:
    with pytest.raises(SnapshotError) as info:
        parse_documents([*make(), catalog()])
    err = info.value
    assert err.document == document
    assert field in err.field
    assert document in str(err)
    assert field in str(err)


def test_invalid_budget_is_not_a_parse_error() -> None:
    snap = snapshot(nodepool(budgets=[{"nodes": "abc"}, {"nodes": "1", "schedule": "@daily"}]))
    assert snap.nodepools[0].budgets == (Budget(nodes="abc"), Budget(nodes="1", schedule="@daily"))


def test_non_mapping_document_is_an_error() -> None:
    with pytest.raises(SnapshotError) as info:
        parse_documents(["just a string"])
    assert "document 1" in str(info.value)


def test_hold_without_its_target_is_an_error() -> None:
    with pytest.raises(SnapshotError) as info:
        snapshot(hold("h", "nodePool", None))
    assert info.value.document == "Hold h"
    assert info.value.field == "spec.nodePool"


@pytest.mark.parametrize(("spec", "field", "words"), [
    ({"nodePool": "pa"}, "spec.nodePool", "this hold's scope is cluster, by default"),  # no scope: not pa's hold
    ({"scope": "cluster", "node": "n1"}, "spec.node", "this hold's scope is cluster)"),
    ({"scope": "node", "node": "n1", "nodePool": "pa"}, "spec.nodePool", "this hold's scope is node)"),
])
def test_a_hold_naming_what_its_scope_does_not_hold_is_an_error(spec: dict[str, Any], field: str,
                                                                 words: str) -> None:
    """As the Hold CRD's validation (``(has(self.scope) && self.scope == 'nodePool') == has(self.nodePool)``): a hold
    with a nodePool but no scope is refused by the apiserver, where ebb read it as a cluster-wide hold."""
    with pytest.raises(SnapshotError) as info:
        snapshot({"apiVersion": "ebb.sh/v1", "kind": "Hold", "metadata": {"name": "h"}, "spec": spec})
    assert (info.value.document, info.value.field) == ("Hold h", field)
    assert words in info.value.message


# -- pod requests ------------------------------------------------------------------------------------------


def _sidecar(name: str, cpu: str, memory: str) -> dict[str, Any]:
    return {**container(name, cpu, memory), "restartPolicy": "Always"}


@pytest.mark.parametrize(("kwargs", "cpu", "memory"), [
    ({"cpu": "250m", "memory": "512Mi"}, 250, 512 * MI),
    # two app containers are summed
    ({"containers": [container("a", "200m", "256Mi"), container("b", "300m", "256Mi")]}, 500, 512 * MI),
    # the largest init container wins over the sum of app containers, per resource
    ({"containers": [container("a", "200m", "256Mi"), container("b", "300m", "256Mi")],
      "init_containers": [container("i1", "1", "128Mi"), container("i2", "400m", "64Mi")]}, 1000, 512 * MI),
    ({"cpu": "100m", "memory": "128Mi", "init_containers": [container("i", "50m", "1Gi")]}, 100, GI),
    # pod overhead (RuntimeClass) is added on top
    ({"cpu": "250m", "memory": "512Mi", "overhead": {"cpu": "100m", "memory": "64Mi"}}, 350, 576 * MI),
    ({"containers": [container("a", "200m", "256Mi")], "init_containers": [container("i", "1", "1Gi")],
      "overhead": {"cpu": "250m", "memory": "1Gi"}}, 1250, 2 * GI),
    # requests default to limits
    ({"cpu": None, "memory": None, "limits": {"cpu": "500m", "memory": "1Gi"}}, 500, GI),
    # ...but an explicit request is kept
    ({"cpu": "100m", "memory": None, "limits": {"cpu": "2", "memory": "1Gi"}}, 100, GI),
    # a sidecar (init container with restartPolicy Always, KEP-753) runs beside the app containers: added to them
    ({"cpu": "600m", "memory": "256Mi", "init_containers": [_sidecar("proxy", "1", "128Mi")]}, 1600, 384 * MI),
    # ...and to every init container started after it, which may then need more than the app containers
    ({"cpu": "600m", "memory": "256Mi",
      "init_containers": [_sidecar("proxy", "200m", "128Mi"), container("migrate", "1", "64Mi")]}, 1200, 384 * MI),
    # an init container before the sidecar runs without it
    ({"cpu": "600m", "memory": "256Mi",
      "init_containers": [container("migrate", "1", "64Mi"), _sidecar("proxy", "200m", "128Mi")]}, 1000, 384 * MI),
], ids=["plain", "sum-app", "max-init", "init-memory", "overhead", "init-and-overhead", "limits-only",
        "request-below-limit", "sidecar", "init-after-sidecar", "init-before-sidecar"])
def test_pod_requests(kwargs: dict[str, Any], cpu: int, memory: int) -> None:
    requests = _pod_requests(pod("web", "a", **kwargs))
    assert requests["cpu"] == cpu
    assert requests["memory"] == memory
    assert requests["pods"] == 1


# Kubernetes adds a pod's quantities exactly (``resource.PodRequests``, ``Quantity.Add``: 0.4m + 0.4m + 0.4m is 1200u)
# and the total is rounded up once (``MilliValue``: 2m), which apimachinery v0.35.1 gives for each of these
@pytest.mark.parametrize(("kwargs", "cpu", "memory"), [
    ({"containers": [container(n, "0.4m", "0.5") for n in "abc"]}, 2, 2),
    ({"containers": [container("a", "0.4m"), container("b", "0.4m")], "init_containers": [container("i", "0.9m")]},
     1, 0),
    ({"cpu": "0.3m", "memory": "0.5", "init_containers": [_sidecar("proxy", "0.3m", "0.5")],
      "overhead": {"cpu": "0.3m"}}, 1, 1),
    ({"containers": [container("a", "1.0005", "0.5Ki"), container("b", "1.0005", "0.25Ki")]}, 2001, 768),
], ids=["three-app-containers", "init-container", "sidecar-and-overhead", "whole-millicores"])
def test_a_pods_requests_are_summed_before_they_are_rounded(kwargs: dict[str, Any], cpu: int, memory: int) -> None:
    requests = _pod_requests(pod("web", "a", **kwargs))
    assert (requests["cpu"], requests.get("memory", 0)) == (cpu, memory)


@pytest.mark.parametrize(("pod_level", "extra", "cpu", "memory", "gpu"), [
    # a pod-level request replaces the containers' sum (1 cpu, 1Gi in two containers)
    ({"requests": {"cpu": "1500m"}}, {}, 1500, GI, 1),
    ({"requests": {"cpu": "500m", "memory": "3Gi"}}, {}, 500, 3 * GI, 1),
    # a pod-level limit without a request: the API server defaults the request to what the containers ask, when
    # they ask for the resource (``defaultPodRequests``), so the limit changes nothing here
    ({"limits": {"cpu": "2", "memory": "2Gi"}}, {}, 1000, GI, 1),
    ({"requests": {"cpu": "750m"}, "limits": {"cpu": "2", "memory": "2Gi"}}, {}, 750, GI, 1),
    # only cpu, memory and hugepages are pod-level resources: the GPU stays the containers'
    ({"requests": {"nvidia.com/gpu": "4"}}, {}, 1000, GI, 1),
    # overhead is added on top of the pod-level request
    ({"requests": {"cpu": "1"}}, {"overhead": {"cpu": "250m"}}, 1250, GI, 1),
    # empty: the containers' sum
    ({}, {}, 1000, GI, 1),
], ids=["cpu", "cpu-and-memory", "limits-only", "request-and-limit", "not-a-pod-level-resource", "overhead", "empty"])
def test_pod_level_requests_replace_the_containers_sum(pod_level: dict[str, Any], extra: dict[str, Any], cpu: int,
                                                       memory: int, gpu: int) -> None:
    """Kubernetes' ``resource.PodRequests`` with pod-level resources (KEP-2837), as Karpenter's ``resources.Ceiling``
    reads it: ``spec.resources`` replaces what the containers request, for cpu, memory and hugepages."""
    doc = pod("web", "a", containers=[container("a", "400m", "512Mi"), container("b", "600m", "512Mi")], **extra)
    doc["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    doc["spec"]["resources"] = pod_level
    requests = _pod_requests(doc)
    assert (requests["cpu"], requests["memory"], requests["nvidia.com/gpu"]) == (cpu, memory, gpu)


@pytest.mark.parametrize(("containers", "limits", "cpu", "memory"), [
    # no container asks: the pod-level limit is the request
    ([container("a"), container("b")], {"cpu": "2", "memory": "2Gi"}, 2000, 2 * GI),
    # a container asks for cpu only: cpu is theirs, memory the limit's
    ([container("a", "500m"), container("b")], {"cpu": "2", "memory": "2Gi"}, 500, 2 * GI),
    # an init container's request counts as the containers' too
    ([container("a")], {"cpu": "2"}, 300, 0),
])
def test_a_pod_level_limit_is_the_request_only_for_what_no_container_asks(
        containers: list[dict[str, Any]], limits: dict[str, str], cpu: int, memory: int) -> None:
    """The API server's ``defaultPodRequests``: a pod-level limit without a pod-level request defaults the request
    to the containers' aggregate where any container asks for the resource, else to the limit."""
    doc = pod("web", "a", containers=containers)
    if len(containers) == 1:
        doc["spec"]["initContainers"] = [container("init", "300m")]
    doc["spec"]["resources"] = {"limits": limits}
    requests = _pod_requests(doc)
    assert (requests.get("cpu", 0), requests.get("memory", 0)) == (cpu, memory)


def test_a_pod_level_request_decides_where_the_pod_fits() -> None:
    """A pod whose containers ask for little but whose pod-level request is 1500m does not fit on a node with 1000m
    free: its node is not consolidated onto it (Karpenter counts the pod-level request)."""
    busy = pod("x", "a", cpu="100m", memory="128Mi")
    busy["spec"]["resources"] = {"requests": {"cpu": "1500m"}}
    docs = [nodepool(), node("a", itype="t3.medium"), busy,  # the cheapest type: no replacement is cheaper
            node("b", annotations={"karpenter.sh/do-not-disrupt": "true"}), pod("y", "b", cpu="1", memory="1Gi")]
    assert "a" not in disrupted(plan_dict(*docs))
    busy["spec"]["resources"] = {"requests": {"cpu": "500m"}}
    assert "a" in disrupted(plan_dict(*docs))


def _resizing(doc: dict[str, Any], statuses: list[dict[str, Any]], *, init: list[dict[str, Any]] | None = None,
              pending: str | None = None) -> dict[str, Any]:
    """``doc`` with ``statuses`` as its containerStatuses (``init``: its initContainerStatuses) and, with ``pending``,
    a PodResizePending condition of that reason."""
    doc["status"]["containerStatuses"] = statuses
    if init is not None:
        doc["status"]["initContainerStatuses"] = init
    if pending is not None:
        doc["status"]["conditions"].append({"type": "PodResizePending", "status": "True", "reason": pending})
    return doc


def _held(name: str, actuated: str | None, allocated: str | None) -> dict[str, Any]:
    """A container status: ``actuated`` cpu in ``resources.requests`` (None: no ``resources``), ``allocated`` cpu in
    ``allocatedResources`` (None: none)."""
    status: dict[str, Any] = {"name": name, "ready": True, "restartCount": 0}
    if actuated is not None:
        status["resources"] = {"requests": {"cpu": actuated, "memory": "512Mi"}}
    if allocated is not None:
        status["allocatedResources"] = {"cpu": allocated, "memory": "512Mi"}
    return status


# (case, the app container's cpu request, its status, the PodResizePending reason, the pod's cpu)
RESIZE = [
    ("no container status: the spec", "500m", None, None, 500),
    ("status as the spec", "500m", _held("main", "500m", "500m"), None, 500),
    ("resize up not yet actuated: the spec", "1", _held("main", "500m", "500m"), "Deferred", 1000),
    ("resize up allocated, not actuated: the spec", "1", _held("main", "500m", "1"), None, 1000),
    ("resize down not yet actuated: what the kubelet holds", "250m", _held("main", "500m", "250m"), None, 500),
    ("resize down, still allocated", "250m", _held("main", "250m", "500m"), None, 500),
    ("infeasible resize: the spec left out", "4", _held("main", "500m", "500m"), "Infeasible", 500),
    ("infeasible resize down: the status", "100m", _held("main", "500m", "300m"), "Infeasible", 500),
    ("allocatedResources without resources: the spec", "250m", _held("main", None, "500m"), None, 250),
    ("another container's status: the spec", "250m", _held("other", "500m", "500m"), None, 250),
]


@pytest.mark.parametrize(("cpu", "status", "pending", "expected"), [c[1:] for c in RESIZE], ids=[c[0] for c in RESIZE])
def test_pod_requests_during_an_in_place_resize(cpu: str, status: dict[str, Any] | None, pending: str | None,
                                                expected: int) -> None:
    """Karpenter's ``resources.Ceiling``: Kubernetes' ``resource.PodRequests`` with ``UseStatusResources``. A
    container whose status has ``resources`` counts, per resource, the largest of its spec's request, its status's
    ``resources.requests`` (actuated) and its ``allocatedResources``; while the first PodResizePending condition says
    Infeasible, only the last two."""
    doc = _resizing(pod("web", "a", cpu=cpu, memory="512Mi"), [status] if status else [], pending=pending)
    assert _pod_requests(doc)["cpu"] == expected


# (case, the init container's restartPolicy, the pod's cpu)
RESIZE_INIT = [
    ("a sidecar's status counts", "Always", 1500),
    ("an init container's status does not", None, 500),
]


@pytest.mark.parametrize(("restart", "expected"), [c[1:] for c in RESIZE_INIT], ids=[c[0] for c in RESIZE_INIT])
def test_init_container_requests_during_an_in_place_resize(restart: str | None, expected: int) -> None:
    """``PodRequests`` reads the status of an init container only when it is a sidecar (``restartPolicy: Always``):
    a 200m sidecar or init container whose status holds 1 cpu, beside a 500m app container."""
    init = container("proxy", "200m", "64Mi")
    if restart is not None:
        init["restartPolicy"] = restart
    doc = _resizing(pod("web", "a", cpu="500m", memory="512Mi", init_containers=[init]), [],
                    init=[_held("proxy", "1", "1")])
    assert _pod_requests(doc)["cpu"] == expected


def test_a_pod_level_request_ignores_container_statuses() -> None:
    """A pod-level request replaces the containers' sum as its spec has it: Karpenter does not enable the pod-level
    in-place resize (``InPlacePodLevelResourcesVerticalScalingEnabled``), so container statuses do not raise it."""
    doc = _resizing(pod("web", "a", cpu="500m", memory="512Mi"), [_held("main", "2", "2")])
    doc["spec"]["resources"] = {"requests": {"cpu": "1"}}
    assert _pod_requests(doc)["cpu"] == 1000


def test_a_pod_shrinking_in_place_still_takes_its_old_room() -> None:
    """A pod resized from 1500m down to 100m whose kubelet still holds 1500m does not fit on a node with 1000m free:
    its node is not consolidated onto it, as Karpenter counts what the kubelet holds; once actuated, it is."""
    busy = _resizing(pod("x", "a", cpu="100m", memory="128Mi"), [_held("main", "1500m", "100m")])
    docs = [nodepool(), node("a", itype="t3.medium"), busy,  # the cheapest type: no replacement is cheaper
            node("b", annotations={"karpenter.sh/do-not-disrupt": "true"}), pod("y", "b", cpu="1", memory="1Gi")]
    assert "a" not in disrupted(plan_dict(*docs))
    busy["status"]["containerStatuses"] = [_held("main", "100m", "100m")]
    assert "a" in disrupted(plan_dict(*docs))


def test_a_resize_in_the_status_alone_is_parsed_again() -> None:
    """A pod whose spec is unchanged keeps its parsed needs from its previous version (`parse_object`'s
    ``previous``) only while its resize state is unchanged too: a status that now holds more is read again."""
    from ebb.core.snapshot import parse_object

    before = pod("web", "a", cpu="250m", memory="512Mi")
    parsed = parse_object(before)
    after = _resizing(pod("web", "a", cpu="250m", memory="512Mi"), [_held("main", "1", "1")])
    assert parse_object(after, previous=(before, parsed)).value.spec.requests["cpu"] == 1000
    same = pod("web", "b", cpu="250m", memory="512Mi")
    assert parse_object(same, previous=(before, parsed)).value.spec is parsed.value.spec


@pytest.mark.parametrize(("annotations", "owner", "phase", "needs_home"), [
    ({}, ("ReplicaSet", "rs"), "Running", True),
    ({}, ("DaemonSet", "agent"), "Running", False),
    ({"kubernetes.io/config.mirror": "abc"}, ("Node", "a"), "Running", False),
    ({}, ("Node", "a"), "Running", False),  # a static pod the kubelet made: its owner says so
    # the mirror annotation alone is no owner (Karpenter's IsOwnedByNode reads the owner references): a pod that needs
    # a home, whose node is not empty
    ({"kubernetes.io/config.mirror": "abc"}, None, "Running", True),
    ({}, ("Job", "once"), "Succeeded", False),
    ({}, ("Job", "once"), "Failed", False),
    ({}, None, "Running", True),  # a bare pod still needs a home
])
def test_which_pods_need_rescheduling(annotations: dict[str, str], owner: tuple[str, str] | None, phase: str,
                                      needs_home: bool) -> None:
    snap = snapshot(pod("p", "a", annotations=annotations, owner=owner, phase=phase))
    assert snap.pods[0].needs_rescheduling is needs_home


# -- nodes and NodeClaims ------------------------------------------------------------------------------


def test_node_initialized_through_its_nodeclaim() -> None:
    snap = snapshot(nodepool(), node("a", initialized=False), node("b", initialized=False),
                    nodeclaim("claim-a", "a", initialized=True), nodeclaim("claim-b", "b", initialized=False))
    labels = {n.name: n.labels.get("karpenter.sh/initialized") for n in snap.nodes}
    assert labels == {"a": "true", "b": None}
    out = plan_dict(nodepool(), node("a", initialized=False), node("b", initialized=False),
                    nodeclaim("claim-a", "a", initialized=True), nodeclaim("claim-b", "b", initialized=False))
    # both are empty: the initialized one is deleted, the other is not a candidate yet
    assert disrupted(out) == {"a"}
    assert "not initialized" in blocked_of(out, "b")["reason"]


def test_node_allocatable_defaults_to_capacity() -> None:
    doc = node("a")
    del doc["status"]["allocatable"]
    snap = snapshot(doc)
    assert snap.nodes[0].allocatable == {"cpu": 2000, "memory": 8 * GI, "pods": 29}


# -- NodePools: current and older fields ------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "expire_after", "defaulted"), [
    ({"expire_after": "720h"}, 720 * 3600.0, False),
    ({"disruption": {"expireAfter": "24h"}}, 24 * 3600.0, False),  # the older v1beta1 place
    ({"expire_after": "48h", "disruption": {"expireAfter": "24h"}}, 48 * 3600.0, False),  # v1 wins
    ({"expire_after": "Never"}, None, False),
    ({"disruption": {"expireAfter": "Never"}}, None, False),
    ({}, 720 * 3600.0, True),  # Karpenter's CRD default
])
def test_expire_after(kwargs: dict[str, Any], expire_after: float | None, defaulted: bool) -> None:
    pool = snapshot(nodepool(**kwargs)).nodepools[0]
    assert (pool.expire_after, pool.expire_after_default) == (expire_after, defaulted)


@pytest.mark.parametrize(("kwargs", "consolidate_after"), [
    ({"consolidate_after": "30s"}, 30.0),
    ({"consolidate_after": "Never"}, None),
    ({"consolidate_after": None, "disruption": {"ttlSecondsAfterEmpty": 600}}, 600.0),
    ({"consolidate_after": None}, 0.0),
])
def test_consolidate_after(kwargs: dict[str, Any], consolidate_after: float | None) -> None:
    assert snapshot(nodepool(**kwargs)).nodepools[0].consolidate_after == consolidate_after


def test_older_spec_level_ttl_seconds_after_empty() -> None:
    doc = nodepool(consolidate_after=None)
    doc["spec"]["ttlSecondsAfterEmpty"] = 120
    assert snapshot(doc).nodepools[0].consolidate_after == 120.0


@pytest.mark.parametrize(("policy", "parsed"), [
    ("WhenEmptyOrUnderutilized", "WhenEmptyOrUnderutilized"),
    ("WhenUnderutilized", "WhenEmptyOrUnderutilized"),  # v1beta1 spelling
    ("WhenEmpty", "WhenEmpty"),
])
def test_consolidation_policy(policy: str, parsed: str) -> None:
    assert snapshot(nodepool(policy=policy)).nodepools[0].consolidation_policy == parsed


def test_unknown_consolidation_policy_is_an_error() -> None:
    with pytest.raises(SnapshotError) as info:
        snapshot(nodepool(policy="Always"))
    assert info.value.field == "spec.disruption.consolidationPolicy"


def test_no_budgets_means_ten_percent() -> None:
    assert snapshot(nodepool(budgets=None)).nodepools[0].budgets == (Budget(nodes="10%"),)


def test_daemonset_and_holds_are_read() -> None:
    snap = snapshot(daemonset("agent", cpu="200m"), hold("h1", "node", "a", expires_at=ago(minutes=-5),
                                                          reason="incident"))
    assert snap.daemonsets[0].spec.requests["cpu"] == 200
    h = snap.holds[0]
    assert (h.scope, h.target, h.reason) == ("node", "a", "incident")
    assert h.expires is not None and h.expires > NOW


@pytest.mark.parametrize(("replicas", "parsed"), [(None, None), (0, 0), (3, 3)])
def test_static_nodepool_replicas(replicas: int | None, parsed: int | None) -> None:
    pool = nodepool()
    if replicas is not None:
        pool["spec"]["replicas"] = replicas
    assert parse_documents([pool, catalog()]).nodepools[0].replicas == parsed


@pytest.mark.parametrize("replicas", [-1, 2.5, "3", True, [1]])
def test_bad_replicas_names_document_and_field(replicas: Any) -> None:
    pool = nodepool()
    pool["spec"]["replicas"] = replicas
    with pytest.raises(SnapshotError) as info:
        parse_documents([pool, catalog()])
    assert (info.value.document, info.value.field) == ("NodePool default", "spec.replicas")


# -- what Karpenter's NodePool CRD (v1.14.1) refuses: the API server keeps it out of a live cluster, so a file --------
# -- with it is a parse error naming the field, and a nearby value it takes is read ----------------------------------

_SPEC = "spec.template.spec"
_HOSTNAME = {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}


def _req_on(key: str) -> dict[str, Any]:
    return {"key": key, "operator": "Exists"}


def _crd_pool(*, startup_taints: list[Any] | None = None, replicas: int | None = None,
              limits: dict[str, Any] | None = None, **kwargs: Any) -> list[Any]:
    doc = nodepool(**kwargs)
    if startup_taints is not None:
        doc["spec"]["template"]["spec"]["startupTaints"] = startup_taints
    if replicas is not None:
        doc["spec"]["replicas"] = replicas
    if limits is not None:
        doc["spec"]["limits"] = limits
    return [doc]


def _taint(effect: str = "NoSchedule", key: str = "example.com/team") -> dict[str, str]:
    return {"key": key, "value": "a", "effect": effect}


# (id, the documents, the document and field named, or None where they are read)
NODEPOOL_CRD: list[tuple[str, Callable[[], list[Any]], tuple[str, str] | None]] = [
    # taints[].effect and startupTaints[].effect: the enum; a Node's taints are held to it by the API server too
    ("taint-effect-lowercase", lambda: _crd_pool(taints=[_taint("noschedule")]),
     ("NodePool default", f"{_SPEC}.taints[0].effect")),
    ("taint-effect-NoSchedule", lambda: _crd_pool(taints=[_taint("NoSchedule")]), None),
    ("taint-effect-PreferNoSchedule", lambda: _crd_pool(taints=[_taint("PreferNoSchedule")]), None),
    ("startup-taint-effect-Evict", lambda: _crd_pool(startup_taints=[_taint(), _taint("Evict")]),
     ("NodePool default", f"{_SPEC}.startupTaints[1].effect")),
    ("startup-taint-effect-NoExecute", lambda: _crd_pool(startup_taints=[_taint("NoExecute")]), None),
    ("node-taint-effect-lowercase", lambda: [node("a", taints=[_taint("noexecute")])],
     ("Node a", "spec.taints[0].effect")),
    ("node-taint-effect-NoExecute", lambda: [node("a", taints=[_taint("NoExecute")])], None),
    # taints[].key: the CRD's pattern (a lower-case DNS subdomain before the '/', one '/' at most)
    ("taint-key-upper-case-domain", lambda: _crd_pool(taints=[_taint(key="Example.com/team")]),
     ("NodePool default", f"{_SPEC}.taints[0].key")),
    ("taint-key-two-slashes", lambda: _crd_pool(taints=[_taint(key="example.com/a/b")]),
     ("NodePool default", f"{_SPEC}.taints[0].key")),
    ("taint-key-upper-case-name", lambda: _crd_pool(taints=[_taint(key="example.com/Team")]), None),
    # spec.weight: minimum 1, maximum 100
    ("weight-101", lambda: _crd_pool(weight=101), ("NodePool default", "spec.weight")),
    ("weight-100", lambda: _crd_pool(weight=100), None),
    ("weight-0", lambda: _crd_pool(weight=0), ("NodePool default", "spec.weight")),
    ("weight-1", lambda: _crd_pool(weight=1), None),
    # requirements[].key: the restricted labels (x-kubernetes-validations) and the pattern
    ("requirement-hostname", lambda: _crd_pool(requirements=[_HOSTNAME]),
     ("NodePool default", f"{_SPEC}.requirements[0].key")),
    ("requirement-zone", lambda: _crd_pool(requirements=[_req_on("topology.kubernetes.io/zone")]), None),
    ("requirement-karpenter-domain", lambda: _crd_pool(requirements=[_req_on("karpenter.sh/foo")]),
     ("NodePool default", f"{_SPEC}.requirements[0].key")),
    ("requirement-karpenter-nodepool", lambda: _crd_pool(requirements=[_req_on("karpenter.sh/nodepool")]),
     ("NodePool default", f"{_SPEC}.requirements[0].key")),
    ("requirement-karpenter-subdomain", lambda: _crd_pool(requirements=[_req_on("x.karpenter.sh/foo")]),
     ("NodePool default", f"{_SPEC}.requirements[0].key")),
    ("requirement-karpenter-bare", lambda: _crd_pool(requirements=[_req_on("karpenter.sh")]),
     ("NodePool default", f"{_SPEC}.requirements[0].key")),
    ("requirement-ends-with-karpenter.sh", lambda: _crd_pool(requirements=[_req_on("notkarpenter.sh/foo")]),
     ("NodePool default", f"{_SPEC}.requirements[0].key")),  # the CEL rule's endsWith, as written
    ("requirement-capacity-type", lambda: _crd_pool(requirements=[_req_on("karpenter.sh/capacity-type")]), None),
    ("requirement-karpenter.shx", lambda: _crd_pool(requirements=[_req_on("karpenter.shx/foo")]), None),
    ("requirement-aws-domain", lambda: _crd_pool(requirements=[_req_on("karpenter.k8s.aws/instance-family")]),
     None),
    ("requirement-key-upper-case-domain", lambda: _crd_pool(requirements=[_req_on("Example.com/tier")]),
     ("NodePool default", f"{_SPEC}.requirements[0].key")),
    ("requirement-key-upper-case-name", lambda: _crd_pool(requirements=[_req_on("example.com/Tier")]), None),
    ("pod-affinity-on-hostname", lambda: [pod("web", affinity={"nodeAffinity": {_REQUIRED: {
        "nodeSelectorTerms": [{"matchExpressions": [_HOSTNAME]}]}}})], None),  # a NodePool's rule only
    # template.metadata.labels: the same restricted labels
    ("label-karpenter-domain", lambda: _crd_pool(labels={"karpenter.sh/custom": "x"}),
     ("NodePool default", "spec.template.metadata.labels.karpenter.sh/custom")),
    ("label-hostname", lambda: _crd_pool(labels={"kubernetes.io/hostname": "x"}),
     ("NodePool default", "spec.template.metadata.labels.kubernetes.io/hostname")),
    ("label-nodepool", lambda: _crd_pool(labels={"karpenter.sh/nodepool": "x"}),
     ("NodePool default", "spec.template.metadata.labels.karpenter.sh/nodepool")),
    ("label-capacity-type", lambda: _crd_pool(labels={"karpenter.sh/capacity-type": "spot"}), None),
    ("label-own-domain", lambda: _crd_pool(labels={"example.com/custom": "x"}), None),
    # a static NodePool (spec.replicas set): no weight, no limit but nodes
    ("static-with-weight", lambda: _crd_pool(replicas=2, weight=10), ("NodePool default", "spec.weight")),
    ("static-without-weight", lambda: _crd_pool(replicas=2), None),
    ("dynamic-with-weight", lambda: _crd_pool(weight=10), None),
    ("static-with-cpu-limit", lambda: _crd_pool(replicas=2, limits={"nodes": 5, "cpu": "100"}),
     ("NodePool default", "spec.limits")),
    ("static-with-nodes-limit", lambda: _crd_pool(replicas=2, limits={"nodes": 5}), None),
    ("static-with-no-limits", lambda: _crd_pool(replicas=0, limits={}), None),
    ("dynamic-with-cpu-limit", lambda: _crd_pool(limits={"cpu": "100"}), None),
    # ebb's former ebb.sh NodePool CRD took the effects and weights Karpenter's does, but restricted no label and
    # left a taint's key free: a cluster may still hold such a NodePool, and it is read
    ("ebb.sh-taint-effect-lowercase", lambda: _crd_pool(api_version="ebb.sh/v1", taints=[_taint("noschedule")]),
     ("NodePool default", f"{_SPEC}.taints[0].effect")),
    ("ebb.sh-weight-101", lambda: _crd_pool(api_version="ebb.sh/v1", weight=101), ("NodePool default", "spec.weight")),
    ("ebb.sh-requirement-hostname", lambda: _crd_pool(api_version="ebb.sh/v1", requirements=[_HOSTNAME]), None),
    ("ebb.sh-label-karpenter-domain", lambda: _crd_pool(api_version="ebb.sh/v1", labels={"karpenter.sh/custom": "x"}),
     None),
    ("ebb.sh-taint-key-upper-case-domain",
     lambda: _crd_pool(api_version="ebb.sh/v1", taints=[_taint(key="Example.com/team")]), None),
]


@pytest.mark.parametrize(("make", "refused"), [c[1:] for c in NODEPOOL_CRD], ids=[c[0] for c in NODEPOOL_CRD])
def test_what_the_nodepool_crd_refuses_is_an_error_naming_the_field(make: Callable[[], list[Any]],
                                                                    refused: tuple[str, str] | None) -> None:
    if refused is None:
        parse_documents([*make(), catalog()])
        return
    with pytest.raises(SnapshotError) as info:
        parse_documents([*make(), catalog()])
    assert (info.value.document, info.value.field) == refused


def test_a_nodepool_s_restricted_keys_are_checked_before_older_names_are_renamed() -> None:
    """A requirement on an older label name is read under its current one, but judged as written."""
    [pool] = parse_documents([*_crd_pool(requirements=[_req_on("beta.kubernetes.io/arch")]), catalog()]).nodepools
    assert [r.key for r in pool.requirements] == ["kubernetes.io/arch"]


def test_a_nodes_pool_type_zone_and_disruption_taint_follow_its_labels_and_taints_through_replace() -> None:
    from dataclasses import replace

    from ebb.core.model import (
        CAPACITY_ON_DEMAND,
        LABEL_CAPACITY_TYPE,
        LABEL_INSTANCE_TYPE,
        LABEL_NODEPOOL,
        LABEL_ZONE,
        TAINT_DISRUPTED,
        Node,
        Taint,
    )

    plain = Node("n", {}, {}, (), {}, {})
    assert (plain.nodepool, plain.instance_type, plain.zone, plain.capacity_type) == (None, None, None,
                                                                                       CAPACITY_ON_DEMAND)
    assert plain.disruption_taint is None and not plain.being_disrupted
    labelled = replace(plain, labels={LABEL_NODEPOOL: "general", LABEL_INSTANCE_TYPE: "m5.large",
                                      LABEL_ZONE: "us-east-1a", LABEL_CAPACITY_TYPE: "spot"})
    assert (labelled.nodepool, labelled.instance_type, labelled.zone, labelled.capacity_type) == (
        "general", "m5.large", "us-east-1a", "spot")
    tainted = replace(labelled, taints=(Taint("other"), Taint(TAINT_DISRUPTED)))
    assert tainted.disruption_taint == TAINT_DISRUPTED and tainted.being_disrupted
    assert tainted.nodepool == "general"
    assert replace(tainted, taints=()) == labelled  # the derived fields are not compared: the inputs are


def test_equal_scheduling_keys_are_one_object_through_copies_pickles_and_threads() -> None:
    """A pod's class and requests keys are looked up by identity (`Interned`): equal values must be one object
    however a pod is made (parsed, copied, unpickled, in another thread), or replicas would fall in two classes."""
    import copy
    import pickle
    from concurrent.futures import ThreadPoolExecutor

    from ebb.core.model import interned
    from ebb.core.snapshot import parse_object

    def parsed(name: str, cpu: str = "100m") -> Any:
        return parse_object(pod(name, cpu=cpu, labels={"app": "web"})).value

    one, two, other = parsed("web-1"), parsed("web-2"), parsed("web-3", cpu="2")
    assert one.class_key is two.class_key and one.requests_key is two.requests_key
    assert one.requests_key is not other.requests_key and one.requests_key != other.requests_key
    for made in (copy.copy(one), copy.deepcopy(one), pickle.loads(pickle.dumps(one))):
        assert made.class_key is one.class_key and made.requests_key is one.requests_key
    with ThreadPoolExecutor(8) as pool:
        keys = list(pool.map(lambda i: interned(("race", i % 2)), range(400)))
    assert len({id(key) for key in keys}) == 2


def test_an_object_twice_fails_the_assembly_given_as_a_list_or_as_a_stream() -> None:
    """`assemble` tells a list without a ref twice in C (a store's objects, every pass) and otherwise goes object
    by object: either way an object that comes twice fails, naming it, and a list without one assembles as the
    same objects streamed do."""
    from ebb.core.snapshot import assemble, parse_object

    def doc(kind: str, name: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "default"},
                "spec": {"containers": []}} if kind == "Pod" else \
            {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}, "status": {"allocatable": {"cpu": "2"}}}

    objects = [parse_object(doc("Node", "a")), parse_object(doc("Pod", "p")), parse_object(doc("Pod", "q"))]
    assert assemble(list(objects)) == assemble(iter(objects))
    twice = [*objects, parse_object(doc("Pod", "p"))]
    for given in (twice, iter(twice)):
        with pytest.raises(SnapshotError, match=r"Pod default/p.*appears twice"):
            assemble(given)


@pytest.mark.parametrize(("files", "message"), [
    ((("a.yaml", ["n1", "n2"]), ("b.yaml", ["n3", "n2"])), "b.yaml: Node n2: metadata.name: appears twice in the "
                                                           "input (first in a.yaml)"),
    ((("a.yaml", ["n1"]), ("b.yaml", ["n2", "n2"])), "b.yaml: Node n2: metadata.name: appears twice in the input"),
])
def test_an_object_given_twice_is_named_with_the_file_it_is_in(files: tuple[tuple[str, list[str]], ...],
                                                                 message: str) -> None:
    """``ebb plan -f a.yaml -f b.yaml``: the error names the file of the second copy (and of the first, when another),
    as every other input error names its file."""
    from ebb.core.snapshot import parse_sources

    def node_doc(name: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                "status": {"allocatable": {"cpu": "2"}}}

    with pytest.raises(SnapshotError) as caught:
        parse_sources((source, [node_doc(n) for n in names]) for source, names in files)
    assert str(caught.value) == message


def test_a_host_network_pods_container_ports_are_its_host_ports() -> None:
    """The API server gives a hostNetwork pod's ports without a hostPort their containerPort as one
    (``defaultHostNetworkPorts``); without hostNetwork such a port takes no host port."""
    def ports_of(host_network: bool) -> list[tuple[int, str]]:
        doc = pod("agent", "a")
        doc["spec"]["hostNetwork"] = host_network
        doc["spec"]["containers"][0]["ports"] = [{"containerPort": 9100}, {"containerPort": 53, "protocol": "UDP"},
                                                 {"containerPort": 8080, "hostPort": 18080}]
        (parsed,) = snapshot(node("a"), doc).pods
        return [(p.port, p.protocol) for p in parsed.spec.host_ports]

    assert ports_of(True) == [(9100, "TCP"), (53, "UDP"), (18080, "TCP")]
    assert ports_of(False) == [(18080, "TCP")]


def test_an_owner_reference_whose_kind_is_not_a_string_is_no_special_owner() -> None:
    """A hand-written ownerReference with a list for its kind is read as a kind no one knows, not a crash."""
    doc = pod("odd", "a")
    doc["metadata"]["ownerReferences"] = [{"kind": ["DaemonSet"], "name": "x", "controller": True}]
    (parsed,) = snapshot(node("a"), doc).pods
    assert parsed.owner_kind == "['DaemonSet']" and not parsed.is_daemonset


def _selecting(name: str, team: str) -> dict[str, Any]:
    """A pod kept away from db pods in the namespaces of ``team`` (a required anti-affinity's namespaceSelector)."""
    away = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname",
        "namespaceSelector": {"matchLabels": {"team": team}}}]}}
    return pod(name, "n1", affinity=away)


def _namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


@pytest.mark.parametrize(("namespaces", "warned"), [([], True), ([_namespace("data", team="data")], False)])
def test_an_input_without_namespaces_warns_of_the_pods_that_select_namespaces(namespaces: list[dict[str, Any]],
                                                                              warned: bool) -> None:
    """A namespaceSelector is read only against the input's Namespaces: without any, ``ebb plan`` says so, naming the
    pods whose terms are read as their own namespace's (a finished pod is not named); with them, nothing is said."""
    done = _selecting("done", "data")
    done["status"]["phase"] = "Succeeded"
    warnings = input_warnings(parse_documents(
        [nodepool(), node("n1"), _selecting("web", "data"), done, pod("plain", "n1"), *namespaces], bundled_catalog=[]))
    unread = [w for w in warnings if "namespaceSelector" in w]
    assert len(unread) == warned
    if warned:
        assert unread[0].startswith("1 pod(s) have pod affinity terms with a namespaceSelector") and \
            "pod default/web" in unread[0] and "done" not in unread[0] and "add namespaces" in unread[0]


def test_replicas_selecting_namespaces_by_label_are_resolved_alike() -> None:
    """Each pod's term resolves to the Namespaces its selector matches; a selector that matches none selects no
    namespace (not the pod's own), and one the pod's replicas repeat gives them the same namespaces."""
    snap = parse_documents([nodepool(), node("n1"), _selecting("web-1", "data"), _selecting("web-2", "data"),
                            _selecting("lone", "nobody"), pod("plain", "n1"), _namespace("data", team="data"),
                            _namespace("etl", team="data"), _namespace("default")], bundled_catalog=[])
    by_name = {p.name: p for p in snap.pods}
    chosen = {name: by_name[name].spec.pod_anti_affinity[0].namespaces for name in ("web-1", "web-2", "lone")}
    assert chosen == {"web-1": {"data", "etl"}, "web-2": {"data", "etl"}, "lone": frozenset()}
    assert all(by_name[n].spec.pod_anti_affinity[0].namespace_selector is None for n in chosen)
    assert by_name["plain"].spec.pod_anti_affinity == ()


@pytest.mark.parametrize("stamp", ["9999-12-31T23:59:59Z", "0001-01-01T00:00:00+01:00", "2026-W48-1"])
def test_an_objects_timestamp_out_of_range_is_refused_naming_its_field(stamp: str) -> None:
    """A creationTimestamp no cluster writes (year 9999, year 1 with an offset, a week date) is refused as bad input
    naming the document and field, where the pass crashed (an OverflowError adding expireAfter to it)."""
    doc = node("n1")
    doc["metadata"]["creationTimestamp"] = stamp
    with pytest.raises(SnapshotError, match=r"metadata\.creationTimestamp.*RFC 3339 time from 1970 to 2262"):
        parse_documents([nodepool(), doc], bundled_catalog=[])


def test_a_nodepool_requirement_not_in_without_values_is_read_as_exists() -> None:
    """nodepool_validation_cel_test.go ("should allow supported ops": NotIn without values) and the CRD, which asks
    values of In alone; Karpenter's NewRequirement reads it as Exists. A pod's is refused, as the API server does."""
    pool = nodepool(requirements=[{"key": "topology.kubernetes.io/zone", "operator": "NotIn"}])
    [read] = snapshot(pool).nodepools
    assert [(r.key, r.operator) for r in read.requirements] == [("topology.kubernetes.io/zone", "Exists")]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "NotIn"}]}]}}}
    with pytest.raises(SnapshotError):
        snapshot(pod("web", "a", affinity=affinity))

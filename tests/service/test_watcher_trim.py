"""Trimming (ebb.adapters.kube.trim) and the list/event → change logic (ebb.adapters.kube.reflector):
pure functions, fed with kubectl-shaped objects as the API server sends them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ebb.adapters.kube import KINDS, KindState, content_digest, kinds_named, trim
from ebb.adapters.kube.trim import LAST_APPLIED
from ebb.core.snapshot import parse_documents

MANAGED = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:metadata": {}}}]


def node(name: str = "node-a", rv: str = "10", heartbeat: str = "2026-11-21T10:00:00Z") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "uid": "u-1",
            "resourceVersion": rv,
            "generation": 3,
            "creationTimestamp": "2026-11-20T10:00:00Z",
            "labels": {"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "m5.large"},
            "annotations": {LAST_APPLIED: "{...}", "karpenter.sh/nodepool-hash": "123"},
            "managedFields": MANAGED,
            "finalizers": ["karpenter.sh/termination"],
        },
        "spec": {"providerID": "aws:///us-east-1a/i-1", "taints": [{"key": "a", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
            "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting",
                 "lastHeartbeatTime": heartbeat, "lastTransitionTime": "2026-11-20T10:01:00Z"}
            ],
            "images": [{"names": ["registry/big:1"], "sizeBytes": 1_000_000}],
            "nodeInfo": {"kubeletVersion": "v1.34.0"},
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
        },
    }


def pod(name: str = "web-1", namespace: str = "default", rv: str = "20", node_name: str = "node-a") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": "p-1",
            "resourceVersion": rv,
            "creationTimestamp": "2026-11-20T11:00:00Z",
            "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "r",
                                 "controller": True}],
            "managedFields": MANAGED,
        },
        "spec": {
            "nodeName": node_name,
            "priority": 5,
            "containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "250m"}}}],
        },
        "status": {
            "phase": "Running",
            "startTime": "2026-11-20T11:00:05Z",
            "podIP": "10.1.0.5",
            "hostIP": "10.0.0.1",
            "qosClass": "Burstable",
            "containerStatuses": [{"name": "app", "ready": True, "restartCount": 0}],
            "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": None,
                            "lastTransitionTime": "2026-11-20T11:00:06Z"}],
        },
    }


def nodeclaim() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "default-x1", "resourceVersion": "5", "labels": {"karpenter.sh/nodepool": "default"},
                     "managedFields": MANAGED},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
        "status": {
            "nodeName": "node-a",
            "providerID": "aws:///us-east-1a/i-1",
            "imageID": "ami-1",
            "lastPodEventTime": "2026-11-20T11:00:05Z",
            "capacity": {"cpu": "2"},
            "conditions": [{"type": "Initialized", "status": "True", "reason": "Initialized", "message": "",
                            "lastTransitionTime": "2026-11-20T10:02:00Z", "observedGeneration": 1}],
        },
    }


def test_trim_node_keeps_what_the_snapshot_reads_and_drops_the_rest() -> None:
    raw = node()
    before = copy.deepcopy(raw)
    out = trim(raw, kind="Node", api_version="v1")
    assert raw == before  # the input is not modified
    assert out["kind"] == "Node" and out["apiVersion"] == "v1"
    assert set(out["metadata"]) == {"name", "uid", "resourceVersion", "creationTimestamp", "labels", "annotations"}
    assert out["metadata"]["annotations"] == {"karpenter.sh/nodepool-hash": "123"}
    assert out["spec"] == raw["spec"]
    assert set(out["status"]) == {"capacity", "allocatable", "conditions"}
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastTransitionTime": "2026-11-20T10:01:00Z"}
    ]


def test_trim_pod_and_nodeclaim_status() -> None:
    p = trim(pod(), kind="Pod", api_version="v1")
    assert p["status"] == {
        "phase": "Running",
        "startTime": "2026-11-20T11:00:05Z",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-20T11:00:06Z"}],
    }
    assert p["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    assert p["metadata"]["namespace"] == "default"
    assert "managedFields" not in p["metadata"]
    c = trim(nodeclaim())
    assert c["apiVersion"] == "karpenter.sh/v1" and c["kind"] == "NodeClaim"
    assert c["status"] == {
        "nodeName": "node-a",
        "providerID": "aws:///us-east-1a/i-1",
        "lastPodEventTime": "2026-11-20T11:00:05Z",
        "conditions": [{"type": "Initialized", "status": "True", "reason": "Initialized",
                        "lastTransitionTime": "2026-11-20T10:02:00Z"}],
        "capacity": {"cpu": "2"},  # what a launching claim counts against its NodePool's limits
    }


def test_trim_keeps_what_a_pod_holds_during_an_in_place_resize() -> None:
    """Of a pod's container statuses, trimming keeps those with ``resources`` (name, ``resources``,
    ``allocatedResources``), which its requests count while a resize is in progress, and they parse as such."""
    raw = pod()
    held = {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}
    raw["status"]["containerStatuses"] = [{"name": "app", "ready": True, "restartCount": 3, "resources": held,
                                           "allocatedResources": {"cpu": "500m"}, "state": {"running": {}}}]
    raw["status"]["initContainerStatuses"] = [{"name": "setup", "ready": False, "restartCount": 0}]
    out = trim(raw, kind="Pod", api_version="v1")
    assert out["status"]["containerStatuses"] == [{"name": "app", "resources": held,
                                                   "allocatedResources": {"cpu": "500m"}}]
    assert "initContainerStatuses" not in out["status"]
    (parsed,) = parse_documents([out], bundled_catalog=[]).pods
    assert parsed.spec.requests["cpu"] == 1000


def test_trim_drops_status_of_kinds_whose_status_ebb_never_reads() -> None:
    for kind, status in (("PodDisruptionBudget", {"disruptionsAllowed": 1}), ("DaemonSet", {"numberReady": 3}),
                         ("NodePool", {"resources": {"cpu": "4"}})):
        out = trim({"metadata": {"name": "x", "annotations": {LAST_APPLIED: "{}"}}, "spec": {}, "status": status},
                   kind=kind)
        assert "status" not in out
        assert "annotations" not in out["metadata"]  # nothing left once last-applied is gone


ZONE_AFFINITY = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}]}]}}
ALLOWED_TOPOLOGIES = [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone",
                                                  "values": ["us-east-1a", "us-east-1b"]}]}]
PVC_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
            "storageClassName": "gp3", "volumeMode": "Filesystem", "volumeName": "pvc-0a1b"}
PV_SPEC = {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "10Gi"}, "storageClassName": "gp3",
           "persistentVolumeReclaimPolicy": "Delete", "nodeAffinity": ZONE_AFFINITY,
           "claimRef": {"namespace": "shop", "name": "data-db-0"},
           "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0123", "fsType": "ext4"}}
META = {"uid": "v-1", "resourceVersion": "7", "managedFields": MANAGED, "finalizers": ["kubernetes.io/pv-protection"],
        "creationTimestamp": "2026-11-20T10:00:00Z"}

#: (kind, apiVersion, the object as listed (no kind or apiVersion), the fields beside metadata trimming keeps)
VOLUME_CASES: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    ("StorageClass", "storage.k8s.io/v1",
     {"metadata": {"name": "gp3", **META}, "provisioner": "ebs.csi.aws.com",
      "volumeBindingMode": "WaitForFirstConsumer", "allowedTopologies": ALLOWED_TOPOLOGIES,
      "parameters": {"type": "gp3", "kmsKeyId": "arn:key"}, "reclaimPolicy": "Delete",
      "allowVolumeExpansion": True, "mountOptions": ["debug"]},
     {"provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
      "allowedTopologies": ALLOWED_TOPOLOGIES}),
    ("StorageClass", "storage.k8s.io/v1",  # the apiserver's default binding mode, no topology
     {"metadata": {"name": "standard", **META}, "provisioner": "rancher.io/local-path",
      "volumeBindingMode": "Immediate"},
     {"provisioner": "rancher.io/local-path", "volumeBindingMode": "Immediate"}),
    ("PersistentVolumeClaim", "v1",
     {"metadata": {"name": "data-db-0", "namespace": "shop", **META},
      "spec": PVC_SPEC, "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"],
                                   "capacity": {"storage": "10Gi"}}},
     {"spec": PVC_SPEC, "status": {"phase": "Bound"}}),
    ("PersistentVolumeClaim", "v1",  # waiting for its first consumer: no volume yet
     {"metadata": {"name": "scratch", "namespace": "shop", **META},
      "spec": {**PVC_SPEC, "volumeName": None}, "status": {"phase": "Pending"}},
     {"spec": {**PVC_SPEC, "volumeName": None}, "status": {"phase": "Pending"}}),
    ("PersistentVolume", "v1",
     {"metadata": {"name": "pvc-0a1b", **META}, "spec": PV_SPEC,
      "status": {"phase": "Bound", "lastPhaseTransitionTime": "x"}},
     {"spec": PV_SPEC}),
]


@pytest.mark.parametrize(("kind", "api_version", "raw", "kept"), VOLUME_CASES,
                         ids=[f"{c[0]}-{c[2]['metadata']['name']}" for c in VOLUME_CASES])
def test_trim_keeps_what_volume_topology_reads(kind: str, api_version: str, raw: dict[str, Any],
                                               kept: dict[str, Any]) -> None:
    """A StorageClass's top-level provisioner, binding mode and allowed topologies (it has no spec), a claim's whole
    spec and its phase, a volume's whole spec (node affinity, source, class) and no status."""
    for copied in (True, False):
        out = trim(raw, kind=kind, api_version=api_version, copy=copied)
        assert {k: v for k, v in out.items() if k != "metadata"} == {"apiVersion": api_version, "kind": kind, **kept}
        assert set(out["metadata"]) == {"name", "uid", "resourceVersion", "creationTimestamp"} | (
            {"namespace"} if kind == "PersistentVolumeClaim" else set())


def test_trim_keeps_a_claims_bind_completed_annotation_and_the_watcher_sees_a_topology_change() -> None:
    claim = {"metadata": {"name": "data", "namespace": "shop",
                          "annotations": {"pv.kubernetes.io/bind-completed": "yes", LAST_APPLIED: "{}"}},
             "spec": PVC_SPEC, "status": {"phase": "Bound"}}
    out = trim(claim, kind="PersistentVolumeClaim", api_version="v1")
    assert out["metadata"]["annotations"] == {"pv.kubernetes.io/bind-completed": "yes"}
    state = KindState(KINDS["StorageClass"])
    cls = {"metadata": {"name": "gp3", "resourceVersion": "1"}, "provisioner": "ebs.csi.aws.com",
           "allowedTopologies": ALLOWED_TOPOLOGIES}
    (first,) = state.relist([cls])
    assert first.object is not None and first.object["allowedTopologies"] == ALLOWED_TOPOLOGIES
    state.record(first)
    assert state.relist([{**cls, "metadata": {"name": "gp3", "resourceVersion": "2"}}]) == []
    narrowed = {**cls, "metadata": {"name": "gp3", "resourceVersion": "3"},
                "allowedTopologies": [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone",
                                                                  "values": ["us-east-1a"]}]}]}
    (changed,) = state.relist([narrowed])  # a top-level field is content: the change is published
    assert changed.object is not None and changed.object["allowedTopologies"] == narrowed["allowedTopologies"]


def csi_node(name: str = "node-a", rv: str = "5", count: int | None = 25) -> dict[str, Any]:
    """A CSINode as the apiserver lists it (no kind or apiVersion): the kubelet's, owned by its Node."""
    ebs: dict[str, Any] = {"name": "ebs.csi.aws.com", "nodeID": "i-0abc123",
                           "topologyKeys": ["topology.ebs.csi.aws.com/zone"]}
    if count is not None:
        ebs["allocatable"] = {"count": count}
    return {"metadata": {"name": name, "uid": "c-1", "resourceVersion": rv, "managedFields": MANAGED,
                         "creationTimestamp": "2026-11-20T10:00:05Z",
                         "annotations": {"storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/aws-ebs"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": "u-1"}]},
            "spec": {"drivers": [ebs, {"name": "efs.csi.aws.com", "nodeID": "i-0abc123", "topologyKeys": None}]}}


def test_trim_keeps_a_csinodes_spec_and_owner_and_no_status() -> None:
    """A CSINode keeps its whole spec (each driver's name and allocatable count, which Karpenter's volume limits
    read; the watcher redacts nothing), its owner (its Node) and no status (it has none: a stray one is dropped)."""
    raw = {**csi_node(), "status": {"anything": 1}}
    for copied in (True, False):
        out = trim(raw, kind="CSINode", api_version="storage.k8s.io/v1", copy=copied)
        assert {k: v for k, v in out.items() if k != "metadata"} == {
            "apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "spec": csi_node()["spec"]}
        assert out["spec"]["drivers"][0]["allocatable"] == {"count": 25}
        assert set(out["metadata"]) == {"name", "uid", "resourceVersion", "creationTimestamp", "annotations",
                                        "ownerReferences"}
        assert out["metadata"]["ownerReferences"][0]["kind"] == "Node"


def test_the_watcher_publishes_a_csinodes_new_attach_limit_and_not_a_bare_resource_version() -> None:
    state = KindState(KINDS["CSINode"])
    (first,) = state.relist([csi_node(count=None)])  # the driver registered, its limit not yet reported
    assert (first.kind, first.namespace, first.name) == ("CSINode", "", "node-a") and first.object is not None
    assert "allocatable" not in first.object["spec"]["drivers"][0]
    state.record(first)
    assert state.relist([csi_node(rv="6", count=None)]) == []
    (changed,) = state.relist([csi_node(rv="7", count=39)])
    assert changed.object is not None and changed.object["spec"]["drivers"][0]["allocatable"] == {"count": 39}


def namespace(name: str = "billing", rv: str = "3", **labels: str) -> dict[str, Any]:
    """A Namespace as the apiserver lists it: its name label, annotations, finalizers and phase."""
    return {"metadata": {"name": name, "uid": "ns-1", "resourceVersion": rv, "managedFields": MANAGED,
                         "creationTimestamp": "2026-11-20T10:00:00Z",
                         "labels": {"kubernetes.io/metadata.name": name, **labels},
                         "annotations": {"owner.example/contact": "bob", LAST_APPLIED: "{}"}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


def test_trim_keeps_of_a_namespace_its_name_and_labels_and_no_annotations_spec_or_status() -> None:
    """A Namespace keeps what a namespaceSelector reads (its labels) and what names and versions it, nothing else:
    an annotation, its finalizers or its phase changing does not wake the planner."""
    for copied in (True, False):
        out = trim(namespace(team="ledger"), kind="Namespace", api_version="v1", copy=copied)
        assert out == {"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": "billing", "uid": "ns-1", "resourceVersion": "3", "creationTimestamp": "2026-11-20T10:00:00Z",
            "labels": {"kubernetes.io/metadata.name": "billing", "team": "ledger"}}}


def test_the_watcher_publishes_a_namespaces_new_label_and_not_its_new_annotation() -> None:
    state = KindState(KINDS["Namespace"])
    (first,) = state.relist([namespace(team="ledger")])
    assert (first.kind, first.namespace, first.name) == ("Namespace", "", "billing")
    state.record(first)
    annotated = namespace(rv="4", team="ledger")
    annotated["metadata"]["annotations"]["owner.example/contact"] = "alice"
    assert state.relist([annotated]) == []
    (changed,) = state.relist([namespace(rv="5", team="payments")])
    assert changed.object is not None and changed.object["metadata"]["labels"]["team"] == "payments"


def test_trimmed_objects_parse_into_the_snapshot() -> None:
    docs = [
        trim(node(), kind="Node", api_version="v1"),
        trim(pod(), kind="Pod", api_version="v1"),
        trim(nodeclaim()),
        trim({"metadata": {"name": "default", "managedFields": MANAGED},
              "spec": {"template": {"spec": {"requirements": []}}, "disruption": {"consolidateAfter": "30s"}},
              "status": {"resources": {}}}, kind="NodePool", api_version="karpenter.sh/v1"),
        trim({"metadata": {"name": "web", "namespace": "default"},
              "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
              "status": {"currentHealthy": 1}}, kind="PodDisruptionBudget", api_version="policy/v1"),
        trim({"metadata": {"name": "agent", "namespace": "kube-system"},
              "spec": {"template": {"metadata": {"labels": {"app": "agent"}},
                                    "spec": {"containers": [
                                        {"name": "a", "resources": {"requests": {"cpu": "50m"}}}]}}},
              "status": {"numberReady": 1}}, kind="DaemonSet", api_version="apps/v1"),
    ]
    snapshot = parse_documents(docs, bundled_catalog=[])
    (n,) = snapshot.nodes
    assert n.name == "node-a" and n.ready and n.allocatable["cpu"] == 1930
    assert n.provider_id == "aws:///us-east-1a/i-1"
    assert n.labels["karpenter.sh/initialized"] == "true"  # from the NodeClaim's Initialized condition
    (p,) = snapshot.pods
    assert (p.node_name, p.phase, p.priority, p.owner_kind) == ("node-a", "Running", 5, "ReplicaSet")
    assert p.spec.requests["cpu"] == 250 and p.start_time is not None
    assert [c.name for c in snapshot.nodeclaims] == ["default-x1"]
    assert [np.name for np in snapshot.nodepools] == ["default"]
    assert [b.name for b in snapshot.pdbs] == ["web"]
    assert [d.name for d in snapshot.daemonsets] == ["agent"]


def test_content_digest_ignores_the_resource_version_only() -> None:
    a = trim(node(rv="1"), kind="Node")
    assert content_digest(a) == content_digest(trim(node(rv="2"), kind="Node"))
    changed = node(rv="3")
    changed["metadata"]["labels"]["new"] = "x"
    assert content_digest(a) != content_digest(trim(changed, kind="Node"))


def test_relist_publishes_new_and_changed_objects_and_tombstones_the_vanished() -> None:
    state = KindState(KINDS["Pod"])
    first = state.relist([pod("a"), pod("b")])
    assert [(c.key, c.deleted) for c in first] == [("Pod/default/a", False), ("Pod/default/b", False)]
    assert first[0].object is not None and first[0].object["kind"] == "Pod"
    for change in first:
        state.record(change)
    assert state.relist([pod("a"), pod("b", rv="99")]) == []  # nothing ebb reads changed
    moved = pod("b", rv="100", node_name="node-b")
    # after a 410 Gone: a deleted while the watch was down, b moved, c new
    second = state.relist([moved, pod("c", namespace="other")])
    assert [(c.key, c.deleted) for c in second] == [
        ("Pod/default/b", False), ("Pod/other/c", False), ("Pod/default/a", True)
    ]
    assert second[0].resource_version == "100"
    for change in second:
        state.record(change)
    assert set(state.published) == {("default", "b"), ("other", "c")}


def test_watch_events() -> None:
    state = KindState(KINDS["Node"])
    added = state.event("ADDED", node(rv="1"))
    assert added is not None and added.key == "Node//node-a" and not added.deleted
    state.record(added)
    # a kubelet heartbeat changes only dropped fields: nothing to publish
    assert state.event("MODIFIED", node(rv="2", heartbeat="2026-11-21T10:00:40Z")) is None
    cordoned = node(rv="3")
    cordoned["spec"]["unschedulable"] = True
    modified = state.event("MODIFIED", cordoned)
    assert modified is not None and modified.object is not None
    assert modified.object["spec"]["unschedulable"] is True
    state.record(modified)
    assert state.event("BOOKMARK", {"metadata": {"resourceVersion": "4"}}) is None
    deleted = state.event("DELETED", node(rv="5"))
    assert deleted is not None and deleted.deleted and deleted.resource_version == "5"
    state.record(deleted)
    assert state.published == {}
    # a deletion of an object never published still gives a tombstone (e.g. after a restart)
    assert state.event("DELETED", node(name="other")) is not None


def test_kinds_named() -> None:
    assert [k.kind for k in kinds_named(["node", "NodeClaim", "Node"])] == ["Node", "NodeClaim"]
    assert KINDS["PodDisruptionBudget"].api_version == "policy/v1"
    assert [(k.api_version, k.plural, k.namespaced, k.custom) for k in kinds_named(
        ["persistentvolumeclaim", "PersistentVolume", "storageclass"])] == [
        ("v1", "persistentvolumeclaims", True, False), ("v1", "persistentvolumes", False, False),
        ("storage.k8s.io/v1", "storageclasses", False, False)]
    csi = kinds_named(["csinode"])[0]
    assert (csi.kind, csi.api_version, csi.plural, csi.namespaced, csi.custom) == (
        "CSINode", "storage.k8s.io/v1", "csinodes", False, False)
    namespace = kinds_named(["namespace"])[0]
    assert (namespace.kind, namespace.api_version, namespace.plural, namespace.namespaced, namespace.custom) == (
        "Namespace", "v1", "namespaces", False, False)
    assert KINDS["NodePool"].custom and KINDS["NodePool"].api_version == "karpenter.sh/v1"
    policy = KINDS["DisruptionPolicy"]
    assert (policy.custom, policy.api_version, policy.plural, policy.namespaced) == (
        True, "ebb.sh/v1", "disruptionpolicies", False)
    try:
        kinds_named(["Deployment"])
    except ValueError as e:
        assert "Deployment" in str(e)
    else:
        raise AssertionError("an unknown kind must be refused")


#: the kubernetes-asyncio function that lists each built-in kind across all namespaces (custom kinds: the
#: CustomObjectsApi's list_cluster_custom_object)
LIST_FUNCTIONS = {"Node": "list_node", "Pod": "list_pod_for_all_namespaces",
                  "PodDisruptionBudget": "list_pod_disruption_budget_for_all_namespaces",
                  "DaemonSet": "list_daemon_set_for_all_namespaces",
                  "PersistentVolumeClaim": "list_persistent_volume_claim_for_all_namespaces",
                  "PersistentVolume": "list_persistent_volume", "StorageClass": "list_storage_class",
                  "CSINode": "list_csi_node", "Namespace": "list_namespace"}


async def test_every_built_in_kind_is_listed_by_its_own_function() -> None:
    from kubernetes_asyncio.client import ApiClient

    async with ApiClient() as api:
        built_in = {kind: spec for kind, spec in KINDS.items() if not spec.custom}
        assert set(built_in) == set(LIST_FUNCTIONS)
        for kind, spec in built_in.items():
            assert getattr(spec.list_function(api), "__name__", "") == LIST_FUNCTIONS[kind], kind


def test_trim_without_copy_gives_the_same_object_sharing_the_inputs_values() -> None:
    for raw, kind in ((node(), "Node"), (pod(), "Pod"), (nodeclaim(), None)):
        copied = trim(raw, kind=kind, api_version="v1")
        shared = trim(raw, kind=kind, api_version="v1", copy=False)
        assert shared == copied
        assert content_digest(shared) == content_digest(copied)
        assert shared["spec"] is raw["spec"]
        assert copied["spec"] is not raw["spec"]


def test_content_digest_of_what_orjson_cannot_encode() -> None:
    a = {"metadata": {"name": "x", "resourceVersion": "1"}, "spec": {"big": 2**70}}
    b = {"metadata": {"name": "x", "resourceVersion": "2"}, "spec": {"big": 2**70}}
    assert content_digest(a) == content_digest(b)
    assert content_digest(a) != content_digest({**a, "spec": {"big": 2**70 + 1}})

"""``ebb.core.recording``: observed changes of a cluster become trace events, table-driven; redaction and
anonymization keep out what must stay out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ebb.core.recording import Anonymizer, Recorder, arrival, redacted
from ebb.core.traces import Trace

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def pod(name: str, *, node: str | None = None, owner: tuple[str, str] | None = ("ReplicaSet", "web"),
        phase: str = "Running", deleting: bool = False, cpu: str = "500m", namespace: str = "shop") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {"app": "web"}, "uid": f"uid-{name}",
                            "annotations": {"karpenter.sh/do-not-disrupt": "true", "secret.example/token": "s3cr3t"}}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner[0], "name": owner[1], "uid": "o",
                                    "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-11-23T12:00:00Z"
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": "registry.example/secret-app:1",
                        "env": [{"name": "PASSWORD", "value": "hunter2"}], "command": ["run"],
                        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
        "nodeSelector": {"team": "data"}, "volumes": [{"name": "v", "secret": {"secretName": "db"}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def node(name: str, *, taints: tuple[str, ...] = (), deleting: bool = False, decision: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"karpenter.sh/nodepool": "general",
                                                     "node.kubernetes.io/instance-type": "m5.large",
                                                     "karpenter.sh/capacity-type": "on-demand",
                                                     "kubernetes.io/hostname": name}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-23T12:00:00Z"
    if decision:
        meta["annotations"] = {"ebb.sh/decision-id": decision}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta,
            "spec": {"taints": [{"key": t, "effect": "NoSchedule"} for t in taints]}}


def claim(name: str, node_name: str, condition: str, reason: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": name},
            "status": {"nodeName": node_name,
                       "conditions": [{"type": condition, "status": "True", "reason": reason}]}}


def event(reason: str, kind: str, name: str, message: str, component: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{name}.1", "namespace": "default"},
            "reason": reason, "message": message, "involvedObject": {"kind": kind, "name": name},
            "source": {"component": component}}


def ref(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


def play(start: list[dict[str, Any]], changes: list[tuple[float, Any]], end: float = 600.0,
         anonymizer: Anonymizer | None = None) -> Trace:
    """Feed a recorder ``changes``: (seconds, object) for an upsert, (seconds, ("delete", kind, ns, name))."""
    recorder = Recorder(start=T0, documents=start, anonymizer=anonymizer)
    for at, change in changes:
        when = T0 + timedelta(seconds=at)
        if isinstance(change, tuple):
            _, kind, namespace, name = change
            recorder.observe(when, kind, namespace, name, None)
        else:
            recorder.observe(when, *ref(change), change)
    return recorder.trace(T0 + timedelta(seconds=end), name="recorded")


def actions(trace: Trace) -> list[tuple[float, str, str]]:
    """(at, arrive/depart, pod name) of a trace's events."""
    out = []
    for e in trace.events:
        if e.create is not None:
            out.append((e.at, "arrive", e.create.objects[0]["metadata"]["name"]))
        elif e.depart is not None:
            out.append((e.at, "depart", e.depart.name))
    return out


def deleted(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    return ("delete", *ref(obj))


BUSY = node("n1")
CASES: list[tuple[str, list[dict[str, Any]], list[tuple[float, Any]], list[tuple[float, str, str]]]] = [
    ("a new pod arrives; bound later it is still one arrival",
     [BUSY], [(10, pod("a")), (12, pod("a", node="n1"))], [(10, "arrive", "a")]),
    ("a pod deleted departs when it is deleted",
     [BUSY, pod("a", node="n1")], [(30, deleted(pod("a")))], [(30, "depart", "a")]),
    ("a pod departs when its deletion starts, not when it is gone",
     [BUSY, pod("a", node="n1")], [(30, pod("a", node="n1", deleting=True)), (40, deleted(pod("a")))],
     [(30, "depart", "a")]),
    ("a finished pod departs when it finishes",
     [BUSY], [(5, pod("j", owner=("Job", "j"))), (6, pod("j", owner=("Job", "j"), node="n1")),
              (100, pod("j", owner=("Job", "j"), node="n1", phase="Succeeded"))],
     [(5, "arrive", "j"), (100, "depart", "j")]),
    ("a pod evicted from a disrupted node and made again is the same replica: no event; its later departure "
     "names the first pod",
     [BUSY, pod("a", node="n1")],
     [(50, node("n1", taints=("karpenter.sh/disrupted",))), (51, deleted(pod("a", node="n1"))), (52, pod("a2")),
      (300, deleted(pod("a2")))],
     [(300, "depart", "a")]),
    ("ebb's taint is a disruption too",
     [BUSY, pod("a", node="n1")],
     [(50, node("n1", taints=("ebb.sh/disrupted",))), (51, deleted(pod("a", node="n1"))), (52, pod("a2"))], []),
    ("a pod deleted from a node that is not disrupted is the workload's own departure",
     [BUSY, pod("a", node="n1")], [(51, deleted(pod("a", node="n1"))), (52, pod("a2"))],
     [(51, "depart", "a"), (52, "arrive", "a2")]),
    ("an evicted replica that is never made again departs at its eviction",
     [BUSY, pod("a", node="n1")], [(50, node("n1", deleting=True)), (51, deleted(pod("a", node="n1")))],
     [(51, "depart", "a")]),
    ("a bare pod on a disrupted node departs (nothing makes it again)",
     [BUSY, pod("b", node="n1", owner=None)],
     [(50, node("n1", taints=("karpenter.sh/disrupted",))), (51, deleted(pod("b", node="n1", owner=None)))],
     [(51, "depart", "b")]),
    ("a pod seen only on its way out neither arrives nor departs",
     [BUSY], [(5, pod("c", node="n1", phase="Succeeded")), (6, deleted(pod("c")))], []),
    ("a DaemonSet's pods follow the nodes: neither arrivals nor departures",
     [BUSY], [(5, pod("ds-x", owner=("DaemonSet", "agent"))), (9, deleted(pod("ds-x", owner=("DaemonSet", "agent"))))],
     []),
    ("times never go backwards (a late watch event)",
     [BUSY], [(20, pod("a")), (10, pod("b"))], [(20, "arrive", "a"), (20, "arrive", "b")]),
]


@pytest.mark.parametrize(("start", "changes", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_pod_arrivals_and_departures(start: list[dict[str, Any]], changes: list[tuple[float, Any]],
                                     expected: list[tuple[float, str, str]]) -> None:
    assert actions(play(start, changes)) == expected


NODE_CASES: list[tuple[str, list[dict[str, Any]], list[tuple[float, Any]], list[tuple[float, str, str, str, str]]]] = [
    ("a node that appears is the provisioner's launch", [],
     [(10, node("n2"))], [(10, "n2", "launched", "karpenter", "provisioning")]),
    ("a node whose NodeClaim Karpenter launched for a disruption is its replacement, the Event seen first",
     [], [(8, event("DisruptionLaunching", "NodeClaim", "c9", "Launching NodeClaim: Underutilized", "karpenter")),
          (10, node("n9")), (11, claim("c9", "n9", "Ready", ""))],
     [(10, "n9", "launched", "karpenter", "replacement")]),
    ("a node with ebb's decision is ebb's replacement", [],
     [(10, node("n3", decision="d-1"))], [(10, "n3", "launched", "ebb", "replacement")]),
    ("Karpenter's removal: its taint and the NodeClaim's reason", [BUSY],
     [(5, claim("c1", "n1", "DisruptionReason", "Underutilized")),
      (20, node("n1", taints=("karpenter.sh/disrupted",))), (30, node("n1", deleting=True)),
      (31, deleted(BUSY))],
     [(30, "n1", "removed", "karpenter", "Underutilized")]),
    ("ebb's removal: its taint and its Event", [BUSY],
     [(20, node("n1", taints=("ebb.sh/disrupted",))),
      (21, event("DisruptionTerminating", "Node", "n1", "Disrupting Node: Empty/Delete", "ebb-termination-executor")),
      (40, deleted(BUSY))],
     [(40, "n1", "removed", "ebb", "Empty")]),
    ("Karpenter's Event on the NodeClaim names the node's reason", [BUSY, claim("c1", "n1", "Ready", "")],
     [(21, event("DisruptionTerminating", "NodeClaim", "c1", "Disrupting NodeClaim: Drifted/Replace",
                 "karpenter")), (40, deleted(BUSY))],
     [(40, "n1", "removed", "karpenter", "Drifted")]),
    ("a candidate's condition (Consolidatable) is no reason; Karpenter's DisruptionReason seen after the Node's "
     "deletion still names it", [BUSY, claim("c1", "n1", "Consolidatable", "Consolidatable")],
     [(20, node("n1", taints=("karpenter.sh/disrupted",))), (30, node("n1", deleting=True)),
      (31, claim("c1", "n1", "DisruptionReason", "Empty")), (32, deleted(BUSY))],
     [(30, "n1", "removed", "karpenter", "Empty")]),
    ("a drifted NodeClaim that Karpenter removes without saying why: Drifted",
     [BUSY, claim("c1", "n1", "Drifted", "Drifted")],
     [(20, node("n1", taints=("karpenter.sh/disrupted",))), (32, deleted(BUSY))],
     [(32, "n1", "removed", "karpenter", "Drifted")]),
    ("a node deleted without a disruption: by someone unknown", [BUSY],
     [(40, deleted(BUSY))], [(40, "n1", "removed", "unknown", "deleted")]),
]


@pytest.mark.parametrize(("start", "changes", "expected"), [c[1:] for c in NODE_CASES],
                         ids=[c[0] for c in NODE_CASES])
def test_node_launches_and_removals_are_observed(start: list[dict[str, Any]], changes: list[tuple[float, Any]],
                                                 expected: list[tuple[float, str, str, str, str]]) -> None:
    trace = play(start, changes)
    assert [(c.at, c.node, c.change, c.by, c.reason) for c in trace.observed] == expected
    assert all(c.nodepool == "general" and c.instance_type == "m5.large" for c in trace.observed)
    assert not [e for e in trace.events if e.create or e.depart]  # node changes are no workload events


def test_writing_the_trace_so_far_moves_no_later_change() -> None:
    recorder = Recorder(start=T0, documents=[BUSY])
    recorder.observe(T0 + timedelta(seconds=5), "Pod", "shop", "a", pod("a"))
    assert recorder.trace(T0 + timedelta(seconds=60), name="saved").duration == 60.0
    recorder.observe(T0 + timedelta(seconds=58), "Pod", "shop", "b", pod("b"))  # held back, handed over late
    assert actions(recorder.trace(T0 + timedelta(seconds=61), name="saved")) == [(5, "arrive", "a"),
                                                                                  (58, "arrive", "b")]


def test_the_trace_holds_its_start_duration_and_starting_cluster() -> None:
    trace = play([BUSY, pod("a", node="n1")], [(10, pod("b"))], end=125.5)
    assert (trace.start, trace.duration) == (T0, 125.5)
    assert [(d["kind"], d["metadata"]["name"]) for d in trace.cluster or []] == [("Node", "n1"), ("Pod", "a")]
    again = Trace.model_validate(trace.model_dump(by_alias=True, mode="json"))  # the file round trip
    assert again == trace


def test_an_arrival_is_the_pod_as_its_controller_made_it_with_only_what_decisions_read() -> None:
    arrived = arrival(pod("a", node="n1"))
    assert arrived["status"] == {"phase": "Pending"}
    assert "nodeName" not in arrived["spec"]
    assert arrived["metadata"]["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    assert arrived["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    assert arrived["spec"]["containers"] == [{"name": "app", "resources": {"requests": {"cpu": "500m",
                                                                                       "memory": "1Gi"}}}]
    assert arrived["spec"]["nodeSelector"] == {"team": "data"}
    text = repr(arrived)
    for secret in ("hunter2", "PASSWORD", "s3cr3t", "secret-app", "secretName", "run"):
        assert secret not in text


def test_redaction_keeps_karpenter_and_ebb_annotations_on_other_kinds() -> None:
    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "general", "annotations": {"karpenter.sh/nodepool-hash": "1", "owner": "bob"}},
            "spec": {"template": {}}}
    assert redacted(pool)["metadata"]["annotations"] == {"karpenter.sh/nodepool-hash": "1"}


def test_anonymized_names_are_hashed_consistently_and_pools_keep_theirs() -> None:
    secret = Anonymizer(b"key")
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "shop"},
           "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 1}}
    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"}, "spec": {}}
    trace = play([BUSY, pod("a", node="n1"), pdb, pool],
                 [(10, pod("b")), (20, deleted(pod("a"))), (30, node("n2"))], anonymizer=secret)
    text = trace.model_dump_json()
    for name in ('"shop"', '"a"', '"b"', '"n1"', '"n2"', '"web"'):
        assert name not in text
    cluster = {d["kind"]: d for d in trace.cluster or []}
    assert cluster["NodePool"]["metadata"]["name"] == "general"
    hashed_web = secret.hashed("web")
    assert cluster["Pod"]["metadata"]["labels"] == {"app": hashed_web}
    assert cluster["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"] == {"app": hashed_web}
    assert cluster["Pod"]["metadata"]["ownerReferences"][0]["name"] == hashed_web
    assert cluster["Pod"]["spec"]["nodeName"] == cluster["Node"]["metadata"]["name"] == secret.hashed("n1")
    assert cluster["Node"]["metadata"]["labels"]["kubernetes.io/hostname"] == secret.hashed("n1")
    depart = next(e.depart for e in trace.events if e.depart is not None)
    assert (depart.namespace, depart.name) == (secret.hashed("shop"), secret.hashed("a"))
    assert trace.observed[0].node == secret.hashed("n2")
    assert Anonymizer(b"other").hashed("web") != hashed_web  # another recording's key: another hash


# -- volumes --------------------------------------------------------------------------------------------------------

#: (what a pod's volume is, the volume as given, what redaction keeps of it: None, dropped)
POD_VOLUME_CASES: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = [
    ("a claim keeps its name", {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}},
     {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}),
    ("a read-only claim keeps readOnly",
     {"name": "logs", "persistentVolumeClaim": {"claimName": "l", "readOnly": True}},
     {"name": "logs", "persistentVolumeClaim": {"claimName": "l", "readOnly": True}}),
    ("an ephemeral volume keeps of its claim template the class, modes and size a replay makes its claim with",
     {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
         "metadata": {"labels": {"team": "s3cr3t-team"}, "annotations": {"secret.example/token": "s3cr3t"}},
         "spec": {"storageClassName": "gp3", "accessModes": ["ReadWriteOnce"],
                  "resources": {"requests": {"storage": "1Gi"}},
                  "dataSource": {"kind": "VolumeSnapshot", "name": "s3cr3t-backup"}}}}},
     {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
         "storageClassName": "gp3", "accessModes": ["ReadWriteOnce"],
         "resources": {"requests": {"storage": "1Gi"}}}}}}),
    ("an ephemeral volume without a template is a marker", {"name": "scratch", "ephemeral": {}},
     {"name": "scratch", "ephemeral": {}}),
    ("a secret is dropped", {"name": "creds", "secret": {"secretName": "db-password"}}, None),
    ("a config map is dropped", {"name": "conf", "configMap": {"name": "app-config"}}, None),
    ("an emptyDir is dropped", {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}}, None),
    ("a hostPath is dropped", {"name": "host", "hostPath": {"path": "/var/secret-dir"}}, None),
    ("a projected token is dropped", {"name": "token", "projected": {"sources": [{"serviceAccountToken": {
        "path": "token"}}]}}, None),
    ("an inline CSI volume is dropped", {"name": "vault", "csi": {"driver": "secrets-store.csi.k8s.io",
                                                                  "volumeAttributes": {"secretProviderClass": "x"}}},
     None),
]


@pytest.mark.parametrize(("volume", "kept"), [c[1:] for c in POD_VOLUME_CASES], ids=[c[0] for c in POD_VOLUME_CASES])
def test_redaction_keeps_of_a_pods_volumes_only_its_claims(volume: dict[str, Any],
                                                          kept: dict[str, Any] | None) -> None:
    given = pod("a", node="n1")
    given["spec"]["volumes"] = [volume]
    for out in (redacted(given), arrival(given)):
        assert out["spec"].get("volumes") == ([kept] if kept is not None else None)
        text = repr(out)
        for secret in ("s3cr3t", "secretName", "db-password", "app-config", "/var/secret-dir", "dataSource",
                       "secretProviderClass", "serviceAccountToken"):
            assert secret not in text


def pvc(name: str, *, volume: str | None = "pvc-0a1b", owner_pod: str | None = None, namespace: str = "shop",
        storage_class: str = "gp3") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": {"team": "data"},
                            "annotations": {"pv.kubernetes.io/bind-completed": "yes",
                                            "volume.kubernetes.io/selected-node": "n1", "owner": "bob"},
                            "finalizers": ["kubernetes.io/pvc-protection"]}
    if owner_pod is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner_pod, "uid": "p",
                                    "controller": True, "blockOwnerDeletion": True}]
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
                            "storageClassName": storage_class, "volumeMode": "Filesystem",
                            "dataSource": {"kind": "VolumeSnapshot", "name": "nightly-backup"}}
    if volume:
        spec["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec,
            "status": {"phase": "Bound" if volume else "Pending", "capacity": {"storage": "10Gi"}}}


ZONE_LABEL = {"topology.kubernetes.io/zone": "us-east-1a"}
ZONE_TERM = {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}]}


def pv(name: str = "pvc-0a1b", **source: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "uid": "v", "labels": {"topology.kubernetes.io/zone": "us-east-1a"},
                         "annotations": {"pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "10Gi"}, "storageClassName": "gp3",
                     "persistentVolumeReclaimPolicy": "Delete", "mountOptions": ["noatime"],
                     "claimRef": {"namespace": "shop", "name": "data-db-0", "uid": "c"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [ZONE_TERM]}}, **source},
            "status": {"phase": "Bound"}}


def storage_class(name: str = "gp3", topologies: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                           "metadata": {"name": name, "labels": {"owner": "bob"},
                                        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                           "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
                           "reclaimPolicy": "Delete", "parameters": {"type": "gp3", "kmsKeyId": "arn:aws:kms:key-1"}}
    if topologies is not None:
        out["allowedTopologies"] = topologies
    return out


KEPT_CLAIM_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
                   "storageClassName": "gp3", "volumeName": "pvc-0a1b"}
KEPT_VOLUME_SPEC = {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "10Gi"}, "storageClassName": "gp3",
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [ZONE_TERM]}}}
ALLOWED = [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["us-east-1a"]}]}]
#: (what, the object, what redaction keeps of it but its metadata's uid)
VOLUME_KIND_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("a bound claim", pvc("data-db-0"),
     {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
      "metadata": {"name": "data-db-0", "namespace": "shop", "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
      "spec": KEPT_CLAIM_SPEC, "status": {"phase": "Bound"}}),
    ("an ephemeral volume's claim keeps its pod as owner", pvc("db-0-scratch", volume=None, owner_pod="db-0"),
     {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
      "metadata": {"name": "db-0-scratch", "namespace": "shop",
                   "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "db-0", "uid": "p",
                                        "controller": True}],
                   "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
      "spec": {k: v for k, v in KEPT_CLAIM_SPEC.items() if k != "volumeName"}, "status": {"phase": "Pending"}}),
    ("a CSI volume keeps its driver, not its handle",
     pv(csi={"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0secret", "fsType": "ext4",
             "nodePublishSecretRef": {"name": "csi-creds"}}),
     {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pvc-0a1b", "labels": ZONE_LABEL},
      "spec": {**KEPT_VOLUME_SPEC, "csi": {"driver": "ebs.csi.aws.com"}}}),
    ("a local volume is a marker, not its path", pv("local-1", local={"path": "/mnt/disks/secret-ssd"}),
     {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "local-1", "labels": ZONE_LABEL},
      "spec": {**KEPT_VOLUME_SPEC, "local": {}}}),
    ("a hostPath volume is a marker, not its path", pv("host-1", hostPath={"path": "/srv/secret-dir"}),
     {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "host-1", "labels": ZONE_LABEL},
      "spec": {**KEPT_VOLUME_SPEC, "hostPath": {}}}),
    ("another volume source is dropped (its zone labels kept: kube-scheduler's VolumeZone reads them)",
     pv("nfs-1", nfs={"server": "secret-filer.example", "path": "/x"}),
     {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "nfs-1", "labels": ZONE_LABEL},
      "spec": KEPT_VOLUME_SPEC}),
    ("a class keeps its provisioner, binding mode, topologies, reclaim policy and default mark, not its parameters",
     storage_class(topologies=ALLOWED),
     {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
      "metadata": {"name": "gp3", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
      "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer", "allowedTopologies": ALLOWED,
      "reclaimPolicy": "Delete"}),
]


@pytest.mark.parametrize(("given", "kept"), [c[1:] for c in VOLUME_KIND_CASES], ids=[c[0] for c in VOLUME_KIND_CASES])
def test_redaction_keeps_of_the_volume_kinds_what_volume_topology_reads(given: dict[str, Any],
                                                                         kept: dict[str, Any]) -> None:
    out = redacted(given)
    out["metadata"].pop("uid", None)
    assert out == kept
    text = repr(out)
    for secret in ("vol-0secret", "csi-creds", "/mnt/disks", "/srv/secret-dir", "secret-filer", "arn:aws:kms",
                   "nightly-backup", "bob", "claimRef", "selected-node", "mountOptions", "team"):
        assert secret not in text


def test_a_recordings_starting_cluster_holds_the_volume_kinds() -> None:
    trace = play([BUSY, pod("a", node="n1"), pvc("data-db-0"), pv(), storage_class()], [])
    assert sorted(d["kind"] for d in trace.cluster or []) == ["Node", "PersistentVolume", "PersistentVolumeClaim",
                                                              "Pod", "StorageClass"]


def test_a_claim_made_during_the_recording_is_created_unbound_before_its_pod() -> None:
    """A StatefulSet's new replica comes with its new claim: the claim is a ``create`` of its own, unbound (the replay
    binds it where its pod runs there), at the moment it was seen; a claim of the starting cluster, a claim changed
    (bound) later and an ephemeral volume's claim (the replay makes it with its pod) are not."""
    made = pvc("data-db-1", volume=None)
    trace = play([BUSY, pvc("data-db-0"), pv(), storage_class()], [
        (5.0, made),
        (6.0, with_volumes(pod("db-1"), claim_volume("data", "data-db-1"))),
        (9.0, pvc("data-db-1")),  # bound: a change, not a claim made
        (10.0, pvc("data-db-0")),
        (12.0, pvc("db-2-scratch", volume=None, owner_pod="db-2")),
    ])
    created = [(e.at, o["kind"], o["metadata"]["name"]) for e in trace.events if e.create for o in e.create.objects]
    assert created == [(5.0, "PersistentVolumeClaim", "data-db-1"), (6.0, "Pod", "db-1")]
    [claim] = [o for e in trace.events if e.create for o in e.create.objects if o["kind"] == "PersistentVolumeClaim"]
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
                             "storageClassName": "gp3"}
    assert claim["status"] == {"phase": "Pending"} and "annotations" not in claim["metadata"]


def with_volumes(obj: dict[str, Any], *volumes: dict[str, Any]) -> dict[str, Any]:
    obj["spec"]["volumes"] = list(volumes)
    return obj


def claim_volume(name: str, claim: str) -> dict[str, Any]:
    return {"name": name, "persistentVolumeClaim": {"claimName": claim}}


def ephemeral_volume(name: str) -> dict[str, Any]:
    return {"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "gp3"}}}}


#: (what, the starting cluster, the claim whose anonymized name is checked, what it must be: (pod, volume) for
#: ``<hashed pod>-<volume>``, else the name whose hash it is)
EPHEMERAL_CASES: list[tuple[str, list[dict[str, Any]], str, tuple[str, str] | str]] = [
    ("the pod first, its claim unowned",
     [with_volumes(pod("db-0"), ephemeral_volume("scratch")), pvc("db-0-scratch")], "db-0-scratch",
     ("db-0", "scratch")),
    ("the claim first, unowned: the recorder knows every pod before it writes",
     [pvc("db-0-scratch"), with_volumes(pod("db-0"), ephemeral_volume("scratch"))], "db-0-scratch",
     ("db-0", "scratch")),
    ("the claim owned by its pod, the pod not recorded", [pvc("db-0-scratch", owner_pod="db-0")], "db-0-scratch",
     ("db-0", "scratch")),
    ("dashes in both names", [with_volumes(pod("web-7f-x"), ephemeral_volume("cache-a")), pvc("web-7f-x-cache-a")],
     "web-7f-x-cache-a", ("web-7f-x", "cache-a")),
    ("a claim named like a pod's volume that is not ephemeral is a claim like any other",
     [with_volumes(pod("db-0"), claim_volume("scratch", "other")), pvc("db-0-scratch")], "db-0-scratch",
     "db-0-scratch"),
    ("the same name in another namespace is another claim",
     [with_volumes(pod("db-0"), ephemeral_volume("scratch")), pvc("db-0-scratch", namespace="other")],
     "db-0-scratch", "db-0-scratch"),
]


@pytest.mark.parametrize(("start", "claim", "expected"), [c[1:] for c in EPHEMERAL_CASES],
                         ids=[c[0] for c in EPHEMERAL_CASES])
def test_an_ephemeral_volumes_claim_is_named_after_its_hashed_pod(start: list[dict[str, Any]], claim: str,
                                                                   expected: tuple[str, str] | str) -> None:
    secret = Anonymizer(b"key")
    trace = play(start, [], anonymizer=secret)
    claims = [d for d in trace.cluster or [] if d["kind"] == "PersistentVolumeClaim"]
    (named,) = claims
    want = f"{secret.hashed(expected[0])}-{expected[1]}" if isinstance(expected, tuple) else secret.hashed(expected)
    assert named["metadata"]["name"] == want
    assert claim not in trace.model_dump_json()


def test_anonymized_claims_and_volumes_keep_their_names_where_they_appear() -> None:
    """A pod's claimName is its claim's name, the claim's volumeName its volume's, a claim's namespace its pod's;
    a local volume's hostname affinity names its node as the node is named; classes keep their names."""
    secret = Anonymizer(b"key")
    local = pv("local-n1", local={"path": "/mnt/ssd"})
    local["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] = [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
    by_host = storage_class("local", topologies=[{"matchLabelExpressions": [
        {"key": "kubernetes.io/hostname", "values": ["n1"]}]}])
    db = with_volumes(pod("db-0", node="n1"), claim_volume("data", "data-db-0"), claim_volume("fast", "fast-db-0"),
                      ephemeral_volume("scratch"))
    start = [BUSY, db, pvc("data-db-0"), pv(), pvc("fast-db-0", volume="local-n1", storage_class="local"), local,
             pvc("db-0-scratch", volume=None, owner_pod="db-0"), storage_class(), by_host]
    later = with_volumes(pod("db-1"), claim_volume("data", "data-db-0"))  # arrives, claims the same claim
    trace = play(start, [(10, later)], anonymizer=secret)
    docs = {(d["kind"], d["metadata"]["name"]): d for d in trace.cluster or []}
    claims = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in trace.cluster or []
              if d["kind"] == "PersistentVolumeClaim"}
    volumes = {d["metadata"]["name"]: d for d in trace.cluster or [] if d["kind"] == "PersistentVolume"}
    (pod_doc,) = [d for d in trace.cluster or [] if d["kind"] == "Pod"]
    namespace = pod_doc["metadata"]["namespace"]
    assert namespace == secret.hashed("shop")
    for volume in pod_doc["spec"]["volumes"]:
        if "persistentVolumeClaim" in volume:
            claim = claims[(namespace, volume["persistentVolumeClaim"]["claimName"])]
            assert claim["spec"]["volumeName"] in volumes
        else:
            assert volume == {"name": "scratch",
                              "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "gp3"}}}}
            assert (namespace, f"{pod_doc['metadata']['name']}-scratch") in claims
    assert len(claims) == 3 and len(volumes) == 2
    assert claims[(namespace, secret.hashed("data-db-0"))]["spec"]["volumeName"] == secret.hashed("pvc-0a1b")
    arrived = next(e.create.objects[0] for e in trace.events if e.create is not None)
    assert arrived["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == secret.hashed("data-db-0")
    node_name = docs[("Node", secret.hashed("n1"))]["metadata"]["name"]
    terms = volumes[secret.hashed("local-n1")]["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == terms[1]["matchFields"][0]["values"] == [node_name]
    assert docs[("StorageClass", "local")]["allowedTopologies"][0]["matchLabelExpressions"][0]["values"] == [node_name]
    assert {"gp3", "local"} <= {d["metadata"]["name"] for d in trace.cluster or [] if d["kind"] == "StorageClass"}
    assert {c["spec"]["storageClassName"] for c in claims.values()} == {"gp3", "local"}
    text = trace.model_dump_json()
    for name in ('"shop"', "data-db-0", "fast-db-0", "db-0-scratch", "pvc-0a1b", "local-n1", '"n1"', '"db-0"'):
        assert name not in text


def csi_node(name: str, *drivers: dict[str, Any]) -> dict[str, Any]:
    """A CSINode as the kubelet makes it: named and owned by its node, each driver with the cloud's instance id."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
            "metadata": {"name": name, "uid": "c", "creationTimestamp": "2026-11-23T11:00:00Z",
                         "labels": {"owner": "bob"},
                         "annotations": {"storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/aws-ebs"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": "n"}]},
            "spec": {"drivers": [{"nodeID": "i-0secret", "topologyKeys": ["topology.ebs.csi.aws.com/zone"], **d}
                                 for d in drivers]}}


#: (what, the drivers, what redaction keeps of them)
CSI_NODE_CASES: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = [
    ("a driver keeps its name and allocatable count",
     [{"name": "ebs.csi.aws.com", "allocatable": {"count": 25}}],
     [{"name": "ebs.csi.aws.com", "allocatable": {"count": 25}}]),
    ("a driver without allocatable stays without (no limit)",
     [{"name": "efs.csi.aws.com"}], [{"name": "efs.csi.aws.com"}]),
    ("an allocatable without a count stays an empty one (Karpenter's limit of 0)",
     [{"name": "ebs.csi.aws.com", "allocatable": {}}], [{"name": "ebs.csi.aws.com", "allocatable": {}}]),
    ("every driver, in order",
     [{"name": "ebs.csi.aws.com", "allocatable": {"count": 39}}, {"name": "efs.csi.aws.com"}],
     [{"name": "ebs.csi.aws.com", "allocatable": {"count": 39}}, {"name": "efs.csi.aws.com"}]),
    ("no driver registered yet", [], []),
]


@pytest.mark.parametrize(("drivers", "kept"), [c[1:] for c in CSI_NODE_CASES], ids=[c[0] for c in CSI_NODE_CASES])
def test_redaction_keeps_of_a_csinode_its_name_and_its_drivers_limits(drivers: list[dict[str, Any]],
                                                                       kept: list[dict[str, Any]]) -> None:
    out = redacted(csi_node("n1", *drivers))
    assert out == {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "n1"},
                   "spec": {"drivers": kept}}
    text = repr(out)
    for secret in ("i-0secret", "topologyKeys", "bob", "migrated-plugins", "ownerReferences", "uid"):
        assert secret not in text


def test_a_csinode_is_anonymized_as_its_node_and_still_names_it() -> None:
    """With --anonymize a CSINode's name is its node's hash (the same key, the same hash), so the recorded cluster's
    CSINode still belongs to its recorded node; its drivers' names (the cluster's vocabulary) stay."""
    secret = Anonymizer(b"key")
    limits = {"name": "ebs.csi.aws.com", "allocatable": {"count": 25}}
    trace = play([node("ip-10-0-1-7.ec2.internal"), csi_node("ip-10-0-1-7.ec2.internal", limits),
                  pod("a", node="ip-10-0-1-7.ec2.internal")], [], anonymizer=secret)
    docs = {d["kind"]: d for d in trace.cluster or []}
    assert set(docs) == {"Node", "CSINode", "Pod"}
    hashed = secret.hashed("ip-10-0-1-7.ec2.internal")
    assert docs["CSINode"]["metadata"] == {"name": hashed} == {"name": docs["Node"]["metadata"]["name"]}
    assert docs["Pod"]["spec"]["nodeName"] == hashed
    assert docs["CSINode"]["spec"] == {"drivers": [limits]}
    text = trace.model_dump_json()
    assert "ip-10-0-1-7" not in text and "i-0secret" not in text


def test_a_recordings_starting_cluster_holds_the_csinodes() -> None:
    trace = play([BUSY, csi_node("n1", {"name": "ebs.csi.aws.com", "allocatable": {"count": 25}})], [])
    (kept,) = [d for d in trace.cluster or [] if d["kind"] == "CSINode"]
    assert kept["metadata"] == {"name": "n1"} and kept["spec"]["drivers"][0]["allocatable"] == {"count": 25}


def namespace(name: str, **labels: str) -> dict[str, Any]:
    """A Namespace as the apiserver serves it: its name label, an annotation, its finalizers and phase."""
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"kubernetes.io/metadata.name": name, **labels},
                         "annotations": {"owner.example/contact": "bob@example.com"}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


def test_redaction_keeps_of_a_namespace_its_name_and_labels_only() -> None:
    out = redacted(namespace("billing", team="ledger"))
    assert out == {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "billing", "labels": {"kubernetes.io/metadata.name": "billing", "team": "ledger"}}}


def test_anonymized_namespaces_still_match_the_namespace_selectors_of_pods() -> None:
    """With --anonymize a Namespace's name, its labels' values (its ``kubernetes.io/metadata.name`` label too, which
    is its name) and the values of a pod affinity term's ``namespaceSelector`` are hashed alike: the recorded pod's
    term still selects the recorded namespace it selected, and no name or label value is left in the clear."""
    from ebb.core.snapshot import parse_documents

    secret = Anonymizer(b"key")
    guarded = pod("a", node="n1")
    guarded["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname",
        "namespaceSelector": {"matchLabels": {"team": "ledger"}, "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["billing", "audit"]}]}}]}}
    trace = play([BUSY, guarded, namespace("shop", team="web"), namespace("billing", team="ledger"),
                  namespace("audit", team="ledger")], [], anonymizer=secret)
    cluster = trace.cluster or []
    names = sorted(d["metadata"]["name"] for d in cluster if d["kind"] == "Namespace")
    assert names == sorted(secret.hashed(n) for n in ("shop", "billing", "audit"))
    for doc in cluster:
        if doc["kind"] == "Namespace":
            assert doc["metadata"]["labels"]["kubernetes.io/metadata.name"] == doc["metadata"]["name"]
    text = trace.model_dump_json()
    for clear in ("billing", "ledger", "audit", "bob@example.com"):
        assert clear not in text
    snapshot = parse_documents(cluster)
    (term,) = next(p for p in snapshot.pods if p.name == secret.hashed("a")).spec.pod_anti_affinity
    assert term.namespaces == frozenset({secret.hashed("billing"), secret.hashed("audit")})


def test_a_recording_keeps_a_pods_dra_claims_by_name_and_its_scheduling_gates() -> None:
    """What a simulation reads of Dynamic Resource Allocation (that the pod, or a container, has a claim) and of
    scheduling gates survives redaction: the claims by name only, not the claim or template they name."""
    doc = pod("a", node="n1")
    doc["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "secret-template"}]
    doc["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu", "request": "big"}]
    doc["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    out = redacted(doc)
    assert out["spec"]["resourceClaims"] == [{"name": "gpu"}]
    assert out["spec"]["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]
    assert out["spec"]["schedulingGates"] == [{"name": "example.com/quota"}]
    assert "secret-template" not in repr(out)

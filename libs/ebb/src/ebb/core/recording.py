"""Recording a live cluster's history as an ``ebb.sh/v1 Trace`` (``ebb record``): the pure half.

The edges (``ebb.adapters.kube.record`` watching the apiserver, or the cluster-watcher's topic) feed a
`Recorder` the cluster at the start and then every observed change of an object with the time it was seen:
``observe(at, kind, namespace, name, obj)``, ``obj`` None for a deletion. ``Recorder.trace`` turns what it saw
into a trace a back-test replays with each policy's disruptions instead of the recorded cluster's:

- **the demand is the recording's**: a pod that appears is an arrival (a ``create`` event at the moment it was
  seen, the pod as its controller made it: Pending, no node); a pod that is deleted, is being deleted, or
  finished (Succeeded or Failed) is a departure (``depart``) at that moment. Its owner, requests, constraints
  and the annotations decisions read go with it; its run time is the time between the two. DaemonSet pods and
  static pods' mirrors follow the nodes, not the workload: the back-test's cluster makes its own.
- **the disruptions are not**: a pod that leaves a node being disrupted (a disruption taint, Karpenter's or
  ebb's, or a node being deleted or already gone) was moved by the recorded cluster's disrupter, not by its
  workload; a controller's next pod for the same owner is that replica again. Neither is a trace event (under
  each policy the replay's own disruptions move pods), and the replica's later departure names the pod the
  trace created first (``depart`` follows the replica). An evicted replica its controller never made again
  (the workload shrank meanwhile) departs at its eviction.
- **the node changes are observed, not replayed** (``Trace.observed``): every Node that appears is a launch (a
  disruption's replacement when a ``DisruptionLaunching`` Event names it or its NodeClaim, or it carries ebb's
  decision) and every Node deleted a removal, with who made it and why, from what the recorder saw: the node's
  disruption taint (``karpenter.sh/disrupted``: Karpenter; ``ebb.sh/disrupted``: ebb), its NodeClaim's conditions
  (Karpenter's ``DisruptionReason``, ``Drifted``, ``Expired``, ...), ebb's ``ebb.sh/decision-id`` annotation on a
  replacement, and the Kubernetes Events about the node or its NodeClaim (Karpenter's and ebb's
  ``DisruptionTerminating`` / ``DisruptionLaunching``, whose messages name the reason).

**Sensitive data stays out** (`redacted`): a pod keeps its name, namespace, labels, owner and the annotations
ebb's decisions read (`KEPT_POD_ANNOTATIONS`), and of its spec only what scheduling and disruption read (each
container's name, resources and host ports; selectors, affinity, tolerations, spread, priority, grace period,
restart policy, overhead; of its volumes only those of a claim, each its name and ``persistentVolumeClaim``'s
``claimName`` and ``readOnly``, or an ``ephemeral`` one's name and of its claim template only the class, access
modes and size, `KEPT_EPHEMERAL_SPEC`, that a replay makes its claim with; its scheduling gates, and its Dynamic
Resource Allocation claims by name only, `_claim_names`): no environment, command, image, other
volume (secrets, config maps, host paths, ...) or other annotation. The volume kinds keep
what volume topology reads (`KEPT_PVC_SPEC`, `KEPT_PV_SPEC`, `KEPT_STORAGE_CLASS_FIELDS`): a claim its
volume, class, access modes, requested size, phase and bind-completed annotation; a volume its node affinity,
class, capacity, access modes, CSI driver and whether it is ``local`` or a ``hostPath`` (not the path); a class
its provisioner, binding mode, allowed topologies, reclaim policy and default-class annotation (not its
parameters); of their labels only a volume's zone and region (`KEPT_PV_LABELS`). A CSINode keeps
its name (its node's) and of each driver its name and ``allocatable.count`` (`_redacted_csi_node`): the volume
attach limits, not the ``nodeID`` (a cloud instance id) or ``topologyKeys``. A Namespace keeps its name and labels
(what a pod affinity term's ``namespaceSelector`` matches). Other objects keep what ``ebb plan``
reads of them, without annotations other than Karpenter's and ebb's. **Names hashed on request** (`Anonymizer`,
``--anonymize``): namespaces, pods, owners, nodes (and the CSINodes named after them, and the hostnames a volume's
node affinity or a class's topology names), NodeClaims, PDBs, claims and volumes, and the values of pod labels (and
the pod selectors that match them: PDBs, spread constraints, pod affinity) and of Namespaces' labels (and the
``namespaceSelector`` that matches them; the ``kubernetes.io/metadata.name`` label too, a namespace's name) other
than well-known ones, each with
a keyed hash, the same value always the same hash within one recording: a pod's ``claimName`` stays its claim's
name, a claim's ``volumeName`` its volume's, and a pod's ephemeral volume's claim (``<pod>-<volume>``) is named
``<hashed pod>-<volume>`` (`Anonymizer.claim_name`). StorageClasses keep their names (configuration).

Pure: no clock, no I/O; times are the caller's.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from ebb.core.model import (
    ANNOTATION_DECISION_ID,
    ANNOTATION_DO_NOT_CONSOLIDATE,
    ANNOTATION_DO_NOT_DISRUPT,
    ANNOTATION_DO_NOT_EVICT,
    ANNOTATION_POD_DELETION_COST,
    DISRUPTION_TAINTS,
    LABEL_CAPACITY_TYPE,
    LABEL_NODEPOOL,
    TAINT_EBB_DISRUPTED,
)
from ebb.core.traces import Create, Depart, NodeChange, NodeChangeKind, Trace, TraceEvent

#: the pod annotations decisions read (do-not-disrupt and its predecessors, the deletion cost, a mirror pod's)
KEPT_POD_ANNOTATIONS: Final = (ANNOTATION_DO_NOT_DISRUPT, ANNOTATION_DO_NOT_EVICT, ANNOTATION_DO_NOT_CONSOLIDATE,
                               ANNOTATION_POD_DELETION_COST, "kubernetes.io/config.mirror")
#: the pod spec fields scheduling and disruption read (containers are cut down further: `_container`)
KEPT_POD_SPEC: Final = ("nodeName", "nodeSelector", "affinity", "tolerations", "topologySpreadConstraints",
                        "priority", "priorityClassName", "terminationGracePeriodSeconds", "restartPolicy",
                        "overhead", "schedulerName", "hostNetwork", "preemptionPolicy", "schedulingGates")
#: annotation prefixes kept on objects other than pods (what the NodePool hash, drift and decisions read)
KEPT_ANNOTATION_PREFIXES: Final = ("karpenter.sh/", "karpenter.k8s.aws/", "ebb.sh/", "kwok.x-k8s.io/")
#: the annotation the PersistentVolume controller sets on a claim it has bound (kept on claims)
ANNOTATION_BIND_COMPLETED: Final = "pv.kubernetes.io/bind-completed"
#: the claim spec fields volume topology reads (the bound volume, or the class an unbound claim waits for)
KEPT_PVC_SPEC: Final = ("volumeName", "storageClassName", "accessModes", "resources")
#: the volume spec fields kept as they are (``local`` and ``hostPath`` are kept as empty markers, ``csi`` as its driver)
KEPT_PV_SPEC: Final = ("nodeAffinity", "storageClassName", "capacity", "accessModes")
#: a volume's sources whose presence volume topology reads (a local volume's hostname affinity is not followed)
PV_SOURCE_MARKERS: Final = ("local", "hostPath")
#: a StorageClass's top-level fields kept (it has no spec): not ``parameters`` (key ids, ...)
KEPT_STORAGE_CLASS_FIELDS: Final = ("provisioner", "volumeBindingMode", "allowedTopologies", "reclaimPolicy")
#: of an ephemeral volume's claim template, what a replay makes its claim with (its class, modes and size)
KEPT_EPHEMERAL_SPEC: Final = ("storageClassName", "accessModes", "resources")
#: the labels of a volume kube-scheduler's VolumeZone filter reads (a volume made before volumes had a node affinity)
KEPT_PV_LABELS: Final = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region",
                         "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region")
#: the annotation that makes a StorageClass the default of claims that name none
ANNOTATION_DEFAULT_CLASS: Final = "storageclass.kubernetes.io/is-default-class"
#: the kinds of a pod's volumes: their claims, the volumes bound to them, the classes of the claims
VOLUME_KINDS: Final = frozenset({"PersistentVolumeClaim", "PersistentVolume", "StorageClass"})
#: a node's CSI drivers and the volumes each can attach (Karpenter's volume limits), named after its node
CSI_NODE: Final = "CSINode"
#: a namespace: of it only its name and labels (what a pod affinity term's ``namespaceSelector`` matches)
NAMESPACE: Final = "Namespace"
#: the label the apiserver gives every Namespace, its name: hashed as namespace names are, though well-known
LABEL_NAMESPACE_NAME: Final = "kubernetes.io/metadata.name"
#: the kinds a recording's starting cluster holds (what ``ebb plan`` and the back-test read)
CLUSTER_KINDS: Final = frozenset({"Node", "Pod", "NodePool", "NodeClaim", "PodDisruptionBudget", "DaemonSet",
                                  "DisruptionPolicy", "InstanceTypeCatalog", "Hold", *VOLUME_KINDS, CSI_NODE,
                                  NAMESPACE})
#: kinds whose names are the cluster's configuration, kept by `Anonymizer` (a policy names its NodePool)
CONFIGURATION_KINDS: Final = frozenset({"NodePool", "DisruptionPolicy", "InstanceTypeCatalog", "Hold", "StorageClass"})
#: the node label whose values are node names (hashed as the nodes' names are)
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
#: owners whose pods follow the nodes, not the workload (a DaemonSet's; a static pod's mirror, owned by its Node):
#: the back-test's cluster makes them for its own nodes, so they are neither arrivals nor departures
NODE_BOUND_OWNERS: Final = frozenset({"DaemonSet", "Node"})
#: controllers that make an evicted pod again
RECREATING_OWNERS: Final = frozenset({"ReplicaSet", "StatefulSet", "Job", "ReplicationController"})
#: label keys whose values are the cluster's vocabulary, not the user's: never hashed
WELL_KNOWN_LABEL_MARKERS: Final = ("kubernetes.io/", "k8s.io/", "karpenter.sh/", "karpenter.k8s.aws/",
                                   "karpenter.kwok.sh/", "ebb.sh/", "kwok.x-k8s.io/")
#: Karpenter's NodeClaim condition that names the reason of the disruption it is executing (its ``reason``)
CONDITION_DISRUPTION_REASON: Final = "DisruptionReason"
#: NodeClaim conditions that make a node a candidate for a reason (the reason when nothing else names one)
CANDIDATE_CONDITIONS: Final = ("Drifted", "Expired")
#: Event reasons that say a node is being disrupted or launched for a disruption (Karpenter's and ebb's)
DISRUPTION_EVENT_REASONS: Final = frozenset({"DisruptionTerminating", "DisruptionLaunching", "Disrupted",
                                             "TerminatingOnInterruption", "SpotInterrupted",
                                             "CapacityReservationInstanceInterrupted",
                                             "ConsolidationApproved", "Expired", "Drifted"})
#: the Event on a replacement a disruption launches (Karpenter's, on its NodeClaim; ebb's, on the Node)
EVENT_LAUNCHING: Final = "DisruptionLaunching"
#: ebb's own components' names in Events' ``source.component`` / ``reportingComponent`` start with it
EBB_COMPONENT_PREFIX: Final = "ebb"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def controller_of(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(kind, name) of a pod's controller (its controller ownerReference, else its first), None for a bare pod."""
    refs = [r for r in _meta(pod).get("ownerReferences") or [] if isinstance(r, Mapping)]
    chosen = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    if chosen is None:
        return None
    return str(chosen.get("kind") or ""), str(chosen.get("name") or "")


# -- redaction ----------------------------------------------------------------------------------------------------


def _claim_names(claims: Any) -> list[dict[str, str]]:
    """Dynamic Resource Allocation claim references (a pod's ``resourceClaims``, a container's ``resources.claims``)
    by name only, without the claim or template they name: that the pod has one is what a simulation reads."""
    return [{"name": str(c.get("name") or "")} for c in claims or [] if isinstance(c, Mapping)] \
        if isinstance(claims, list) else []


def _container(container: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": str(container.get("name") or "main")}
    resources = container.get("resources")
    if isinstance(resources, Mapping):
        kept: dict[str, Any] = {k: dict(v) for k, v in resources.items()
                                if k in ("requests", "limits") and isinstance(v, Mapping)}
        claims = _claim_names(resources.get("claims"))
        if claims:  # the DRA claims it uses: by name only
            kept["claims"] = claims
        if kept:
            out["resources"] = kept
    ports = [{k: p[k] for k in ("containerPort", "hostPort", "protocol", "hostIP") if k in p}
             for p in container.get("ports") or [] if isinstance(p, Mapping) and p.get("hostPort")]
    if ports:
        out["ports"] = ports
    if container.get("restartPolicy"):  # a native sidecar
        out["restartPolicy"] = container["restartPolicy"]
    return out


def _volume(volume: Mapping[str, Any]) -> dict[str, Any] | None:
    """A pod's volume as volume topology reads it: a claim's (its name and claimName, readOnly) or an ephemeral
    one's (its name and of its claim template only `KEPT_EPHEMERAL_SPEC`); None for any other source."""
    name = str(volume.get("name") or "")
    claim = volume.get("persistentVolumeClaim")
    if isinstance(claim, Mapping):
        kept = {k: claim[k] for k in ("claimName", "readOnly") if claim.get(k) is not None}
        return {"name": name, "persistentVolumeClaim": kept}
    ephemeral = volume.get("ephemeral")
    if isinstance(ephemeral, Mapping):  # the class its claim is made in (configuration), nothing else of the template
        template = ephemeral.get("volumeClaimTemplate")
        spec = template.get("spec") if isinstance(template, Mapping) else None
        kept_spec = {k: copy.deepcopy(spec[k]) for k in KEPT_EPHEMERAL_SPEC if spec.get(k) is not None} \
            if isinstance(spec, Mapping) else {}
        return {"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": kept_spec}} if kept_spec else {}}
    return None


def _volume_spec(kind: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """Of a claim's or a volume's spec, what volume topology reads (`KEPT_PVC_SPEC`, `KEPT_PV_SPEC`)."""
    if kind == "PersistentVolumeClaim":
        return {k: copy.deepcopy(spec[k]) for k in KEPT_PVC_SPEC if spec.get(k) is not None}
    out = {k: copy.deepcopy(spec[k]) for k in KEPT_PV_SPEC if spec.get(k) is not None}
    out.update({k: {} for k in PV_SOURCE_MARKERS if spec.get(k) is not None})
    csi = spec.get("csi")
    if isinstance(csi, Mapping):
        out["csi"] = {"driver": csi["driver"]} if csi.get("driver") is not None else {}
    return out


def _redacted_volume_kind(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """A PersistentVolumeClaim, PersistentVolume or StorageClass with only what volume topology reads (see the
    module): no labels, no annotation but a claim's bind-completed, no volume source but markers."""
    meta = _meta(obj)
    out_meta: dict[str, Any] = {k: copy.deepcopy(meta[k]) for k in
                                ("name", "namespace", "ownerReferences", "creationTimestamp", "deletionTimestamp",
                                 "uid") if meta.get(k) is not None}
    if "ownerReferences" in out_meta:  # an ephemeral volume's claim is its pod's
        out_meta["ownerReferences"] = [{k: r[k] for k in ("apiVersion", "kind", "name", "uid", "controller")
                                        if k in r} for r in out_meta["ownerReferences"] if isinstance(r, Mapping)]
    if kind == "PersistentVolume":  # a volume made before volumes had a node affinity: its zone in its labels
        zones = {k: str(v) for k, v in (meta.get("labels") or {}).items() if k in KEPT_PV_LABELS}
        if zones:
            out_meta["labels"] = zones
    if kind in ("PersistentVolumeClaim", "StorageClass"):
        kept = ANNOTATION_BIND_COMPLETED if kind == "PersistentVolumeClaim" else ANNOTATION_DEFAULT_CLASS
        annotations = _kept_annotations(meta.get("annotations"), lambda k: k == kept)
        if annotations:
            out_meta["annotations"] = annotations
    default_version = "storage.k8s.io/v1" if kind == "StorageClass" else "v1"
    out: dict[str, Any] = {"apiVersion": obj.get("apiVersion") or default_version, "kind": kind, "metadata": out_meta}
    if kind == "StorageClass":
        out.update({k: copy.deepcopy(obj[k]) for k in KEPT_STORAGE_CLASS_FIELDS if obj.get(k) is not None})
        return out
    spec = obj.get("spec")
    if isinstance(spec, Mapping):
        out["spec"] = _volume_spec(kind, spec)
    status = obj.get("status")
    if kind == "PersistentVolumeClaim" and isinstance(status, Mapping) and status.get("phase") is not None:
        out["status"] = {"phase": status["phase"]}
    return out


def _redacted_csi_node(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A CSINode with only its name (its node's) and, of each driver, its name and ``allocatable.count``: an
    ``allocatable`` without a count stays an empty one (Karpenter reads it as a limit of 0, a driver without
    ``allocatable`` as no limit); not ``nodeID`` (the cloud's instance id), ``topologyKeys``, labels or owners."""
    out: dict[str, Any] = {"apiVersion": obj.get("apiVersion") or "storage.k8s.io/v1", "kind": CSI_NODE,
                           "metadata": {k: v for k, v in _meta(obj).items() if k == "name" and v is not None}}
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return out
    drivers: list[dict[str, Any]] = []
    for driver in spec.get("drivers") or []:
        if not isinstance(driver, Mapping):
            continue
        kept: dict[str, Any] = {"name": driver["name"]} if driver.get("name") is not None else {}
        allocatable = driver.get("allocatable")
        if isinstance(allocatable, Mapping):
            kept["allocatable"] = {"count": allocatable["count"]} if allocatable.get("count") is not None else {}
        drivers.append(kept)
    out["spec"] = {"drivers": drivers}
    return out


def _kept_annotations(annotations: Any, keep: Any) -> dict[str, str] | None:
    if not isinstance(annotations, Mapping):
        return None
    kept = {str(k): str(v) for k, v in annotations.items() if keep(str(k))}
    return kept or None


def redacted(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` (a kubectl-shaped object, trimmed or not) with only what decisions read: see the module."""
    kind = str(obj.get("kind") or "")
    if kind == "InstanceTypeCatalog":  # instance types and prices: nothing of the user's
        return copy.deepcopy(dict(obj))
    if kind in VOLUME_KINDS:
        return _redacted_volume_kind(kind, obj)
    if kind == CSI_NODE:
        return _redacted_csi_node(obj)
    meta = _meta(obj)
    if kind == NAMESPACE:  # its labels are what selectors read; its annotations, spec and status are not
        return {"apiVersion": obj.get("apiVersion") or "v1", "kind": kind,
                "metadata": {k: copy.deepcopy(meta[k]) for k in ("name", "labels") if meta.get(k) is not None}}
    out_meta: dict[str, Any] = {k: copy.deepcopy(meta[k]) for k in
                                ("name", "namespace", "labels", "ownerReferences", "creationTimestamp",
                                 "deletionTimestamp", "uid") if meta.get(k) is not None}
    if kind == "Pod":
        annotations = _kept_annotations(meta.get("annotations"), lambda k: k in KEPT_POD_ANNOTATIONS)
    else:
        annotations = _kept_annotations(meta.get("annotations"),
                                        lambda k: k.startswith(KEPT_ANNOTATION_PREFIXES))
    if annotations:
        out_meta["annotations"] = annotations
    if "ownerReferences" in out_meta:
        out_meta["ownerReferences"] = [{k: r[k] for k in ("apiVersion", "kind", "name", "uid", "controller")
                                        if k in r} for r in out_meta["ownerReferences"] if isinstance(r, Mapping)]
    out: dict[str, Any] = {"apiVersion": obj.get("apiVersion") or "v1", "kind": kind, "metadata": out_meta}
    spec = obj.get("spec")
    if kind == "Pod" and isinstance(spec, Mapping):
        pod_spec: dict[str, Any] = {k: copy.deepcopy(spec[k]) for k in KEPT_POD_SPEC if spec.get(k) is not None}
        for name in ("containers", "initContainers"):
            if spec.get(name):
                pod_spec[name] = [_container(c) for c in spec[name] if isinstance(c, Mapping)]
        volumes = [v for v in (_volume(v) for v in spec.get("volumes") or [] if isinstance(v, Mapping)) if v]
        if volumes:
            pod_spec["volumes"] = volumes
        resource_claims = _claim_names(spec.get("resourceClaims"))
        if resource_claims:
            pod_spec["resourceClaims"] = resource_claims
        out["spec"] = pod_spec
    elif isinstance(spec, Mapping):
        out["spec"] = copy.deepcopy(dict(spec))
    status = obj.get("status")
    if isinstance(status, Mapping):
        keep = {"Pod": ("phase", "conditions", "startTime"), "Node": ("capacity", "allocatable", "conditions"),
                "NodeClaim": ("conditions", "nodeName", "providerID", "lastPodEventTime", "capacity")}.get(kind, ())
        kept_status = {k: copy.deepcopy(status[k]) for k in keep if status.get(k) is not None}
        if kept_status:
            out["status"] = kept_status
    return out


def claim_arrival(claim: Mapping[str, Any]) -> dict[str, Any]:
    """A claim made during a recording, for a ``create`` event: redacted and unbound (Pending, no volume, no
    bind-completed annotation), as its maker (a StatefulSet's controller, a user) made it. The replay's cluster binds
    it as the cluster did: at once for an Immediate class, in the zone of its first pod's node for a
    WaitForFirstConsumer one (the volume recorded was made in the recorded pod's zone, which the replay may not
    choose)."""
    out = redacted(claim)
    out.get("spec", {}).pop("volumeName", None)
    for field_ in ("annotations", "deletionTimestamp", "creationTimestamp"):
        out["metadata"].pop(field_, None)
    out["status"] = {"phase": "Pending"}
    return out


def arrival(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded pod as its controller made it, for a ``create`` event: redacted, Pending, on no node."""
    out = redacted(pod)
    out.get("spec", {}).pop("nodeName", None)
    out["metadata"].pop("deletionTimestamp", None)
    out["metadata"].pop("creationTimestamp", None)
    out["status"] = {"phase": "Pending"}
    return out


# -- anonymization ------------------------------------------------------------------------------------------------


class Anonymizer:
    """Names and user label values replaced by a keyed hash (``x`` and 12 hex digits, a valid name and label
    value): the same value, the same hash, within one recording (one ``key``); without the key, not
    reversible. NodePools, DisruptionPolicies, Holds, StorageClasses and the instance type catalog keep their
    names (the policies to back-test name them; a class is configuration).

    Claims are named as their pods' volumes name them (`claim_name`): an ephemeral volume's claim, named
    ``<pod>-<volume>`` by Kubernetes, becomes ``<hashed pod>-<volume>``, so that the hashed pod's volume still
    names it. A claim is known as ephemeral from a pod with that ephemeral volume (`note`: the recorder notes
    every object before it writes any) or from its owner, the pod (Kubernetes makes the pod its controller)."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        #: (namespace, claim name) -> (pod, volume) of the ephemeral volumes seen
        self._ephemeral: dict[tuple[str, str], tuple[str, str]] = {}

    def hashed(self, value: str) -> str:
        if not value:
            return value
        return "x" + hmac.new(self.key, value.encode("utf-8"), hashlib.sha256).hexdigest()[:12]

    @staticmethod
    def well_known(label: str) -> bool:
        """Whether ``label``'s values are the cluster's vocabulary (kept); a namespace's name label is not (its
        values are namespace names, hashed)."""
        return label != LABEL_NAMESPACE_NAME and any(marker in label for marker in WELL_KNOWN_LABEL_MARKERS)

    def labels(self, labels: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v if self.well_known(k) else self.hashed(str(v)) for k, v in labels.items()}

    def selector(self, selector: Any) -> Any:
        """A label selector over pods (matchLabels and matchExpressions' values hashed as pod labels are)."""
        if not isinstance(selector, Mapping):
            return selector
        out = dict(selector)
        if isinstance(selector.get("matchLabels"), Mapping):
            out["matchLabels"] = self.labels(selector["matchLabels"])
        expressions = []
        for expr in selector.get("matchExpressions") or []:
            hashed = isinstance(expr, Mapping) and not self.well_known(str(expr.get("key"))) and expr.get("values")
            expressions.append({**expr, "values": [self.hashed(str(v)) for v in expr["values"]]} if hashed else expr)
        if expressions:
            out["matchExpressions"] = expressions
        return out

    def _pod_terms(self, affinity: Mapping[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(dict(affinity))
        for kind in ("podAffinity", "podAntiAffinity"):
            block = out.get(kind)
            if not isinstance(block, Mapping):
                continue
            for terms in ("requiredDuringSchedulingIgnoredDuringExecution",
                          "preferredDuringSchedulingIgnoredDuringExecution"):
                for term in block.get(terms) or []:
                    inner = term.get("podAffinityTerm", term) if isinstance(term, dict) else None
                    if isinstance(inner, dict):
                        inner["labelSelector"] = self.selector(inner.get("labelSelector"))
                        if inner.get("namespaceSelector") is not None:  # over Namespaces' labels, hashed alike
                            inner["namespaceSelector"] = self.selector(inner["namespaceSelector"])
                        if inner.get("namespaces"):
                            inner["namespaces"] = [self.hashed(str(n)) for n in inner["namespaces"]]
        return out

    def node_name(self, name: str) -> str:
        return self.hashed(name)

    def note(self, obj: Mapping[str, Any]) -> None:
        """Learn the ephemeral claims ``obj`` tells of: a pod's ephemeral volumes, or a claim owned by its pod
        and named ``<pod>-<volume>``."""
        kind = str(obj.get("kind") or "")
        meta = _meta(obj)
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if kind == "Pod" and name:
            spec = obj.get("spec")
            for volume in (spec.get("volumes") or []) if isinstance(spec, Mapping) else []:
                if isinstance(volume, Mapping) and isinstance(volume.get("ephemeral"), Mapping) and volume.get("name"):
                    self._ephemeral[(namespace, f"{name}-{volume['name']}")] = (name, str(volume["name"]))
        elif kind == "PersistentVolumeClaim":
            for ref in meta.get("ownerReferences") or []:
                pod = str(ref.get("name") or "") if isinstance(ref, Mapping) and ref.get("kind") == "Pod" else ""
                if pod and ref.get("controller") and name.startswith(f"{pod}-") and len(name) > len(pod) + 1:
                    self._ephemeral.setdefault((namespace, name), (pod, name[len(pod) + 1:]))

    def claim_name(self, namespace: str, name: str) -> str:
        """A claim's name hashed: ``<hashed pod>-<volume>`` for an ephemeral volume's claim (`note`), else the
        name's hash (the same wherever it appears: a claim's name, a pod's ``claimName``)."""
        ephemeral = self._ephemeral.get((namespace, name))
        if ephemeral is not None:
            pod, volume = ephemeral
            return f"{self.hashed(pod)}-{volume}"
        return self.hashed(name)

    def _hostnames(self, requirements: Any, key: str, field: str = "key") -> None:
        """Hash, in place, the values of the requirements on ``key`` (node names, hashed as nodes' names are)."""
        for requirement in requirements or []:
            if isinstance(requirement, dict) and requirement.get(field) == key and requirement.get("values"):
                requirement["values"] = [self.node_name(str(v)) for v in requirement["values"]]

    def _node_selector_terms(self, terms: Any) -> None:
        for term in terms or []:
            if isinstance(term, dict):
                self._hostnames(term.get("matchExpressions"), LABEL_HOSTNAME)
                self._hostnames(term.get("matchFields"), "metadata.name")

    def object(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """A redacted object with its names hashed (see the class)."""
        out = copy.deepcopy(dict(obj))
        kind = str(out.get("kind") or "")
        meta = out.setdefault("metadata", {})
        if kind == "StorageClass":  # a class's topology may name nodes
            for term in out.get("allowedTopologies") or []:
                if isinstance(term, dict):
                    self._hostnames(term.get("matchLabelExpressions"), LABEL_HOSTNAME)
        if kind in CONFIGURATION_KINDS:  # the cluster's configuration, named by the operators: kept
            return out
        self.note(obj)
        namespace = str(meta.get("namespace") or "")
        if kind == "PersistentVolumeClaim" and meta.get("name"):
            meta["name"] = self.claim_name(namespace, str(meta["name"]))
        elif kind == CSI_NODE and meta.get("name"):  # its node's name: the same hash, so it still names its node
            meta["name"] = self.node_name(str(meta["name"]))
        elif meta.get("name"):
            meta["name"] = self.hashed(str(meta["name"]))
        if meta.get("namespace"):
            meta["namespace"] = self.hashed(namespace)
        meta.pop("uid", None)
        for ref in meta.get("ownerReferences") or []:
            if ref.get("name") and ref.get("kind") != "NodePool":
                ref["name"] = self.hashed(str(ref["name"]))
            ref.pop("uid", None)
        # a Namespace's labels are what pods' namespaceSelectors match: hashed as theirs are
        if kind in ("Pod", NAMESPACE) and isinstance(meta.get("labels"), Mapping):
            meta["labels"] = self.labels(meta["labels"])
        if kind == "Pod":
            spec = out.get("spec") or {}
            if spec.get("nodeName"):
                spec["nodeName"] = self.hashed(str(spec["nodeName"]))
            if isinstance(spec.get("affinity"), Mapping):
                spec["affinity"] = self._pod_terms(spec["affinity"])
            for constraint in spec.get("topologySpreadConstraints") or []:
                if isinstance(constraint, dict):
                    constraint["labelSelector"] = self.selector(constraint.get("labelSelector"))
            for volume in spec.get("volumes") or []:
                claim = volume.get("persistentVolumeClaim") if isinstance(volume, dict) else None
                if isinstance(claim, dict) and claim.get("claimName"):
                    claim["claimName"] = self.claim_name(namespace, str(claim["claimName"]))
        elif kind == "PersistentVolumeClaim":
            spec = out.get("spec") or {}
            if spec.get("volumeName"):
                spec["volumeName"] = self.hashed(str(spec["volumeName"]))
        elif kind == "PersistentVolume":
            spec = out.get("spec") or {}
            affinity = spec.get("nodeAffinity")
            required = affinity.get("required") if isinstance(affinity, dict) else None
            if isinstance(required, dict):
                self._node_selector_terms(required.get("nodeSelectorTerms"))
        elif kind == "PodDisruptionBudget":
            spec = out.get("spec") or {}
            spec["selector"] = self.selector(spec.get("selector"))
        elif kind == "Node":
            labels = meta.get("labels") or {}
            if labels.get("kubernetes.io/hostname"):
                labels["kubernetes.io/hostname"] = self.hashed(str(labels["kubernetes.io/hostname"]))
            spec = out.get("spec") or {}
            if spec.get("providerID"):
                spec["providerID"] = self.hashed(str(spec["providerID"]))
        elif kind == "NodeClaim":
            status = out.get("status") or {}
            for name in ("nodeName", "providerID"):
                if status.get(name):
                    status[name] = self.hashed(str(status[name]))
        return out


# -- the recorder -------------------------------------------------------------------------------------------------


def _key(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


def _taints(node: Mapping[str, Any]) -> list[str]:
    spec = node.get("spec")
    taints = spec.get("taints") if isinstance(spec, Mapping) else None
    return [str(t.get("key")) for t in taints or [] if isinstance(t, Mapping)]


def _finished(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status")
    return isinstance(status, Mapping) and status.get("phase") in ("Succeeded", "Failed")


@dataclass
class _Why:
    """What was seen about one node's disruption: by whom, the reasons each source named, and the words."""

    by: str = ""
    #: the NodeClaim's DisruptionReason (Karpenter's own record of the command it executes)
    stated: str = ""
    #: a disruption Event's reason (Karpenter's or ebb's message)
    told: str = ""
    #: a NodeClaim condition that made it a candidate (Drifted, Expired)
    candidate: str = ""
    detail: str = ""

    @property
    def reason(self) -> str:
        return self.stated or self.told or self.candidate


def _reason_of_message(message: str) -> str:
    """The reason in a disruption Event's message (``Disrupting NodeClaim: Underutilized/Delete``, ebb's
    ``... (underutilized)``), or ''."""
    for reason in ("Underutilized", "Empty", "Drifted", "Expired", "Interrupted", "Interruption", "Emptiness",
                   "Expiration", "Drift", "Consolidation"):
        if reason.lower() in message.lower():
            return {"Emptiness": "Empty", "Expiration": "Expired", "Drift": "Drifted",
                    "Interruption": "Interrupted", "Consolidation": "Underutilized"}.get(reason, reason)
    return ""


@dataclass
class RecordCounts:
    """What a recording holds so far (for the progress line)."""

    arrivals: int = 0
    departures: int = 0
    moved: int = 0
    launches: int = 0
    removals: int = 0
    changes: int = 0
    #: claims made during the recording (not an ephemeral volume's: the replay makes those with their pods)
    claims: int = 0


@dataclass
class Recorder:
    """Turns a cluster's observed changes into a `Trace` (see the module). ``anonymizer``: names hashed."""

    start: datetime
    documents: Sequence[Mapping[str, Any]]
    anonymizer: Anonymizer | None = None
    counts: RecordCounts = field(default_factory=RecordCounts)
    #: the latest object seen per key (``kind/namespace/name``), of the kinds the recorder reads
    _objects: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    _events: list[TraceEvent] = field(default_factory=list)
    _observed: list[NodeChange] = field(default_factory=list)
    #: pod key -> the pod name the trace knows its replica by (its own, or the first of an evicted replica's)
    _replica: dict[str, str] = field(default_factory=dict)
    #: pods departed (or moved) already
    _gone: set[str] = field(default_factory=set)
    #: (namespace, owner kind, owner name) -> the evicted replicas waiting for their controller's new pod:
    #: (the trace's pod name, eviction time)
    _evicted: dict[tuple[str, str, str], list[tuple[str, float]]] = field(default_factory=dict)
    #: node name -> what was seen of its disruption (taints, NodeClaim conditions, Events)
    _why: dict[str, _Why] = field(default_factory=dict)
    #: NodeClaim name -> its node
    _claim_node: dict[str, str] = field(default_factory=dict)
    #: nodes whose removal is recorded
    _removed: set[str] = field(default_factory=set)
    #: the removals, (seconds, node, its last object): who and why are told in `trace`, from all that was seen
    #: by then (a NodeClaim's condition or an Event can arrive after the Node's deletion)
    _removals: list[tuple[float, str, Mapping[str, Any]]] = field(default_factory=list)
    #: NodeClaim or Node name -> (by, detail) of a DisruptionLaunching Event: a disruption's replacement
    _replacing: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: a launch's node as written (hashed with --anonymize) -> its name
    _raw_node: dict[str, str] = field(default_factory=dict)
    _last: float = 0.0
    _cluster: list[dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        for doc in self.documents:
            if self.anonymizer is not None:  # an ephemeral claim is named after its pod, whichever comes first
                self.anonymizer.note(doc)
            kind = str(doc.get("kind") or "")
            meta = _meta(doc)
            key = _key(kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            self._objects[key] = doc
            if kind == "Pod":
                self._replica[key] = str(meta.get("name"))
                if _finished(doc) or meta.get("deletionTimestamp"):
                    self._gone.add(key)
            elif kind == "NodeClaim":
                self._note_claim(doc)
            elif kind == "Node":
                self._note_node(str(meta.get("name")), doc)

    # -- feeding ------------------------------------------------------------------------------------------------

    def seconds(self, at: datetime) -> float:
        """``at`` as seconds after the start (never before it, never before the last change)."""
        self._last = max(self._last, round((at - self.start).total_seconds(), 3))
        return self._last

    def observe(self, at: datetime, kind: str, namespace: str, name: str, obj: Mapping[str, Any] | None) -> None:
        """One change seen at ``at``: ``obj`` the object now (as the API serves it, or trimmed), None: deleted."""
        t = self.seconds(at)
        self.counts.changes += 1
        key = _key(kind, namespace, name)
        before = self._objects.get(key)
        if obj is None:
            self._objects.pop(key, None)
        else:
            self._objects[key] = obj
            if self.anonymizer is not None:
                self.anonymizer.note(obj)
        if kind == "Pod":
            self._pod(t, key, before, obj)
        elif kind == "Node":
            self._node(t, name, before, obj)
        elif kind == "NodeClaim":
            if obj is not None:
                self._note_claim(obj)
        elif kind == "PersistentVolumeClaim" and obj is not None and before is None:
            self._claim_made(t, obj)
        elif kind == "Event" and obj is not None:
            self.note_event(obj)

    def note_event(self, event: Mapping[str, Any]) -> None:
        """A Kubernetes Event (core/v1 or events.k8s.io/v1): a disruption's reason, and whose, for its node."""
        reason = str(event.get("reason") or "")
        if reason not in DISRUPTION_EVENT_REASONS:
            return
        involved = event.get("involvedObject") or event.get("regarding") or {}
        kind, name = str(involved.get("kind") or ""), str(involved.get("name") or "")
        source = event.get("source") or {}
        component = str(event.get("reportingComponent") or event.get("reportingController")
                        or (source.get("component") if isinstance(source, Mapping) else "") or "")
        message = str(event.get("message") or event.get("note") or "")
        if reason == EVENT_LAUNCHING:  # on the replacement (its NodeClaim, or ebb's Node), maybe before its Node
            by = "ebb" if component.startswith(EBB_COMPONENT_PREFIX) else "karpenter"
            self._replacing[name] = (by, f"{reason}: {message}"[:300])
            return
        node = self._claim_node.get(name, name) if kind == "NodeClaim" else name if kind == "Node" else ""
        if not node:
            return
        why = self._why.setdefault(node, _Why())
        why.by = "ebb" if component.startswith(EBB_COMPONENT_PREFIX) else "karpenter" if component else why.by
        why.told = _reason_of_message(message) or why.told
        why.detail = f"{reason}: {message}"[:300]

    def note_ebb_step(self, node: str, phase: str, message: str) -> None:
        """A step of one of ebb's decisions on ``node`` (``ebb.disruption.events``)."""
        why = self._why.setdefault(node, _Why())
        why.by = "ebb"
        why.told = _reason_of_message(message) or why.told
        why.detail = f"{phase}: {message}"[:300]

    # -- pods ---------------------------------------------------------------------------------------------------

    def _node_disrupted(self, node: str) -> bool:
        obj = self._objects.get(_key("Node", "", node))
        if obj is None:
            return bool(node)  # gone already: the pod went with its node
        return bool(_meta(obj).get("deletionTimestamp")) or any(t in DISRUPTION_TAINTS for t in _taints(obj))

    def _pod(self, t: float, key: str, before: Mapping[str, Any] | None, pod: Mapping[str, Any] | None) -> None:
        owner = controller_of(pod if pod is not None else before or {})
        if owner is not None and owner[0] in NODE_BOUND_OWNERS:
            return
        if pod is not None and key not in self._replica:
            self._arrive(t, key, pod)
            return
        if key in self._gone or key not in self._replica:
            return
        last = pod if pod is not None else before
        if last is None:
            return
        leaving = pod is None or bool(_meta(pod).get("deletionTimestamp")) or _finished(pod)
        if not leaving:
            return
        self._gone.add(key)
        node = str((last.get("spec") or {}).get("nodeName") or "")
        owner = controller_of(last)
        if (not _finished(last) and owner is not None and owner[0] in RECREATING_OWNERS and node
                and self._node_disrupted(node)):
            namespace = str(_meta(last).get("namespace") or "default")
            self._evicted.setdefault((namespace, *owner), []).append((self._replica[key], t))
            self.counts.moved += 1
            return
        self._depart(t, key)

    def _claim_made(self, t: float, claim: Mapping[str, Any]) -> None:
        """A claim first seen after the start: a ``create`` of it unbound, so that the pods that use it can run in the
        replay (one whose claim is missing waits Pending); not an ephemeral volume's claim, which the replay's
        cluster makes with its pod, nor one being deleted."""
        meta = _meta(claim)
        if meta.get("deletionTimestamp") or any(isinstance(r, Mapping) and r.get("kind") == "Pod"
                                                for r in meta.get("ownerReferences") or []):
            return
        self._events.append(TraceEvent(at=t, create=Create(objects=[self._private(claim_arrival(claim))])))
        self.counts.claims += 1

    def _arrive(self, t: float, key: str, pod: Mapping[str, Any]) -> None:
        meta = _meta(pod)
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name"))
        owner = controller_of(pod)
        waiting = self._evicted.get((namespace, *owner)) if owner is not None else None
        if waiting:  # the controller's new pod for a replica the recorded disrupter moved: no arrival
            self._replica[key] = waiting.pop(0)[0]
            return
        self._replica[key] = name
        if _finished(pod) or meta.get("deletionTimestamp"):
            self._gone.add(key)  # seen only on its way out: neither arrived nor departs
            return
        self._events.append(TraceEvent(at=t, create=Create(objects=[self._private(arrival(pod))])))
        self.counts.arrivals += 1

    def _depart(self, t: float, key: str) -> None:
        namespace = key.split("/", 2)[1]
        self._events.append(TraceEvent(at=t, depart=Depart(namespace=self._name(namespace or "default"),
                                                           name=self._name(self._replica[key]))))
        self.counts.departures += 1

    # -- nodes --------------------------------------------------------------------------------------------------

    def _note_claim(self, claim: Mapping[str, Any]) -> None:
        name = str(_meta(claim).get("name") or "")
        status = claim.get("status")
        if not isinstance(status, Mapping):
            status = {}
        node = str(status.get("nodeName") or "") or self._claim_node.get(name, "")
        if not node:
            return
        self._claim_node[name] = node
        true = {str(c.get("type")): str(c.get("reason") or "") for c in status.get("conditions") or []
                if isinstance(c, Mapping) and c.get("status") == "True"}
        why = self._why.setdefault(node, _Why())
        if true.get(CONDITION_DISRUPTION_REASON):
            why.stated = true[CONDITION_DISRUPTION_REASON]
            why.by = why.by or "karpenter"
            why.detail = why.detail or f"NodeClaim {name}: {CONDITION_DISRUPTION_REASON} {why.stated}"
        why.candidate = next((c for c in CANDIDATE_CONDITIONS if c in true), why.candidate)

    def _note_node(self, name: str, node: Mapping[str, Any]) -> None:
        taints = _taints(node)
        if any(t in DISRUPTION_TAINTS for t in taints):
            why = self._why.setdefault(name, _Why())
            why.by = why.by or ("ebb" if TAINT_EBB_DISRUPTED in taints else "karpenter")

    def _change(self, t: float, name: str, node: Mapping[str, Any], change: NodeChangeKind, *, by: str,
                reason: str, detail: str) -> NodeChange:
        labels = _meta(node).get("labels") or {}
        return NodeChange(
            at=t, node=self._node_name(name), change=change, by=by, reason=reason, detail=detail,
            nodepool=str(labels.get(LABEL_NODEPOOL) or ""),
            instanceType=str(labels.get("node.kubernetes.io/instance-type") or ""),
            capacityType=str(labels.get(LABEL_CAPACITY_TYPE) or ""))

    def _node(self, t: float, name: str, before: Mapping[str, Any] | None, node: Mapping[str, Any] | None) -> None:
        if node is not None:
            self._note_node(name, node)
        if before is None and node is not None:
            labels = _meta(node).get("labels") or {}
            annotations = _meta(node).get("annotations") or {}
            by = "ebb" if annotations.get(ANNOTATION_DECISION_ID) else \
                "karpenter" if labels.get(LABEL_NODEPOOL) else "unknown"
            reason = "replacement" if annotations.get(ANNOTATION_DECISION_ID) else \
                "provisioning" if labels.get(LABEL_NODEPOOL) else "added"
            launched = self._change(t, name, node, "launched", by=by, reason=reason, detail="")
            self._raw_node[launched.node] = name
            self._observed.append(launched)
            self.counts.launches += 1
            self._removed.discard(name)
            return
        leaving = node is None or bool(_meta(node).get("deletionTimestamp"))
        if not leaving or name in self._removed:
            return
        last = node if node is not None else before
        if last is None:
            return
        self._removed.add(name)
        self._removals.append((t, name, last))
        self.counts.removals += 1

    # -- output -------------------------------------------------------------------------------------------------

    def _name(self, value: str) -> str:
        return self.anonymizer.hashed(value) if self.anonymizer is not None else value

    def _node_name(self, value: str) -> str:
        return self.anonymizer.node_name(value) if self.anonymizer is not None else value

    def _private(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        return self.anonymizer.object(obj) if self.anonymizer is not None else dict(obj)

    def starting_cluster(self) -> list[dict[str, Any]]:
        """The cluster at the start, redacted (and anonymized), of the kinds a back-test starts from (made once:
        a long recording writes its trace so far many times)."""
        if self._cluster is None:
            self._cluster = [self._private(redacted(doc)) for doc in self.documents if doc.get("kind") in CLUSTER_KINDS]
        return self._cluster

    def trace(self, end: datetime, *, name: str, description: str = "") -> Trace:
        """What was recorded from the start to ``end``: the events by time; evicted replicas never made again
        depart at their eviction."""
        duration = max(round((end - self.start).total_seconds(), 3), self._last, 0.0)  # moves no later change
        events = list(self._events)
        for (namespace, _, _), waiting in sorted(self._evicted.items()):
            events.extend(TraceEvent(at=at, depart=Depart(namespace=self._name(namespace), name=self._name(pod)))
                          for pod, at in waiting)
        events.sort(key=lambda e: e.at)
        claims_of: dict[str, list[str]] = {}
        for claim, node in self._claim_node.items():
            claims_of.setdefault(node, []).append(claim)
        observed = []
        for launch in self._observed:  # a launch a DisruptionLaunching Event names is a disruption's replacement
            raw = self._raw_node.get(launch.node, launch.node)
            told = next((self._replacing[n] for n in [raw, *claims_of.get(raw, [])] if n in self._replacing), None)
            replaced = told is not None and launch.reason == "provisioning"
            observed.append(launch.model_copy(update={"by": told[0], "reason": "replacement", "detail": told[1]})
                            if told is not None and replaced else launch)
        for t, node, last in self._removals:
            why = self._why.get(node, _Why())
            reason = why.reason or ("disrupted" if why.by else "deleted")
            observed.append(self._change(t, node, last, "removed", by=why.by or "unknown", reason=reason,
                                         detail=why.detail))
        return Trace(name=name, description=description, events=events, start=self.start, duration=duration,
                     cluster=self.starting_cluster(), observed=sorted(observed, key=lambda c: c.at))


def recorded_kinds(documents: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many objects of each kind ``documents`` hold (the recording's starting state, said on stderr)."""
    counts: dict[str, int] = {}
    for doc in documents:
        kind = str(doc.get("kind") or "")
        counts[kind] = counts.get(kind, 0) + 1
    return counts

"""The simulated cluster's volume controllers: how claims are made and bound, so that a pod with volumes runs in a
replay as it ran in the cluster.

Without them a back-test of a cluster with volumes goes wrong in two ways: a pod whose claim is never made waits
Pending for ever (kube-scheduler refuses a pod whose PersistentVolumeClaim is missing, and so does ebb's engine,
`ebb.core.volumes`), and a claim never bound leaves its pod free to move to any zone, where the real cluster pins it
to the zone its volume was made in. Four of Kubernetes' controllers, reduced to what placement reads:

- **the ephemeral volume controller**: a pod's ``ephemeral`` volume gets its claim, ``<pod>-<volume>``, made from the
  volume's ``volumeClaimTemplate`` and owned by the pod (`ephemeral_claims`); the garbage collector removes it, and
  the volume dynamically provisioned for it, with the pod;
- **the admission plugin** ``DefaultStorageClass``: a new claim that names no class (no ``storageClassName`` at all)
  gets the default class, the one annotated ``storageclass.kubernetes.io/is-default-class: "true"`` (`admitted`);
- **the external provisioner and the PV controller**: a claim of a class with a provisioner is bound to a new volume
  (`provision`), when its first pod is bound to a node for a ``WaitForFirstConsumer`` class (on that node's zone),
  at once for an ``Immediate`` class (on the first zone the class allows, or the first zone of the cluster's nodes).
  The volume's ``nodeAffinity`` is what the provisioner writes: the class's ``allowedTopologies`` keys with the
  node's values when it lists any, else the zone for a zonal driver (`ZONAL_PROVISIONERS`: EBS, persistent disk,
  Azure disk, Cinder) and the node's hostname for a local one (`LOCAL_PROVISIONERS`); none for the others (EFS, NFS,
  Azure files), whose volumes attach anywhere;
- a claim that names ``kubernetes.io/no-provisioner`` or a class not held is left unbound, as there.

Pure: functions of the objects, returning the objects to store.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ebb.core.model import LABEL_HOSTNAME, LABEL_ZONE
from ebb.core.volumes import IN_TREE_DRIVERS

#: the annotation of the default StorageClass
ANNOTATION_DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
#: the annotations the PV controller writes on a claim it bound, and the scheduler on a WaitForFirstConsumer claim
ANNOTATION_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANNOTATION_SELECTED_NODE = "volume.kubernetes.io/selected-node"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
#: the provisioner of statically made local volumes: it makes none
NO_PROVISIONER = "kubernetes.io/no-provisioner"
#: provisioners whose volumes are zonal: the volume is made in one zone and attaches only there
ZONAL_PROVISIONERS = frozenset({
    "ebs.csi.aws.com", "kubernetes.io/aws-ebs", "pd.csi.storage.gke.io", "kubernetes.io/gce-pd",
    "disk.csi.azure.com", "kubernetes.io/azure-disk", "cinder.csi.openstack.org", "kubernetes.io/cinder"})
#: provisioners whose volumes are on one node's disk
LOCAL_PROVISIONERS = frozenset({"rancher.io/local-path", "openebs.io/local"})



def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def claim_names(pod: Mapping[str, Any]) -> list[str]:
    """The claims ``pod``'s volumes use: each ``persistentVolumeClaim``'s, and ``<pod>-<volume>`` of each ephemeral
    volume, in the order of its volumes."""
    names: list[str] = []
    pod_name = str(_meta(pod).get("name") or "")
    for volume in _spec(pod).get("volumes") or []:
        if not isinstance(volume, Mapping):
            continue
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, Mapping) and claim.get("claimName"):
            names.append(str(claim["claimName"]))
        elif isinstance(volume.get("ephemeral"), Mapping):
            names.append(f"{pod_name}-{volume.get('name')}")
    return names


def ephemeral_claims(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The claims the ephemeral volume controller makes for ``pod``: one per ``ephemeral`` volume, ``<pod>-<volume>``
    in the pod's namespace, the volume's ``volumeClaimTemplate`` (its labels, annotations and spec) owned by the pod,
    Pending."""
    meta = _meta(pod)
    made = []
    for volume in _spec(pod).get("volumes") or []:
        ephemeral = volume.get("ephemeral") if isinstance(volume, Mapping) else None
        if not isinstance(ephemeral, Mapping):
            continue
        template = ephemeral.get("volumeClaimTemplate")
        template = template if isinstance(template, Mapping) else {}
        owner = {"apiVersion": "v1", "kind": "Pod", "name": meta.get("name"), "controller": True,
                 "blockOwnerDeletion": True, **({"uid": meta["uid"]} if meta.get("uid") else {})}
        claim_meta: dict[str, Any] = {"name": f"{meta.get('name')}-{volume.get('name')}",
                                      "namespace": meta.get("namespace") or "default", "ownerReferences": [owner]}
        for field in ("labels", "annotations"):
            if isinstance(_meta(template).get(field), Mapping):
                claim_meta[field] = dict(_meta(template)[field])
        made.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": claim_meta,
                     "spec": copy.deepcopy(dict(_spec(template))), "status": {"phase": "Pending"}})
    return made


def owned_by(claim: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """Whether ``claim`` is owned by ``pod`` (an ephemeral volume's: its owner reference names the pod, and its uid
    when both have one)."""
    pod_meta = _meta(pod)
    if _meta(claim).get("namespace", "default") != pod_meta.get("namespace", "default"):
        return False
    for ref in _meta(claim).get("ownerReferences") or []:
        if (isinstance(ref, Mapping) and ref.get("kind") == "Pod" and ref.get("name") == pod_meta.get("name")
                and (not ref.get("uid") or not pod_meta.get("uid") or ref.get("uid") == pod_meta.get("uid"))):
            return True
    return False


def default_class(classes: Iterable[Mapping[str, Any]]) -> str | None:
    """The default StorageClass's name (the newest-named when several claim to be, as the admission plugin picks the
    newest; names stand in for creation times here), None when there is none."""
    marked = sorted(str(_meta(c).get("name")) for c in classes
                    if str((_meta(c).get("annotations") or {}).get(ANNOTATION_DEFAULT_CLASS, "")).lower() == "true")
    return marked[-1] if marked else None


def admitted(claim: Mapping[str, Any], classes: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """``claim`` as the ``DefaultStorageClass`` admission plugin stores it when it names no class: with the default
    class's name; None when it names one (``""`` included: no class on purpose) or there is no default."""
    if "storageClassName" in _spec(claim) or _spec(claim).get("volumeName"):
        return None
    name = default_class(classes)
    if name is None:
        return None
    return {**claim, "spec": {**_spec(claim), "storageClassName": name}}


def _zones_allowed(storage_class: Mapping[str, Any]) -> list[str]:
    """The zones a class's ``allowedTopologies`` list, in order."""
    zones: list[str] = []
    for term in storage_class.get("allowedTopologies") or []:
        for expression in (term or {}).get("matchLabelExpressions") or []:
            if expression.get("key") in (LABEL_ZONE, "topology.ebs.csi.aws.com/zone",
                                         "failure-domain.beta.kubernetes.io/zone"):
                zones.extend(str(v) for v in expression.get("values") or [])
    return zones


def _node_affinity(storage_class: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any] | None:
    """The ``nodeAffinity`` the provisioner writes on a volume made for a node with ``labels``: the keys of the first
    ``allowedTopologies`` term the node meets, with its values; else the zone (a zonal driver) or hostname (a local
    one); None when the volume attaches anywhere."""
    for term in storage_class.get("allowedTopologies") or []:
        expressions = [e for e in (term or {}).get("matchLabelExpressions") or [] if isinstance(e, Mapping)]
        if expressions and all(labels.get(str(e.get("key"))) in (e.get("values") or []) for e in expressions):
            keys = [str(e["key"]) for e in expressions]
            return {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": k, "operator": "In", "values": [labels[k]]} for k in keys]}]}}
    provisioner = str(storage_class.get("provisioner") or "")
    key = LABEL_ZONE if provisioner in ZONAL_PROVISIONERS else LABEL_HOSTNAME if provisioner in LOCAL_PROVISIONERS \
        else None
    if key is None or not labels.get(key):
        return None
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": key, "operator": "In", "values": [labels[key]]}]}]}}


def provision(claim: Mapping[str, Any], storage_class: Mapping[str, Any] | None, *,
              node: Mapping[str, Any] | None = None, zones: Sequence[str] = (),
              serial: int = 0) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The volume the provisioner makes for the unbound ``claim`` and the claim bound to it, or None when none is
    made: the claim is bound already, or names no class or one not held, or its class has no provisioner
    (``kubernetes.io/no-provisioner``). ``node``: the node its first pod was bound to (WaitForFirstConsumer); without
    it (Immediate) the volume is made in the first zone the class allows, else the first of ``zones`` (the cluster's).
    ``serial`` tells apart the volumes made for claims of the same name over a run."""
    spec = _spec(claim)
    if spec.get("volumeName") or storage_class is None:
        return None
    provisioner = str(storage_class.get("provisioner") or "")
    if not provisioner or provisioner == NO_PROVISIONER:
        return None
    meta = _meta(claim)
    namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name"))
    if node is not None:
        labels = dict(_meta(node).get("labels") or {})
    else:
        zone = next(iter([*_zones_allowed(storage_class), *zones]), None)
        labels = {LABEL_ZONE: zone} if zone else {}
    digest = hashlib.sha256(f"{namespace}/{name}/{serial}".encode()).hexdigest()
    volume_name = f"pvc-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
    volume_spec: dict[str, Any] = {
        "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")},
        "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
        "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
        "storageClassName": _meta(storage_class).get("name"),
        "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace, "name": name,
                     **({"uid": meta["uid"]} if meta.get("uid") else {})},
        "csi": {"driver": IN_TREE_DRIVERS.get(provisioner, provisioner), "volumeHandle": volume_name}}
    affinity = _node_affinity(storage_class, labels)
    if affinity is not None:
        volume_spec["nodeAffinity"] = affinity
    volume = {"apiVersion": "v1", "kind": "PersistentVolume",
              "metadata": {"name": volume_name, "annotations": {"pv.kubernetes.io/provisioned-by": provisioner}},
              "spec": volume_spec, "status": {"phase": "Bound"}}
    annotations = {**(meta.get("annotations") or {}), ANNOTATION_BIND_COMPLETED: "yes"}
    if node is not None:
        annotations[ANNOTATION_SELECTED_NODE] = str(_meta(node).get("name"))
    bound = {**claim, "metadata": {**meta, "annotations": annotations},
             "spec": {**spec, "volumeName": volume_name}, "status": {"phase": "Bound"}}
    return volume, bound


def waits_for_consumer(storage_class: Mapping[str, Any] | None) -> bool:
    """Whether a class binds its claims when their first pod is scheduled (else at once: ``Immediate``)."""
    return storage_class is not None and storage_class.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER

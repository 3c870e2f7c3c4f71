"""What a pod's PersistentVolumes ask of the node it runs on, so that no move strands a pod away from its data.

A pod whose claim is bound to a zonal volume (an EBS volume, a zonal persistent disk) can only run in that zone: moved
anywhere else, kube-scheduler's ``VolumeBinding`` filter leaves it Pending for ever. Karpenter reads the same
(``VolumeTopology.GetRequirements``) and ebb follows it:

- a claim bound to a volume asks what the volume's ``spec.nodeAffinity.required`` terms ask (an OR of terms);
- an unbound claim asks its StorageClass's ``allowedTopologies`` (each term's ``matchLabelExpressions``, ``In``);
- a pod with several claims asks each claim's terms: the cross product, one term of each claim ANDed.

Where ebb is stricter than Karpenter, it is on the safe side (docs/decisions.md, the differences table):

- a ``local`` or ``hostPath`` volume's hostname requirement is kept: its data is on that node's disk, so the pod
  moves nowhere and its node stays (Karpenter drops the hostname and moves the pod, which then waits Pending);
- a claim, volume or StorageClass the input lacks, and a claim or volume being deleted or a claim ``Lost``, keep the
  pod off every node (`SchedulingSpec.volume_block` says which): kube-scheduler would refuse its copy (Karpenter
  drops such a pod's volume requirements instead and moves it). So does, for a pending pod, a claim that names its
  volume but is not bound yet (no ``pv.kubernetes.io/bind-completed``), as Karpenter ignores such a pod.

A node attaches a bounded number of volumes per CSI driver (an EBS-backed Nitro instance about 25, its CSINode's
``spec.drivers[].allocatable.count``), and Karpenter's ``ExistingNode.CanAdd`` refuses a pod whose volumes would pass
that (``VolumeUsage.ExceedsLimits``). ebb counts the attachments as a resource, ``attachable-volumes-csi-<driver>``
(kube-scheduler's name for the same limit, `attach_limit_key`): a pod requests one per claim of a limited driver (the
driver resolved as Karpenter's ``ResolveDriver`` does: a bound claim's volume's CSI driver, an unbound one's
StorageClass provisioner), an existing node has its CSINode's count (no limit, `UNLIMITED_ATTACHMENTS`, when its CSINode
lists none for the driver), and a new node has no limit (Karpenter checks none on a NodeClaim). Two pods of one node
sharing a claim count it twice where Karpenter counts it once: on the safe side.

The volumes are read only when the input holds at least one PersistentVolumeClaim, PersistentVolume, StorageClass or
CSINode (a live cluster's reads always do; a dump made without them is warned about by ``ebb.core.snapshot``): pods
are then given their `SchedulingSpec.volume_terms` and attachments, and nodes their attachment limits, once, by
`with_volume_topology`, while the snapshot is assembled.

Pure: no I/O.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, TypeVar, cast

from ebb.core.model import (
    ATTACH_LIMIT_PREFIX,
    UNLIMITED_ATTACHMENTS,
    CSINode,
    Node,
    PersistentVolume,
    Pod,
    Requirement,
    StorageClass,
    VolumeClaim,
)

Terms = tuple[tuple[Requirement, ...], ...]
T = TypeVar("T")

#: in-tree volume plugins' names and the CSI drivers that took them over (csi-translation-lib), for a StorageClass
#: whose provisioner is an in-tree name
IN_TREE_DRIVERS = {
    "kubernetes.io/aws-ebs": "ebs.csi.aws.com",
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/azure-file": "file.csi.azure.com",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
    "kubernetes.io/vsphere-volume": "csi.vsphere.vmware.com",
    "kubernetes.io/portworx-volume": "pxd.portworx.com",
}


def attach_limit_key(driver: str) -> str:
    """The resource a node's attachments of ``driver``'s volumes are counted in."""
    return ATTACH_LIMIT_PREFIX + driver


def claim_driver(claim: VolumeClaim, volumes: dict[str, PersistentVolume], classes: dict[str, StorageClass]) -> str:
    """The CSI driver that attaches ``claim``'s volume (Karpenter's ``ResolveDriver``): its volume's when bound (""
    when that volume is not a CSI one, or missing), else its StorageClass's provisioner ("" without one)."""
    if claim.volume_name:
        volume = volumes.get(claim.volume_name)
        return volume.driver if volume is not None else ""
    sc = classes.get(claim.storage_class) if claim.storage_class else None
    return sc.driver if sc is not None else ""


def attachments(pod: Pod, claims: dict[str, VolumeClaim], volumes: dict[str, PersistentVolume],
                classes: dict[str, StorageClass], limited: frozenset[str]) -> dict[str, int]:
    """What ``pod`` requests of the attachment resources of the ``limited`` drivers: one per distinct claim of each
    (a claim the input lacks attaches nothing it knows of, as Karpenter's ``GetVolumes`` skips it)."""
    counted: dict[str, set[str]] = {}
    for name in pod.claims:
        claim = claims.get(f"{pod.namespace}/{name}")
        if claim is None:
            continue
        driver = claim_driver(claim, volumes, classes)
        if driver in limited:
            counted.setdefault(driver, set()).add(name)
    return {attach_limit_key(driver): len(names) for driver, names in sorted(counted.items())}


#: a StorageClass whose claims are bound as soon as they are made, not when their first pod is scheduled: such a claim
#: unbound is refused by kube-scheduler (Karpenter's ``ValidatePersistentVolumeClaims`` too)
IMMEDIATE = "Immediate"


def volume_requirements(pod: Pod, claims: dict[str, VolumeClaim], volumes: dict[str, PersistentVolume],
                        classes: dict[str, StorageClass]) -> tuple[Terms | None, str]:
    """What ``pod``'s claims ask of its node: (the terms, one of which a node must meet, or None when they ask
    nothing; why no node may take it, "" when some may). ``claims`` by ``namespace/name``, ``volumes`` and
    ``classes`` by name. A pending pod whose claim names its volume without the PersistentVolume controller's
    ``pv.kubernetes.io/bind-completed`` goes nowhere: kube-scheduler reads such a claim as unbound, and Karpenter
    ignores the pod (``ValidatePersistentVolumeClaims``, which it asks of pending pods only: a running pod's claim is
    as its node has it)."""
    alternatives: list[tuple[Requirement, ...]] | None = None
    for name in pod.claims:
        claim = claims.get(f"{pod.namespace}/{name}")
        if claim is None:
            return (), f"its PersistentVolumeClaim {pod.namespace}/{name} is not in the input"
        if claim.deleting:
            return (), f"its PersistentVolumeClaim {claim.key} is being deleted"
        if claim.lost:
            return (), f"its PersistentVolumeClaim {claim.key} is Lost (its volume no longer exists)"
        terms: Terms | None
        if claim.volume_name:
            volume = volumes.get(claim.volume_name)
            if volume is None:
                return (), f"its PersistentVolume {claim.volume_name} (of claim {claim.key}) is not in the input"
            if volume.deleting:
                return (), f"its PersistentVolume {claim.volume_name} (of claim {claim.key}) is being deleted"
            if not (claim.bind_completed or pod.node_name):
                return (), (f"its PersistentVolumeClaim {claim.key} names volume {claim.volume_name} but is not bound "
                            f"yet (no pv.kubernetes.io/bind-completed annotation)")
            terms = _volume_terms(volume)
        else:
            if not claim.storage_class:
                return (), f"its PersistentVolumeClaim {claim.key} is unbound and names no StorageClass"
            sc = classes.get(claim.storage_class)
            if sc is None:
                return (), f"the StorageClass {claim.storage_class} of its claim {claim.key} is not in the input"
            if sc.binding_mode == IMMEDIATE:
                return (), (f"its PersistentVolumeClaim {claim.key} is unbound, and its StorageClass "
                            f"{claim.storage_class} binds Immediate")
            terms = sc.allowed_topologies or None
        if terms is None:
            continue
        alternatives = list(terms) if alternatives is None else [
            (*mine, *theirs) for mine, theirs in itertools.product(alternatives, terms)]
    return (None if alternatives is None else tuple(alternatives)), ""


def _volume_terms(volume: PersistentVolume) -> Terms | None:
    """A volume's node affinity terms; a term without requirements asks nothing of a node, as Karpenter skips it, so
    a volume whose terms are all empty asks nothing (a term left with none matches every node)."""
    if volume.node_terms is None:
        return None
    terms = tuple(term for term in volume.node_terms if term)
    return terms or None


#: pods' specs given volume terms, by (the spec's id, the terms, the block, the attachments), with the spec itself
#: kept alive so that its id is not reused: a running planner assembles a snapshot every pass, and a pod whose claims
#: are unchanged keeps one spec, whose compiled forms the simulator then finds again; nodes given their attachment
#: limits likewise, by (the node's id, the limits)
_GIVEN: dict[tuple[Any, ...], tuple[Any, Any]] = {}
_GIVEN_LOCK = threading.Lock()
#: how many specs and nodes `_GIVEN` keeps before it starts again
_GIVEN_MAX = 50_000


def _given(key: tuple[Any, ...], source: T, **changes: Any) -> T:
    """``source`` with ``changes`` (`dataclasses.replace`), made once for ``key`` while ``source`` lives."""
    with _GIVEN_LOCK:
        hit = _GIVEN.get(key)
        if hit is None or hit[0] is not source:
            if len(_GIVEN) >= _GIVEN_MAX:
                _GIVEN.clear()
            hit = _GIVEN[key] = (source, replace(source, **changes))  # type: ignore[type-var]
        return cast(T, hit[1])


def with_volume_topology(pods: Iterable[Pod], claims: Iterable[VolumeClaim], volumes: Iterable[PersistentVolume],
                         classes: Iterable[StorageClass], *, nodes: Iterable[Node] = (),
                         csi_nodes: Iterable[CSINode] = ()) -> tuple[tuple[Pod, ...], tuple[Node, ...]]:
    """``pods`` and ``nodes`` as the volumes see them: each pod with claims given what they ask of its node
    (`volume_requirements`: `SchedulingSpec.volume_terms` and `SchedulingSpec.volume_block`) and the attachments it
    requests of the drivers some CSINode limits (`attachments`), each node given its limit of those drivers'
    attachments as allocatable (its CSINode's count, else `UNLIMITED_ATTACHMENTS`); the others as they are."""
    by_key = {c.key: c for c in claims}
    by_name = {v.name: v for v in volumes}
    class_of = {c.name: c for c in classes}
    limits_of = {c.name: c.limits for c in csi_nodes}
    limited = frozenset(driver for limits in limits_of.values() for driver in limits)
    out: list[Pod] = []
    for pod in pods:
        if not pod.claims or pod.spec.volume_block:  # (a pod with DRA claims goes nowhere already)
            out.append(pod)
            continue
        terms, block = volume_requirements(pod, by_key, by_name, class_of)
        attached = attachments(pod, by_key, by_name, class_of, limited) if limited else {}
        if terms is None and not block and not attached:
            out.append(pod)
            continue
        spec = pod.spec
        given = _given(("spec", id(spec), terms, block, tuple(attached.items())), spec,
                       requests={**spec.requests, **attached}, volume_terms=terms, volume_block=block)
        out.append(replace(pod, spec=given))
    if not limited:
        return tuple(out), tuple(nodes)
    keys = sorted(limited)
    limited_nodes: list[Node] = []
    for node in nodes:
        own = limits_of.get(node.name, {})
        limits = tuple((attach_limit_key(d), own.get(d, UNLIMITED_ATTACHMENTS)) for d in keys)
        limited_nodes.append(_given(("node", id(node), limits), node, allocatable={**node.allocatable, **dict(limits)}))
    return tuple(out), tuple(limited_nodes)

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
  drops such a pod's volume requirements instead and moves it).

The volumes are read only when the input holds at least one PersistentVolumeClaim, PersistentVolume or StorageClass
(a live cluster's reads always do; a dump made without them is warned about by ``ebb.core.snapshot``): pods are then
given their `SchedulingSpec.volume_terms` once, by `with_volume_topology`, while the snapshot is assembled.

Pure: no I/O.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable
from dataclasses import replace

from ebb.core.model import (
    PersistentVolume,
    Pod,
    Requirement,
    SchedulingSpec,
    StorageClass,
    VolumeClaim,
)

Terms = tuple[tuple[Requirement, ...], ...]

#: a StorageClass whose claims are bound as soon as they are made, not when their first pod is scheduled: such a claim
#: unbound is refused by kube-scheduler (Karpenter's ``ValidatePersistentVolumeClaims`` too)
IMMEDIATE = "Immediate"


def volume_requirements(pod: Pod, claims: dict[str, VolumeClaim], volumes: dict[str, PersistentVolume],
                        classes: dict[str, StorageClass]) -> tuple[Terms | None, str]:
    """What ``pod``'s claims ask of its node: (the terms, one of which a node must meet, or None when they ask
    nothing; why no node may take it, "" when some may). ``claims`` by ``namespace/name``, ``volumes`` and
    ``classes`` by name."""
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


#: pods' specs given volume terms, by (the spec's id, the terms, the block), with the spec itself kept alive so that
#: its id is not reused: a running planner assembles a snapshot every pass, and a pod whose claims are unchanged
#: keeps one spec, whose compiled forms the simulator then finds again
_GIVEN: dict[tuple[int, Terms | None, str], tuple[SchedulingSpec, SchedulingSpec]] = {}
_GIVEN_LOCK = threading.Lock()
#: how many specs `_GIVEN` keeps before it starts again
_GIVEN_MAX = 50_000


def with_volume_topology(pods: Iterable[Pod], claims: Iterable[VolumeClaim], volumes: Iterable[PersistentVolume],
                         classes: Iterable[StorageClass]) -> tuple[Pod, ...]:
    """``pods``, each pod with claims given what they ask of its node (`volume_requirements`) in its spec's
    `SchedulingSpec.volume_terms` and `SchedulingSpec.volume_block`; the others as they are."""
    by_key = {c.key: c for c in claims}
    by_name = {v.name: v for v in volumes}
    class_of = {c.name: c for c in classes}
    out: list[Pod] = []
    for pod in pods:
        if not pod.claims:
            out.append(pod)
            continue
        terms, block = volume_requirements(pod, by_key, by_name, class_of)
        if terms is None and not block:
            out.append(pod)
            continue
        key = (id(pod.spec), terms, block)
        with _GIVEN_LOCK:
            hit = _GIVEN.get(key)
            if hit is None or hit[0] is not pod.spec:
                if len(_GIVEN) >= _GIVEN_MAX:
                    _GIVEN.clear()
                hit = _GIVEN[key] = (pod.spec, replace(pod.spec, volume_terms=terms, volume_block=block))
        out.append(replace(pod, spec=hit[1]))
    return tuple(out)


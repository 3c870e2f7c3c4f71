"""What a replacement node is: the Node object a launch creates for a command's replacement.

A replace command (and an expiration or drift that needs room) names its replacements as the simulation
sized them: a NodePool, instance types cheapest first, a capacity type and the zones the moved pods allow.
``launch_spec`` picks the cheapest instance type with an available offering of that capacity type in one of
those zones (the first such zone) and ``node_object`` writes the Node a launcher creates: the NodePool's
template labels, annotations and taints, the instance type's labels, Karpenter's well-known labels, the
NodePool's hash (so the new node is not drifted), and the capacity and allocatable (capacity less the
instance type's overhead) the simulation counted on. Names are derived from the decision, so a launch
repeated after a crash names the same node. Pure: values in, values out.

Next to a real Karpenter (the termination-executor's ``karpenter`` provider) a replacement is not a Node but a
``karpenter.sh/v1`` NodeClaim that Karpenter launches: ``nodeclaim_object`` writes it as Karpenter's own
provisioner would from the NodePool (its template's labels, annotations, nodeClassRef, taints, startupTaints,
expireAfter and terminationGracePeriod, the NodePool's hash, an owner reference to the NodePool), with
requirements that pin what the simulation chose (the instance types cheapest first, the capacity type, the
zones) and ebb's ``ebb.sh/decision-id`` annotation.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ebb.core.labels import made_up_labels, requirement_matches
from ebb.core.model import (
    ANNOTATION_DECISION_ID,
    ANNOTATION_NODEPOOL_HASH,
    ANNOTATION_NODEPOOL_HASH_VERSION,
    LABEL_INITIALIZED,
    LABEL_REGISTERED,
    NEW_NODE_DEFAULT_LABELS,
    InstanceType,
    NodePool,
    Offering,
)
from ebb.core.quantity import fmt_time

LABEL_NODEPOOL = "karpenter.sh/nodepool"
LABEL_CAPACITY_TYPE = "karpenter.sh/capacity-type"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_HOSTNAME = "kubernetes.io/hostname"
NODECLAIM_API_VERSION = "karpenter.sh/v1"
#: the requirements a replacement NodeClaim pins to what the simulation chose (the NodePool's own are dropped)
PINNED_REQUIREMENTS = (LABEL_INSTANCE_TYPE, LABEL_CAPACITY_TYPE, LABEL_ZONE)


class LaunchError(ValueError):
    """The replacement cannot be launched as asked (no such NodePool, no available offering)."""


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    name: str
    nodepool: str
    instance_type: str
    capacity_type: str
    zone: str
    price: float


def replacement_name(decision_id: str, index: int, nodepool: str) -> str:
    """The node name of a decision's ``index``-th replacement: the same on every attempt."""
    digest = hashlib.sha256(f"{decision_id}/{index}".encode()).hexdigest()[:10]
    return f"{nodepool}-{digest}"[:63]


def launch_spec(name: str, *, nodepool: str, instance_types: Sequence[str], capacity_type: str,
                zones: Sequence[str], catalog: Mapping[str, InstanceType]) -> LaunchSpec:
    """The cheapest option of a replacement that has an available offering (types are cheapest first)."""
    for type_name in instance_types:
        it = catalog.get(type_name)
        if it is None:
            continue
        offers = [o for o in it.offerings if o.available and o.capacity_type == capacity_type
                  and (not zones or o.zone in zones)]
        if offers:
            zone_order = {z: i for i, z in enumerate(zones)}
            best = min(offers, key=lambda o: (o.price, zone_order.get(o.zone, len(zone_order))))
            return LaunchSpec(name, nodepool, type_name, capacity_type, best.zone, best.price)
    raise LaunchError(f"none of {', '.join(instance_types) or 'no types'} has an available {capacity_type} "
                      f"offering in {', '.join(zones) or 'any zone'}")


def _quantity(resource: str, value: int) -> str:
    return f"{value}m" if resource == "cpu" else str(value)


def allocatable_of(instance_type: InstanceType) -> dict[str, str]:
    """The instance type's allocatable resources as Kubernetes quantities: its capacity less its overhead and its
    huge pages (`InstanceType.allocatable`)."""
    return {r: _quantity(r, max(0, v)) for r, v in sorted(instance_type.allocatable().items())}


#: labels a NodePool's requirement never gives a node by itself: the instance type and offering decide them
_OFFERING_LABELS = frozenset({LABEL_INSTANCE_TYPE, LABEL_ZONE, LABEL_CAPACITY_TYPE, "kubernetes.io/arch",
                              "kubernetes.io/os", LABEL_NODEPOOL, LABEL_HOSTNAME})


def requirement_labels(pool: NodePool, instance_type: InstanceType,
                       chosen: Mapping[str, str] | None = None) -> dict[str, str]:
    """The labels a node of ``pool`` takes from the NodePool's ``In`` requirements on its own keys (not the instance
    type's or the offering's, nor the template's labels): the value ``chosen`` gives (a replacement's ``labels``:
    what the pods it is for need), else the requirement's first, as the scheduling simulation has it and as
    Karpenter labels a NodeClaim with a value of each such requirement; and of each key they require without naming
    a value (``Exists``, ``NotIn``, ``Gt``, ...), the value made up for it (`made_up_labels`)."""
    chosen = chosen or {}
    out: dict[str, str] = {}
    for req in pool.requirements:
        key = req.key
        if (req.operator != "In" or not req.values or key in _OFFERING_LABELS or key in instance_type.labels
                or key in pool.labels or key in out):
            continue
        value = chosen.get(key)
        out[key] = value if value is not None and value in req.values else req.values[0]
    # a key required without a value named (Exists, NotIn, Gt, ...): the value the simulation gave the node
    made_up = made_up_labels(pool, (*_OFFERING_LABELS, *instance_type.labels))
    return {**made_up, **out}


def offering_for(instance_type: InstanceType, pool: NodePool, capacity_type: str, zones: Iterable[str], *,
                 chosen: Mapping[str, str] | None = None, available_only: bool = False) -> Offering | None:
    """The offering a launch of ``instance_type`` as ``capacity_type`` in one of ``zones`` takes: the cheapest (then by
    zone) of those whose own labels (a capacity reservation's id) the NodePool's requirements and the replacement's
    ``chosen`` labels admit, else of any of them; None when there is none. Another reservation's offering of the same
    price would label the node with a value its NodePool no longer admits, and drift would replace it again."""
    zones = set(zones)
    fitting = [o for o in instance_type.offerings if o.capacity_type == capacity_type and o.zone in zones
               and (o.available or not available_only)]
    chosen = chosen or {}

    def admitted(offering: Offering) -> bool:
        labels = dict(offering.labels)
        return all(requirement_matches(r, labels) for r in pool.requirements if r.key in labels) and all(
            labels.get(key, value) == value for key, value in chosen.items())

    return min((o for o in fitting if admitted(o)), default=None, key=lambda o: (o.price, o.zone)) or min(
        fitting, default=None, key=lambda o: (o.price, o.zone))


def node_object(spec: LaunchSpec, *, pool: NodePool, instance_type: InstanceType, now: datetime,
                provider_id: str = "", initialized: bool = False,
                chosen: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The kubectl-shaped Node of a launch (not yet Ready: the launcher's world makes it so), labelled with the
    NodePool's requirements' values (`requirement_labels`: ``chosen`` are the replacement's)."""
    offering = offering_for(instance_type, pool, spec.capacity_type, (spec.zone,), chosen=chosen)
    labels: dict[str, str] = {**NEW_NODE_DEFAULT_LABELS, **instance_type.labels,
                              **requirement_labels(pool, instance_type, chosen), **pool.labels,
                              **dict(offering.labels if offering is not None else ())}
    labels.update({
        # the NodePool's and NodeClass's (karpenter.sh/initialized only once the node is Ready)
        **{key: value for key, value in pool.template_labels.items() if key != LABEL_INITIALIZED},
        LABEL_NODEPOOL: pool.name,
        LABEL_CAPACITY_TYPE: spec.capacity_type,
        LABEL_INSTANCE_TYPE: spec.instance_type,
        LABEL_ZONE: spec.zone,
        LABEL_HOSTNAME: spec.name,
        LABEL_REGISTERED: "true",
        "kubernetes.io/os": instance_type.os_under(pool.requirements),
    })
    if initialized:
        labels[LABEL_INITIALIZED] = "true"
    annotations = dict(pool.annotations)
    if pool.hash is not None:
        annotations[ANNOTATION_NODEPOOL_HASH] = pool.hash
    if pool.hash_version is not None:
        annotations[ANNOTATION_NODEPOOL_HASH_VERSION] = pool.hash_version
    capacity = {r: _quantity(r, v) for r, v in sorted(instance_type.capacity.items())}
    allocatable = allocatable_of(instance_type)
    spec_: dict[str, Any] = {"providerID": provider_id or f"ebb:///{spec.zone}/{spec.name}"}
    taints = [{"key": t.key, "value": t.value, "effect": t.effect} if t.value else {"key": t.key, "effect": t.effect}
              for t in (*pool.taints, *pool.startup_taints)]
    if taints:
        spec_["taints"] = taints
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels, "annotations": annotations,
                     "creationTimestamp": fmt_time(now)},
        "spec": spec_,
        "status": {"capacity": capacity, "allocatable": allocatable,
                   "conditions": [{"type": "Ready", "status": "False", "reason": "Launching"}]},
    }


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def nodeclaim_object(name: str, *, nodepool: Mapping[str, Any], instance_types: Sequence[str], capacity_type: str,
                     zones: Sequence[str], decision_id: str,
                     requests: Mapping[str, str] | None = None,
                     chosen: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``karpenter.sh/v1`` NodeClaim of a replacement, from its NodePool object (kubectl-shaped, as the API
    server returns it), as Karpenter's provisioner writes one: the template's labels and annotations, the
    ``karpenter.sh/nodepool`` label and the NodeClass label, the NodePool's hash, the template's nodeClassRef,
    taints, startupTaints, expireAfter and terminationGracePeriod, and the template's requirements with the
    instance type, capacity type and zone replaced by ``instance_types`` (cheapest first), ``capacity_type``
    and ``zones`` (the instance type and the zone keeping their ``minValues``, at most as many as they list).
    ``requests`` (resource -> quantity) become ``spec.resources.requests`` when given. ``chosen`` (a replacement's
    ``labels``) narrows the template's requirement of each of its keys to that value and labels the claim with it, as
    Karpenter's scheduler narrows a requirement to what the pods need.
    LaunchError when the NodePool has no nodeClassRef (Karpenter could not launch the claim)."""
    meta = _mapping(nodepool.get("metadata"))
    pool = str(meta.get("name") or "")
    template = _mapping(_mapping(nodepool.get("spec")).get("template"))
    template_meta, template_spec = _mapping(template.get("metadata")), _mapping(template.get("spec"))
    ref = _mapping(template_spec.get("nodeClassRef"))
    if not ref.get("kind") or not ref.get("name"):
        raise LaunchError(f"NodePool {pool} has no spec.template.spec.nodeClassRef")
    labels = {str(k): str(v) for k, v in _mapping(template_meta.get("labels")).items()}
    labels[LABEL_NODEPOOL] = pool
    labels[f"{ref.get('group') or ''}/{str(ref['kind']).lower()}"] = str(ref["name"])
    annotations = {str(k): str(v) for k, v in _mapping(template_meta.get("annotations")).items()}
    pool_annotations = _mapping(meta.get("annotations"))
    for key in (ANNOTATION_NODEPOOL_HASH, ANNOTATION_NODEPOOL_HASH_VERSION):
        if key in pool_annotations:
            annotations[key] = str(pool_annotations[key])
    annotations[ANNOTATION_DECISION_ID] = decision_id
    kept = [copy.deepcopy(dict(r)) for r in template_spec.get("requirements") or []
            if isinstance(r, Mapping) and r.get("key") not in PINNED_REQUIREMENTS]
    for requirement in kept:
        value = (chosen or {}).get(str(requirement.get("key")))
        if value is not None and requirement.get("operator") == "In" and value in (requirement.get("values") or []):
            requirement["values"] = [value]
            requirement.pop("minValues", None)
            labels[str(requirement["key"])] = value
    pinned = [{"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": list(instance_types)},
              {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": [capacity_type]},
              {"key": LABEL_ZONE, "operator": "In", "values": list(zones)}]
    # the instance type and the zone keep the template's minValues (Karpenter's NodeClaims carry them; its own check
    # of the launch needs them), no more than the values listed: the NodeClaim CRD refuses an `In` with fewer values
    # than its minValues, and the zones counted are each type's (`filter_replacement`), not the ones a replacement
    # launches in; the capacity type none, as Karpenter writes it (`NodeClaimTemplate.ToNodeClaim`)
    floors = {str(r.get("key")): r["minValues"] for r in template_spec.get("requirements") or []
              if isinstance(r, Mapping) and r.get("key") in (LABEL_INSTANCE_TYPE, LABEL_ZONE)
              and isinstance(r.get("minValues"), int)}
    for requirement in pinned:
        if requirement["key"] in floors:
            requirement["minValues"] = min(floors[requirement["key"]], len(requirement["values"]))
    spec: dict[str, Any] = {"nodeClassRef": dict(ref), "requirements": [*kept, *pinned]}
    for key in ("taints", "startupTaints", "expireAfter", "terminationGracePeriod"):
        if template_spec.get(key) is not None:
            spec[key] = copy.deepcopy(template_spec[key])
    if requests:
        spec["resources"] = {"requests": dict(requests)}
    metadata: dict[str, Any] = {"name": name, "labels": labels, "annotations": annotations}
    if meta.get("uid"):
        # owned by its NodePool, as Karpenter's own NodeClaims are (deleting the NodePool deletes it)
        metadata["ownerReferences"] = [{"apiVersion": str(nodepool.get("apiVersion") or NODECLAIM_API_VERSION),
                                        "kind": "NodePool", "name": pool, "uid": str(meta["uid"])}]
    return {"apiVersion": NODECLAIM_API_VERSION, "kind": "NodeClaim", "metadata": metadata, "spec": spec}

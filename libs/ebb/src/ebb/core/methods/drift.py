"""Drift: nodes that no longer match their NodePool are replaced (respecting the Drifted budget).

A node has drifted when (1) its karpenter.sh/nodepool-hash differs from its NodePool's, both carrying the
same karpenter.sh/nodepool-hash-version (a static field of the template changed), (2) its labels no longer satisfy
the NodePool's requirements (dynamic fields: widening `In [a]` to `In [a, b]` is not drift), (3) its instance type is no
longer offered in its zone and capacity type (an offering that is only unavailable now still counts, as in
Karpenter; a node without an instance-type label has none), or (4) its NodeClaim already says Drifted. (1), (2) and
(3) read the node's NodeClaim, as Karpenter does: its hash annotations when it carries the hash, its labels over the
Node's (the Node's fill in a label the NodeClaim lacks); a node without a NodeClaim is read on itself. Behavioural
fields (weight, limits, disruption) never drift because they are not part of the hash. A command goes stale
when its node no longer drifts. A static NodePool's drifted nodes are replaced one for one, each in its own
command, so the pool keeps ``spec.replicas`` nodes (Karpenter's StaticDrift); the others are rotated together.
"""

from __future__ import annotations

from ebb.core.causes import BlockCause, Cause, Stale, StaleCause
from ebb.core.cluster import ClusterView
from ebb.core.labels import absent_label_admitted, requirement_matches
from ebb.core.memo import Memo
from ebb.core.methods.base import Method, MethodOutcome, PassContext
from ebb.core.methods.rotation import rotate_keeping_static
from ebb.core.model import (
    ANNOTATION_NODEPOOL_HASH,
    ANNOTATION_NODEPOOL_HASH_VERSION,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_ZONE,
    InstanceType,
    Node,
    NodeClaim,
    NodePool,
    Requirement,
)
from ebb.core.node_pods import KEEP_AT_MOST
from ebb.core.simulator.constraints import same_objects

NAME = "drift"
REASON = "Drifted"


def drift_reason(view: ClusterView, node: Node, pool: NodePool) -> str | None:
    claim = view.claim_of(node)
    # as Karpenter's areStaticFieldsDrifted and areRequirementsDrifted, the NodeClaim's hash and labels: Karpenter
    # re-stamps the NodeClaim's hash when the hash version changes (the Node keeps the copy it registered with), and a
    # hand-set Node label is not what the node was launched as. What the NodeClaim does not say (no hash annotation, a
    # label it lacks: a hand-written NodeClaim) is read on the Node, as for a node without a NodeClaim
    stamped = claim if claim is not None and ANNOTATION_NODEPOOL_HASH in claim.annotations else None
    annotations = stamped.annotations if stamped is not None else node.annotations
    node_hash = annotations.get(ANNOTATION_NODEPOOL_HASH)
    node_version = annotations.get(ANNOTATION_NODEPOOL_HASH_VERSION)
    # as Karpenter's areStaticFieldsDrifted: only when both carry a hash and the same hash version (a version
    # missing on either side, or different, says nothing: Karpenter re-stamps the hash when its version changes); an
    # annotation is carried when it is there, empty or not, as Karpenter looks it up
    if (pool.hash is not None and node_hash is not None and pool.hash_version is not None
            and node_version == pool.hash_version and node_hash != pool.hash):
        whose = f"its NodeClaim {stamped.name}'s" if stamped is not None else "its"
        return (f"drifted: {whose} nodepool-hash {node_hash} differs from NodePool {pool.name}'s {pool.hash} "
                "(the NodePool template changed)")
    claim_labels = claim.labels if claim is not None else {}
    labels = {**node.labels, **claim_labels} if claim_labels else node.labels
    for req in pool.requirements:
        if not requirement_matches(req, labels):
            have = labels.get(req.key)
            if have is None and absent_label_admitted(pool.requirements, req.key):
                continue  # their intersection is a NotIn (Exists with NotIn [blue]), which a missing label meets
            values = f" {list(req.values)}" if req.values else ""
            requirement = f"NodePool {pool.name}'s requirement {req.key} {req.operator}{values}"
            if have is None:
                return f"drifted: it has no {req.key} label, which {requirement} needs"
            if req.key in claim_labels and claim is not None:
                shown = f"NodeClaim {claim.name}'s {req.key}={have}"
            else:
                shown = f"{req.key}={have}"
            return f"drifted: its {shown} no longer satisfies {requirement}"
    # as Karpenter's instanceTypeNotFound, the instance type, zone and capacity type the NodeClaim was launched as
    # (the same labels as the requirements above: a label the NodeClaim lacks is read on the Node)
    # (a label it has on neither says nothing: any zone, any capacity type, as Karpenter's requirements from labels)
    launched = (labels.get(LABEL_INSTANCE_TYPE), labels.get(LABEL_ZONE), labels.get(LABEL_CAPACITY_TYPE))
    if not view.offered(*launched):
        instance_type, zone, capacity_type = launched
        if instance_type is None:
            return f"drifted: it has no {LABEL_INSTANCE_TYPE} label (no offered instance type is found for it)"
        on_node = (node.instance_type, node.zone, node.capacity_type)
        whose = (f" (its NodeClaim {claim.name}'s labels; the Node's say {on_node[0]}, {on_node[2]} in {on_node[1]})"
                 if claim is not None and on_node != launched else "")
        if instance_type not in view.types:
            return f"drifted: instance type {instance_type} is not in the catalog (it is offered nowhere){whose}"
        where = (f" as {capacity_type}" if capacity_type else "") + (f" in {zone}" if zone else "")
        return f"drifted: instance type {instance_type} is no longer offered{where}{whose}"
    if claim is not None and claim.drifted:
        return f"drifted: its NodeClaim {claim.name} has condition Drifted=True"
    return None


#: each node's last verdict (`drift_reason`) with what it was found from: the Node, its NodePool's name, hash, hash
#: version and requirements, its NodeClaim, and the catalog's generation (`_catalog_generation`); by node name
_VERDICTS: Memo[str, tuple[Node, str, str | None, str | None, tuple[Requirement, ...], NodeClaim | None, int,
                           str | None]] = Memo(KEEP_AT_MOST)
#: the last catalog seen (its instance types and where it came from) and its generation, raised when it changes
_CATALOG: list[tuple[tuple[InstanceType, ...], str, int]] = [((), "", 0)]


def _catalog_generation(view: ClusterView) -> int:
    """A number that stays the same while the view's catalog is the last one's (the same InstanceType objects, from
    the same source): an unchanged type is the same object pass after pass, so a verdict found against the last
    catalog holds against this one."""
    types, source = view.snapshot.instance_types, view.snapshot.catalog_source
    kept_types, kept_source, generation = _CATALOG[0]  # one tuple: read whole though another thread may replace it
    if kept_source == source and same_objects(kept_types, types):
        return generation
    generation += 1
    _CATALOG[0] = (types, source, generation)
    return generation


def drifted_nodes(view: ClusterView) -> dict[str, str]:
    """Every drifted node of ``view`` with why (the rules need the view only, not a pass's simulation), found once
    per view (read-only: callers copy what they change). A node's verdict is kept with the frozen objects it was
    found from and taken again while they are the same objects (`_VERDICTS`): most nodes of a pass are as they were
    the pass before."""
    if view.drifted is not None:
        return view.drifted
    out: dict[str, str] = {}
    catalog = _catalog_generation(view)
    for node in view.snapshot.nodes:
        pool = view.pools.get(node.nodepool or "")
        if pool is None:
            continue
        claim = view.claim_of(node)  # by status.nodeName or status.providerID
        kept = _VERDICTS.get(node.name)
        if (kept is not None and kept[0] is node and kept[1] == pool.name and kept[2] == pool.hash
                and kept[3] == pool.hash_version and kept[4] is pool.requirements and kept[5] is claim
                and kept[6] == catalog):
            why = kept[7]
        else:
            why = drift_reason(view, node, pool)
            _VERDICTS.keep(node.name, (node, pool.name, pool.hash, pool.hash_version, pool.requirements, claim,
                                       catalog, why))
        if why:
            out[node.name] = why
    view.drifted = out
    return out


def run(ctx: PassContext) -> MethodOutcome:
    """Drifted nodes of static NodePools are replaced one for one first (Karpenter's StaticDrift, which its
    method order puts before Drift), then the others are rotated with what is left of the Drifted budgets
    (`rotate_keeping_static`)."""
    view, wanted = ctx.view, drifted_nodes(ctx.view)
    closed = view.no_pool_launches()
    if closed is None:
        return rotate_keeping_static(ctx, NAME, REASON, wanted)
    # no NodePool may open a node: Karpenter's drift returns the scheduler's error on its first candidate, static
    # drift replaces static NodePools' nodes still
    static = {n: why for n, why in wanted.items() if view.pools[view.nodes[n].nodepool or ""].replicas is not None}
    out = rotate_keeping_static(ctx, NAME, REASON, static)
    for name, why in wanted.items():
        if name not in static and name not in ctx.excluded:
            out.blocked[name] = BlockCause(Cause.DUE_BUT, {"due": why},
                                           view.blocked_reason(name, consolidation=False) or closed)
    return out


def validate(view: ClusterView, node: Node) -> StaleCause | None:
    if drift_reason(view, node, view.pools[node.nodepool or ""]) is None:
        return StaleCause(Stale.NO_LONGER_DRIFTED, {"node": node.name})
    return None


METHOD = Method(NAME, REASON, consolidation=False, run=run, validate=validate)

"""Drift: nodes that no longer match their NodePool are replaced (respecting the Drifted budget).

A node has drifted when (1) its karpenter.sh/nodepool-hash differs from its NodePool's at the same hash
version (a static field of the template changed), (2) its labels no longer satisfy the NodePool's
requirements (dynamic fields: widening `In [a]` to `In [a, b]` is not drift), (3) its instance type is no
longer offered in its zone and capacity type (an offering that is only unavailable now still counts, as in
Karpenter), or (4) its NodeClaim already says Drifted. Behavioural
fields (weight, limits, disruption) never drift because they are not part of the hash. A command goes stale
when its node no longer drifts.
"""

from __future__ import annotations

from ebb.core.causes import Stale, StaleCause
from ebb.core.cluster import ClusterView
from ebb.core.labels import requirement_matches
from ebb.core.methods.base import Method, MethodOutcome, PassContext
from ebb.core.methods.rotation import rotate
from ebb.core.model import ANNOTATION_NODEPOOL_HASH, ANNOTATION_NODEPOOL_HASH_VERSION, Node, NodePool

NAME = "drift"
REASON = "Drifted"


def drift_reason(view: ClusterView, node: Node, pool: NodePool) -> str | None:
    node_hash = node.annotations.get(ANNOTATION_NODEPOOL_HASH)
    node_version = node.annotations.get(ANNOTATION_NODEPOOL_HASH_VERSION)
    if pool.hash and node_hash and node_version == pool.hash_version and node_hash != pool.hash:
        return (f"drifted: its nodepool-hash {node_hash} differs from NodePool {pool.name}'s {pool.hash} "
                "(the NodePool template changed)")
    for req in pool.requirements:
        if not requirement_matches(req, node.labels):
            have = node.labels.get(req.key)
            shown = f"{req.key}={have}" if have is not None else f"no {req.key} label"
            values = f" {list(req.values)}" if req.values else ""
            return (f"drifted: its {shown} no longer satisfies NodePool {pool.name}'s requirement "
                    f"{req.key} {req.operator}{values}")
    if not view.offered(node):
        return (f"drifted: instance type {node.instance_type} is no longer offered as {node.capacity_type} "
                f"in {node.zone}")
    claim = view.claims.get(node.name)
    if claim is not None and claim.drifted:
        return f"drifted: its NodeClaim {claim.name} has condition Drifted=True"
    return None


def drifted_nodes(view: ClusterView) -> dict[str, str]:
    """Every drifted node of ``view`` with why (the rules need the view only, not a pass's simulation)."""
    out: dict[str, str] = {}
    for node in view.snapshot.nodes:
        pool = view.pools.get(node.nodepool or "")
        if pool is None:
            continue
        why = drift_reason(view, node, pool)
        if why:
            out[node.name] = why
    return out


def run(ctx: PassContext) -> MethodOutcome:
    return rotate(ctx, NAME, REASON, drifted_nodes(ctx.view))


def validate(view: ClusterView, node: Node) -> StaleCause | None:
    if drift_reason(view, node, view.pools[node.nodepool or ""]) is None:
        return StaleCause(Stale.NO_LONGER_DRIFTED, {"node": node.name})
    return None


METHOD = Method(NAME, REASON, consolidation=False, run=run, validate=validate)

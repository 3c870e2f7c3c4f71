"""Expiration: nodes older than their NodePool's expireAfter are replaced (respecting the Expired budget).

`spec.template.spec.expireAfter` (v1), or the older `spec.disruption.expireAfter`, else Karpenter's CRD default
720h (the explanation then says it is the default), or the NodePool's DisruptionPolicy's `spec.expireAfter` (no
default); `Never` disables it.
Replacements are launched first when the pods need them; several nodes per pass, simulated together. A static
NodePool's expired nodes are each replaced by one node of the pool, so it keeps ``spec.replicas`` nodes.
A command goes stale when its node is no longer expired (its NodePool's expireAfter grew, or became Never).
"""

from __future__ import annotations

from ebb.core.causes import Stale, StaleCause
from ebb.core.cluster import ClusterView
from ebb.core.methods.base import Method, MethodOutcome, PassContext
from ebb.core.methods.rotation import rotate_keeping_static
from ebb.core.model import Node, NodePool
from ebb.core.quantity import fmt_time, format_duration

NAME = "expiration"
REASON = "Expired"


def expiry_reason(view: ClusterView, node: Node, pool: NodePool) -> str | None:
    """Why the node has expired (its age against its NodePool's expireAfter), or None. The age is measured from
    its NodeClaim's creation when it has one, as Karpenter's expiration does (`ClusterView.launched`)."""
    launched = view.launched(node)
    if pool.expire_after is None or launched is None:
        return None
    age = (view.now - launched).total_seconds()
    if age < pool.expire_after:
        return None
    default = " (Karpenter's CRD default: it sets none)" if pool.expire_after_default else ""
    return (f"expired: launched {fmt_time(launched)}, {format_duration(age)} ago, "
            f"past {pool.policy_source}'s expireAfter {format_duration(pool.expire_after)}{default}")


def expired_nodes(view: ClusterView) -> dict[str, str]:
    """Every expired node of ``view`` with why (the rule needs the view only, not a pass's simulation)."""
    out: dict[str, str] = {}
    for node in view.snapshot.nodes:
        pool = view.pools.get(node.nodepool or "")
        why = expiry_reason(view, node, pool) if pool is not None else None
        if why:
            out[node.name] = why
    return out


def run(ctx: PassContext) -> MethodOutcome:
    """Expired nodes of static NodePools replaced one for one, the others rotated together (`rotate_keeping_static`)."""
    return rotate_keeping_static(ctx, NAME, REASON, expired_nodes(ctx.view))


def validate(view: ClusterView, node: Node) -> StaleCause | None:
    if expiry_reason(view, node, view.pools[node.nodepool or ""]) is None:
        return StaleCause(Stale.NO_LONGER_EXPIRED, {"node": node.name})
    return None


METHOD = Method(NAME, REASON, consolidation=False, run=run, validate=validate)

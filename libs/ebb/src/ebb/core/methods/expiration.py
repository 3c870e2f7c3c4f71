"""Expiration: nodes older than their NodePool's expireAfter are replaced (respecting the Expired budget).

`spec.template.spec.expireAfter` (v1), or the older `spec.disruption.expireAfter`; `Never` disables it.
Replacements are launched first when the pods need them; several nodes per pass, simulated together.
"""

from __future__ import annotations

from ebb.core.cluster import fmt_time
from ebb.core.methods.base import MethodOutcome, PassContext
from ebb.core.methods.rotation import rotate
from ebb.core.quantity import format_duration

NAME = "expiration"
REASON = "Expired"


def expired_nodes(ctx: PassContext) -> dict[str, str]:
    view = ctx.view
    out: dict[str, str] = {}
    for node in view.snapshot.nodes:
        pool = view.pools.get(node.nodepool or "")
        if pool is None or pool.expire_after is None or node.creation_time is None:
            continue
        age = (ctx.now - node.creation_time).total_seconds()
        if age >= pool.expire_after:
            out[node.name] = (f"expired: launched {fmt_time(node.creation_time)}, {format_duration(age)} ago, "
                              f"past NodePool {pool.name}'s expireAfter {format_duration(pool.expire_after)}")
    return out


def run(ctx: PassContext) -> MethodOutcome:
    return rotate(ctx, NAME, REASON, expired_nodes(ctx))

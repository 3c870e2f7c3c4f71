"""Who may be consolidated (Underutilized) at all; shared by the multi-node and single-node methods."""

from __future__ import annotations

from ebb.core.methods.base import MethodOutcome, PassContext, budget_block

REASON = "Underutilized"


def candidates(ctx: PassContext, out: MethodOutcome) -> list[str]:
    """Consolidation candidates in disruption-cost order; excluded ones get their reason in `out`."""
    view = ctx.view
    names: list[str] = []
    for node in view.snapshot.nodes:
        name = node.name
        if not view.movable[name] or name in view.not_candidate or name in ctx.excluded:
            continue
        pool = view.pools[node.nodepool or ""]
        blocked = view.blocked_reason(name, consolidation=True)
        if blocked:
            out.blocked[name] = blocked
            continue
        if pool.consolidation_policy != "WhenEmptyOrUnderutilized":
            out.blocked[name] = (f"NodePool {pool.name}'s consolidationPolicy is {pool.consolidation_policy}: "
                                 "only empty nodes are consolidated")
            continue
        if pool.consolidate_after is None:
            out.blocked[name] = f"NodePool {pool.name}'s consolidateAfter is Never"
            continue
        paused = view.paused(node)
        if paused:
            out.blocked[name] = f"consolidation is paused by {paused}"
            continue
        not_yet = view.stable_for(node, pool.consolidate_after)
        if not_yet:
            out.blocked[name] = not_yet
            continue
        if ctx.budget_left(pool.name, REASON) <= 0:
            out.blocked[name] = budget_block(ctx, pool.name, REASON)
            out.budget_only.add(name)
            continue
        names.append(name)
    return view.order(names)

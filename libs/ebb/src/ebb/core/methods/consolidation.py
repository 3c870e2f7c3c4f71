"""Who may be consolidated at all: the gate shared by emptiness and the two consolidation methods.

A node passes when nothing blocks it (do-not-disrupt, PDBs, do-not-consolidate, ...), its NodePool's
consolidateAfter is not Never, no hold or stabilization window pauses it, it has been stable for
consolidateAfter, and the budget for the reason has room.
"""

from __future__ import annotations

from ebb.core.methods.base import MethodOutcome, PassContext, budget_block
from ebb.core.model import Node, NodePool

REASON = "Underutilized"


def gate(ctx: PassContext, node: Node, pool: NodePool, reason: str) -> tuple[str | None, bool]:
    """(why the node may not be consolidated now, or None; whether the budget alone stops it)."""
    view = ctx.view
    blocked = view.blocked_reason(node.name, consolidation=True)
    if blocked:
        return blocked, False
    if pool.consolidate_after is None:
        return f"NodePool {pool.name}'s consolidateAfter is Never", False
    paused = view.paused(node)
    if paused:
        return f"consolidation is paused by {paused}", False
    not_yet = view.stable_for(node, pool.consolidate_after)
    if not_yet:
        return not_yet, False
    if ctx.budget_left(pool.name, reason) <= 0:
        return budget_block(ctx, pool.name, reason), True
    return None, False


def candidates(ctx: PassContext, out: MethodOutcome) -> list[str]:
    """Underutilized candidates in disruption-cost order; excluded ones get their reason in `out`."""
    view = ctx.view
    names: list[str] = []
    for node in view.snapshot.nodes:
        name = node.name
        if not view.movable[name] or name in view.not_candidate or name in ctx.excluded:
            continue
        pool = view.pools[node.nodepool or ""]
        if pool.consolidation_policy != "WhenEmptyOrUnderutilized" and not view.blocked_reason(name, True):
            out.blocked[name] = (f"NodePool {pool.name}'s consolidationPolicy is {pool.consolidation_policy}: "
                                 "only empty nodes are consolidated")
            continue
        why, budget_only = gate(ctx, node, pool, REASON)
        if why:
            out.blocked[name] = why
            if budget_only:
                out.budget_only.add(name)
            continue
        names.append(name)
    return view.order(names)

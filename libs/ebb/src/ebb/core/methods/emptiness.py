"""Emptiness: nodes with no pods that need a home, empty for consolidateAfter, are deleted together.

DaemonSet, mirror/static and finished pods do not count. All empty candidates go in one command,
capped per NodePool by the Empty budget; holds and stabilization windows pause it.
"""

from __future__ import annotations

from ebb.core.methods.base import Command, MethodOutcome, PassContext, budget_block

NAME = "emptiness"
REASON = "Empty"


def run(ctx: PassContext) -> MethodOutcome:
    out = MethodOutcome()
    view = ctx.view
    taken: list[str] = []
    empty = [n.name for n in view.snapshot.nodes
             if not view.movable[n.name] and n.name not in view.not_candidate and n.name not in ctx.excluded]
    for name in view.order(empty):
        node = view.nodes[name]
        pool = view.pools[node.nodepool or ""]
        blocked = view.blocked_reason(name, consolidation=True)
        if blocked:
            out.blocked[name] = f"empty, but {blocked}"
            continue
        if pool.consolidate_after is None:
            out.blocked[name] = f"empty, but NodePool {pool.name}'s consolidateAfter is Never"
            continue
        paused = view.paused(node)
        if paused:
            out.blocked[name] = f"empty, but consolidation is paused by {paused}"
            continue
        not_yet = view.stable_for(node, pool.consolidate_after)
        if not_yet:
            out.blocked[name] = f"empty, but {not_yet}"
            continue
        if ctx.budget_left(pool.name, REASON) <= 0:
            out.blocked[name] = f"empty, but {budget_block(ctx, pool.name, REASON)}"
            continue
        ctx.consume(pool.name, REASON)
        taken.append(name)
    if taken:
        out.commands.append(Command(NAME, REASON, "delete", tuple(taken), (), sum(view.price[n] for n in taken),
                                    {}, "; ".join(f"{n}: no pods need rescheduling" for n in taken)))
    return out

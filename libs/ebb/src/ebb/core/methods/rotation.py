"""Replacing a set of nodes together (expiration and drift): the shared mechanics.

Both methods may act on several nodes in one pass, up to the budget for their reason, and simulate
the nodes jointly: each accepted node's pods are placed with the earlier ones already gone, launching
as many replacement nodes as needed. A node whose pods cannot be placed anywhere is left, with why (a
`DUE_BUT` cause: why the method wants it, but why it stays).

The command is then built from the set simulated as validation simulates it (every node removed at once,
all their pods placed together): node by node and all at once pack differently, and a command whose
replacements validation finds dearer on the very snapshot it came from would be proposed and rejected on
every pass. If the whole set does not fit at once, the last nodes are left out until it does.
"""

from __future__ import annotations

from ebb.core.causes import BlockCause, Cause
from ebb.core.methods.base import (
    Command,
    MethodOutcome,
    PassContext,
    Replacement,
    budget_block,
    held_words,
    leaving,
)
from ebb.core.simulator.results import NewNode


def rotate(ctx: PassContext, method: str, reason: str, wanted: dict[str, str]) -> MethodOutcome:
    """`wanted`: node -> why it should go (e.g. "expired ..."). Returns one command for the nodes taken."""
    out = MethodOutcome()
    view, state = ctx.view, ctx.state
    start = state.mark()
    taken: list[str] = []
    used: dict[str, int] = {}
    for name in view.order([n for n in wanted if n not in ctx.excluded]):
        node = view.nodes[name]
        due = {"due": wanted[name]}
        blocked = view.blocked_reason(name, consolidation=False)
        if blocked:
            out.blocked[name] = BlockCause(Cause.DUE_BUT, due, blocked)
            continue
        pool = node.nodepool or ""
        if ctx.budget_left(pool, reason) - used.get(pool, 0) <= 0:
            out.blocked[name] = BlockCause(Cause.DUE_BUT, due, budget_block(ctx, pool, reason))
            continue
        mark = state.mark()
        moved, _held = leaving(view, state, (name,))
        failures, _ = state.place_all(moved, max_new=10**6, first_failure=True)
        if failures:
            state.rollback(mark)
            pod, why = next(iter(failures.items()))
            out.blocked[name] = BlockCause(Cause.DUE_BUT, due, BlockCause(Cause.POD_NOWHERE_TO_GO,
                                                                          {"pod": pod, "why": why}))
            continue
        used[pool] = used.get(pool, 0) + 1
        taken.append(name)
    state.rollback(start)
    while taken:
        command = _jointly(ctx, method, reason, wanted, taken)
        if command is not None:
            for name in taken:
                ctx.consume(view.nodes[name].nodepool or "", reason)
            out.commands.append(command)
            break
        taken.pop()
    return out


def _jointly(ctx: PassContext, method: str, reason: str, wanted: dict[str, str], taken: list[str]) -> Command | None:
    """The command that replaces ``taken``, simulated as validation simulates it: every node removed at once and
    all their pods placed together, with as many replacements as needed; None when a pod fits nowhere."""
    view, state = ctx.view, ctx.state
    mark = state.mark()
    try:
        moved, held = leaving(view, state, taken)
        failures, _ = state.place_all(moved, max_new=10**6, first_failure=True)
        if failures:
            return None
        new_nodes: list[NewNode] = state.new_nodes()
        replacements = tuple(Replacement(n.nodepool, n.instance_types, n.capacity_type, n.zones, n.price,
                                         n.hostname, n.labels) for n in new_nodes)
        savings = sum(view.price[n] for n in taken) - sum(r.price for r in replacements)
        placements = {p.key: state.bin_name(state.placed[p.key]) for p in moved if p.key in state.placed}
        explanation = "; ".join(f"{n}: {wanted[n]}" for n in taken) + held_words(held)
        return Command(method, reason, "replace" if replacements else "delete", tuple(taken), replacements,
                       savings, placements, explanation)
    finally:
        state.rollback(mark)

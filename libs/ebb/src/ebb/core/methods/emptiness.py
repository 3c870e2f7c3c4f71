"""Emptiness: nodes with no pods that need a home, empty for consolidateAfter, are deleted together.

DaemonSet, mirror/static and finished pods do not count. All empty candidates go in one command, capped per
NodePool by the Empty budget and its ``demandWindow``; holds and stabilization windows pause it. A command
goes stale when a node is no longer consolidatable (`still_consolidatable`) or pods arrived on it.

An empty node the pass's base simulation counts on is not taken: pending pods and the pods of nodes being
disrupted are placed first (`simulation`), and when some of them have nowhere else to go once the node is gone
it stays, "nominated" for them (Karpenter's provisioner nominates such a node and its disruption leaves it
alone). Validation removes the command's nodes and places those pods again, so a pass that ignored them
proposed commands its own validation rejected on the same snapshot.
"""

from __future__ import annotations

from ebb.core.causes import BlockCause, Cause, Stale, StaleCause
from ebb.core.cluster import ClusterView
from ebb.core.methods.base import Command, Method, MethodOutcome, PassContext
from ebb.core.methods.consolidation import (
    capacity_lost,
    demand_block,
    gate,
    set_aside_unsettled,
    still_consolidatable,
    take_capacity,
)
from ebb.core.model import Node

NAME = "emptiness"
REASON = "Empty"


def run(ctx: PassContext) -> MethodOutcome:
    out = MethodOutcome()
    view, state = ctx.view, ctx.state
    taken: list[str] = []
    empty = [n.name for n in view.snapshot.nodes
             if not view.movable[n.name] and n.name not in view.not_candidate and n.name not in ctx.excluded]
    start = set_aside_unsettled(view, state)  # as validation simulates an Empty command
    for name in view.order(empty):
        node = view.nodes[name]
        pool = view.pools[node.nodepool or ""]
        why = gate(ctx, node, pool, REASON)
        if why:
            out.blocked[name] = BlockCause(Cause.EMPTY_BUT, inner=why)
            continue
        mark = state.mark()
        expected = state.remove_node(name)  # pods the base simulation put here (pending, or leaving other nodes)
        failures, _ = state.place_all(expected, max_new=0, first_failure=True) if expected else ({}, None)
        if failures:
            state.rollback(mark)
            pod, where = next(iter(failures.items()))
            out.blocked[name] = BlockCause(Cause.EMPTY_BUT, inner=BlockCause(Cause.NOMINATED, {
                "pod": pod, "why": where}))
            continue
        lost = capacity_lost(view, (name,))
        short = demand_block(view, ctx.capacity_left, lost, "deleting it") if lost else None
        if short is not None:
            state.rollback(mark)
            out.blocked[name] = BlockCause(Cause.EMPTY_BUT, inner=short)
            continue
        take_capacity(ctx, lost)
        ctx.consume(pool.name, REASON)
        taken.append(name)
    state.rollback(start)
    if taken:
        out.commands.append(Command(NAME, REASON, "delete", tuple(taken), (), sum(view.price[n] for n in taken),
                                    {}, "; ".join(f"{n}: no pods need rescheduling" for n in taken)))
    return out


def validate(view: ClusterView, node: Node) -> StaleCause | None:
    stale = still_consolidatable(view, node)
    if stale is None and view.movable[node.name]:
        return StaleCause(Stale.NO_LONGER_EMPTY, {"node": node.name, "arrived": len(view.movable[node.name])})
    return stale


METHOD = Method(NAME, REASON, consolidation=True, run=run, validate=validate)

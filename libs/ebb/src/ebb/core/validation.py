"""Validation: is a command decided earlier still right against a fresher snapshot?

The planner waits (15 s by default) between deciding a consolidation and executing it, as Karpenter
does, then re-checks against fresh state: every node is still a candidate for the method, the budgets
still allow it, and a new simulation still places every pod with no more (and no dearer) replacements.
A stale command is rejected with the reason, never run.
"""

from __future__ import annotations

from datetime import datetime

from ebb.core.cluster import ClusterView
from ebb.core.methods import drift, expiration
from ebb.core.methods.base import EPSILON, Command, EngineOptions, PassContext, simulation
from ebb.core.model import Snapshot

CONSOLIDATION_METHODS = ("emptiness", "multi-node-consolidation", "single-node-consolidation")


def validate(command: Command, snapshot: Snapshot, now: datetime,
             options: EngineOptions | None = None) -> str | None:
    """None when the command is still valid; otherwise why it became invalid."""
    view = ClusterView.build(snapshot, now)
    consolidation = command.method in CONSOLIDATION_METHODS
    sched, state = simulation(view)
    ctx = PassContext(view, options or EngineOptions(), sched, state,
                      {k: v.allowed for k, v in view.budgets.items()})
    wanted: dict[str, str] = {}
    if command.method == "expiration":
        wanted = expiration.expired_nodes(ctx)
    elif command.method == "drift":
        wanted = drift.drifted_nodes(ctx)
    per_pool: dict[str, int] = {}
    for name in command.nodes:
        node = view.nodes.get(name)
        if node is None:
            return f"node {name} is gone"
        blocked = view.blocked_reason(name, consolidation)
        if blocked:
            return f"node {name} is no longer a candidate: {blocked}"
        pool = view.pools[node.nodepool or ""]
        if command.method in ("expiration", "drift") and name not in wanted:
            return f"node {name} is no longer {'expired' if command.method == 'expiration' else 'drifted'}"
        if consolidation:
            paused = view.paused(node)
            if paused:
                return f"consolidation of node {name} is paused by {paused}"
            if pool.consolidate_after is None:
                return f"NodePool {pool.name}'s consolidateAfter is now Never"
            not_yet = view.stable_for(node, pool.consolidate_after)
            if not_yet:
                return f"node {name} changed: {not_yet}"
            if command.method == "emptiness" and view.movable[name]:
                return f"node {name} is no longer empty: {len(view.movable[name])} pods arrived"
        per_pool[pool.name] = per_pool.get(pool.name, 0) + 1
    for pool_name, count in per_pool.items():
        allowed = view.budgets[(pool_name, command.reason)].allowed
        if allowed < count:
            return (f"the {command.reason} budget of NodePool {pool_name} now allows {allowed} disruptions, "
                    f"the command needs {count}")
    state = ctx.state
    leaving = [pod for name in command.nodes for pod in state.remove_node(name)]
    failures, _ = state.place_all(leaving, max_new=len(command.replacements), first_failure=True)
    if failures:
        pod, why = next(iter(failures.items()))
        return f"pod {pod} would no longer fit: {why}"
    new_price = sum(n.price for n in state.new_nodes())
    old_price = sum(r.price for r in command.replacements)
    if new_price > old_price + EPSILON:
        return (f"the replacement now costs ${new_price:.4f}/h, more than the ${old_price:.4f}/h the "
                "command was approved for")
    return None

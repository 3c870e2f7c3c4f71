"""Validation: is a command decided earlier still right against a fresher snapshot?

The planner waits (15 s by default) between deciding a consolidation and executing it, as Karpenter
does, then re-checks against fresh state: every node still exists and is a candidate for the method
(the method's own re-check, `Method.validate`, included: still expired, still drifted, still empty, still
consolidatable), the budgets still allow it, and a new simulation still places every pod with no more (and
no dearer) replacements. A stale command is rejected with why, a `StaleCause` whose sentence the planner
records; it is never run.
"""

from __future__ import annotations

from datetime import datetime

from ebb.core.causes import Stale, StaleCause
from ebb.core.methods import METHODS
from ebb.core.methods.base import EPSILON, Command, EngineOptions, simulation
from ebb.core.methods.consolidation import set_aside_unsettled
from ebb.core.model import Snapshot


def validate(command: Command, snapshot: Snapshot, now: datetime,
             options: EngineOptions | None = None) -> StaleCause | None:
    """None when the command is still valid; otherwise why it became invalid. ``options`` are the engine's
    (of them the re-check depends only on ``require_nodeclaim``: a node that lost its NodeClaim is no longer
    a candidate)."""
    method = METHODS.get(command.method)
    if method is None:
        raise ValueError(f"{command.method!r} is not a disruption method of the engine")
    view = (options or EngineOptions()).view_of(snapshot, now)
    per_pool: dict[str, int] = {}
    for name in command.nodes:
        node = view.nodes.get(name)
        if node is None:
            return StaleCause(Stale.NODE_GONE, {"node": name})
        blocked = view.blocked_reason(name, method.consolidation)
        if blocked:
            return StaleCause(Stale.NO_LONGER_CANDIDATE, {"node": name}, blocked)
        stale = method.validate(view, node)
        if stale:
            return stale
        pool = node.nodepool or ""
        per_pool[pool] = per_pool.get(pool, 0) + 1
    for pool_name, count in per_pool.items():
        allowed = view.budgets[(pool_name, command.reason)].allowed
        if allowed < count:
            return StaleCause(Stale.BUDGET_SHRANK, {"reason": command.reason, "pool": pool_name,
                                                    "source": view.pools[pool_name].policy_source,
                                                    "allowed": allowed, "needed": count})
    _scheduler, state = simulation(view)
    if method.consolidation:
        set_aside_unsettled(view, state)
    leaving = [pod for name in command.nodes for pod in state.remove_node(name)]
    failures, _ = state.place_all(leaving, max_new=len(command.replacements), first_failure=True)
    if failures:
        pod, why = next(iter(failures.items()))
        return StaleCause(Stale.POD_NO_LONGER_FITS, {"pod": pod, "why": why})
    new_price = sum(n.price for n in state.new_nodes())
    old_price = sum(r.price for r in command.replacements)
    if new_price > old_price + EPSILON:
        return StaleCause(Stale.REPLACEMENT_DEARER, {"price": new_price, "approved": old_price})
    return None

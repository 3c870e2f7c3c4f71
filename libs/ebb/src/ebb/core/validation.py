"""Validation: is a command decided earlier still right against a fresher snapshot?

The planner waits (15 s by default) between deciding a consolidation and executing it, as Karpenter
does, then re-checks against fresh state: every node still exists and is a candidate for the method
(the method's own re-check, `Method.validate`, included: still expired, still drifted, still empty, still
consolidatable), the budgets still allow it, a consolidation still leaves every NodePool with a
``demandWindow`` the capacity its peak demand asks for and still saves what the pods it now evicts ask
(``minimumSavingPerEvictedPod``, `ebb.core.worth`), and a new simulation still places every pod (on new nodes
whose NodePool's ``minValues`` their cheapest `MAX_INSTANCE_TYPES` options still meet: Karpenter's validation
simulates as its decision did, ``SimulateScheduling``'s ``Truncate`` included) with as many
replacements as the command launches: no more, no dearer, and for a consolidation no fewer (Karpenter's rule too: a
replace whose pods now fit with fewer new nodes launches for nothing, and a cheaper command is likely, as when a node
a scale-down left half empty was proposed for a replace and is empty by the time its command is validated), each of
whose instance types still holds the pods (Karpenter's ``instanceTypesAreSubset``: a pod that arrived asking more
memory leaves the small types out, and the cloud could pick one). A stale
command is rejected with why, a `StaleCause` whose sentence the planner records; it is never run.

"Fresh state" is the planner's view, rebuilt from ``ebb.cluster.objects``, and it can lag the cluster: a
watch in backoff after an apiserver restart, a consumer behind. Karpenter does not disrupt while its
cluster state is not synced; ebb's planner asks the apiserver itself, after `validate`, for the pods bound to
the command's nodes, and `view_behind` rejects the command when the apiserver lists one there that the view
does not place there (an "empty" node that is not empty, a consolidation that never simulated a pod).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from ebb.core import worth
from ebb.core.causes import Stale, StaleCause
from ebb.core.cluster import ClusterView
from ebb.core.methods import METHODS
from ebb.core.methods.base import (
    EPSILON,
    MAX_INSTANCE_TYPES,
    Command,
    EngineOptions,
    leaving,
    min_values_refused,
    simulation,
    uninitialized_room,
)
from ebb.core.methods.consolidation import command_capacity_lost, demand_block, set_aside_unsettled
from ebb.core.model import Snapshot


def validate(command: Command, snapshot: Snapshot, now: datetime, options: EngineOptions | None = None, *,
             view: ClusterView | None = None) -> StaleCause | None:
    """None when the command is still valid; otherwise why it became invalid. ``options`` are the engine's
    (of them the re-check depends only on ``require_nodeclaim``: a node that lost its NodeClaim is no longer
    a candidate). ``view`` is ``options.view_of(snapshot, now)`` when the caller has it already."""
    method = METHODS.get(command.method)
    if method is None:
        raise ValueError(f"{command.method!r} is not a disruption method of the engine")
    if view is None:
        view = (options or EngineOptions()).view_of(snapshot, now)
    elif view.snapshot is not snapshot or view.now != now:
        raise ValueError("the view given is not the snapshot's at that moment")
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
    if method.consolidation and view.demand_peak:
        short = demand_block(view, view.headrooms(), command_capacity_lost(view, command), f"this {command.action}")
        if short is not None:
            return StaleCause(Stale.BELOW_DEMAND_PEAK, {}, short)
    if method.consolidation:
        refused = worth.refusal(view, command.nodes, command.savings, f"this {command.action}")
        if refused is not None:
            return StaleCause(Stale.EVICTIONS_NOW_NOT_WORTH, {}, refused)
    scheduler, state = simulation(view)
    if method.consolidation:
        set_aside_unsettled(view, state)
    moved, _held = leaving(view, state, command.nodes)
    failures, _ = state.place_all(moved, max_new=len(command.replacements), first_failure=True)
    if failures:
        pod, why = next(iter(failures.items()))
        return StaleCause(Stale.POD_NO_LONGER_FITS, {"pod": pod, "why": why})
    new_nodes = state.new_nodes()
    for new in new_nodes:
        if len(new.instance_types) > MAX_INSTANCE_TYPES:  # fewer: the simulation asked minValues of them all
            compiled = scheduler.pool_named(new.nodepool)
            refused = None if compiled is None else min_values_refused(compiled, new.instance_types)
            if refused is not None:
                return StaleCause(Stale.POD_NO_LONGER_FITS, {"pod": new.pods[0], "why": (
                    f"NodePool {new.nodepool} couldn't meet minValues requirements: {refused.text}")})
    if method.consolidation and len(new_nodes) < len(command.replacements):
        # Karpenter's validation too ("scheduling simulation produced new results"): a replacement the pods no
        # longer need is a launch for nothing; the next pass finds the command the cluster asks for now (a delete)
        return StaleCause(Stale.REPLACEMENT_NOT_NEEDED, {"needed": len(new_nodes),
                                                         "approved": len(command.replacements)})
    if method.consolidation and options is not None and options.karpenter_pace:
        for new in new_nodes:
            waiting = uninitialized_room(state, new, view.uninitialized_owned())
            if waiting is not None:
                return StaleCause(Stale.POD_NO_LONGER_FITS, {"pod": waiting[0], "why": (
                    f"node {waiting[1]} has room for it but is not initialized yet")})
    new_price = sum(n.price for n in new_nodes)
    old_price = sum(r.price for r in command.replacements)
    if new_price > old_price + EPSILON:
        return StaleCause(Stale.REPLACEMENT_DEARER, {"price": new_price, "approved": old_price})
    if method.consolidation:
        # Karpenter's ``instanceTypesAreSubset``: every type the replacement may launch as must still hold the pods it
        # is for, else the cloud may pick one too small for them (or one a pod's new requirement refuses)
        for approved, new in zip(command.replacements, new_nodes, strict=False):
            fitting = set(new.instance_types)
            left_out = [t for t in approved.instance_types if t not in fitting]
            if left_out:
                return StaleCause(Stale.REPLACEMENT_CHANGED, {"types": tuple(left_out[:3])})
    return None


def view_behind(snapshot: Snapshot, live: Mapping[str, Iterable[str]]) -> StaleCause | None:
    """None when the snapshot places on each node of ``live`` every pod the apiserver lists bound to it;
    otherwise the first node (by name) where it does not. ``live`` maps a node to the ``namespace/name`` of each
    pod bound to it that matters to a disruption: not finished, not being deleted, neither a mirror pod nor a
    DaemonSet's (``ebb.core.drain.reschedulable_keys`` reads them). A pod the view has and the
    apiserver does not is no danger (it left since) and is not compared."""
    placed: dict[str, set[str]] = {name: set() for name in live}
    for pod in snapshot.pods:
        if pod.node_name in placed:
            placed[pod.node_name].add(pod.key)
    for name in sorted(live):
        unseen = sorted(set(live[name]) - placed[name])
        if unseen:
            return StaleCause(Stale.VIEW_BEHIND, {"node": name, "count": len(unseen), "pods": tuple(unseen[:3])})
    return None

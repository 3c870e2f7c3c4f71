"""Replacing a set of nodes together (expiration and drift): the shared mechanics.

The nodes of a static NodePool (``spec.replicas``) are not part of a set: each is replaced by one node of its own
pool, in a command of its own (`one_for_one`), so the pool keeps its node count.

Both methods may act on several nodes in one pass, up to the budget for their reason, and simulate
the nodes jointly: each accepted node's pods are placed with the earlier ones already gone, launching
as many replacement nodes as needed. A node whose pods cannot be placed anywhere is left, with why (a
`DUE_BUT` cause: why the method wants it, but why it stays), and so is one whose pods need a replacement that
cannot be launched: its instance type options do not meet its NodePool's ``minValues`` (Karpenter's simulation
leaves such pods unscheduled; ``MinValuesPolicy: Strict``).

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
    as_launched,
    budget_block,
    held_words,
    launch_refused,
    leaving,
    reserved_first,
    truncated,
)
from ebb.core.simulator.results import NewNode


def rotate_keeping_static(ctx: PassContext, method: str, reason: str, wanted: dict[str, str]) -> MethodOutcome:
    """``wanted`` (node -> why it should go) as expiration and drift take it: the nodes of static NodePools replaced
    one for one first (`one_for_one`), then the others rotated together (`rotate`) with what is left of the
    budgets. A static NodePool's nodes are never rotated with others: their pods would go to any NodePool and the
    pool would lose nodes, where Karpenter's static provisioning keeps ``spec.replicas``."""
    static = {n: why for n, why in wanted.items() if ctx.view.pools[ctx.view.nodes[n].nodepool or ""].replicas
              is not None}
    out = one_for_one(ctx, method, reason, {n: why for n, why in static.items() if n not in ctx.excluded})
    rotated = rotate(ctx, method, reason, {n: why for n, why in wanted.items() if n not in static})
    out.commands.extend(rotated.commands)
    out.blocked.update(rotated.blocked)
    return out


def rotate(ctx: PassContext, method: str, reason: str, wanted: dict[str, str]) -> MethodOutcome:
    """`wanted`: node -> why it should go (e.g. "expired ..."). Returns one command for the nodes taken."""
    out = MethodOutcome()
    view, state = ctx.view, ctx.state
    start = state.mark()
    taken: list[str] = []
    used: dict[str, int] = {}
    # empty nodes first, then in disruption-cost order: Karpenter's drift takes its empty candidates before the others
    # (a node whose pods' eviction costs sum below 0 would otherwise come before them)
    ordered = view.order([n for n in wanted if n not in ctx.excluded])
    for name in [*(n for n in ordered if not view.movable[n]), *(n for n in ordered if view.movable[n])]:
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
        refused = _unlaunchable(ctx, {p.key for p in moved})
        if refused is not None:
            state.rollback(mark)
            out.blocked[name] = BlockCause(Cause.DUE_BUT, due, refused)
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
    all their pods placed together, with as many replacements as needed; None when a pod fits nowhere or a
    replacement cannot be launched (`_unlaunchable`)."""
    view, state = ctx.view, ctx.state
    mark = state.mark()
    try:
        moved, held = leaving(view, state, taken)
        failures, _ = state.place_all(moved, max_new=10**6, first_failure=True)
        if failures or _unlaunchable(ctx, None) is not None:
            return None
        new_nodes: list[NewNode] = [as_launched(state, n) for n in state.new_nodes()]
        replacements = tuple(Replacement(n.nodepool, truncated(n.instance_types), n.capacity_type, n.zones, n.price,
                                         n.hostname, n.labels) for n in new_nodes)
        savings = sum(view.price[n] for n in taken) - sum(r.price for r in replacements)
        placements = {p.key: state.bin_name(state.placed[p.key]) for p in moved if p.key in state.placed}
        explanation = "; ".join(f"{n}: {wanted[n]}" for n in taken) + held_words(held)
        return Command(method, reason, "replace" if replacements else "delete", tuple(taken), replacements,
                       savings, placements, explanation)
    finally:
        state.rollback(mark)


def _unlaunchable(ctx: PassContext, pods: set[str] | None) -> BlockCause | None:
    """Why a new node of the simulation that holds one of ``pods`` (None: any) cannot be launched: its options do
    not meet its NodePool's ``minValues`` (`launch_refused`), its cheapest `MAX_INSTANCE_TYPES` options as Karpenter's
    simulation keeps them (`truncated`); None when every one can. Karpenter's simulation leaves
    the pods of such a NodeClaim unscheduled, and its drift takes no node whose pods do not all schedule."""
    if not any(r.min_values is not None for p in ctx.scheduler.pools for r in p.pool.requirements):
        return None
    for new in ctx.state.new_nodes():
        if pods is None or not pods.isdisjoint(new.pods):
            refused = launch_refused(ctx, new.nodepool, new.instance_types)
            if refused is not None:
                return refused
    return None


def one_for_one(ctx: PassContext, method: str, reason: str, wanted: dict[str, str]) -> MethodOutcome:
    """A static NodePool (``spec.replicas``) keeps its node count: each of its nodes in ``wanted`` (node -> why it
    should go) gets a command of its own that replaces it by one node of the pool, as Karpenter's StaticDrift
    launches one NodeClaim from the pool's template per drifted node (and, for an expired node, as its static
    provisioning brings the pool back to its replicas once the node is gone). Not while the pool has more nodes
    than its replicas (a scale-down is under way), and no more at once than the budget for ``reason`` and the pool's
    ``limits.nodes`` leave room for. The replacement is the node the pods need if they fit nowhere else (so
    validation finds the same), else the pool's cheapest."""
    out = MethodOutcome()
    view = ctx.view
    launched: dict[str, int] = {}  # pool -> replacements this pass has already reserved room for
    for name in view.order(list(wanted)):
        node = view.nodes[name]
        pool = view.pools[node.nodepool or ""]
        due = {"due": wanted[name]}
        blocked = view.blocked_reason(name, consolidation=False)
        if blocked:
            out.blocked[name] = BlockCause(Cause.DUE_BUT, due, blocked)
            continue
        # its nodes and the NodeClaims launched whose node has not registered yet, as Karpenter's state counts them
        launching = [c for c in view.launching_claims() if c.nodepool == pool.name]
        members = [n for n in view.snapshot.nodes if n.nodepool == pool.name]
        running = sum(1 for n in members if not n.deleting) + sum(1 for c in launching if not c.deleting)
        if running > (pool.replicas or 0):
            out.blocked[name] = BlockCause(Cause.DUE_BUT, due, BlockCause(Cause.STATIC_SCALING_DOWN, {
                "pool": pool.name, "count": running, "replicas": pool.replicas}))
            continue
        # Karpenter reserves the replacements against limits.nodes, counting deleting nodes too
        limit = pool.limits.get("nodes")
        if limit is not None and len(members) + len(launching) + launched.get(pool.name, 0) + 1 > limit:
            out.blocked[name] = BlockCause(Cause.DUE_BUT, due, BlockCause(Cause.STATIC_AT_LIMIT, {
                "pool": pool.name, "limit": limit}))
            continue
        if ctx.budget_left(pool.name, reason) <= 0:
            out.blocked[name] = BlockCause(Cause.DUE_BUT, due, budget_block(ctx, pool.name, reason))
            continue
        command = _replaced_by_one(ctx, method, reason, name, wanted[name])
        if isinstance(command, BlockCause):
            out.blocked[name] = BlockCause(Cause.DUE_BUT, due, command)
            continue
        ctx.consume(pool.name, reason)
        launched[pool.name] = launched.get(pool.name, 0) + 1
        out.commands.append(command)
    return out


def _replaced_by_one(ctx: PassContext, method: str, reason: str, name: str, why: str) -> Command | BlockCause:
    view, state = ctx.view, ctx.state
    pool_name = view.nodes[name].nodepool or ""
    mark = state.mark()
    try:
        moved, held = leaving(view, state, (name,))
        with state.launching_in(pool_name):  # a static NodePool's own replacement; else the pool is no destination
            failures, _ = state.place_all(moved, max_new=1, first_failure=True)
        if failures:
            pod, reason = next(iter(failures.items()))
            return BlockCause(Cause.POD_NOWHERE_TO_GO, {"pod": pod, "why": reason})
        needed = [reserved_first(state, n) for n in state.new_nodes()]
        listed = [as_launched(state, n) for n in needed]
        placements = {p.key: state.bin_name(state.placed[p.key]) for p in moved if p.key in state.placed}
    finally:
        state.rollback(mark)
    if needed and needed[0].nodepool == pool_name:
        n = listed[0]  # its options narrowed to its capacity type; minValues is asked of them all (``needed``)
        options = needed[0].instance_types
        replacement = Replacement(n.nodepool, n.instance_types, n.capacity_type, n.zones, n.price, n.hostname,
                                  n.labels)
    else:
        cheapest = _cheapest_of_pool(ctx, pool_name)
        if cheapest is None:
            return BlockCause(Cause.STATIC_NOTHING_OFFERED, {"pool": pool_name})
        replacement, options = cheapest, cheapest.instance_types
    # a static NodePool's NodeClaim is launched from its template (no disruption simulation truncates its types)
    refused = launch_refused(ctx, pool_name, options, truncate=False)
    if refused is not None:
        return refused
    return Command(method, reason, "replace", (name,), (replacement,), view.price[name] - replacement.price,
                   placements,
                   f"{name}: {why}; replaced one for one (its NodePool {pool_name} is static){held_words(held)}")


def _cheapest_of_pool(ctx: PassContext, pool_name: str) -> Replacement | None:
    """A node of the pool's cheapest offering: its type and the others of that capacity type, cheapest first."""
    pool = ctx.scheduler.pool_named(pool_name)
    if pool is None or not len(pool.combo_type):
        return None
    best = min(range(len(pool.combo_type)), key=lambda c: (float(pool.combo_price[c]), pool.combo_zone[c],
                                                           pool.types[int(pool.combo_type[c])].name))
    capacity_type = pool.combo_ct[best]
    prices: dict[str, float] = {}
    for combo in range(len(pool.combo_type)):
        if pool.combo_ct[combo] == capacity_type:
            type_name = pool.types[int(pool.combo_type[combo])].name
            prices[type_name] = min(prices.get(type_name, float("inf")), float(pool.combo_price[combo]))
    types = tuple(sorted(prices, key=lambda t: (prices[t], t)))
    first = pool.types[int(pool.combo_type[best])].name
    zones = tuple(sorted({pool.combo_zone[c] for c in range(len(pool.combo_type))
                          if pool.combo_ct[c] == capacity_type and pool.types[int(pool.combo_type[c])].name == first
                          and float(pool.combo_price[c]) == prices[first]}))
    return Replacement(pool_name, types, capacity_type, zones, prices[first])

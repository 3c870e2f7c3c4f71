"""Multi-node consolidation: remove several nodes at once, launching at most one cheaper replacement (Karpenter's
rule), or with ``EngineOptions.max_replacements`` up to that many, so that a set of nodes is repacked onto several
cheaper ones (`_jointly`: each replacement filtered alone, their price together held to the removed nodes'
``minimumPriceImprovementPercent``).

Karpenter binary-searches prefixes of its candidate list and gives up after a timeout. ebb grows the set
greedily instead, in disruption-cost order, on one incremental simulation: a candidate joins when its pods
(and pods the simulation already moved onto it) fit on the remaining nodes (or the single replacement) and the
savings grow, and no NodePool is left below its ``demandWindow``'s peak. Each check costs only the pods it
moves, so merges of hundreds of nodes are found on clusters of thousands without a timeout. Two runs,
delete-only and with one replacement; the larger saving wins and a tie goes to the delete (no launch, fewer
pods moved). A run's set, simulated jointly as validation will (`_jointly`), is not taken when one of its nodes alone
would save as much (`_one_saves_as_much`): packed together its pods can need a dearer replacement than step by step.

The run with a replacement knows the replacement filter's rules that no later node can lift. A step is refused
as soon as its replacement costs at least what the set would remove (the claim's launch floor only grows as
pods join it), and a step that keeps the set all spot with a replacement that may be spot (`may_launch_spot`),
where spot-to-spot is off, is refused outright: `filter_replacement` would refuse that set, and every set grown from
it that stays all spot, only at the end. The run then goes on to the nodes after it and can still find a set it can
keep.

Before it takes a node, the delete-only run steps each candidate alone and, where the delete fails, carries on with
a replacement (`_carry_on`); on a cluster where nothing consolidates that is the whole pass. A caller that makes pass
after pass (``PassContext.refusals``) keeps each such step refused both ways, and the next pass's run takes it where it
still holds on its start state instead of stepping the node again (`ebb.core.methods.kept`). With such a caller, a step
that neither run takes is also not made again for a node alike after it, until the run takes a node (`StepsAlike`).

With ``EngineOptions.karpenter_pace`` (the back-test's simulations of Karpenter) the search is Karpenter's own
instead (`_karpenter_prefix`): the largest prefix of the candidates its budgets allow that consolidates.

The set the greedy run found is then simulated as validation will simulate it (``_jointly``): every node
removed at once, all their pods placed together. Placing node by node and placing all at once pack
differently, and a command validation would reject on the very snapshot it came from would be proposed,
rejected and proposed again on every pass. When the whole set does not fit jointly, the largest prefix that
does is found by binary search (Karpenter's search over prefixes), and the command is that prefix's. A set with
nodes of a NodePool whose consolidationPolicy is Balanced must also pass that NodePool's score
(`ebb.core.balanced`); when it does not, the same search looks for the largest prefix that does.

The greedy runs grow a set only from a node that saves something on its own, so they miss merges of nodes none of
which does (two $1.00 nodes whose pods fit together on one $1.50 node). The merge search (`_merge`) is Karpenter's
with a first probe of its own: the first `MAX_MERGE` candidates the budgets allow, the whole set first (Karpenter
starts at half of it), then Karpenter's binary search over the sizes of their prefixes, each set simulated jointly
with at most one replacement. What it finds is taken when it saves more
than the greedy set and than its nodes one at a time (`_alone`; Karpenter would take it regardless); the candidates
it tried and left keep why (`PassContext.merges`), which single-node consolidation's verdicts carry.

With ``EngineOptions.search == "optimizer"`` a linear program over every candidate at once comes first
(`ebb.core.methods.optimizer`, `_optimized`): which nodes to remove and how many of each instance type to launch (at
most ``max_replacements``) to save most, room summed per NodePool; its proposal is simulated as validation would
(`_jointly`, then its largest prefix that consolidates); the greedy runs are left out when it gives a set, and
when it gives none the delete-only run looks (the program weighed the launches already); it competes with the merge
search as the greedy set does.

Where a NodePool prices evictions (``minimumSavingPerEvictedPod``, `ebb.core.worth`), a node joins the set only
when what it adds to the saving pays for the pods it evicts, the set found must save what its evictions ask, and
the two runs' sets compare by their saving less that.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ebb.core import balanced, worth
from ebb.core.causes import BlockCause, Cause
from ebb.core.cluster import ClusterView
from ebb.core.methods import optimizer
from ebb.core.methods.base import (
    EPSILON,
    SEARCH_OPTIMIZER,
    Command,
    Method,
    MethodOutcome,
    PassContext,
    Replacement,
    filter_replacement,
    improvement_refused,
    may_launch_spot,
    no_cheaper_replacement,
    placements_of,
    spot_to_spot,
    strictest_improvement,
)
from ebb.core.methods.consolidation import (
    REASON,
    NoCheaperLaunch,
    candidates,
    capacity_lost,
    command_capacity_lost,
    demand_block,
    give_up_on_replacing,
    give_up_when_dear,
    karpenter_order,
    kept_refusals,
    set_aside_unsettled,
    still_consolidatable,
    take_capacity,
)
from ebb.core.methods.kept import NewNodeWhy, RefusalSession, StepsAlike, alone_verdict, new_node_why
from ebb.core.model import CAPACITY_SPOT, Pod
from ebb.core.quantity import dollars
from ebb.core.simulator.results import NewNode
from ebb.core.simulator.scheduler import later_may_place

NAME = "multi-node-consolidation"
#: the most candidates one set of the merge search holds (Karpenter's ``maxParallel``)
MAX_MERGE = 100


def _greedy(ctx: PassContext, names: list[str], allow_replace: bool, refused_alone: set[str],
            session: RefusalSession | None = None) -> Command | None:
    """One greedy run, delete-only or with one replacement. The delete-only run adds to ``refused_alone`` the
    nodes whose step on its own it carried on with a replacement and found refused; the run with a replacement
    skips their steps on their own. ``session``: the refusals of nodes alone the caller's last pass found, which the
    delete-only run takes where they hold instead of stepping the node, and keeps those it finds; with it, a step
    that is that of a node alike stepped since the run last took a node is not made again (`StepsAlike`)."""
    state, view = ctx.state, ctx.view
    kept = None if allow_replace else session
    alike = None if session is None else StepsAlike(session)
    start = state.mark()
    taken: list[str] = []
    used: dict[str, int] = {}
    removed_price = 0.0
    savings = 0.0
    all_spot = True  # every node taken so far is spot: a spot replacement then needs spot-to-spot
    for name in names:
        pool = view.nodes[name].nodepool or ""
        if ctx.budget_left(pool, REASON) - used.get(pool, 0) <= 0:
            continue
        alone = not taken and not state.claims  # this step is the node's consolidation on its own
        if alone and name in refused_alone:
            continue  # the delete-only run's step carried on with a replacement and found it refused (`_carry_on`)
        held = kept.held(name, view.price[name]) if alone and kept is not None else None
        if held is not None:  # the last pass's refusal of this step, which holds on this start state
            refusal, why = held
            ctx.no_room[name] = (refusal.first.key, why)
            _remember(ctx, name, True, {refusal.first.key: why} if refusal.fits_nowhere else {}, refusal.replacement,
                      new=refusal.new)
            refused_alone.add(name)
            continue
        known = None if alike is None or (alone and allow_replace) else alike.like(name, view.price[name])
        if known is not None:  # the step of a node alike made on this state: refused, or alone carried on and kept
            if known[0] is not None:
                ctx.no_room[name] = known[0]
            continue
        spot = all_spot and view.nodes[name].capacity_type == CAPACITY_SPOT
        mark = state.mark()
        leaving = state.remove_node_ordered(name)  # in `placement_order`, placed (and read by `_carry_on`) so
        max_new = (1 - len(state.claims)) if allow_replace else 0
        # the replacement is given up once it is too dear whatever else joins it; a step alone, whose verdict is
        # single-node consolidation's (`_remember`), only when single-node would give up there too (no
        # explanations)
        on_claim = None if not allow_replace or (alone and ctx.options.explain) else \
            give_up_when_dear(ctx, removed_price + view.price[name] - savings, spot)
        try:
            # why a pod found no room is read only for a node alone (`_remember`): the delete-only run's, and with
            # explanations the run with a replacement's (why a new node did not take it either)
            failures, _ = state.place_ordered(leaving, max_new=max_new, first_failure=True, on_claim=on_claim,
                                              explain=alone and (not allow_replace or ctx.options.explain))
        except NoCheaperLaunch as e:
            if alike is not None and not alone:
                alike.note(name, view.price[name], leaving)
            state.rollback(mark)
            if alone:
                _remember(ctx, name, allow_replace, {}, e.cause)
            continue
        if failures:
            if alone:
                _remember(ctx, name, allow_replace, failures, None,
                          new=_nowhere(ctx, name, failures) if allow_replace else None)
                if not allow_replace and len(failures) == 1:
                    first, why = next(iter(failures.items()))
                    if _carry_on(ctx, name, leaving, first, kept):
                        refused_alone.add(name)
                    elif alike is not None:  # its replacement would be taken: kept for the nodes alike
                        alike.note(name, view.price[name], leaving,
                                   (next(i for i, pod in enumerate(leaving) if pod.key == first), why))
            elif alike is not None:
                alike.note(name, view.price[name], leaving)
            state.rollback(mark)
            continue
        new_nodes = state.new_nodes()
        if spot and new_nodes and _spot_refused(ctx, new_nodes[0]):
            # every node of the set would be spot and so would its replacement: `filter_replacement` refuses that
            # set, and every set grown from it that stays all spot, so the run goes on without this node
            refused = filter_replacement(new_nodes[0], [name], ctx) if alone else None
            if alike is not None and not alone:
                alike.note(name, view.price[name], leaving)
            state.rollback(mark)
            if isinstance(refused, BlockCause):
                _remember(ctx, name, allow_replace, failures, refused)
            continue
        new_price = sum(n.price for n in new_nodes)
        candidate_savings = removed_price + view.price[name] - new_price
        if candidate_savings <= savings + EPSILON:
            if alike is not None and not alone:
                alike.note(name, view.price[name], leaving)
            state.rollback(mark)
            if alone:
                _remember(ctx, name, allow_replace, failures, no_cheaper_replacement(
                    view, [name], new_nodes[0] if len(new_nodes) == 1 else None, new_price, view.price[name]))
            continue
        if candidate_savings - savings <= worth.asked(view, [name]) - EPSILON:
            state.rollback(mark)  # what the node adds to the saving does not pay for the pods it evicts
            continue
        if view.demand_peak and demand_block(view, ctx.capacity_left, capacity_lost(
                view, [*taken, name], [(n.nodepool, n.instance_types[0]) for n in new_nodes]), "") is not None:
            state.rollback(mark)  # the set would leave a NodePool below its demandWindow's peak: go on without it
            continue
        taken.append(name)
        if alike is not None:
            alike.clear()
        used[pool] = used.get(pool, 0) + 1
        removed_price += view.price[name]
        savings = candidate_savings
        all_spot = spot
    state.rollback(start)
    if len(taken) < 2:
        return None
    command = _jointly(ctx, taken, allow_replace)
    if isinstance(command, Command):
        return command
    # the whole set does not fit when placed at once: the largest prefix that does (at least two nodes)
    return _largest_prefix(ctx, taken, allow_replace, len(taken) - 1)


def _largest_prefix(ctx: PassContext, names: list[str], allow_replace: bool, longest: int,
                    how: str = "") -> Command | None:
    """The command of the longest prefix of ``names``, of two to ``longest`` nodes, that consolidates together
    (`_jointly`, ``how`` ending its explanation), found by binary search over the prefix's length; None when none
    does."""
    low, high, best = 2, longest, None
    while low <= high:
        middle = (low + high) // 2
        found = _jointly(ctx, names[:middle], allow_replace, how=how)
        if isinstance(found, Command):
            best, low = found, middle + 1
        else:
            high = middle - 1
    return best


def _carry_on(ctx: PassContext, name: str, leaving: list[Pod], first: str, kept: RefusalSession | None) -> bool:
    """The delete-only run's step of ``name`` on its own just found its first pod without room on the other nodes
    (``first``), the pods before it placed there (``leaving`` is in `placement_order`). Carry on from that pod with
    one new node allowed: that is the step of the run with a replacement on its own (a new node is opened only for a
    pod that finds no room, so the pods before stay where they went), without placing those pods again. True when
    that step would not be taken, its verdict kept for single-node consolidation (`_remember`) and, given ``kept``,
    the refusal for the next pass (`_keep`): a pod that fits nowhere, a replacement too dear as pods join it (without
    explanations, `give_up_on_replacing`), a spot replacement of a spot node where spot-to-spot is off, or one that
    saves nothing. The caller rolls back."""
    state, view = ctx.state, ctx.view
    # the pods from the one without room on: those before it went onto the other nodes, those after were not tried
    # (a pod the simulation had moved onto this node is still marked placed there, so the order decides)
    at = next(i for i, pod in enumerate(leaving) if pod.key == first)
    if later_may_place(state.s.classes(leaving[at])):
        return False  # `place_all` went on past it and placed pods after it: no step to carry on from
    rest = leaving[at:]
    try:
        failures, _ = state.place_ordered(rest, max_new=1, first_failure=True, explain=ctx.options.explain,
                                          on_claim=None if ctx.options.explain else give_up_on_replacing(ctx, name))
    except NoCheaperLaunch as e:
        _remember(ctx, name, True, {}, e.cause)
        _keep(ctx, kept, name, leaving, at, fits_nowhere=False, replacement=e.cause)
        return True
    if failures:
        nowhere = _nowhere(ctx, name, failures)
        _remember(ctx, name, True, failures, None, new=nowhere)
        _keep(ctx, kept, name, leaving, at, fits_nowhere=True, replacement=None, new=nowhere)
        return True
    new = state.new_nodes()[0]
    price = view.price[name]
    if view.nodes[name].capacity_type == CAPACITY_SPOT and _spot_refused(ctx, new):
        refused = filter_replacement(new, [name], ctx)
        _remember(ctx, name, True, {}, refused if isinstance(refused, BlockCause) else None)
        return True
    if price - new.price <= EPSILON:
        cause = no_cheaper_replacement(view, [name], new, new.price, price)
        _remember(ctx, name, True, {}, cause)
        _keep(ctx, kept, name, leaving, at, fits_nowhere=False, replacement=cause)
        return True
    return False


def _nowhere(ctx: PassContext, name: str, failures: dict[str, str]) -> NewNodeWhy | None:
    """Which pod a step of ``name`` alone with a replacement allowed found no room for even so, and why
    (`new_node_why`), against the delete-only run's sentence on its first pod without room."""
    first, why = ctx.no_room.get(name, ("", ""))
    return new_node_why(failures, ctx.options.explain, first, why)


def _keep(ctx: PassContext, kept: RefusalSession | None, name: str, leaving: list[Pod], at: int, *,
          fits_nowhere: bool, replacement: BlockCause | None, new: NewNodeWhy | None = None) -> None:
    """Keep the refusal `_carry_on` just found (the state as its placements left it) for the next pass
    (`RefusalSession.record`)."""
    if kept is not None:
        kept.record(name, leaving, at, ctx.view.price[name], ctx.no_room[name][1], fits_nowhere=fits_nowhere,
                    replacement=replacement, new=new)


def _spot_refused(ctx: PassContext, new: NewNode) -> bool:
    """A replacement that may be spot where spot-to-spot is off: refused when every node it replaces is spot (the
    caller's part of Karpenter's rule, `filter_replacement`)."""
    return not spot_to_spot(ctx, new.nodepool) and may_launch_spot(ctx, new)


def _remember(ctx: PassContext, name: str, allow_replace: bool, failures: dict[str, str],
              replacement: BlockCause | None, *, new: NewNodeWhy | None = None) -> None:
    """Keep what a greedy step that consolidated ``name`` on its own found (`PassContext.no_room`, `.alone`): on
    the state single-node consolidation starts from, that step is single-node's own simulation of the node. The
    delete-only run finds its first pod without room on the other nodes; the run with a replacement then finds
    that a new node does not take every pod (single-node: `Cause.PODS_FIT_NOWHERE`) or why the replacement is
    refused (``replacement``: it costs at least as much, `Cause.NO_CHEAPER_REPLACEMENT`, or it is spot where
    spot-to-spot is off); ``new``: why the pod that fit nowhere did not fit on the new node either (`new_node_why`)."""
    if not allow_replace:
        if failures:  # else its pods fit elsewhere and deleting it saves nothing (a node of price 0): single-node's
            ctx.no_room[name] = next(iter(failures.items()))
        return
    found = ctx.no_room.get(name)
    if found is None:  # the delete-only run took a node before this one: no verdict on the node alone
        return
    verdict = alone_verdict(found[0], found[1], fits_nowhere=bool(failures), replacement=replacement, new=new)
    if verdict is not None:
        ctx.alone[name] = verdict


def _jointly(ctx: PassContext, taken: list[str], allow_replace: bool, *, how: str = "",
             explain: bool = False, keep: bool = False) -> Command | BlockCause:
    """The command that removes ``taken``, simulated as validation simulates it: every node removed at once and
    all their pods placed together, on the remaining nodes and at most ``max_replacements`` new ones (one unless the
    engine options say more); else why not: a pod does not fit (`Cause.PODS_FIT_NOWHERE`, why it found no room said
    only with ``explain``), a replacement is filtered out (`filter_replacement`'s cause), nothing is saved, several
    replacements together miss the price improvement asked, a Balanced NodePool's score or a ``demandWindow``
    refuses it. ``how`` ends the command's explanation (how the set was found). With ``keep`` the simulation of a
    command found is left applied, its replacements closed to further pods (they launch as the command chose); the
    caller rolls it back."""
    state, view = ctx.state, ctx.view
    mark = state.mark()
    claims_before = set(state.claims) if keep else set()
    kept = False
    try:
        leaving = [pod for name in taken for pod in state.remove_node(name)]
        failures, _ = state.place_all(leaving, max_new=ctx.options.max_replacements if allow_replace else 0,
                                      first_failure=True, explain=explain)
        if failures:
            pod, why = next(iter(failures.items()))
            return BlockCause(Cause.PODS_FIT_NOWHERE, {"pod": pod, "why": why})
        removed_price = sum(view.price[name] for name in taken)
        found: list[Replacement] = []
        for new in state.new_nodes():
            replacement = filter_replacement(new, taken, ctx)
            if not isinstance(replacement, Replacement):
                return replacement
            found.append(replacement)
        replacements = tuple(found)
        savings = removed_price - sum(r.price for r in replacements)
        if savings <= EPSILON:
            return BlockCause(Cause.NO_CHEAPER_REPLACEMENT, {"needed": removed_price - savings,
                                                             "price": removed_price})
        if len(replacements) > 1 and (too_small := _improvement_refusal(view, taken, removed_price,
                                                                         removed_price - savings)) is not None:
            return too_small
        if (not_worth := worth.refusal(view, taken, savings, "this consolidation")) is not None:
            return not_worth
        scores = balanced.judge(view, taken, savings)
        rejected = balanced.rejection(scores)
        if rejected is not None:
            ctx.balanced_refused = (tuple(taken), scores)
            # a Balanced NodePool finds it not worth its disruption: a smaller prefix may be
            return balanced.cause(rejected, view.pools[rejected.pool], "this merge")
        action = "replace" if replacements else "delete"
        if view.demand_peak:
            short = demand_block(view, ctx.capacity_left, capacity_lost(
                view, taken, [(r.nodepool, r.instance_types[0]) for r in replacements]), action)
            if short is not None:
                return short
        command = Command(NAME, REASON, action, tuple(taken), replacements, savings, placements_of(state, leaving),
                          f"{len(taken)} nodes costing ${dollars(removed_price)}/h " + _replaced_by(replacements)
                          + how + worth.words(view, taken, savings) + balanced.approval(scores))
        if keep:
            for b in [b for b in state.claims if b not in claims_before]:
                state.close_bin(b)
            kept = True
        return command
    finally:
        if not kept:
            state.rollback(mark)


def _replaced_by(replacements: tuple[Replacement, ...]) -> str:
    """How a merge's command ends its explanation's first words: what takes the removed nodes' place."""
    if not replacements:
        return "deleted; their pods fit on the other nodes"
    if len(replacements) == 1:
        return f"replaced by one {replacements[0].instance_types[0]}"
    launched = ", ".join(f"{r.instance_types[0]} (${dollars(r.price)}/h)" for r in replacements)
    return f"replaced by {len(replacements)} nodes: {launched}"


def _improvement_refusal(view: ClusterView, taken: list[str], removed_price: float,
                         launched_price: float) -> BlockCause | None:
    """A merge with several replacements against the strictest ``minimumPriceImprovementPercent`` of the removed
    nodes' NodePools, on the replacements' price together (each one alone is held to the removed price by
    `filter_replacement`, which a repack's parts always pass)."""
    strictest = strictest_improvement(view, taken)
    if strictest is None:
        return None
    if launched_price <= removed_price * (1 - strictest.minimum_price_improvement_percent / 100) + EPSILON:
        return None
    return improvement_refused(strictest, "replacements together cost", launched_price, removed_price)


#: Karpenter's multi-node consolidation clamps its candidates to this many (``maxParallel``), yet with more of them its
#: search's prefixes reach one more (``firstNConsolidationOption`` lowers its ``max`` to the candidates less one only
#: when there are no more than ``maxParallel``, and its prefix is ``candidates[0 : mid+1]``)
KARPENTER_MAX_CANDIDATES = 100


def _karpenter_prefix(ctx: PassContext, names: list[str]) -> Command | None:
    """Karpenter's own search (``EngineOptions.karpenter_pace``; multinodeconsolidation.go): the candidates the
    budgets allow, in Karpenter's order (`candidates` gives them so at its pace), at most ``KARPENTER_MAX_CANDIDATES``
    + 1; the largest prefix of at least two of them that consolidates (deleted, or replaced by one cheaper node), by
    binary search over its length."""
    left: dict[str, int] = {}
    allowed: list[str] = []
    for name in names:
        pool = ctx.view.nodes[name].nodepool or ""
        left.setdefault(pool, ctx.budget_left(pool, REASON))
        if left[pool] <= 0:
            continue
        left[pool] -= 1
        allowed.append(name)
    allowed = allowed[:KARPENTER_MAX_CANDIDATES + 1]
    return _largest_prefix(ctx, allowed, True, len(allowed))


def _merge(ctx: PassContext, names: list[str], *, order: str = "", record: bool = True) -> Command | None:
    """Karpenter's multi-node search, whatever single nodes could do on their own: the candidates in the order given
    (disruption cost, or Karpenter's: `_merges`), those the budgets allow, the first `MAX_MERGE` of them; the whole
    set first, then Karpenter's binary search over the sizes of their prefixes for the largest that consolidates
    together with at most one replacement (`_jointly`). Karpenter's search starts at half the candidates and so misses
    a set that consolidates only whole (docs/decisions.md); it is bounded by a timeout, this one by its probes (one,
    then at most seven for a hundred candidates). With ``record``, each candidate of the search that no set taken
    includes keeps why the smallest set tried that holds it was refused (`PassContext.merges`): single-node
    consolidation's verdict on the node says it. ``order`` names the candidates' order in the command's words (""
    for disruption cost)."""
    view = ctx.view
    used: dict[str, int] = {}
    considered: list[str] = []
    for name in names:
        pool = view.nodes[name].nodepool or ""
        if ctx.budget_left(pool, REASON) - used.get(pool, 0) <= 0:
            continue
        used[pool] = used.get(pool, 0) + 1
        considered.append(name)
        if len(considered) == MAX_MERGE:
            break
    if len(considered) < 2:
        return None
    explain = ctx.options.explain
    refused: dict[int, BlockCause] = {}  # the size of a set tried -> why it was refused

    def tried(size: int) -> Command | None:
        how = (f" (a merge of the first {size} of the {len(considered)} candidates the search considered{order}, "
               "the largest set of them that consolidates together)")
        found = _jointly(ctx, considered[:size], True, how=how, explain=explain)
        if isinstance(found, BlockCause):
            refused[size] = found
            return None
        return found

    best = tried(len(considered))  # the whole set first: Karpenter's first probe is half of it
    if best is None:
        low, high = 2, len(considered) - 1
        while low <= high:
            middle = (low + high) // 2
            found = tried(middle)
            if found is not None:
                best, low = found, middle + 1
            else:
                high = middle - 1
    if best is not None:
        alone, alone_net = _alone(ctx, best.nodes)
        net = worth.net(view, best.nodes, best.savings)
        if alone > EPSILON and alone_net >= net - EPSILON:
            # one at a time its nodes save as much or more (less what their evictions ask, where a NodePool prices
            # them): single-node consolidation's moves, not this merge
            priced = abs(net - best.savings) > EPSILON or abs(alone_net - alone) > EPSILON
            refused[len(best.nodes)] = BlockCause(Cause.ALONE_SAVES_MORE, {
                "alone": alone_net, "savings": net,
                "net": "each less what its evictions ask (minimumSavingPerEvictedPod)" if priced else ""})
            best = None
        else:
            best = replace(best, explanation=best.explanation + (
                f"; one at a time its nodes would save ${dollars(alone)}/h" if alone > EPSILON else
                "; none of its nodes consolidates on its own"))
    if record:
        sizes = sorted(refused)
        for at, name in enumerate(considered):
            size = next((k for k in sizes if k > at), None)
            if size is not None and (best is None or name not in best.nodes):
                ctx.merges[name] = (size, refused[size])
    return best


def _merges(ctx: PassContext, names: list[str]) -> Command | None:
    """The merge search (`_merge`) over the candidates in disruption-cost order and, where that order is not
    Karpenter's, again in Karpenter's (`karpenter_order`: the most savings per disruption first): its prefixes are
    other sets, among them merges Karpenter's own search takes (two nodes of two pods each, behind a cheaper node of
    one pod that no set of the three can merge with). The one that saves more is taken (a tie goes to the
    disruption-cost order's); the candidates left keep the disruption-cost order's refusals."""
    best = _merge(ctx, names)
    theirs = karpenter_order(ctx.view, names)
    if theirs == names:
        return best
    other = _merge(ctx, theirs, order=" in Karpenter's order (the most savings per disruption first)", record=False)
    if other is not None and (best is None or worth.net(ctx.view, other.nodes, other.savings)
                              > worth.net(ctx.view, best.nodes, best.savings) + EPSILON):
        for name in other.nodes:
            ctx.merges.pop(name, None)  # taken: no refusal of it to tell
        return other
    return best


def _optimized(ctx: PassContext, names: list[str]) -> Command | None:
    """The optimizer search's command (`ebb.core.methods.optimizer`): the candidates the budgets allow, the program's
    choice among them simulated as validation simulates it (`_jointly`), else the largest prefix of that choice that
    consolidates (`_largest_prefix`); None when the program removes fewer than two nodes or no prefix consolidates."""
    view, state = ctx.view, ctx.state
    s = state.s
    allowed = [name for name in names if ctx.budget_left(view.nodes[name].nodepool or "", REASON) > 0]
    if len(allowed) < 2:
        return None
    n_nodes = s.N
    node_pool = np.array([node.nodepool or "" for node in s.nodes], dtype=object)
    receiving = state.open[:n_nodes].copy()
    for b in state.aside:
        receiving[b] = False  # a node set aside takes no pod: its room is not room
    free = np.maximum(state.free[:n_nodes], 0)
    at = np.array([s.node_index[name] for name in allowed], dtype=np.int64)
    # what removing each takes out of its NodePool: its pods' requests, and its own room where that counted
    taken = (s.node_alloc[at] - state.free[at]) + free[at] * receiving[at][:, None]
    values = np.array([view.price[name] - worth.asked(view, [name])
                       - optimizer.PER_POD_TIE_BREAK * len(view.movable.get(name, ())) for name in allowed])
    compiled = {pool.pool.name: pool for pool in s.pools}
    groups: list[optimizer.Group] = []
    for pool_name in dict.fromkeys(node_pool[at].tolist()):
        pool = compiled.get(pool_name)
        if pool is not None and len(pool.types):
            type_alloc, cheapest = pool.type_alloc, pool.type_floor(None)  # per type, its cheapest offering
        else:
            type_alloc, cheapest = np.zeros((0, len(s.resources)), dtype=np.int64), np.zeros(0)
        groups.append(optimizer.Group(np.flatnonzero(node_pool[at] == pool_name),
                                      free[(node_pool == pool_name) & receiving].sum(axis=0),
                                      ctx.budget_left(pool_name, REASON), type_alloc, cheapest))
    chosen = [allowed[i] for i in optimizer.choose(values, taken, groups, ctx.options.max_replacements)]
    if len(chosen) < 2:
        return None
    how = (f" (the optimizer's choice among {len(allowed)} candidates: the set a linear program over all of them "
           "found to save most within the budgets, simulated")
    found = _jointly(ctx, chosen, True, how=how + ")", explain=False)
    if isinstance(found, Command):
        return found
    return _largest_prefix(ctx, chosen, True, len(chosen) - 1,
                           how=how + f"; the largest part of its {len(chosen)} nodes that consolidates)")


def _alone(ctx: PassContext, names: tuple[str, ...]) -> tuple[float, float]:
    """What consolidating ``names`` one at a time would save, in their order, and the same less what each one's
    evictions ask (`ebb.core.worth`): each node on its own, simulated as a set of one (`_jointly`: its pods on the
    other nodes and at most one replacement, as single-node consolidation simulates it; a node whose evictions its
    saving does not pay for saves nothing) on the cluster as the earlier ones' consolidations left it (their pods
    moved, their replacements launched and full), so two nodes whose pods fit only in the same room are not both
    counted; none for a node whose verdict alone the greedy runs already found (`PassContext.alone`). A Balanced
    NodePool's refusal of one node alone is not the search's (`PassContext.balanced_refused` is kept)."""
    total = net = 0.0
    refused = ctx.balanced_refused
    mark = ctx.state.mark()
    try:
        for name in names:
            if name in ctx.alone:
                continue
            found = _jointly(ctx, [name], True, keep=True)
            if isinstance(found, Command):
                total += found.savings
                net += worth.net(ctx.view, found.nodes, found.savings)
    finally:
        ctx.state.rollback(mark)
    ctx.balanced_refused = refused
    return total, net


def _one_saves_as_much(ctx: PassContext, command: Command) -> bool:
    """Whether one of ``command``'s nodes consolidated on its own (simulated as `_alone` simulates it) would save as
    much as the whole command or more, both less what their evictions ask (`ebb.core.worth`). A greedy run grows its
    set only while the saving grows, so in its own simulation the set saves more than its first node alone; the set
    simulated jointly (`_jointly`, as validation will) packs its pods differently and can save less: a node whose pods
    fit on another node's room, merged with one whose pods then take that room, so that its pods need the
    replacement. Only a node whose price, less what its evictions ask, reaches the command's saving could save as
    much alone, and only those are simulated."""
    view = ctx.view
    net = worth.net(view, command.nodes, command.savings)
    refused = ctx.balanced_refused
    try:
        for name in command.nodes:
            if name in ctx.alone or view.price[name] - worth.asked(view, [name]) < net - EPSILON:
                continue  # its verdict alone is a refusal, or even its delete would save less
            found = _jointly(ctx, [name], True)
            if isinstance(found, Command) and worth.net(view, found.nodes, found.savings) >= net - EPSILON:
                return True
        return False
    finally:
        ctx.balanced_refused = refused


def run(ctx: PassContext) -> MethodOutcome:
    out = MethodOutcome()
    names = candidates(ctx, out)
    if len(names) < 2:
        return out
    best: Command | None = None
    start = set_aside_unsettled(ctx.view, ctx.state)
    refused_alone: set[str] = set()
    # the greedy runs' refusals of nodes alone (Karpenter's search makes no step alone: single-node keeps them then)
    kept = None if ctx.options.karpenter_pace else kept_refusals(ctx)
    if ctx.options.karpenter_pace:  # the back-test's simulation of Karpenter: its own search, as it is
        best = _karpenter_prefix(ctx, names)
    else:
        if ctx.options.search == SEARCH_OPTIMIZER:
            best = _optimized(ctx, names)
            if best is not None and _one_saves_as_much(ctx, best):
                best = None
        if best is None:
            # the greedy runs; when the optimizer's program finds no set, the delete-only one (the program weighed
            # the launches already)
            runs = (False,) if ctx.options.search == SEARCH_OPTIMIZER else (False, True)
            for allow_replace in runs:
                command = _greedy(ctx, names, allow_replace, refused_alone, kept)
                if command is not None and (best is None or worth.net(ctx.view, command.nodes, command.savings)
                                            > worth.net(ctx.view, best.nodes, best.savings) + EPSILON) \
                        and not _one_saves_as_much(ctx, command):
                    best = command
        merged = _merges(ctx, names)
        if merged is not None and (best is None or worth.net(ctx.view, merged.nodes, merged.savings)
                                   > worth.net(ctx.view, best.nodes, best.savings) + EPSILON):
            best = merged
    ctx.state.rollback(start)
    if kept is not None:
        kept.close()
    if best is not None:
        for name in best.nodes:
            ctx.consume(ctx.view.nodes[name].nodepool or "", REASON)
        take_capacity(ctx, command_capacity_lost(ctx.view, best))
        out.commands.append(best)
        scores = balanced.judge(ctx.view, best.nodes, best.savings)
        ctx.moves.extend(balanced.moves(ctx.view, best.nodes, scores, approved=True))
    elif ctx.balanced_refused is not None:  # counted once, the last set refused (as Karpenter counts its search's)
        ctx.moves.extend(balanced.moves(ctx.view, *ctx.balanced_refused, approved=False))
    return out


METHOD = Method(NAME, REASON, consolidation=True, run=run, validate=still_consolidatable)

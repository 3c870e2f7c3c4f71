"""Single-node consolidation: delete a node whose pods fit elsewhere, or replace it with one cheaper node.

Candidates are tried in disruption-cost order (least disruption first). A delete beats a replace. Karpenter
acts on one node per pass; ebb takes every candidate that consolidates on its own in the same pass, up to the
Underutilized budget (and its NodePool's ``demandWindow``), each as its own command (with
``EngineOptions.karpenter_pace``, one, as Karpenter: the back-test's simulations of Karpenter set it). They are
simulated in sequence on one state, so a later command never counts on capacity an earlier one uses, and a replacement
node, once chosen, takes no other command's pods. On a 2,000-node cluster this turns hundreds of passes into a
handful. With explanations on, every remaining candidate gets its own reason. In a NodePool whose
consolidationPolicy is Balanced, a candidate whose delete would not be worth its disruption is not simulated, and
a command found is made only when its score passes (`ebb.core.balanced`). A command that saves less than its
NodePool's ``minimumSavingPerEvictedPod`` asks for the pods it evicts is not made (`ebb.core.worth`), and every
command's explanation says what it evicts against what it saves.
"""

from __future__ import annotations

from dataclasses import replace

from ebb.core import balanced, worth
from ebb.core.causes import BlockCause, Cause
from ebb.core.methods.base import (
    Command,
    Method,
    MethodOutcome,
    PassContext,
    filter_replacement,
    placements_of,
)
from ebb.core.methods.consolidation import (
    REASON,
    NoCheaperLaunch,
    candidates,
    command_capacity_lost,
    demand_block,
    give_up_on_replacing,
    set_aside_unsettled,
    still_consolidatable,
    take_capacity,
)
from ebb.core.model import placement_order

NAME = "single-node-consolidation"


def evaluate(ctx: PassContext, name: str, keep: bool = False) -> Command | BlockCause:
    """The command that would consolidate this one node, or why none would. With `keep`, a found
    command stays applied to the simulation state (its replacement closed to further pods).

    The delete is tried first: its pods on the other nodes, as they are. When one finds no room, the replace
    starts from there, with one new node allowed: the pods before it go where they went (`SimState.place_first`).
    Without explanations (`EngineOptions.explain` off) the replace stops as soon as the new node is known to cost
    too much whatever else joins it (`SimState.launch_floor`), and the cause then gives that bound as the price
    needed: the verdict, no command, is the one placing every pod would reach."""
    state, view = ctx.state, ctx.view
    price = view.price[name]
    mark = state.mark()
    claims_before = set(state.claims)
    leaving = state.remove_node(name)
    order = placement_order(leaving)
    stop, why = state.place_first(order)
    failures: dict[str, str] = {}
    if stop is not None:
        prefix = state.mark()
        if why is not None:
            failures = {order[stop].key: why}
        else:
            failures, _ = state.place_ordered(order[stop:], max_new=0, first_failure=True)
    if stop is None or not failures:
        placements = placements_of(state, leaving)
        if not keep:
            state.rollback(mark)
        return Command(NAME, REASON, "delete", (name,), (), price, placements,
                       f"{name}: its {len(leaving)} pods fit on other nodes")
    pod, why = next(iter(failures.items()))
    no_delete = {"pod": pod, "why": why}
    state.rollback(prefix)
    try:
        failures, _ = state.place_ordered(order[stop:], max_new=1, first_failure=True,
                                          on_claim=None if ctx.options.explain else give_up_on_replacing(ctx, name))
    except NoCheaperLaunch as e:
        state.rollback(mark)
        return BlockCause(Cause.NO_REPLACEMENT, no_delete, e.cause)
    if failures:
        state.rollback(mark)
        return BlockCause(Cause.PODS_FIT_NOWHERE, no_delete)
    new_bins = [b for b in state.claims if b not in claims_before]
    new_node = next(n for n in state.new_nodes() if n.hostname == state.claims[new_bins[0]].hostname)
    replacement = filter_replacement(new_node, [name], ctx)
    placements = placements_of(state, leaving)
    if isinstance(replacement, BlockCause) or not keep:
        state.rollback(mark)
    else:
        state.close_bin(new_bins[0])
    if isinstance(replacement, BlockCause):
        return BlockCause(Cause.NO_REPLACEMENT, no_delete, replacement)
    return Command(NAME, REASON, "replace", (name,), (replacement,), price - replacement.price, placements,
                   f"{name}: replaced by a {replacement.instance_types[0]} at ${replacement.price:.4f}/h "
                   f"instead of ${price:.4f}/h")


def judged(ctx: PassContext, command: Command) -> tuple[list[balanced.Score], BlockCause | None]:
    """The Balanced NodePools' scores of ``command`` (none when none of its NodePools is Balanced), and why one of
    them would not make it (its score is below the threshold), or why it is not worth the pods it evicts
    (`ebb.core.worth`), or None."""
    scores = balanced.judge(ctx.view, command.nodes, command.savings)
    rejected = balanced.rejection(scores)
    if rejected is None:
        return scores, worth.refusal(ctx.view, command.nodes, command.savings, f"this {command.action}")
    return scores, balanced.cause(rejected, ctx.view.pools[rejected.pool], f"this {command.action}")


def _with_merge(ctx: PassContext, name: str, verdict: BlockCause) -> BlockCause:
    """``verdict`` on the node alone, and why multi-node consolidation's merge search refused the smallest set it
    tried that holds the node (`Cause.NO_MERGE`), when it tried one."""
    merge = ctx.merges.get(name)
    if merge is None:
        return verdict
    return BlockCause(Cause.NO_MERGE, {"size": merge[0], "merge": merge[1]}, verdict)


def run(ctx: PassContext) -> MethodOutcome:
    out = MethodOutcome()
    start = set_aside_unsettled(ctx.view, ctx.state)
    for name in candidates(ctx, out):
        pool = ctx.view.nodes[name].nodepool or ""
        if ctx.budget_left(pool, REASON) <= 0:
            if ctx.options.explain:
                out.blocked[name] = BlockCause(Cause.BUDGET_USED_BY_CONSOLIDATIONS, {
                    "reason": REASON, "pool": pool, "source": ctx.view.pools[pool].policy_source})
            continue
        # a Balanced NodePool's node whose delete, the best it can do, would not be worth its disruption
        short_of = balanced.delete_falls_short(ctx.view, name)
        if short_of is not None:
            out.blocked[name] = balanced.cause(short_of, ctx.view.pools[pool], "even deleting it")
            continue
        # while the state is still the one multi-node consolidation looked at: its verdict on the node alone
        known = None if out.commands else ctx.alone.get(name)
        if known is not None:
            out.blocked[name] = _with_merge(ctx, name, known)
            continue
        mark = ctx.state.mark()
        verdict = evaluate(ctx, name, keep=True)
        if isinstance(verdict, Command):
            scores, rejected = judged(ctx, verdict)
            ctx.moves.extend(balanced.moves(ctx.view, verdict.nodes, scores, approved=rejected is None))
            if rejected is not None:
                ctx.state.rollback(mark)
                out.blocked[name] = _with_merge(ctx, name, rejected)
                continue
            verdict = replace(verdict, explanation=verdict.explanation
                              + worth.words(ctx.view, verdict.nodes, verdict.savings) + balanced.approval(scores))
            lost = command_capacity_lost(ctx.view, verdict)
            short = demand_block(ctx.view, ctx.capacity_left, lost, f"this {verdict.action}") if lost else None
            if short is not None:
                ctx.state.rollback(mark)
                verdict = short
            else:
                take_capacity(ctx, lost)
        if isinstance(verdict, BlockCause):
            out.blocked[name] = _with_merge(ctx, name, verdict)
        else:
            ctx.consume(pool, REASON)
            out.commands.append(verdict)
            if ctx.options.karpenter_pace:  # Karpenter's loop: one node per pass
                break
    ctx.state.rollback(start)
    return out


METHOD = Method(NAME, REASON, consolidation=True, run=run, validate=still_consolidatable)

"""Single-node consolidation: delete one node whose pods fit elsewhere, or replace it with one cheaper node.

Candidates are tried in disruption-cost order and the first that works acts (least disruption first,
as Karpenter). A delete beats a replace. With explanations on, every candidate is evaluated so each
node that stays gets its own reason ("why isn't my node consolidated?").
"""

from __future__ import annotations

from ebb.core.methods.base import Command, MethodOutcome, PassContext, filter_replacement, placements_of
from ebb.core.methods.consolidation import REASON, candidates

NAME = "single-node-consolidation"


def evaluate(ctx: PassContext, name: str) -> tuple[Command | None, str]:
    """The command that would consolidate this one node, or why none would."""
    state, view = ctx.state, ctx.view
    price = view.price[name]
    mark = state.mark()
    leaving = state.remove_node(name)
    failures, _ = state.place_all(leaving, max_new=0)
    if not failures:
        placements = placements_of(state, leaving)
        state.rollback(mark)
        return Command(NAME, REASON, "delete", (name,), (), price, placements,
                       f"{name}: its {len(leaving)} pods fit on other nodes"), ""
    pod, why = next(iter(failures.items()))
    no_delete = f"its pods do not fit on the other nodes (pod {pod}: {why})"
    state.rollback(mark)
    leaving = state.remove_node(name)
    failures, _ = state.place_all(leaving, max_new=1)
    if failures:
        state.rollback(mark)
        return None, no_delete + ", and not on one new node either"
    new_nodes = state.new_nodes()
    replacement, why_not = filter_replacement(new_nodes[0], [name], ctx)
    placements = placements_of(state, leaving)
    state.rollback(mark)
    if replacement is None:
        return None, f"{no_delete}, and {why_not}"
    return Command(NAME, REASON, "replace", (name,), (replacement,), price - replacement.price, placements,
                   f"{name}: replaced by a {replacement.instance_types[0]} at ${replacement.price:.4f}/h "
                   f"instead of ${price:.4f}/h"), ""


def run(ctx: PassContext) -> MethodOutcome:
    out = MethodOutcome()
    chosen: Command | None = None
    for name in candidates(ctx, out):
        if chosen is not None and not ctx.options.explain:
            break
        command, why = evaluate(ctx, name)
        if command is None:
            out.blocked[name] = why
        elif chosen is None:
            chosen = command
        else:
            out.blocked[name] = (f"it could be consolidated too ({command.action}, saving "
                                 f"${command.savings:.4f}/h), but one single-node command acts per pass and "
                                 f"{chosen.nodes[0]} disrupts less; it is considered again next pass")
    if chosen is not None:
        pool = ctx.view.nodes[chosen.nodes[0]].nodepool or ""
        ctx.consume(pool, REASON)
        out.commands.append(chosen)
    return out

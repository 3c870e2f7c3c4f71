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

What consolidating one node alone would do is also what the engine tells of every node that waits for its budget;
a caller that makes pass after pass keeps those verdicts (`AloneVerdicts`), and a pass takes each one that still
holds on its own start state instead of simulating the node again: a pass after a change of one node simulates
again only the nodes whose pods that change could send elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ebb.core import balanced, worth
from ebb.core.causes import BlockCause, Cause
from ebb.core.labels import selector_matches
from ebb.core.methods.base import (
    EPSILON,
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
    kept_refusals,
    set_aside_unsettled,
    still_consolidatable,
    take_capacity,
)
from ebb.core.methods.kept import (
    MAX_CHANGED,
    ChangedBins,
    KeptRefusals,
    RefusalSession,
    Start,
    fits_nowhere_cause,
    new_node_why,
    one_per_class,
    simple,
)
from ebb.core.model import Interned, Pod, PodAffinityTerm, placement_order
from ebb.core.quantity import dollars
from ebb.core.simulator.scheduler import SimState
from ebb.core.simulator.topology import Topology

NAME = "single-node-consolidation"


def evaluate(ctx: PassContext, name: str, keep: bool = False, *, bins: list[int] | None = None,
             refusals: RefusalSession | None = None) -> Command | BlockCause:
    """The command that would consolidate this one node, or why none would. With `keep`, a found
    command stays applied to the simulation state (its replacement closed to further pods). Given ``bins``, a delete
    adds to it the bins its pods went to (`AloneVerdicts`); given ``refusals``, a replace refused as multi-node
    consolidation's step alone refuses one (a pod that fits nowhere, a replacement given up or no cheaper) is recorded
    there (`RefusalSession.record`).

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
        if bins is not None:
            bins.extend(state.placed[pod.key] for pod in leaving)
        if not keep:
            state.rollback(mark)
        return Command(NAME, REASON, "delete", (name,), (), price, placements, f"{name}: {_fit_words(name, leaving)}")
    pod, why = next(iter(failures.items()))
    no_delete = {"pod": pod, "why": why}
    state.rollback(prefix)
    try:
        failures, _ = state.place_ordered(order[stop:], max_new=1, first_failure=True,
                                          on_claim=None if ctx.options.explain else give_up_on_replacing(ctx, name))
    except NoCheaperLaunch as e:
        if refusals is not None and why is not None:
            refusals.record(name, order, stop, price, why, fits_nowhere=False, replacement=e.cause)
        state.rollback(mark)
        return BlockCause(Cause.NO_REPLACEMENT, no_delete, e.cause)
    if failures:
        new = new_node_why(failures, ctx.options.explain, pod, why or "")
        if refusals is not None and why is not None:
            refusals.record(name, order, stop, price, why, fits_nowhere=True, replacement=None, new=new)
        state.rollback(mark)
        return fits_nowhere_cause(pod, no_delete["why"], new)
    new_bins = [b for b in state.claims if b not in claims_before]
    new_node = next(n for n in state.new_nodes() if n.hostname == state.claims[new_bins[0]].hostname)
    replacement = filter_replacement(new_node, [name], ctx)
    # no cheaper, whatever the node's type: multi-node's greedy runs refuse the step too; at Karpenter's pace, where
    # there are none, any replacement refused by what it reads of the node, the NodePools, the options and the new node,
    # or for a pod of this node a node not initialized yet has room for (which pod and node are found again where it
    # is taken: `RefusalSession.held`)
    if refusals is not None and why is not None and isinstance(replacement, BlockCause) \
            and (price - new_node.price <= EPSILON or ctx.options.karpenter_pace):
        waiting = ctx.options.karpenter_pace and replacement.kind is Cause.PODS_FIT_NOWHERE
        refusals.record(name, order, stop, price, why, fits_nowhere=False, replacement=replacement, filtered=True,
                        waiting=waiting)
    placements = placements_of(state, leaving)
    if isinstance(replacement, BlockCause) or not keep:
        state.rollback(mark)
    else:
        state.close_bin(new_bins[0])
    if isinstance(replacement, BlockCause):
        return BlockCause(Cause.NO_REPLACEMENT, no_delete, replacement)
    return Command(NAME, REASON, "replace", (name,), (replacement,), price - replacement.price, placements,
                   f"{name}: replaced by a {replacement.instance_types[0]} at ${dollars(replacement.price)}/h "
                   f"instead of ${dollars(price)}/h")


@dataclass(frozen=True, slots=True)
class _Kept:
    """A delete found for a node alone: the pods that left it, its price, the last bin (in the
    start state's order) a pod went to, and the command; ``kinds``: a pod of each class among them."""

    leaving: tuple[Pod, ...]
    kinds: tuple[Pod, ...]
    price: float
    reach: int
    command: Command


class AloneVerdicts:
    """What consolidating each node alone would do on a pass's start state, kept from pass to pass: the engine's
    explanation of a node that waits for its budget (`Cause.BUDGET_WAIT`) evaluates every such node alone, most of a
    pass where budgets are held, and a pass after a change of one node finds most of them as the pass before did.

    Only deletes whose pods each have one form (no preference), no topology constraint (spread, pod affinity or
    anti-affinity, their own or another pod's against them) and no host port are kept. Placing such a pod reads no
    topology count and no NodePool: it goes to the first bin, in the start state's order, that is open, has room and
    admits it by its labels and taints, and what each bin answers depends on that bin alone (its node, its room, whether
    it takes pods) and on the pod. The delete is therefore the same on any start state whose bins up to the last one its
    pods went to (its ``reach``) are the same, with the same pods leaving the node at the same price. Each pass compares
    its start state with the last one's (`Start.same_up_to`: the nodes by reference or value, the room and openness as
    arrays) and keeps the deletes whose reach lies inside the part that is the same. A delete that reaches further is
    checked against the bins that changed (`Start.changed_in`: those whose place among the unchanged ones moved count as
    changed, so the others keep their order): it holds when the bin each of its pods went to is unchanged and no changed
    bin before that one in the new order takes the pod (`AloneSession._holds`). Then, pod by pod, the bins before the
    one it went to are the same unchanged bins as before, holding the same pods placed before it, which did not take it,
    and changed bins, which do not; so it goes there again. The others are evaluated again: after a change of one node,
    the deletes that put a pod on it or whose pods it now takes. A kept delete is still checked against the pods'
    classes of this pass (a new pod's anti-affinity may have given one a constraint). A cache, not state: its answers
    are those evaluated afresh (`tests/property/test_alone_verdicts_properties.py`). One pass at a time per instance; a
    caller keeps one for the passes it makes over one cluster (`ebb_consolidation_planner.pass_inputs.PassInputs`)."""

    __slots__ = ("_last", "hits", "refusals")

    def __init__(self) -> None:
        #: the last pass's start state and the deletes kept on it, by node name
        self._last: tuple[Start, dict[str, _Kept]] | None = None
        #: evaluations answered from a kept delete (for tests and benchmarks)
        self.hits = 0
        #: what multi-node consolidation's greedy runs found of nodes alone that consolidate neither way, for the next
        #: pass's runs (`ebb.core.methods.kept.KeptRefusals`)
        self.refusals = KeptRefusals()

    def on(self, state: SimState) -> AloneSession:
        """A pass's evaluations on ``state`` (its start state: it is back to it after each evaluation)."""
        start = Start.of(state)
        last = self._last
        kept: dict[str, _Kept] = {}
        checked: dict[str, _Kept] = {}
        changed: list[int] | None = None
        if last is not None:
            same, index = last[0].same_up_to(start), state.s.node_index
            for name, found in last[1].items():
                if name in index:
                    (kept if found.reach < same else checked)[name] = found
            if checked:
                changed = last[0].changed_in(start)
                if changed is None or len(changed) > MAX_CHANGED:
                    checked, changed = {}, None
        return AloneSession(self, start, kept, checked, ChangedBins(state, start, changed or []))


class AloneSession:
    """One pass's evaluations of nodes alone (`AloneVerdicts.on`); `close` keeps them for the next pass."""

    def __init__(self, owner: AloneVerdicts, start: Start, kept: dict[str, _Kept], checked: dict[str, _Kept],
                 changed: ChangedBins) -> None:
        self._owner, self._start, self._kept = owner, start, kept
        #: the kept deletes whose reach is past the first changed bin: taken when `_holds`
        self._checked = checked
        #: the bins of this start state that changed since the last one's; the others kept their order
        self._changed = changed
        self._simple: dict[Interned, bool] = {}

    def _holds(self, state: SimState, name: str, found: _Kept) -> _Kept | None:
        """``found`` with its reach in this start state's order, when each of its pods goes where it went on the last
        one: its bin is unchanged, and no changed bin before it in this order (other than the node's own, which the
        delete closes) takes it; else None. The unchanged bins are in the same order (`Start.changed_in`), so the
        first bin that takes each pod is the same, as the class docstring argues."""
        index, changed = state.s.node_index, self._changed
        own = index[name]
        reach = -1
        for pod in found.leaving:
            at = index.get(found.command.placements.get(pod.key, ""))
            if at is None or at in changed.at or changed.take_before(pod, at, own):
                return None
            reach = max(reach, at)
        return replace(found, reach=reach)

    def evaluate(self, ctx: PassContext, name: str) -> Command | BlockCause:
        """`evaluate` of node ``name`` on the start state, from the delete kept for it when that still holds."""
        state = ctx.state
        leaving = state.leaving_of(name)
        price = ctx.view.price[name]
        found = self._kept.get(name)
        checked = found is None
        if checked:
            found = self._checked.pop(name, None)
        if found is not None and found.price == price and len(found.leaving) == len(leaving) \
                and all(a is b or a == b for a, b in zip(found.leaving, leaving, strict=True)) \
                and simple(state, found.kinds, self._simple):
            held = self._holds(state, name, found) if checked else found
            if held is not None:
                self._kept[name] = held
                self._owner.hits += 1
                return held.command
        bins: list[int] = []
        verdict = evaluate(ctx, name, bins=bins)
        if isinstance(verdict, Command) and verdict.action == "delete" and all(b < state.s.N for b in bins) \
                and simple(state, tuple(leaving), self._simple):
            kinds = one_per_class(leaving)
            self._kept[name] = _Kept(tuple(leaving), kinds, price, max(bins, default=-1), verdict)
        else:
            self._kept.pop(name, None)
        return verdict

    def close(self) -> None:
        """Keep this pass's start state and the deletes that hold on it for the next pass (those not asked for this
        pass and not known to hold are left out)."""
        self._owner._last = (self._start, self._kept)


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
    most = ctx.options.max_replacements
    into = "at most one new node" if most == 1 else f"at most {most} new nodes"
    return BlockCause(Cause.NO_MERGE, {"size": merge[0], "into": into, "merge": merge[1]}, verdict)


def run(ctx: PassContext) -> MethodOutcome:
    out = MethodOutcome()
    start = set_aside_unsettled(ctx.view, ctx.state)
    # once a command changed the state: multi-node's refusals of nodes alone, taken where they hold on it. At
    # Karpenter's pace, multi-node's search leaves no verdict on a node alone (`PassContext.alone`), and the pass makes
    # one command: the refusals kept from the last pass are taken from the start, the evaluations record theirs, and
    # they are kept for the next pass (`first`)
    pace = ctx.options.karpenter_pace
    refusals: RefusalSession | None = None
    first: RefusalSession | None = None  # at Karpenter's pace, the session on the pass's start state
    refusals_hold = True  # False without a keeper of refusals
    # the required pod affinity terms of the pods this pass's commands move: (the pod, where it goes, the term)
    relied: list[tuple[Pod, str, PodAffinityTerm]] = []
    for name in candidates(ctx, out):
        pool = ctx.view.nodes[name].nodepool or ""
        target = _affinity_target(ctx.view.movable[name], relied) if relied else None
        if target is not None:
            out.blocked[name] = target
            continue
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
        # while the state is still the one multi-node consolidation looked at: its verdict on the node alone; after
        # a command, its refusal of the node alone where that holds on the state the command left
        known = None if out.commands else ctx.alone.get(name)
        if known is None and (out.commands or pace) and refusals_hold:
            if refusals is None:
                refusals = kept_refusals(ctx)
                refusals_hold = refusals is not None
                if pace and not out.commands:
                    first = refusals
            held = refusals.held(name, ctx.view.price[name]) if refusals is not None else None
            if held is not None:
                known = held[0].verdict(held[1])
        if known is not None:
            out.blocked[name] = _with_merge(ctx, name, known)
            continue
        mark = ctx.state.mark()
        # after a command, a refusal found here answers the nodes alike after it (`RefusalSession.held`)
        verdict = evaluate(ctx, name, keep=True, refusals=refusals if out.commands or pace else None)
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
            for pod in ctx.view.movable[name]:
                if pod.spec.pod_affinity:
                    to = verdict.placements.get(pod.key, "")
                    relied.extend((pod, f"node {to}" if to in ctx.view.nodes else "a new node", term)
                                  for term in pod.spec.pod_affinity)
            refusals = None  # checked again on the state this command leaves
            if pace:  # Karpenter's loop: one node per pass
                break
    ctx.state.rollback(start)
    if first is not None:
        first.close()
    return out


def _affinity_target(pods: Sequence[Pod], relied: Sequence[tuple[Pod, str, PodAffinityTerm]]) -> BlockCause | None:
    """Why a node whose pod a pod moved by an earlier command of this pass requires pod affinity to waits for the
    next pass (`Cause.AFFINITY_TARGET_OF_A_MOVE`); None when none of its pods is such a target. The commands of a pass
    run at once: the moved pod may be scheduled after its target left for another zone, and find no home."""
    for mover, to, term in relied:
        namespaces = Topology.term_namespaces(term, mover.namespace)
        for pod in pods:
            if (namespaces is None or pod.namespace in namespaces) and selector_matches(term.selector, pod.labels):
                return BlockCause(Cause.AFFINITY_TARGET_OF_A_MOVE, {"pod": mover.key, "to": to, "target": pod.key})
    return None


METHOD = Method(NAME, REASON, consolidation=True, run=run, validate=still_consolidatable)


def _fit_words(name: str, leaving: Sequence[Pod]) -> str:
    """That the pods node ``name`` would leave fit on other nodes: its own, and those the simulation had placed on it
    first (pending pods, pods of nodes being disrupted), which are not its pods and which it does not evict."""
    own = sum(pod.node_name == name for pod in leaving)
    if own == len(leaving):
        return f"its {own} pods fit on other nodes"
    return (f"its {own} pods, and the {len(leaving) - own} expected on it (pending or leaving a node), fit on other "
            "nodes")

"""The decision engine: one pass over a snapshot at `now` -> commands, blocked causes, budgets, cost.

Methods run in `METHOD_ORDER`; the first that produces commands acts and the rest do not. With
explanations on, the later methods are still evaluated (against the untouched budgets) so that every
node that is not disrupted gets its own cause, including "it could be consolidated, but an earlier
method acted this pass" (`Cause.ANOTHER_METHOD_ACTED`); one that those explained commands leave out for their
budget is told whose commands would take it (`Cause.BUDGET_FOR_WAITING_COMMANDS`), since they do not execute this
pass. A node that waits only for its budget is told
also what consolidating it alone would do: the budget stays the cause, what it alone would do is a
value of it (`Cause.BUDGET_WAIT`, `Cause.BUDGET_WAIT_UNCONSOLIDATABLE`). Each `Blocked` carries its
`BlockCause`; its `reason` is the cause's sentence, written only when read. Each result also says when a pass
over the same snapshot could first decide differently (``revisit_at``, `ebb.core.revisit`), so a caller whose
snapshot has not changed may reuse the answer until then. Pure: no I/O, no clock, no logging.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from ebb.core.balanced import Move
from ebb.core.causes import NOTHING_TO_DO, BlockCause, Cause
from ebb.core.cluster import ClusterView
from ebb.core.methods import METHOD_ORDER, single_node
from ebb.core.methods.base import Command, EngineOptions, PassContext, simulation
from ebb.core.methods.consolidation import set_aside_unsettled
from ebb.core.methods.kept import KeptRefusals
from ebb.core.revisit import revisit_at

#: ``Blocked.method`` of a node no method got to say anything about (not a candidate, blocked for every
#: method, or nothing to do)
ALL_METHODS = "all"


@dataclass(frozen=True, slots=True)
class Blocked:
    """A node the pass does not disrupt: which method said why (or "all"), and why."""

    node: str
    method: str
    cause: BlockCause

    @property
    def reason(self) -> str:
        """The cause's sentence (``blocked[].reason`` of ``ebb plan``, the message of the node's Event)."""
        return self.cause.text


@dataclass(frozen=True, slots=True)
class BudgetRow:
    nodepool: str
    reason: str
    allowed: int
    detail: str
    #: a budget of the pool is invalid (a bad cron, count or duration): ``allowed`` is 0 and ``detail`` says why
    invalid: bool = False
    #: the budget's nodes before the disrupting ones are taken off, and those (``BudgetVerdict``)
    limit: int = 0
    disrupting: int = 0


@dataclass(frozen=True, slots=True)
class PassResult:
    now: datetime
    commands: tuple[Command, ...]
    blocked: tuple[Blocked, ...]
    budgets: tuple[BudgetRow, ...]
    cost_before: float
    cost_after: float
    #: the earliest moment after ``now`` at which a pass over the same snapshot could decide differently (its
    #: commands, findings or budgets; ``ebb.core.revisit``): ``now`` when that cannot be ruled out, None when
    #: nothing changes with time alone
    revisit_at: datetime | None = None
    #: the consolidation moves the pass's methods counted, approved or refused (`ebb.core.balanced.Move`)
    moves: tuple[Move, ...] = ()


def _context(view: ClusterView, options: EngineOptions, refusals: KeptRefusals | None = None) -> PassContext:
    sched, state = simulation(view)
    remaining = {k: v.allowed for k, v in view.budgets.items()}
    return PassContext(view, options, sched, state, remaining, refusals=refusals)


def run_pass(snapshot_view: ClusterView, options: EngineOptions | None = None, *,
             alone: single_node.AloneVerdicts | None = None) -> PassResult:
    """One pass of the engine over a prepared ClusterView (`EngineOptions.view_of`, or `ClusterView.build` with
    the same ``require_nodeclaim``). ``alone``: what consolidating each node alone did on the caller's last pass,
    for the explanations of the nodes that wait for their budget (the answer is the same without it)."""
    options = options or EngineOptions()
    view = snapshot_view
    if view.require_nodeclaim != options.require_nodeclaim:
        raise ValueError(f"the view was built with require_nodeclaim={view.require_nodeclaim}, the options say "
                         f"{options.require_nodeclaim}")
    ctx = _context(view, options, alone.refusals if alone is not None else None)
    commands: list[Command] = []
    causes: dict[str, tuple[str, BlockCause]] = {}  # node -> (the method that said it, why)
    acted: str | None = None
    for method, _why in METHOD_ORDER:
        if acted is not None:
            break
        outcome = method.run(ctx)
        for name, cause in outcome.blocked.items():
            causes.setdefault(name, (method.name, cause))
        if outcome.commands:
            commands.extend(outcome.commands)
            acted = method.name
    disrupted = {n for c in commands for n in c.nodes}
    if options.explain and acted is not None:
        # Explain the rest against the cluster as it will be once this pass's commands ran.
        explain_ctx = PassContext(view, options, ctx.scheduler, ctx.state,
                                  {k: v.allowed for k, v in view.budgets.items()}, frozenset(disrupted),
                                  merges=ctx.merges,  # the merges multi-node's search refused, if it acted
                                  refusals=ctx.refusals)  # a kept refusal holds on this state as on any other
        for command in commands:
            claims_before = set(ctx.state.claims)
            leaving = [pod for name in command.nodes for pod in ctx.state.remove_node(name)]
            ctx.state.place_all(leaving, max_new=len(command.replacements), explain=False)
            for b in [b for b in ctx.state.claims if b not in claims_before]:
                # a replacement launches as what the command chose: it takes no pod of a later method's run, which
                # would otherwise grow it into a dearer type the command never launches
                ctx.state.close_bin(b)
        # (NodePool, reason) -> the methods whose explained (not executed) commands take that budget
        waiting_for: defaultdict[tuple[str, str], list[str]] = defaultdict(list)
        seen = False
        for method, _why in METHOD_ORDER:
            if acted == method.name:
                seen = True
                continue
            if not seen:
                continue
            outcome = method.run(explain_ctx)
            for command in outcome.commands:
                for name in command.nodes:
                    waiting_for[(view.nodes[name].nodepool or "", method.reason)].append(method.name)
            for name, cause in outcome.blocked.items():
                if name not in disrupted and name not in causes:
                    causes[name] = (method.name, _to_waiting_commands(view, cause, waiting_for, acted))
            for command in outcome.commands:
                for name in command.nodes:
                    if name not in disrupted:
                        causes.setdefault(name, (method.name, BlockCause(Cause.ANOTHER_METHOD_ACTED, {
                            "method": method.name, "action": command.action, "acted": acted})))
    if options.explain:
        _explain_budget_waits(view, options, ctx, disrupted=disrupted, causes=causes, alone=alone)
    blocked = []
    for node in snapshot_view.snapshot.nodes:
        if node.name in disrupted:
            continue
        hard = view.hard_block.get(node.name)
        if node.name in view.not_candidate:
            blocked.append(Blocked(node.name, ALL_METHODS, view.not_candidate[node.name]))
        elif hard is not None and node.name in causes and causes[node.name][1] == hard:
            blocked.append(Blocked(node.name, ALL_METHODS, hard))
        elif node.name in causes:
            method_name, cause = causes[node.name]
            blocked.append(Blocked(node.name, method_name, cause))
        else:
            blocked.append(Blocked(node.name, ALL_METHODS, NOTHING_TO_DO))
    before = view.pool_cost()
    # summed exactly (`math.fsum`), whatever order the set of disrupted nodes iterates in; + 0.0 makes -0.0 0.0
    after = math.fsum((before, *(-view.price[n] for n in disrupted),
                       *(r.price for c in commands for r in c.replacements))) + 0.0
    budgets = tuple(BudgetRow(pool, reason, v.allowed, v.detail, v.invalid, v.limit, v.disrupting)
                    for (pool, reason), v in sorted(view.budgets.items()))
    return PassResult(view.now, tuple(commands), tuple(blocked), budgets, before, after, revisit_at(view),
                      tuple(ctx.moves))


def _to_waiting_commands(view: ClusterView, cause: BlockCause,
                         waiting_for: Mapping[tuple[str, str], list[str]], acted: str) -> BlockCause:
    """A cause from the explaining run that says a budget is used up: the budget went to commands of the
    explaining run, which do not execute this pass, so say whose (`Cause.BUDGET_FOR_WAITING_COMMANDS`) rather
    than "used up by other disruptions this pass". Also inside a cause that qualifies it (``expired, but ...``)."""
    if cause.kind in (Cause.BUDGET_USED_UP, Cause.BUDGET_USED_BY_CONSOLIDATIONS):
        pool, reason = str(cause.values["pool"]), str(cause.values["reason"])
        takers = waiting_for.get((pool, reason))
        if not takers:
            return cause
        return BlockCause(Cause.BUDGET_FOR_WAITING_COMMANDS, {
            "reason": reason, "pool": pool, "source": view.pools[pool].policy_source,
            "detail": view.budgets[(pool, reason)].detail, "by": tuple(dict.fromkeys(takers)), "acted": acted})
    if cause.inner is not None:
        inner = _to_waiting_commands(view, cause.inner, waiting_for, acted)
        if inner is not cause.inner:
            return replace(cause, inner=inner)
    return cause


def _explain_budget_waits(view: ClusterView, options: EngineOptions, ctx: PassContext, *, disrupted: set[str],
                          causes: dict[str, tuple[str, BlockCause]],
                          alone: single_node.AloneVerdicts | None = None) -> None:
    """A node skipped only because the budget ran out: say also what consolidating it alone would do (from
    ``alone``'s deletes kept from the last pass where they still hold)."""
    solo = PassContext(view, options, ctx.scheduler, ctx.state, {k: v.allowed for k, v in view.budgets.items()},
                       frozenset(disrupted))
    waiting = sorted(node for node, (_method, cause) in causes.items()
                     if cause.waits_for_budget and node not in disrupted)
    start = set_aside_unsettled(view, ctx.state)
    session = alone.on(ctx.state) if alone is not None and waiting else None
    for node in waiting:
        method_name, budget = causes[node]
        verdict = session.evaluate(solo, node) if session is not None else single_node.evaluate(solo, node)
        if isinstance(verdict, Command):
            verdict = single_node.judged(solo, verdict)[1] or verdict
        if isinstance(verdict, BlockCause):
            causes[node] = (single_node.NAME, BlockCause(Cause.BUDGET_WAIT_UNCONSOLIDATABLE, {"alone": verdict},
                                                         budget))
        else:
            causes[node] = (method_name, BlockCause(Cause.BUDGET_WAIT, {"action": verdict.action,
                                                                        "savings": verdict.savings}, budget))
    if session is not None:
        session.close()
    ctx.state.rollback(start)


def plan_pass(snapshot: object, now: datetime, options: EngineOptions | None = None) -> PassResult:
    """Convenience: build the view and run one pass."""
    from ebb.core.model import Snapshot

    assert isinstance(snapshot, Snapshot)
    options = options or EngineOptions()
    return run_pass(options.view_of(snapshot, now), options)

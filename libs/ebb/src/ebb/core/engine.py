"""The decision engine: one pass over a snapshot at `now` -> commands, blocked reasons, budgets, cost.

Methods run in `METHOD_ORDER`; the first that produces commands acts and the rest do not. With
explanations on, the later methods are still evaluated (against the untouched budgets) so that every
node that is not disrupted gets its own reason, including "it could be consolidated, but an earlier
method acted this pass". Pure: no I/O, no clock, no logging.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ebb.core.cluster import ClusterView
from ebb.core.methods import METHOD_ORDER, single_node
from ebb.core.methods.base import Command, EngineOptions, PassContext, simulation

NOTHING_TO_DO = ("nothing to do: it is not expired, drifted or empty, and no consolidation makes the "
                 "cluster cheaper")


@dataclass(frozen=True, slots=True)
class Blocked:
    node: str
    method: str
    reason: str


@dataclass(frozen=True, slots=True)
class BudgetRow:
    nodepool: str
    reason: str
    allowed: int
    detail: str


@dataclass(frozen=True, slots=True)
class PassResult:
    now: datetime
    commands: tuple[Command, ...]
    blocked: tuple[Blocked, ...]
    budgets: tuple[BudgetRow, ...]
    cost_before: float
    cost_after: float


def _context(view: ClusterView, options: EngineOptions) -> PassContext:
    sched, state = simulation(view)
    remaining = {k: v.allowed for k, v in view.budgets.items()}
    return PassContext(view, options, sched, state, remaining)


def run_pass(snapshot_view: ClusterView, options: EngineOptions | None = None) -> PassResult:
    """One pass of the engine over a prepared ClusterView (see `ClusterView.build`)."""
    options = options or EngineOptions()
    view = snapshot_view
    ctx = _context(view, options)
    commands: list[Command] = []
    reasons: dict[str, tuple[str, str]] = {}
    budget_only: set[str] = set()
    acted: str | None = None
    for module, _why in METHOD_ORDER:
        if acted is not None:
            break
        outcome = module.run(ctx)
        for node, reason in outcome.blocked.items():
            if node not in reasons and node in outcome.budget_only:
                budget_only.add(node)
            reasons.setdefault(node, (module.NAME, reason))
        if outcome.commands:
            commands.extend(outcome.commands)
            acted = module.NAME
    disrupted = {n for c in commands for n in c.nodes}
    if options.explain and acted is not None:
        # Explain the rest against the cluster as it will be once this pass's commands ran.
        explain_ctx = PassContext(view, options, ctx.scheduler, ctx.state,
                                  {k: v.allowed for k, v in view.budgets.items()}, frozenset(disrupted))
        for command in commands:
            leaving = [pod for name in command.nodes for pod in ctx.state.remove_node(name)]
            ctx.state.place_all(leaving, max_new=len(command.replacements))
        seen = False
        for module, _why in METHOD_ORDER:
            if acted == module.NAME:
                seen = True
                continue
            if not seen:
                continue
            outcome = module.run(explain_ctx)
            for node, reason in outcome.blocked.items():
                if node not in disrupted and node not in reasons:
                    if node in outcome.budget_only:
                        budget_only.add(node)
                    reasons[node] = (module.NAME, reason)
            for command in outcome.commands:
                for node in command.nodes:
                    if node not in disrupted:
                        reasons.setdefault(node, (module.NAME, (
                            f"it could be disrupted by {module.NAME} ({command.action}), but {acted} acted "
                            "this pass and only one method acts per pass; it is considered again next pass")))
    if options.explain:
        _explain_budget_waits(view, options, ctx, disrupted=disrupted, budget_only=budget_only, reasons=reasons)
    blocked = []
    for node in snapshot_view.snapshot.nodes:
        if node.name in disrupted:
            continue
        if node.name in view.not_candidate:
            blocked.append(Blocked(node.name, "all", view.not_candidate[node.name]))
        elif node.name in view.hard_block and reasons.get(node.name, ("", ""))[1] == view.hard_block[node.name]:
            blocked.append(Blocked(node.name, "all", view.hard_block[node.name]))
        elif node.name in reasons:
            method, reason = reasons[node.name]
            blocked.append(Blocked(node.name, method, reason))
        else:
            blocked.append(Blocked(node.name, "all", NOTHING_TO_DO))
    before = view.pool_cost()
    after = before - sum(view.price[n] for n in disrupted) + sum(r.price for c in commands for r in c.replacements)
    budgets = tuple(BudgetRow(pool, reason, v.allowed, v.detail)
                    for (pool, reason), v in sorted(view.budgets.items()))
    return PassResult(view.now, tuple(commands), tuple(blocked), budgets, before, after)


def _explain_budget_waits(view: ClusterView, options: EngineOptions, ctx: PassContext, *, disrupted: set[str],
                          budget_only: set[str], reasons: dict[str, tuple[str, str]]) -> None:
    """A node skipped only because the budget ran out: say also what consolidating it alone would do."""
    solo = PassContext(view, options, ctx.scheduler, ctx.state, {k: v.allowed for k, v in view.budgets.items()},
                       frozenset(disrupted))
    for node in sorted(budget_only - disrupted):
        method, budget_text = reasons[node]
        command, why = single_node.evaluate(solo, node)
        if command is None:
            reasons[node] = (single_node.NAME, f"{why} (and {budget_text})")
        else:
            reasons[node] = (method, f"{budget_text}; on its own it could be consolidated ({command.action}, "
                                     f"saving ${command.savings:.4f}/h)")


def plan_pass(snapshot: object, now: datetime, options: EngineOptions | None = None) -> PassResult:
    """Convenience: build the view and run one pass."""
    from ebb.core.model import Snapshot

    assert isinstance(snapshot, Snapshot)
    return run_pass(ClusterView.build(snapshot, now), options)

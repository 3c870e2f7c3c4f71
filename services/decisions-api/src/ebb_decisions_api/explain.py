"""GET /v1/nodes/{name}/explain?now= and GET /v1/nodepools/{name}/budgets: answers built from one engine pass.

Without ``now`` a node's explanation is the leader planner's last pass (``ebb_decisions_api.passes``); with it,
the API evaluates a pass on its live state at that moment, here.

The explanation of a node is the engine's own (docs/architecture.md#decision-semantics: every node that is not
disrupted gets a reason from ``run_pass``, and a command says why its nodes are disrupted); this module only
picks the node's entries out of a ``PassResult`` and adds what the store knows. A pool's budgets are
``ClusterView.budgets`` (the core's ``allowed_disruptions``) per reason, plus each budget as written with its
schedule window: ``ebb.core.budgets.active_window`` says whether and until when a budget is active, and the next
window starts at the cron schedule's next firing after now (open now or not). Functions here are blocking (CPU)
and run in a worker thread; they take values and return JSON-ready dicts."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ebb.core.budgets import active_window, budget_error, next_fire
from ebb.core.causes import BlockCause
from ebb.core.cluster import ClusterView
from ebb.core.engine import PassResult, run_pass
from ebb.core.methods.base import EngineOptions
from ebb.core.model import REASONS, Node, NodePool, Snapshot
from ebb.core.plan import command_json
from ebb.core.quantity import fmt_time, parse_duration


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """One pass's view of one node."""

    node: Node
    view: ClusterView
    result: PassResult


def explain_pass(snapshot: Snapshot, name: str, now: datetime, options: EngineOptions) -> NodeVerdict | None:
    """Run one engine pass at ``now``; None when the snapshot has no node ``name`` (blocking)."""
    node = next((n for n in snapshot.nodes if n.name == name), None)
    if node is None:
        return None
    view = options.view_of(snapshot, now)
    return NodeVerdict(node, view, run_pass(view, options))


def node_explanation(verdict: NodeVerdict) -> dict[str, Any]:
    """The engine's verdict on the node: the command that disrupts it, or why nothing does."""
    name = verdict.node.name
    command = next((c for c in verdict.result.commands if name in c.nodes), None)
    blocked = next((b for b in verdict.result.blocked if b.node == name), None)
    pool = verdict.node.nodepool
    out: dict[str, Any] = {
        "node": name,
        "nodePool": pool,
        "now": fmt_time(verdict.result.now),
        "disrupted": command is not None,
        #: being-disrupted (a live decision holds it) is for the caller, who knows the store
        "state": "would-be-disrupted" if command is not None else "not-disrupted",
        "command": command_json(command) if command is not None else None,
        "blocked": {"method": blocked.method, "reason": blocked.reason} if blocked is not None else None,
        "summary": (f"{command.method} would {command.action} it now ({command.reason}): {command.explanation}"
                    if command is not None else
                    f"not disrupted now: {blocked.reason}" if blocked is not None else "not disrupted now"),
        "paused": _text(verdict.view.paused(verdict.node)),
        #: where the pool's disruption settings come from: "NodePool X" or "DisruptionPolicy X"
        "policy": verdict.view.pools[pool].policy_source if pool in verdict.view.pools else None,
        "budgets": pool_budget_rows(verdict.view, pool) if pool in verdict.view.pools else [],
    }
    return out


def _text(cause: BlockCause | None) -> str | None:
    return cause.text if cause is not None else None


def pool_budget_rows(view: ClusterView, pool: str | None) -> list[dict[str, Any]]:
    """Allowed disruptions now per reason for ``pool`` (one row per reason, in REASONS order)."""
    rows = []
    for reason in REASONS:
        verdict = view.budgets.get((pool or "", reason))
        if verdict is not None:
            rows.append({"reason": reason, "allowed": verdict.allowed, "detail": verdict.detail,
                         "invalid": verdict.invalid})
    return rows


def budgets_report(snapshot: Snapshot, pool_name: str, now: datetime) -> dict[str, Any] | None:
    """The budgets of NodePool ``pool_name`` at ``now``; None when the snapshot has no such pool (blocking)."""
    pool = next((p for p in snapshot.nodepools if p.name == pool_name), None)
    if pool is None:
        return None
    view = ClusterView.build(snapshot, now)
    owned = [n for n in snapshot.nodes if n.nodepool == pool.name]
    disrupting = sorted(n.name for n in owned if n.deleting or n.being_disrupted)
    not_ready = sorted(n.name for n in owned if not n.ready and not n.deleting)
    return {
        "nodePool": pool.name,
        #: the object the budgets below are written in: "NodePool X" or "DisruptionPolicy X"
        "policy": pool.policy_source,
        "now": fmt_time(now),
        "nodes": {"total": len(owned), "disrupting": disrupting, "notReady": not_ready},
        "reasons": pool_budget_rows(view, pool.name),
        "budgets": [_budget(pool, index, now, total=len(owned), disrupting=len(disrupting),
                               not_ready=len(not_ready))
                    for index in range(len(pool.budgets))],
        "paused": _text(view.pause.get((pool.name, ""))),
    }


def _budget(pool: NodePool, index: int, now: datetime, *, total: int, disrupting: int,
            not_ready: int) -> dict[str, Any]:
    budget = pool.budgets[index]
    out: dict[str, Any] = {
        "index": index,
        "nodes": budget.nodes,
        "schedule": budget.schedule,
        "duration": budget.duration,
        "reasons": list(budget.reasons) if budget.reasons is not None else None,
        "active": False,
        "windowStart": None,
        "windowEnd": None,
        "nextWindowStart": None,
        "nextWindowEnd": None,
        "limit": None,
        "allowed": None,
        "error": budget_error(budget),
    }
    if out["error"] is not None:
        return out  # fails closed: the pool's reasons say 0
    text = budget.nodes.strip()
    limit = math.ceil(total * int(text[:-1]) / 100) if text.endswith("%") else int(text)
    out["limit"] = limit
    out["allowed"] = max(0, limit - disrupting - not_ready)
    if budget.schedule is None:
        out["active"] = True
        return out
    window = active_window(budget, now)
    if window is not None:
        out["active"] = True
        if window[0] != window[1]:  # a schedule that never fires is always active, with no window
            out["windowStart"], out["windowEnd"] = fmt_time(window[0]), fmt_time(window[1])
    # the next window, whether or not one is open now: the schedule's next firing after now
    seconds = parse_duration(budget.duration or "0s") or 0.0
    start = next_fire(budget.schedule, now)
    if start is None:  # never fires: always active, as Karpenter reads it (`active_window`)
        out["nextWindowStart"] = out["nextWindowEnd"] = None
        return out
    out["nextWindowStart"] = fmt_time(start)
    out["nextWindowEnd"] = fmt_time(start + timedelta(seconds=seconds))
    return out

"""The leader planner's last pass, as the decisions-api serves it: "why not this node?" has one owner.

The consolidation-planner's leader publishes each pass it computes on ebb.planner.passes (``PlannerPass``: its
commands, why every other node is left alone, findings, budgets, the demand record, its time and revision). The
API's consumer keeps the latest pass of its cluster in ``LeaderPasses``, and ``GET /v1/nodes/{name}/explain``
answers from it (`pass_explanation`), saying the pass's time: the answer is the planner's own, demand window
included, not a second pass on another snapshot. Asked ``?now=`` (a moment of the caller's choosing), the route
evaluates a pass on the live state at that moment instead (`on_demand_explanation`, ``"source": "on-demand"``),
as ``POST /v1/plan`` does; both on-demand answers take the leader's demand record (`with_leader_demand`), so at
the pass's moment on the same objects they say what the planner said.

`pass_explanation` is pure (a message and a name in, the JSON out); ``LeaderPasses`` is what the consumer fills;
`explanation` is the route's data source.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime
from typing import Any

import anyio
import anyio.to_thread

from ebb.contracts import PlannerPass
from ebb.contracts.messages import PassBudget
from ebb.core.findings import findings
from ebb.core.methods.base import EngineOptions
from ebb.core.model import REASONS, Snapshot
from ebb.core.quantity import fmt_time
from ebb_decisions_api.explain import NodeVerdict, explain_pass, node_explanation

#: ``source`` of an explanation taken from the leader planner's last pass
FROM_PASS = "planner-pass"
#: ``source`` of an explanation evaluated by the API at a moment the caller gave
ON_DEMAND = "on-demand"


class NoPass(RuntimeError):
    """No pass of the leader planner has been read yet (none published, or the topic is still being read)."""


class UnknownNode(LookupError):
    """The pass the answer comes from has no such node."""


class LeaderPasses:
    """The latest ``PlannerPass`` of one cluster, as read from ebb.planner.passes."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.latest: PlannerPass | None = None
        #: set once the topic was read to its end at startup (a pass may still be missing: no planner leads)
        self.seeded = asyncio.Event()

    def apply(self, message: PlannerPass) -> bool:
        """Keep ``message`` when it is of this cluster; the topic's order is the leaders' order of passes."""
        if message.cluster != self.cluster:
            return False
        self.latest = message
        return True

    def current(self) -> PlannerPass:
        """The latest pass; NoPass when there is none yet."""
        if self.latest is None:
            state = "no pass has been published yet" if self.seeded.is_set() else "ebb.planner.passes is still loading"
            raise NoPass(f"the leader planner's explanation is not available: {state}; ask with ?now= for an "
                         "explanation evaluated by the API")
        return self.latest


def with_leader_demand(snapshot: Snapshot, passes: LeaderPasses | None) -> Snapshot:
    """``snapshot`` with the leader's demand record (the last pass's), so that an on-demand pass keeps the capacity
    the demand windows' peaks ask for as the planner does; unchanged when no pass is known."""
    if passes is None or passes.latest is None or snapshot.demand:
        return snapshot
    return replace(snapshot, demand=passes.latest.demand_record())


def _pass_of(message: PlannerPass) -> dict[str, Any]:
    return {"at": fmt_time(message.at), "revision": message.revision,
            "revisitAt": fmt_time(message.revisit_at) if message.revisit_at is not None else None}


def pass_explanation(message: PlannerPass, name: str) -> dict[str, Any] | None:
    """The explanation of node ``name`` from the leader's pass ``message`` (the shape of ``node_explanation``, with
    ``source``, ``pass``, the cause's kind and the node's findings); None when the pass does not name the node."""
    command = next((c for c in message.commands if name in c.nodes), None)
    blocked = next((b for b in message.blocked if b.node == name), None)
    if command is None and blocked is None:
        return None
    if command is not None:
        pool = command.node_pools[command.nodes.index(name)]
    else:
        pool = blocked.node_pool if blocked is not None else None
    policies = {p.node_pool: p.policy for p in message.pools}
    command_out = command.model_dump(mode="json", by_alias=True, exclude={"node_pools"}) if command else None
    return {
        "node": name,
        "nodePool": pool,
        "now": fmt_time(message.at),
        "source": FROM_PASS,
        "pass": _pass_of(message),
        "disrupted": command is not None,
        "state": "would-be-disrupted" if command is not None else "not-disrupted",
        "command": command_out,
        "blocked": {"method": blocked.method, "reason": blocked.reason} if blocked is not None else None,
        "cause": blocked.cause if blocked is not None else None,
        "summary": (f"{command.method} would {command.action} it now ({command.reason}): {command.explanation}"
                    if command is not None else f"not disrupted now: {blocked.reason}" if blocked is not None
                    else "not disrupted now"),
        "paused": blocked.paused if blocked is not None else None,
        "policy": policies.get(pool) if pool is not None else None,
        "budgets": [{"reason": b.reason, "allowed": b.allowed, "detail": b.detail, "invalid": b.invalid}
                    for b in sorted(message.budgets, key=_reason_order) if b.node_pool == pool],
        "findings": [{"finding": f.kind, "reason": f.reason, "since": fmt_time(f.since) if f.since else None}
                     for f in message.findings if f.node == name],
    }


def _reason_order(budget: PassBudget) -> int:
    """Budgets in ``REASONS`` order, as ``node_explanation`` lists them."""
    return REASONS.index(budget.reason) if budget.reason in REASONS else len(REASONS)


def on_demand_explanation(verdict: NodeVerdict) -> dict[str, Any]:
    """``node_explanation`` of a pass the API evaluated, in the shape of `pass_explanation` (blocking: the
    findings are computed from the verdict's view)."""
    out = node_explanation(verdict)
    name = verdict.node.name
    blocked = next((b for b in verdict.result.blocked if b.node == name), None)
    out["source"] = ON_DEMAND
    out["pass"] = None
    out["cause"] = str(blocked.cause.kind) if blocked is not None else None
    out["findings"] = [{"finding": f.kind, "reason": f.reason, "since": fmt_time(f.since) if f.since else None}
                       for f in findings(verdict.view).get(name, [])]
    return out


async def explanation(passes: LeaderPasses, snapshot: Snapshot, name: str, at: datetime | None, *,
                      options: EngineOptions, limiter: anyio.CapacityLimiter) -> dict[str, Any]:
    """The explanation of node ``name``: from the leader's last pass, or, ``at`` a moment the caller gave, from a
    pass the API evaluates on the live ``snapshot`` with the leader's demand record (in a worker thread, under
    ``limiter``). NoPass when there is no leader pass to answer from; UnknownNode when the answer's pass does not
    have the node."""
    if at is None:
        message = passes.current()
        out = pass_explanation(message, name)
        if out is None:
            raise UnknownNode(f"no node {name!r} in the leader planner's last pass (at {fmt_time(message.at)}, "
                              f"{len(message.blocked) + sum(len(c.nodes) for c in message.commands)} nodes)")
        return out
    verdict = await anyio.to_thread.run_sync(explain_pass, with_leader_demand(snapshot, passes), name, at, options,
                                             limiter=limiter)
    if verdict is None:
        raise UnknownNode(f"no node {name!r} in the live cluster state ({len(snapshot.nodes)} nodes known)")
    return await anyio.to_thread.run_sync(on_demand_explanation, verdict, limiter=limiter)

"""The one mapping between a decision (``ebb.core.decision.Decision``) and its ``decisions`` row, and the
checked move and live-nodes query ``ebb.adapters.store.decision_store.DecisionStore`` (the store the planner,
the executor and the decisions-api use) builds its transactions from.

The JSON shapes of a row's nodes and replacements, and what a decision keeps of itself once written, are
``ebb.adapters.store.shapes`` (which the memory store uses too); this module re-exports them.

Rows are created in one place, ``create``: a decision is handed over proposed and moved to the state it is
written in through the lifecycle (``ebb.core.decision.arrive``). State changes go through ``move``, which
applies ``ebb.core.decision.transition`` to the row, so no writer can make a move the lifecycle does not allow.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from ebb.adapters.store.models import Decision as DecisionRow
from ebb.adapters.store.shapes import (
    decision_node,
    node_names,
    nodes_json,
    replacement_of,
    replacements_json,
    stored_savings,
    utc,
)
from ebb.core.decision import LIVE, Decision, State, arrive, transition
from ebb.core.launch import replacement_name

__all__ = ["create", "decision_node", "decision_of", "live_nodes", "live_replacements", "move", "node_names",
           "nodes_json", "replacements_json", "row_of", "state_of", "utc"]


def decision_of(row: DecisionRow) -> Decision:
    """The typed decision of a row (KeyError / ValueError when its replacements are not in the row shape)."""
    created = utc(row.created_at)
    assert created is not None
    return Decision(
        id=row.id, method=row.method, reason=row.reason, action=row.action,
        nodes=tuple(decision_node(n) for n in row.nodes or []),
        replacements=tuple(replacement_of(r) for r in row.replacements or []),
        savings=float(row.savings or 0), state=State(row.state), created_at=created,
        updated_at=utc(row.updated_at) or created, explanation=dict(row.explanation or {}),
        approved_at=utc(row.approved_at), started_at=utc(row.started_at), finished_at=utc(row.finished_at),
        approve_at=utc(row.approve_at),
    )


def row_of(decision: Decision, cluster: str, *, shadow: bool = False) -> DecisionRow:
    """A new row for ``decision`` in ``cluster`` (``shadow``: a shadow decision, docs/shadow.md)."""
    row = DecisionRow(id=decision.id, cluster=cluster, shadow=shadow)
    row.method = decision.method
    row.reason = decision.reason
    row.action = decision.action
    row.nodes = nodes_json(decision.nodes)
    row.replacements = replacements_json(decision.replacements)
    row.savings = stored_savings(decision.savings)
    row.created_at = decision.created_at
    row.approve_at = decision.approve_at
    _write(row, decision)
    return row


def create(session: AsyncSession, cluster: str, proposal: Decision, to: State = State.PROPOSED,
           at: datetime | None = None, *, approved_at: datetime | None = None,
           shadow: bool = False) -> tuple[DecisionRow, Decision]:
    """Add the row of ``proposal`` (a proposed decision) to ``session``, moved through the lifecycle to ``to`` at
    ``at`` (default: when it was created; ``approved_at`` when it was approved before ``at``): the one place a
    decision row is made (``shadow``: marked a shadow decision)."""
    decision = arrive(proposal, to, at or proposal.created_at, approved_at=approved_at)
    row = row_of(decision, cluster, shadow=shadow)
    session.add(row)
    return row, decision


def _write(row: DecisionRow, decision: Decision) -> None:
    """Copy what a move changes (state, times, explanation) onto ``row``."""
    row.state = decision.state.value
    row.explanation = dict(decision.explanation)
    row.updated_at = decision.updated_at
    row.approved_at = decision.approved_at
    row.started_at = decision.started_at
    row.finished_at = decision.finished_at


def move(row: DecisionRow, to: State, at: datetime, **explanation: Any) -> Decision:
    """Move the row's decision to ``to`` (``ebb.core.decision.transition``; IllegalTransition leaves the row
    as it was) and return the moved decision."""
    moved = transition(decision_of(row), to, at, **explanation)
    _write(row, moved)
    return moved


def state_of(row: DecisionRow) -> State:
    return State(row.state)


def _of_live(column: Any, cluster: str, states: Iterable[State], shadow: bool) -> Any:
    """The ids and ``column`` of the decisions of ``cluster`` in ``states``, shadow ones or real ones, oldest first."""
    return select(DecisionRow.id, column).where(
        DecisionRow.cluster == cluster, DecisionRow.state.in_([State(s).value for s in states]),
        DecisionRow.shadow.is_(shadow)
    ).order_by(DecisionRow.created_at, DecisionRow.id)


async def live_nodes(session: AsyncSession, cluster: str, *, exclude: str | None = None,
                     states: Iterable[State] = LIVE, shadow: bool = False) -> dict[str, str]:
    """node -> id of the decision of ``cluster`` in one of ``states`` (by default the live ones) holding it;
    the newest decision wins when two hold one node. Shadow decisions and real ones never hold each other's nodes:
    ``shadow`` says which are read."""
    held: dict[str, str] = {}
    for decision_id, nodes in await session.execute(_of_live(DecisionRow.nodes, cluster, states, shadow)):
        if decision_id == exclude:
            continue
        for name in node_names(nodes):
            held[name] = decision_id
    return held


async def holders(session: AsyncSession, cluster: str, node: str, *, shadow: bool = False) -> list[str]:
    """The ids of the live decisions of ``cluster`` holding ``node``, the oldest first: more than one when a pass
    proposed on a node from a view read before another decision took it (the proposal's validation refuses it)."""
    query = _of_live(DecisionRow.nodes, cluster, LIVE, shadow)
    return [decision_id for decision_id, nodes in await session.execute(query) if node in node_names(nodes)]


async def live_replacements(session: AsyncSession, cluster: str, *, exclude: str | None = None,
                            states: Iterable[State] = LIVE, shadow: bool = False) -> dict[str, str]:
    """replacement name -> id of the decision of ``cluster`` in one of ``states`` (by default the live ones)
    that launches it: ``replacement_name`` of each of its replacements, the executor's name of the Node (or,
    next to Karpenter, the NodeClaim) it launches."""
    launched: dict[str, str] = {}
    query = _of_live(DecisionRow.replacements, cluster, states, shadow)
    for decision_id, replacements in await session.execute(query):
        if decision_id == exclude:
            continue
        for index, entry in enumerate(replacements or []):
            pool = entry.get("nodePool") if isinstance(entry, dict) else None
            if pool:
                launched[replacement_name(decision_id, index, str(pool))] = decision_id
    return launched

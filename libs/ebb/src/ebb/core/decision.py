"""The decision lifecycle (docs/architecture.md#store): a typed decision, its states and the allowed moves.

This module is the one owner of the list of states. The store's check constraint
(``ebb.adapters.store.models``), the rows and wire messages a decision maps to
(``ebb.adapters.store.decisions``, ``ebb.contracts.messages``), the planner, the executor and the
decisions-api's response schema all take them from here, so a state cannot be added, renamed or given a
new move in one place only.

::

    proposed ──► approved ──► executing ──► succeeded
       │                          ├───────► rolled_back   (the command was undone: untainted, replacements deleted)
       └──► rejected              └───────► failed        (it could not be undone: pods were evicted, or nothing ran)

A decision is only ever made proposed (``Decision.of_command``, or a ``Decision`` built in the proposed state) and
reaches any other state by moves: ``transition`` for one move, ``arrive`` for the moves from proposed to a
state (an interruption is proposed and approved at once; an executor that finds no row of a command writes it
proposed, approved and executing). The store creates every row through ``arrive``.

A proposed decision carries the moment it is due for validation (``approve_at``): the state of a proposal is
in its row, so whichever planner leads when it is due validates it.

Pure: values and functions, no I/O and no clock (times are arguments).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final

from ebb.core.methods.base import Command, Replacement


class State(enum.StrEnum):
    """Where a decision stands. The values are the store's ``decisions.state`` and the API's ``state``."""

    PROPOSED = "proposed"
    APPROVED = "approved"
    EXECUTING = "executing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ROLLED_BACK = "rolled_back"
    REJECTED = "rejected"


#: every state, in the order of the lifecycle (the store's check constraint lists these)
STATES: Final[tuple[str, ...]] = tuple(s.value for s in State)
#: a decision in one of these states still holds its nodes: no other decision may take them
LIVE: Final[frozenset[State]] = frozenset({State.PROPOSED, State.APPROVED, State.EXECUTING})
#: a decision in one of these states disrupted (or is disrupting) its nodes: what a back-test counts
DISRUPTING: Final[tuple[str, ...]] = (State.EXECUTING.value, State.SUCCEEDED.value)
#: a decision in one of these states has ended: it is never executed (again) and has no move left
FINISHED: Final[frozenset[State]] = frozenset(State) - LIVE

#: state -> the states a decision may move to from it (the finished states have none)
TRANSITIONS: Final[Mapping[State, frozenset[State]]] = {
    # a leading planner validates and budgets it when it is due, or finds it stale / over budget / interrupted
    State.PROPOSED: frozenset({State.APPROVED, State.REJECTED}),
    # the executor picks the command up
    State.APPROVED: frozenset({State.EXECUTING}),
    # the executor ends it: done; undone (untainted, replacements deleted, nothing evicted); or not undone
    State.EXECUTING: frozenset({State.SUCCEEDED, State.ROLLED_BACK, State.FAILED}),
    State.SUCCEEDED: frozenset(),
    State.FAILED: frozenset(),
    State.ROLLED_BACK: frozenset(),
    State.REJECTED: frozenset(),
}


class IllegalTransition(ValueError):
    """A move the lifecycle does not allow (e.g. rejecting an executing decision)."""

    def __init__(self, decision_id: str, source: State, target: State) -> None:
        allowed = ", ".join(sorted(TRANSITIONS[source])) or "none: it has ended"
        super().__init__(f"decision {decision_id} cannot go from {source} to {target} (allowed: {allowed})")
        self.source = source
        self.target = target


def allowed(source: State, target: State) -> bool:
    return target in TRANSITIONS[source]


@dataclass(frozen=True, slots=True)
class DecisionNode:
    """A node a decision disrupts."""

    name: str
    nodepool: str
    instance_type: str | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """One disruption decision: what it does to which nodes, why, and where it stands."""

    id: str
    method: str
    reason: str
    #: delete or replace
    action: str
    nodes: tuple[DecisionNode, ...]
    #: launched first (empty for a delete)
    replacements: tuple[Replacement, ...]
    #: estimated savings per hour
    savings: float
    state: State
    created_at: datetime
    updated_at: datetime
    #: why: ``text`` (the sentence), and what else explains it (findings, interruption, rejected, ...)
    explanation: Mapping[str, Any] = field(default_factory=dict, compare=False)
    approved_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    #: when a proposal is due to be validated and approved or rejected (None: not a validated proposal, e.g. an
    #: interruption's, approved at once)
    approve_at: datetime | None = None

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    @property
    def node_pool(self) -> str:
        """The NodePool whose budget the decision consumes (its first node's)."""
        return self.nodes[0].nodepool if self.nodes else ""

    @property
    def text(self) -> str:
        return str(self.explanation.get("text", ""))

    @property
    def live(self) -> bool:
        return self.state in LIVE

    @property
    def command(self) -> Command:
        """The engine command the decision carries out (what validation re-checks; the pass's placements are not
        kept)."""
        return Command(method=self.method, reason=self.reason, action=self.action, nodes=self.node_names,
                       replacements=self.replacements, savings=self.savings, explanation=self.text)

    @classmethod
    def of_command(
        cls,
        decision_id: str,
        command: Command,
        *,
        nodes: tuple[DecisionNode, ...],
        now: datetime,
        explanation: Mapping[str, Any] | None = None,
        approve_at: datetime | None = None,
    ) -> Decision:
        """A proposed decision of an engine command (``nodes``: the command's nodes with their pools), due for
        validation at ``approve_at``."""
        if tuple(n.name for n in nodes) != command.nodes:
            raise ValueError("the decision's nodes must be the command's, in its order")
        return cls(
            id=decision_id, method=command.method, reason=command.reason, action=command.action, nodes=nodes,
            replacements=command.replacements, savings=command.savings, state=State.PROPOSED, created_at=now,
            updated_at=now, explanation=dict(explanation) if explanation is not None else {"text": command.explanation},
            approve_at=approve_at,
        )


def transition(decision: Decision, to: State, at: datetime, **explanation: Any) -> Decision:
    """``decision`` moved to ``to`` at ``at`` (the timestamps of the move set; ``explanation`` items added),
    or IllegalTransition."""
    if not allowed(decision.state, to):
        raise IllegalTransition(decision.id, decision.state, to)
    return replace(
        decision,
        state=to,
        updated_at=at,
        approved_at=at if to is State.APPROVED else decision.approved_at,
        started_at=(decision.started_at or at) if to is State.EXECUTING else decision.started_at,
        finished_at=at if to in FINISHED else decision.finished_at,
        explanation={**decision.explanation, **explanation} if explanation else decision.explanation,
    )


def path(source: State, target: State) -> tuple[State, ...]:
    """The states a decision passes through from ``source`` to ``target`` (``target`` last; empty when they are the
    same), by the fewest moves; IllegalTransition when no moves lead there."""
    routes: dict[State, tuple[State, ...]] = {source: ()}
    frontier = [source]
    while frontier and target not in routes:
        step: list[State] = []
        for state in frontier:
            for nxt in sorted(TRANSITIONS[state]):
                if nxt not in routes:
                    routes[nxt] = (*routes[state], nxt)
                    step.append(nxt)
        frontier = step
    if target not in routes:
        raise IllegalTransition("?", source, target)
    return routes[target]


def arrive(decision: Decision, to: State, at: datetime, *, approved_at: datetime | None = None) -> Decision:
    """A *proposed* ``decision`` moved through the lifecycle to ``to`` at ``at`` (every move checked by
    ``transition``; ``approved_at``: when it was approved, if before ``at``). ValueError for a decision that is not
    proposed: a decision is born proposed."""
    if decision.state is not State.PROPOSED:
        raise ValueError(f"decision {decision.id} is {decision.state}: a decision starts proposed")
    for state in path(State.PROPOSED, to):
        decision = transition(decision, state, approved_at if state is State.APPROVED and approved_at else at)
    return decision

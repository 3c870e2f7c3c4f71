"""The decision lifecycle (``ebb.core.decision``): every allowed move, a sample of illegal ones, the timestamps
a move sets, and the one mapping of a decision to its command (its row: tests/adapters/test_decision_rows.py)."""

from __future__ import annotations

import pytest

from ebb.contracts import DisruptionCommand
from ebb.contracts.messages import DisruptionEvent, event_id
from ebb.core.decision import (
    FINISHED,
    LIVE,
    TRANSITIONS,
    IllegalTransition,
    State,
    allowed,
    arrive,
    path,
    transition,
)
from tests.kit.decisions import T0, T1, decision

P, A, E, S, F, R, X = (State.PROPOSED, State.APPROVED, State.EXECUTING, State.SUCCEEDED, State.FAILED,
                       State.ROLLED_BACK, State.REJECTED)

ALLOWED = [(P, A), (P, X), (A, E), (E, S), (E, R), (E, F)]
ILLEGAL = [(P, E), (P, S), (P, F), (P, R), (P, P), (A, X), (A, S), (A, F), (A, P), (E, X), (E, A), (E, P),
           (S, F), (S, R), (F, R), (R, F), (X, A), (X, P), (S, E), (R, E)]


def test_the_table_is_the_whole_lifecycle() -> None:
    assert set(TRANSITIONS) == set(State)
    assert {(s, t) for s, targets in TRANSITIONS.items() for t in targets} == set(ALLOWED)
    assert {P, A, E} == LIVE and {S, F, R, X} == FINISHED and not LIVE & FINISHED
    assert all(not TRANSITIONS[s] for s in FINISHED)


@pytest.mark.parametrize(("source", "target"), ALLOWED)
def test_an_allowed_move(source: State, target: State) -> None:
    assert allowed(source, target)
    moved = transition(decision(source), target, T1)
    assert moved.state is target and moved.updated_at == T1 and moved.id == "d-1"
    assert moved.approved_at == (T1 if target is A else None)
    assert moved.started_at == (T1 if target is E else None)
    assert moved.finished_at == (T1 if target in FINISHED else None)


@pytest.mark.parametrize(("source", "target"), ILLEGAL)
def test_an_illegal_move(source: State, target: State) -> None:
    assert not allowed(source, target)
    with pytest.raises(IllegalTransition, match=f"from {source} to {target}"):
        transition(decision(source), target, T1)


def test_a_move_keeps_earlier_times_and_adds_to_the_explanation() -> None:
    executing = transition(transition(decision(), A, T0), E, T1)
    assert executing.approved_at == T0 and executing.started_at == T1
    rejected = transition(decision(), X, T1, rejected="stale")
    assert rejected.explanation == {"text": "cheaper", "rejected": "stale"}


def test_a_decision_makes_its_command_and_a_command_its_decision() -> None:
    with pytest.raises(ValueError, match="not approved"):
        DisruptionCommand.of_decision(decision())
    approved = transition(decision(), A, T1)
    wire = DisruptionCommand.of_decision(approved)
    assert (wire.decision_id, wire.node_pool, wire.nodes, wire.action, wire.approved_at) == (
        "d-1", "general", ("n1",), "replace", T1)
    assert wire.replacements[0].instance_types == ("m5.large", "m5a.large")
    back = wire.decision(T1)
    assert back.state is A and back.replacements == approved.replacements and back.node_names == ("n1",)


def test_a_step_has_one_id_in_the_timeline_and_on_the_bus() -> None:
    event = DisruptionEvent.step("d-1", "n1", "Proposed", "x" * 5000, T0)
    assert event.id == event_id("d-1", "n1", "Proposed") and len(event.message) == 4096
    assert event_id("d-1", "n1", "Approved") != event.id != event_id("d-1", "n2", "Proposed")


@pytest.mark.parametrize("target", list(State))
def test_every_state_is_reached_from_proposed_by_allowed_moves(target: State) -> None:
    route = path(P, target)
    assert (route[-1] if route else P) is target
    assert all(allowed(a, b) for a, b in zip((P, *route), route, strict=False))
    born = arrive(decision(), target, T1, approved_at=T0)
    assert born.state is target and born.updated_at == (T0 if target in (P, A) else T1)
    assert born.approved_at == (T0 if target in (A, E, S, F, R) else None)
    assert born.finished_at == (T1 if target in FINISHED else None)


def test_a_decision_is_born_proposed() -> None:
    with pytest.raises(ValueError, match="starts proposed"):
        arrive(decision(A), E, T1)
    with pytest.raises(IllegalTransition):
        path(S, P)


def test_a_decision_carries_its_due_time_and_its_command() -> None:
    due = decision(approve_at=T1)
    assert due.approve_at == T1 and transition(due, A, T1).approve_at == T1
    command = due.command
    assert (command.method, command.reason, command.action, command.nodes, command.replacements) == (
        due.method, due.reason, due.action, due.node_names, due.replacements)

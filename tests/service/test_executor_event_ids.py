"""The termination-executor's event ids: a step that happens once per decision and node (Tainted,
WaitingReadiness, Evicted, Terminated, RolledBack, Failed) keeps its id when a command is carried out again
after a crash, and so does a Launching, keyed by the replacement it launches (whose name is derived from the
decision): the timeline and the subscribers that apply ids once see each step once."""

from __future__ import annotations

import pytest

from ebb_termination_executor.executor import event_id


@pytest.mark.parametrize("phase", ["Tainted", "WaitingReadiness", "Evicted", "Terminated", "RolledBack", "Failed"])
def test_once_per_node_steps_have_stable_ids(phase: str) -> None:
    assert event_id("d1", "n1", phase) == event_id("d1", "n1", phase)
    assert event_id("d1", "n1", phase) != event_id("d2", "n1", phase)
    assert event_id("d1", "n1", phase) != event_id("d1", "n2", phase)


def test_steps_of_one_node_have_distinct_ids() -> None:
    phases = ["Tainted", "WaitingReadiness", "Evicted", "Terminated", "RolledBack", "Failed"]
    assert len({event_id("d1", "n1", p) for p in phases}) == len(phases)


def test_a_launching_is_named_by_its_replacement() -> None:
    first = event_id("d1", "n1", "Launching", key="ebb-d1-0")
    assert first == event_id("d1", "n1", "Launching", key="ebb-d1-0")
    assert first != event_id("d1", "n1", "Launching", key="ebb-d1-1")
    assert first != event_id("d2", "n1", "Launching", key="ebb-d1-0")


def test_a_launching_without_a_key_gets_a_fresh_id() -> None:
    assert event_id("d1", "n1", "Launching") != event_id("d1", "n1", "Launching")

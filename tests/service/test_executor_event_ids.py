"""The termination-executor's event ids: a step that happens once per decision and node (Tainted, Evicted,
Terminated, RolledBack, Failed) keeps its id when a command is carried out again after a crash, so the
timeline and the subscribers that apply ids once see it once; Launching (one per replacement) does not."""

from __future__ import annotations

from ebb_termination_executor.executor import event_id


def test_once_per_node_steps_have_stable_ids() -> None:
    for phase in ("Tainted", "Evicted", "Terminated", "RolledBack", "Failed"):
        assert event_id("d1", "n1", phase) == event_id("d1", "n1", phase)
        assert event_id("d1", "n1", phase) != event_id("d2", "n1", phase)
        assert event_id("d1", "n1", phase) != event_id("d1", "n2", phase)
    assert event_id("d1", "n1", "Tainted") != event_id("d1", "n1", "Evicted")


def test_launching_gets_a_fresh_id_each_time() -> None:
    assert event_id("d1", "n1", "Launching") != event_id("d1", "n1", "Launching")
    assert event_id("d1", "n1", "WaitingReadiness") != event_id("d1", "n1", "WaitingReadiness")

"""A decision's row in the store (``ebb.adapters.store.decisions``): one mapping each way, rows of the older JSON
shapes read, a row moved only as the lifecycle (``ebb.core.decision``, tests/unit/test_decision.py) allows, and
the store's check constraint listing exactly the lifecycle's states."""

from __future__ import annotations

import pytest

from ebb.adapters.store import decisions
from ebb.adapters.store.models import DECISION_STATES
from ebb.adapters.store.shapes import replacement_of, replacements_json
from ebb.core.decision import STATES, DecisionNode, IllegalTransition, State, transition
from ebb.core.methods.base import Replacement
from tests.kit.decisions import T1, decision

A, S = State.APPROVED, State.SUCCEEDED


def test_a_decision_makes_one_row_and_back() -> None:
    approved = transition(decision(), A, T1)
    row = decisions.row_of(approved, "c1")
    assert row.nodes == [{"name": "n1", "nodePool": "general", "instanceType": "m5.xlarge"}]
    assert row.replacements == [{"nodePool": "general", "instanceTypes": ["m5.large", "m5a.large"],
                                 "capacityType": "on-demand", "zones": ["us-east-1a"], "price": 0.096}]
    assert row.state == "approved" and row.cluster == "c1" and row.approved_at == T1
    assert decisions.decision_of(row) == approved
    # the store's check constraint lists exactly the enum's values
    assert DECISION_STATES == STATES == ("proposed", "approved", "executing", "succeeded", "failed",
                                         "rolled_back", "rejected")


def test_rows_of_the_older_shapes_are_read() -> None:
    row = decisions.row_of(decision(), "c1")
    row.nodes = ["n1", {"name": "n2", "nodePool": "general"}]
    assert decisions.decision_of(row).nodes == (DecisionNode("n1", ""), DecisionNode("n2", "general"))
    assert decisions.node_names(row.nodes) == ["n1", "n2"]


def test_a_row_moves_only_as_the_lifecycle_allows() -> None:
    row = decisions.row_of(decision(), "c1")
    decisions.move(row, A, T1)
    assert row.state == "approved" and row.approved_at == T1
    with pytest.raises(IllegalTransition):
        decisions.move(row, S, T1)
    assert row.state == "approved" and row.finished_at is None


def test_a_rows_due_time_is_the_decisions() -> None:
    due = decision(approve_at=T1)
    assert decisions.decision_of(decisions.row_of(due, "c1")).approve_at == T1


def test_a_replacements_labels_are_kept_in_the_decision_row() -> None:
    """A command resumed after a crash relaunches its replacements from the decision row: the labels a replacement
    is launched with (a custom requirement's value its pods need) are kept there; a row without any (older rows)
    reads back as none."""
    labelled = Replacement("general", ("c5.large",), "on-demand", ("us-east-1a",), 0.085, labels=(("team", "b"),))
    bare = Replacement("general", ("c5.large",), "on-demand", ("us-east-1a",), 0.085)
    row, old_row = replacements_json([labelled, bare])
    assert row["labels"] == {"team": "b"} and replacement_of(row) == labelled
    assert "labels" not in old_row and replacement_of(old_row) == bare

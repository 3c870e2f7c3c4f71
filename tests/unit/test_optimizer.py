"""Multi-node consolidation's optimizer search (ebb.core.methods.optimizer, ``EngineOptions.search``): a linear
program over every candidate chooses the set that saves most within the budgets, room summed per NodePool, and the
engine simulates the proposal before it becomes a command (the largest prefix that consolidates when the whole
set does not)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from ebb.core.methods.base import Command, EngineOptions
from ebb.core.methods.optimizer import Group, choose
from ebb.core.plan import make_plan, plan_json
from ebb.core.validation import validate
from tests.kit.builders import (
    NOW,
    budget_bound_cluster,
    catalog,
    instance_type,
    node,
    nodepool,
    pod,
    repack_cluster,
    snapshot,
)


def _group(members: list[int], room: list[int], budget: int = 100, types: Sequence[tuple[list[int], float]] = ()
           ) -> Group:
    alloc = np.array([t[0] for t in types], dtype=np.int64).reshape(len(types), len(room))
    return Group(np.array(members, dtype=np.int64), np.array(room, dtype=np.int64), budget, alloc,
                 np.array([t[1] for t in types], dtype=np.float64))


# (id, values, what each removal takes (cpu, pods), groups, max new nodes, the candidates chosen in order)
CASES: list[tuple[str, list[float], list[list[int]], list[Group], int, list[int]]] = [
    ("room for two of three: the two most valuable", [1.0, 3.0, 2.0], [[2, 1], [2, 1], [2, 1]],
     [_group([0, 1, 2], [4, 10])], 0, [1, 2]),
    ("the budget caps the count", [1.0, 3.0, 2.0], [[1, 1], [1, 1], [1, 1]], [_group([0, 1, 2], [9, 9], budget=1)],
     0, [1]),
    ("a cheaper new node makes room for all", [2.0, 2.0, 2.0], [[4, 1], [4, 1], [4, 1]],
     [_group([0, 1, 2], [4, 10], types=[([8, 50], 1.5)])], 1, [0, 1, 2]),
    ("no launch allowed: only what the room holds", [2.0, 2.5, 2.2], [[4, 1], [4, 1], [4, 1]],
     [_group([0, 1, 2], [4, 10], types=[([8, 50], 1.5)])], 0, [1]),
    ("each NodePool's room is its own", [1.0, 1.0], [[4, 1], [4, 1]],
     [_group([0], [0, 10]), _group([1], [4, 10])], 0, [1]),
    ("nothing saves anything", [0.0, -1.0], [[1, 1], [1, 1]], [_group([0, 1], [9, 9])], 0, []),
    ("a resource no removal takes asks nothing", [1.0, 1.0], [[0, 1], [0, 1]], [_group([0, 1], [0, 9])], 0, [0, 1]),
]


@pytest.mark.parametrize(("values", "taken", "groups", "max_new", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_the_program_chooses_what_saves_most_within_room_and_budgets(
        values: list[float], taken: list[list[int]], groups: list[Group], max_new: int, expected: list[int]) -> None:
    assert choose(np.array(values), np.array(taken, dtype=np.int64), groups, max_new) == expected


def test_no_candidate_no_program() -> None:
    assert choose(np.zeros(0), np.zeros((0, 2), dtype=np.int64), [], 1) == []


def _commands(docs: list[Any], **options: Any) -> list[dict[str, Any]]:
    commands: list[dict[str, Any]] = plan_json(make_plan(snapshot(*docs), NOW, options=EngineOptions(**options)))[
        "commands"]
    return commands


def test_within_a_budget_the_optimizer_takes_the_dearer_nodes_the_greedy_search_passes_over() -> None:
    (greedy,) = _commands(budget_bound_cluster())
    (optimized,) = _commands(budget_bound_cluster(), search="optimizer")
    assert (greedy["nodes"], greedy["savingsPerHour"]) == (["a1", "a2"], 2.0)
    assert (sorted(optimized["nodes"]), optimized["savingsPerHour"]) == (["b1", "b2"], 8.0)
    assert optimized["method"] == "multi-node-consolidation" and optimized["action"] == "delete"
    assert "(the optimizer's choice among 5 candidates: the set a linear program over all of them found to save " \
           "most within the budgets, simulated)" in optimized["explanation"]


def test_the_optimizers_command_is_one_validation_accepts() -> None:
    docs = budget_bound_cluster()
    result = make_plan(snapshot(*docs), NOW, options=EngineOptions(search="optimizer"))
    (command,) = result.first.commands
    assert isinstance(command, Command)
    assert validate(command, snapshot(*docs), NOW, EngineOptions(search="optimizer")) is None


def test_a_proposal_that_does_not_fit_whole_keeps_its_largest_prefix_that_does() -> None:
    """Six $1.00 nodes with a 1300m pod each and a 4-cpu type at $1.50/h: room summed, one new node seems to hold
    every pod, but a 4-cpu node holds three 1300m pods; the simulation keeps the three that fit with one
    replacement, and with two replacements all six move in one command."""
    (one,) = _commands(repack_cluster(), search="optimizer")
    assert (len(one["nodes"]), len(one["replacements"])) == (3, 1)
    assert "nodes that consolidates)" in one["explanation"]  # a part of the program's choice
    (two,) = _commands(repack_cluster(), search="optimizer", max_replacements=2)
    assert (len(two["nodes"]), len(two["replacements"])) == (6, 2)


def test_karpenters_pace_keeps_karpenters_own_search() -> None:
    """The back-test's simulations of Karpenter search as Karpenter does, whatever the search option says."""
    assert _commands(budget_bound_cluster(), karpenter_pace=True) == \
        _commands(budget_bound_cluster(), karpenter_pace=True, search="optimizer")


def test_pods_pinned_to_their_node_pool_are_left_to_the_simulation() -> None:
    """Room is summed per NodePool, constraints are not in the program: a pod that a node selector keeps off the
    other nodes makes the simulation refuse the set, and no command is made of it."""
    docs: list[Any] = [catalog([instance_type("one", "2", "8Gi", 29, 1.0)]), nodepool()]
    for name in ("a", "b", "c"):
        docs += [node(name, itype="one", labels={"slot": name}),
                 pod(f"p-{name}", name, cpu="500m", node_selector={"slot": name})]
    assert _commands(docs, search="optimizer") == []

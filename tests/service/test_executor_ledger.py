"""The termination-executor releases a decision's budget_ledger rows in the transaction that ends it
(``ExecutorStore.finish``), whether it succeeded or failed, and leaves other decisions' rows alone; a
command recorded before (a redelivery) changes nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ebb.contracts import DisruptionCommand
from ebb.core.decision import State
from ebb_consolidation_planner.store import PlannerStore
from ebb_termination_executor.store import ExecutorStore, Start
from tests.unit.builders import proposed

NOW = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)


async def approved(planner: PlannerStore, decision_id: str, *nodes: str) -> DisruptionCommand:
    await planner.propose(proposed(decision_id, *nodes, now=NOW))
    approval = await planner.approve(decision_id, node_pools=dict.fromkeys(nodes, "default"), reason="Empty",
                                     allowed={"default": 10}, counted=(), now=NOW)
    assert approval.approved
    return DisruptionCommand(decision_id=decision_id, node_pool="default", method="emptiness", reason="Empty",
                             action="delete", nodes=nodes, replacements=(), savings_per_hour=0.1, explanation="empty",
                             approved_at=NOW)


@pytest.mark.parametrize("state", ["succeeded", "rolled_back", "failed"])
async def test_finish_releases_the_decisions_ledger_rows(stores: tuple[PlannerStore, ExecutorStore],
                                                         state: str) -> None:
    planner, executor = stores
    first = await approved(planner, "d1", "n1", "n2")
    await approved(planner, "d2", "n3")
    assert sorted((e.node, e.decision_id) for e in await planner.ledger()) == [
        ("n1", "d1"), ("n2", "d1"), ("n3", "d2")]
    assert (await executor.start(first, NOW))[0] is Start.EXECUTE
    assert [e.node for e in await planner.ledger()] == ["n1", "n2", "n3"]  # still consuming while executing
    assert await executor.finish(first, state, NOW)  # type: ignore[arg-type]
    assert await executor.state("d1") == state
    assert [(e.node, e.decision_id) for e in await planner.ledger()] == [("n3", "d2")]


async def test_a_redelivered_command_changes_nothing(stores: tuple[PlannerStore, ExecutorStore]) -> None:
    planner, executor = stores
    command = await approved(planner, "d1", "n1")
    await executor.start(command, NOW)
    assert await executor.finish(command, State.SUCCEEDED, NOW)
    await approved(planner, "d2", "n1")  # the node's budget is free again: another decision takes it
    assert not await executor.finish(command, State.FAILED, NOW)  # recorded already: rolled back
    assert await executor.state("d1") == "succeeded"
    assert [(e.node, e.decision_id) for e in await planner.ledger()] == [("n1", "d2")]

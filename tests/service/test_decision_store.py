"""``ebb.adapters.store.decision_store.DecisionStore``, the one store of the planner, the executor and the
decisions-api, on SQLite (PostgreSQL: tests/integration).

One instance serves all three: what the planner approves the executor starts and finishes, what the API holds
the planner reads. The executor releases a decision's budget_ledger rows in the transaction that ends it
(``finish``), whether it succeeded or failed, and leaves other decisions' rows alone; a command recorded
before (a redelivery) changes nothing. ``state`` has one meaning for every caller: a ``State`` or None."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from ebb.adapters.store.decision_store import DecisionStore, Start
from ebb.contracts import DisruptionCommand
from ebb.core.decision import Decision, State
from ebb.core.launch import replacement_name
from ebb.core.methods.base import Replacement
from tests.kit.builders import proposed

NOW = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)


def command_of(decision_id: str, *nodes: str) -> DisruptionCommand:
    return DisruptionCommand(decision_id=decision_id, node_pool="default", method="emptiness", reason="Empty",
                             action="delete", nodes=nodes, replacements=(), savings_per_hour=0.1, explanation="empty",
                             approved_at=NOW)


async def approved(store: DecisionStore, decision_id: str, *nodes: str) -> DisruptionCommand:
    await store.propose(proposed(decision_id, *nodes, now=NOW))
    approval = await store.approve(decision_id, node_pools=dict.fromkeys(nodes, "default"), reason="Empty",
                                   allowed={"default": 10}, counted=(), now=NOW)
    assert approval.approved
    return command_of(decision_id, *nodes)


@pytest.mark.parametrize("state", ["succeeded", "rolled_back", "failed"])
async def test_finish_releases_the_decisions_ledger_rows(store: DecisionStore, state: str) -> None:
    first = await approved(store, "d1", "n1", "n2")
    await approved(store, "d2", "n3")
    assert sorted((e.node, e.decision_id) for e in await store.ledger()) == [
        ("n1", "d1"), ("n2", "d1"), ("n3", "d2")]
    assert (await store.start(first, NOW))[0] is Start.EXECUTE
    assert [e.node for e in await store.ledger()] == ["n1", "n2", "n3"]  # still consuming while executing
    assert await store.finish(first, state, NOW)  # type: ignore[arg-type]
    assert await store.state("d1") is State(state)
    assert [(e.node, e.decision_id) for e in await store.ledger()] == [("n3", "d2")]


async def test_a_redelivered_command_changes_nothing(store: DecisionStore) -> None:
    command = await approved(store, "d1", "n1")
    await store.start(command, NOW)
    assert await store.finish(command, State.SUCCEEDED, NOW)
    await approved(store, "d2", "n1")  # the node's budget is free again: another decision takes it
    assert not await store.finish(command, State.FAILED, NOW)  # recorded already: rolled back
    assert await store.state("d1") is State.SUCCEEDED
    assert [(e.node, e.decision_id) for e in await store.ledger()] == [("n1", "d2")]
    assert await store.start(command, NOW) == (Start.DUPLICATE, None)  # applied: nothing to do, no state


# (the decision before the command arrives, what start answers, where the decision stands after it)
START_CASES = [
    ("approved", (Start.EXECUTE, State.EXECUTING), State.EXECUTING),
    ("absent", (Start.EXECUTE, State.EXECUTING), State.EXECUTING),  # inserted from the command
    ("executing", (Start.EXECUTE, State.EXECUTING), State.EXECUTING),  # resumed after a crash
    ("rejected", (Start.FINISHED, State.REJECTED), State.REJECTED),
]


@pytest.mark.parametrize(("before", "answer", "after"), START_CASES)
async def test_start_answers_what_to_do_and_the_state(store: DecisionStore, before: str,
                                                      answer: tuple[Start, State | None], after: State) -> None:
    command = command_of("d1", "n1")
    if before in ("approved", "executing"):
        await approved(store, "d1", "n1")
    if before == "executing":
        await store.start(command, NOW)
    if before == "rejected":
        await store.propose(proposed("d1", "n1", now=NOW))
        assert await store.reject("d1", "stale", NOW)
    assert await store.start(command, NOW) == answer
    assert await store.state("d1") is after


async def test_state_of_an_unknown_or_foreign_decision_is_none(store: DecisionStore) -> None:
    await store.propose(proposed("d1", "n1", now=NOW))
    assert await store.state("d1") is State.PROPOSED
    assert await store.state("nope") is None
    other = DecisionStore(store.engine, "another-cluster")  # same database, another cluster: sees nothing
    assert await other.state("d1") is None
    assert await other.live_nodes() == {}
    assert await store.live_nodes() == {"n1": "d1"}


async def test_holds_the_api_writes_are_the_ones_the_planner_reads(store: DecisionStore) -> None:
    soon, later = NOW + timedelta(minutes=5), NOW + timedelta(hours=1)
    short = await store.create_hold(scope_kind="node", scope="n1", reason="debugging", expires_at=soon, now=NOW)
    await store.create_hold(scope_kind="nodepool", scope="default", reason="freeze", expires_at=None,
                            now=NOW + timedelta(seconds=1), hold_id="freeze")
    assert [h.scope for h in await store.list_holds(NOW)] == ["n1", "default"]
    assert [h.id for h in await store.list_holds(later)] == ["freeze"]
    assert [h.id for h in await store.list_holds(later, include_expired=True)] == [short.id, "freeze"]
    # SQLite hands times back naive; the store's are UTC
    assert all(h.created_at.tzinfo is UTC for h in await store.list_holds(NOW))
    assert [h.expires_at for h in await store.list_holds(NOW)] == [soon, None]
    assert await store.delete_hold("freeze") and not await store.delete_hold("freeze")
    assert [h.id for h in await store.list_holds(NOW)] == [short.id]


async def test_approved_lists_what_waits_for_the_executor(store: DecisionStore) -> None:
    first = await approved(store, "d1", "n1")
    await approved(store, "d2", "n2")
    await store.propose(proposed("d3", "n3", now=NOW))
    waiting = await store.approved()
    assert [d.id for d in waiting] == ["d1", "d2"]
    assert all(d.approved_at == NOW for d in waiting)  # aware, although SQLite stored it naive
    await store.start(first, NOW)
    assert [d.id for d in await store.approved()] == ["d2"]


async def test_live_replacements_name_what_live_decisions_launch(store: DecisionStore) -> None:
    """replacement name -> decision, for the live decisions (or those of ``states``, without ``exclude``): the
    planner keeps them from being disrupted while their decision runs; a finished decision's are free."""
    pools = ("default", "other")

    def replace(decision_id: str, node: str) -> Decision:
        return dataclasses.replace(
            proposed(decision_id, node, now=NOW, method="single-node-consolidation", reason="Underutilized"),
            action="replace", replacements=tuple(Replacement(p, ("m5.large",), "on-demand", ("us-east-1a",), 0.1)
                                                 for p in pools))

    for decision_id, node in (("d1", "n1"), ("d2", "n2"), ("d3", "n3")):
        await store.propose(replace(decision_id, node))
    for decision_id, node in (("d2", "n2"), ("d3", "n3")):
        approval = await store.approve(decision_id, node_pools={node: "default"}, reason="Underutilized",
                                       allowed={"default": 10}, counted=(), now=NOW)
        assert approval.approved
    assert approval.decision is not None
    command = DisruptionCommand.of_decision(approval.decision)  # d3's
    await store.start(command, NOW)
    await store.finish(command, State.SUCCEEDED, NOW)

    def names(*decisions: str) -> dict[str, str]:
        return {replacement_name(d, i, p): d for d in decisions for i, p in enumerate(pools)}

    assert await store.live_replacements() == names("d1", "d2")
    assert await store.live_replacements(exclude="d1", states=(State.APPROVED, State.EXECUTING)) == names("d2")
    assert await DecisionStore(store.engine, "another-cluster").live_replacements() == {}


async def test_the_demand_record_is_replaced_whole_and_kept_per_cluster(store: DecisionStore) -> None:
    from ebb.core.model import DemandSample

    assert await store.load_demand() == ()
    first = (DemandSample("batch", NOW - timedelta(minutes=20), 96_000, 180 * 2**30),
             DemandSample("general", NOW - timedelta(minutes=20), 4_000, 2**33),
             DemandSample("batch", NOW, 40_000, 80 * 2**30))
    await store.save_demand(first)
    assert await store.load_demand() == first
    second = first[1:]
    await store.save_demand(second)
    assert await store.load_demand() == second
    other = DecisionStore(store.engine, "other")
    assert await other.load_demand() == ()
    await other.save_demand(first[:1])
    assert (await store.load_demand(), await other.load_demand()) == (second, first[:1])

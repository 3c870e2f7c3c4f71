"""``ebb.adapters.store.decision_store.DecisionStore``, the one store of the planner, the executor and the
decisions-api, on SQLite (PostgreSQL: tests/integration).

One instance serves all three: what the planner approves the executor starts and finishes, what the API holds
the planner reads. The executor releases a decision's budget_ledger rows in the transaction that ends it
(``finish``), whether it succeeded or failed, and leaves other decisions' rows alone; a command recorded
before (a redelivery) changes nothing. ``state`` has one meaning for every caller: a ``State`` or None."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.exc import IntegrityError

from ebb.adapters.store.decision_store import EXECUTOR, PLANNER, DecisionStore, Start, command_id
from ebb.contracts import (
    TOPIC_DISRUPTION_COMMANDS,
    TOPIC_DISRUPTION_EVENTS,
    DisruptionCommand,
    DisruptionEvent,
    Message,
)
from ebb.core.decision import Decision, IllegalTransition, State
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
    ("executing", (Start.RESUME, State.EXECUTING), State.EXECUTING),  # resumed after a crash
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


class Published:
    """A ``Publish`` that keeps what it was given, or fails while ``failing``."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, list[str]]] = []
        self.failing = False

    async def __call__(self, topic: str, messages: Sequence[Message]) -> None:
        if self.failing:
            raise ConnectionError("the bus is away")
        self.runs.append((topic, [str(m.id) for m in messages]))


async def test_a_decisions_messages_are_written_with_it_and_relayed_in_order_once(store: DecisionStore) -> None:
    """A proposal and its approval put their steps and the command in the outbox in their transactions; a relay
    publishes them in order (a run per topic), marks them sent and publishes nothing again; a failed publish
    leaves them for the next round."""
    command = await approved(store, "d1", "n1")
    rows = await store.outbox(unsent=True)
    assert [(r.topic, r.origin) for r in rows] == [
        (TOPIC_DISRUPTION_EVENTS, PLANNER), (TOPIC_DISRUPTION_COMMANDS, PLANNER), (TOPIC_DISRUPTION_EVENTS, PLANNER)]
    assert rows[1].message_id == str(command_id("d1")) and rows[1].payload["decisionId"] == "d1"
    publish = Published()
    publish.failing = True
    with pytest.raises(ConnectionError):
        await store.relay(PLANNER, publish, lambda: NOW)
    assert len(await store.outbox(unsent=True)) == 3
    publish.failing = False
    assert await store.relay(EXECUTOR, publish, lambda: NOW) == 0  # another origin's relay: nothing of its own
    assert await store.relay(PLANNER, publish, lambda: NOW) == 3
    assert [topic for topic, _ in publish.runs] == [TOPIC_DISRUPTION_EVENTS, TOPIC_DISRUPTION_COMMANDS,
                                                    TOPIC_DISRUPTION_EVENTS]
    assert publish.runs[1][1] == [str(command_id("d1"))]
    assert await store.outbox(unsent=True) == [] and await store.relay(PLANNER, publish, lambda: NOW) == 0
    # the executor's steps: each once, with the decision's end in one transaction
    step = DisruptionEvent.step("d1", "n1", "Tainted", "tainted", NOW)
    await store.start(command, NOW)
    await store.record_steps([step])
    await store.record_steps([step])  # a resumed command reports it again: recorded and sent once
    await store.finish(command, State.SUCCEEDED, NOW, events=[DisruptionEvent.step("d1", "n1", "Terminated", "x", NOW)])
    assert await store.relay(EXECUTOR, publish, lambda: NOW) == 2
    found = await store.get_decision("d1")
    assert found is not None and [e.type for e in found[1]] == ["Proposed", "Approved", "Tainted", "Terminated"]
    assert await store.purge_outbox(NOW + timedelta(seconds=1)) == 5 and await store.outbox() == []


async def test_a_private_store_hands_committed_messages_to_the_relay_in_memory(store: DecisionStore) -> None:
    """The embedded mode's store (``private``): no outbox rows; what a transaction sends reaches the relay once it
    committed, and a transaction that rolls back sends nothing."""
    private = DecisionStore(store.engine, store.cluster, private=True)
    await approved(private, "d1", "n1")
    assert await private.outbox() == []
    publish = Published()
    assert await private.relay(PLANNER, publish, lambda: NOW) == 3
    assert [topic for topic, _ in publish.runs] == [TOPIC_DISRUPTION_EVENTS, TOPIC_DISRUPTION_COMMANDS,
                                                    TOPIC_DISRUPTION_EVENTS]
    with pytest.raises(IntegrityError):  # the same id again: the transaction rolls back
        await private.propose(proposed("d1", "n2", now=NOW))
    assert await private.relay(PLANNER, publish, lambda: NOW) == 0
    publish.failing = True
    await private.propose(proposed("d2", "n2", now=NOW))
    with pytest.raises(ConnectionError):
        await private.relay(PLANNER, publish, lambda: NOW)
    publish.failing = False
    assert await private.relay(PLANNER, publish, lambda: NOW) == 1  # kept for the next round


async def test_every_decision_row_is_born_proposed_and_moved_through_the_lifecycle(store: DecisionStore) -> None:
    """``add_decision`` (fixtures, imports), the executor's row of a command it has no decision for, and the
    planner's writes all go through ``decisions.create``: the times of the moves are set as the lifecycle sets
    them, and a decision handed over in another state than proposed is refused."""
    row = await store.add_decision(decision_id="d-x", method="emptiness", reason="Empty", action="delete",
                                   nodes=["n1"], replacements=[], created_at=NOW, state="succeeded")
    assert (row.state, row.approved_at, row.started_at, row.finished_at) == ("succeeded", NOW, NOW, NOW)
    assert row.nodes == ["n1"]  # kept in the JSON given
    start, state = await store.start(command_of("d-new", "n5"), NOW + timedelta(seconds=5))
    assert (start, state) == (Start.EXECUTE, State.EXECUTING)
    found = await store.get_decision("d-new")
    assert found is not None and found[0].approved_at == NOW and found[0].started_at == NOW + timedelta(seconds=5)
    approved_already = dataclasses.replace(proposed("d-y", "n6", now=NOW), state=State.APPROVED)
    with pytest.raises(IllegalTransition):
        await store.propose(approved_already)

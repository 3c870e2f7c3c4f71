"""``ebb.adapters.store.decision_store.DecisionStore``, the one store of the planner, the executor and the
decisions-api, on SQLite (PostgreSQL: tests/integration), and ``ebb.adapters.store.memory.MemoryStore``, the
embedded mode's store in memory, held to the same behaviour: every test of what the services use of the store
(``ebb.adapters.store.port.Store``) runs on both (the ``either`` fixture); the outbox table, imports and
several clusters in one database are the SQL store's alone.

One instance serves all three: what the planner approves the executor starts and finishes, what the API holds
the planner reads. The executor releases a decision's budget_ledger rows in the transaction that ends it
(``finish``), whether it succeeded or failed, and leaves other decisions' rows alone; a command recorded
before (a redelivery) changes nothing. ``state`` has one meaning for every caller: a ``State`` or None."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.exc import IntegrityError

from ebb.adapters.store.decision_store import EXECUTOR, PLANNER, DecisionStore, Start, command_id
from ebb.adapters.store.memory import DuplicateError, MemoryStore
from ebb.adapters.store.shapes import noted_interruptions
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
from ebb_embedded.store import WriteCount
from tests.kit.builders import proposed

NOW = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)

#: a store the services can be given: on SQLite, or in memory
AnyStore = DecisionStore | MemoryStore


@pytest.fixture(params=["sqlite", "memory"])
def either(request: pytest.FixtureRequest, store: DecisionStore) -> AnyStore:
    """The SQL store on SQLite (``store``), then the memory store, of the same cluster and executor consumer."""
    if request.param == "sqlite":
        return store
    return MemoryStore(store.cluster, consumer=store.consumer)


def command_of(decision_id: str, *nodes: str) -> DisruptionCommand:
    return DisruptionCommand(decision_id=decision_id, node_pool="default", method="emptiness", reason="Empty",
                             action="delete", nodes=nodes, replacements=(), savings_per_hour=0.1, explanation="empty",
                             approved_at=NOW)


async def approved(store: AnyStore, decision_id: str, *nodes: str) -> DisruptionCommand:
    await store.propose(proposed(decision_id, *nodes, now=NOW))
    approval = await store.approve(decision_id, node_pools=dict.fromkeys(nodes, "default"), reason="Empty",
                                   allowed={"default": 10}, counted=(), now=NOW)
    assert approval.approved
    return command_of(decision_id, *nodes)


@pytest.mark.parametrize("state", ["succeeded", "rolled_back", "failed"])
async def test_finish_releases_the_decisions_ledger_rows(either: AnyStore, state: str) -> None:
    first = await approved(either, "d1", "n1", "n2")
    await approved(either, "d2", "n3")
    assert sorted((e.node, e.decision_id) for e in await either.ledger()) == [
        ("n1", "d1"), ("n2", "d1"), ("n3", "d2")]
    assert (await either.start(first, NOW))[0] is Start.EXECUTE
    assert [e.node for e in await either.ledger()] == ["n1", "n2", "n3"]  # still consuming while executing
    assert await either.finish(first, state, NOW)  # type: ignore[arg-type]
    assert await either.state("d1") is State(state)
    assert [(e.node, e.decision_id) for e in await either.ledger()] == [("n3", "d2")]


async def test_a_redelivered_command_changes_nothing(either: AnyStore) -> None:
    command = await approved(either, "d1", "n1")
    await either.start(command, NOW)
    assert await either.finish(command, State.SUCCEEDED, NOW)
    await approved(either, "d2", "n1")  # the node's budget is free again: another decision takes it
    assert not await either.finish(command, State.FAILED, NOW)  # recorded already: rolled back
    assert await either.state("d1") is State.SUCCEEDED
    assert [(e.node, e.decision_id) for e in await either.ledger()] == [("n1", "d2")]
    assert await either.start(command, NOW) == (Start.DUPLICATE, None)  # applied: nothing to do, no state


# (the decision before the command arrives, what start answers, where the decision stands after it)
START_CASES = [
    ("approved", (Start.EXECUTE, State.EXECUTING), State.EXECUTING),
    ("absent", (Start.EXECUTE, State.EXECUTING), State.EXECUTING),  # inserted from the command
    ("executing", (Start.RESUME, State.EXECUTING), State.EXECUTING),  # resumed after a crash
    ("rejected", (Start.FINISHED, State.REJECTED), State.REJECTED),
]


@pytest.mark.parametrize(("before", "answer", "after"), START_CASES)
async def test_start_answers_what_to_do_and_the_state(either: AnyStore, before: str,
                                                      answer: tuple[Start, State | None], after: State) -> None:
    command = command_of("d1", "n1")
    if before in ("approved", "executing"):
        await approved(either, "d1", "n1")
    if before == "executing":
        await either.start(command, NOW)
    if before == "rejected":
        await either.propose(proposed("d1", "n1", now=NOW))
        assert await either.reject("d1", "stale", NOW)
    assert await either.start(command, NOW) == answer
    assert await either.state("d1") is after


async def test_state_of_an_unknown_or_foreign_decision_is_none(store: DecisionStore) -> None:
    await store.propose(proposed("d1", "n1", now=NOW))
    assert await store.state("d1") is State.PROPOSED
    assert await store.state("nope") is None
    other = DecisionStore(store.engine, "another-cluster")  # same database, another cluster: sees nothing
    assert await other.state("d1") is None
    assert await other.live_nodes() == {}
    assert await store.live_nodes() == {"n1": "d1"}


async def test_holds_the_api_writes_are_the_ones_the_planner_reads(either: AnyStore) -> None:
    soon, later = NOW + timedelta(minutes=5), NOW + timedelta(hours=1)
    short = await either.create_hold(scope_kind="node", scope="n1", reason="debugging", expires_at=soon, now=NOW)
    await either.create_hold(scope_kind="nodepool", scope="default", reason="freeze", expires_at=None,
                            now=NOW + timedelta(seconds=1), hold_id="freeze")
    assert [h.scope for h in await either.list_holds(NOW)] == ["n1", "default"]
    assert [h.id for h in await either.list_holds(later)] == ["freeze"]
    assert [h.id for h in await either.list_holds(later, include_expired=True)] == [short.id, "freeze"]
    # SQLite hands times back naive; the store's are UTC
    assert all(h.created_at.tzinfo is UTC for h in await either.list_holds(NOW))
    assert [h.expires_at for h in await either.list_holds(NOW)] == [soon, None]
    assert await either.delete_hold("freeze") and not await either.delete_hold("freeze")
    assert [h.id for h in await either.list_holds(NOW)] == [short.id]


async def test_approved_lists_what_waits_for_the_executor(either: AnyStore) -> None:
    first = await approved(either, "d1", "n1")
    await approved(either, "d2", "n2")
    await either.propose(proposed("d3", "n3", now=NOW))
    waiting = await either.approved()
    assert [d.id for d in waiting] == ["d1", "d2"]
    assert all(d.approved_at == NOW for d in waiting)  # aware, although SQLite stored it naive
    await either.start(first, NOW)
    assert [d.id for d in await either.approved()] == ["d2"]


async def test_live_replacements_name_what_live_decisions_launch(either: AnyStore) -> None:
    """replacement name -> decision, for the live decisions (or those of ``states``, without ``exclude``): the
    planner keeps them from being disrupted while their decision runs; a finished decision's are free."""
    pools = ("default", "other")

    def replace(decision_id: str, node: str) -> Decision:
        return dataclasses.replace(
            proposed(decision_id, node, now=NOW, method="single-node-consolidation", reason="Underutilized"),
            action="replace", replacements=tuple(Replacement(p, ("m5.large",), "on-demand", ("us-east-1a",), 0.1)
                                                 for p in pools))

    for decision_id, node in (("d1", "n1"), ("d2", "n2"), ("d3", "n3")):
        await either.propose(replace(decision_id, node))
    for decision_id, node in (("d2", "n2"), ("d3", "n3")):
        approval = await either.approve(decision_id, node_pools={node: "default"}, reason="Underutilized",
                                        allowed={"default": 10}, counted=(), now=NOW)
        assert approval.approved
    assert approval.decision is not None
    command = DisruptionCommand.of_decision(approval.decision)  # d3's
    await either.start(command, NOW)
    await either.finish(command, State.SUCCEEDED, NOW)

    def names(*decisions: str) -> dict[str, str]:
        return {replacement_name(d, i, p): d for d in decisions for i, p in enumerate(pools)}

    assert await either.live_replacements() == names("d1", "d2")
    assert await either.live_replacements(exclude="d1", states=(State.APPROVED, State.EXECUTING)) == names("d2")
    if isinstance(either, DecisionStore):
        assert await DecisionStore(either.engine, "another-cluster").live_replacements() == {}


async def test_the_demand_record_is_replaced_whole_and_kept_per_cluster(either: AnyStore) -> None:
    from ebb.core.model import DemandSample

    assert await either.load_demand() == ()
    first = (DemandSample("batch", NOW - timedelta(minutes=20), 96_000, 180 * 2**30),
             DemandSample("general", NOW - timedelta(minutes=20), 4_000, 2**33),
             DemandSample("batch", NOW, 40_000, 80 * 2**30))
    await either.save_demand(first)
    assert await either.load_demand() == first
    second = first[1:]
    await either.save_demand(second)
    assert await either.load_demand() == second
    if not isinstance(either, DecisionStore):
        return
    store = either
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


async def test_a_private_store_hands_committed_messages_to_the_relay_in_memory(either: AnyStore) -> None:
    """The embedded mode's store (``private``; the memory store always is): no outbox rows; what a transaction sends
    reaches the relay once it committed, and a transaction that rolls back sends nothing."""
    private = either
    if isinstance(either, DecisionStore):
        private = DecisionStore(either.engine, either.cluster, private=True)
    await approved(private, "d1", "n1")
    if isinstance(private, DecisionStore):
        assert await private.outbox() == []
    publish = Published()
    assert await private.relay(PLANNER, publish, lambda: NOW) == 3
    assert [topic for topic, _ in publish.runs] == [TOPIC_DISRUPTION_EVENTS, TOPIC_DISRUPTION_COMMANDS,
                                                    TOPIC_DISRUPTION_EVENTS]
    with pytest.raises((IntegrityError, DuplicateError)):  # the same id again: the transaction rolls back
        await private.propose(proposed("d1", "n2", now=NOW))
    assert await private.relay(PLANNER, publish, lambda: NOW) == 0
    publish.failing = True
    await private.propose(proposed("d2", "n2", now=NOW))
    with pytest.raises(ConnectionError):
        await private.relay(PLANNER, publish, lambda: NOW)
    publish.failing = False
    assert await private.relay(PLANNER, publish, lambda: NOW) == 1  # kept for the next round
    # the executor's steps go to its relay, each once
    command = command_of("d1", "n1")
    await private.start(command, NOW)
    step = DisruptionEvent.step("d1", "n1", "Tainted", "tainted", NOW)
    await private.record_steps([step])
    await private.record_steps([step])
    await private.finish(command, State.SUCCEEDED, NOW, events=[DisruptionEvent.step("d1", "n1", "Terminated", "x",
                                                                                      NOW)])
    publish.runs.clear()
    assert await private.relay(EXECUTOR, publish, lambda: NOW) == 2
    assert publish.runs == [(TOPIC_DISRUPTION_EVENTS, [str(step.id), str(DisruptionEvent.step(
        "d1", "n1", "Terminated", "x", NOW).id)])]
    found = await private.get_decision("d1")
    assert found is not None and [e.type for e in found[1]] == ["Proposed", "Approved", "Tainted", "Terminated"]


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


async def test_an_interruption_is_applied_once_and_makes_room(either: AnyStore) -> None:
    """``interrupt``: the node's decision written approved with its command, the proposal that held the node
    rejected; the same message again is a duplicate, and a node an approved decision takes away is busy."""
    await either.propose(proposed("p1", "n1", now=NOW))
    lost = dataclasses.replace(proposed("i1", "n1", now=NOW, method="interruption", reason="Interrupted",
                                        text="spot"), explanation={"text": "spot"})
    done = await either.interrupt(message_id="m1", consumer="interruptions", decision=lost, now=NOW)
    assert done.outcome == "created" and done.rejected == (("p1", ("n1",)),)
    assert done.decision is not None and done.decision.state is State.APPROVED
    assert (await either.state("p1"), await either.state("i1")) == (State.REJECTED, State.APPROVED)
    again = await either.interrupt(message_id="m1", consumer="interruptions", decision=lost, now=NOW)
    assert again.outcome == "duplicate"
    other = dataclasses.replace(lost, id="i2")
    busy = await either.interrupt(message_id="m2", consumer="interruptions", decision=other, now=NOW)
    assert (busy.outcome, busy.holder) == ("busy", "i1")
    publish = Published()
    await either.relay(PLANNER, publish, lambda: NOW)  # the private store's; the SQL store's from its outbox
    assert TOPIC_DISRUPTION_COMMANDS in [topic for topic, _ in publish.runs]


async def test_an_interruption_of_a_node_two_live_decisions_hold_is_kept_on_the_approved_one(either: AnyStore) -> None:
    """A pass that read the live decisions before an interruption's was written may propose on the interrupted node:
    two live decisions hold it then, the proposal the newer. A second interruption of the node is kept on the approved
    interruption (busy), never a second live interruption of the node (the fuzzing of the planner's handler found
    it); the proposal is left to its validation, which refuses a node another decision holds."""
    first = dataclasses.replace(proposed("i1", "n1", now=NOW, method="interruption", reason="Interrupted",
                                         text="spot"), explanation={"text": "spot"})
    assert (await either.interrupt(message_id="m1", consumer="interruptions", decision=first, now=NOW)).outcome == (
        "created")
    await either.propose(proposed("p1", "n1", now=NOW + timedelta(seconds=1)))
    second = dataclasses.replace(first, id="i2", explanation={"text": "shutting-down"})
    busy = await either.interrupt(message_id="m2", consumer="interruptions", decision=second, now=NOW)
    assert (busy.outcome, busy.holder) == ("busy", "i1")
    assert [await either.state(d) for d in ("i1", "p1", "i2")] == [State.APPROVED, State.PROPOSED, None]
    refused = await either.approve("p1", node_pools={"n1": "default"}, reason="Empty", allowed={"default": 10},
                                   counted=(), now=NOW)
    assert refused.rejected and await either.live_nodes() == {"n1": "i1"}


# (how the decision holding the node ends, whether the interruption that came meanwhile gets its own decision then)
HOLDER_ENDS = [
    (State.SUCCEEDED, False),  # the node is gone: the interruption is carried out
    (State.FAILED, True),  # a drain refused or blocked: the node stays, so the interruption must still remove it
    (State.ROLLED_BACK, True),
]


@pytest.mark.parametrize(("ended", "carried_on"), HOLDER_ENDS)
async def test_an_interruption_of_a_busy_node_is_kept_until_its_holder_ends(either: AnyStore, ended: State,
                                                                            carried_on: bool) -> None:
    """An interruption of a node an approved decision holds is only noted (busy), kept on the holder; when the
    holder ends without the node gone, ``finish`` writes the interruption's own decision approved, with its
    command for the executor's relay, once (a redelivered finish writes nothing)."""
    command = await approved(either, "d1", "n1", "n2")
    spot = dataclasses.replace(proposed("i1", ("n2", "default"), now=NOW, method="interruption",
                                        reason="Interrupted", text="spot"), explanation={"text": "spot"})
    busy = await either.interrupt(message_id="m1", consumer="interruptions", decision=spot, now=NOW)
    assert (busy.outcome, busy.holder) == ("busy", "d1")
    assert await either.state("i1") is None
    again = await either.interrupt(message_id="m1", consumer="interruptions", decision=spot, now=NOW)
    assert again.outcome == "duplicate"
    assert (await either.start(command, NOW))[0] is Start.EXECUTE
    later = NOW + timedelta(minutes=2)
    assert await either.finish(command, ended, later, hold_for=900.0, why="drain refused")
    assert not await either.finish(command, ended, later)  # a redelivery: nothing again
    publish = Published()
    await either.relay(EXECUTOR, publish, lambda: later)
    commands = [ids for topic, ids in publish.runs if topic == TOPIC_DISRUPTION_COMMANDS]
    if not carried_on:
        assert await either.state("i1") is None and commands == []
        return
    assert await either.state("i1") is State.APPROVED
    assert commands == [[str(command_id("i1"))]]
    assert "i1" in {d.id for d in await either.approved()}
    assert await either.live_nodes() == {"n2": "i1"}  # the interruption's one node, the holder's others free


async def test_two_interruptions_kept_on_a_holder_of_one_node_become_one_decision(either: AnyStore) -> None:
    """Two interruptions of one node (a scheduled change, then the instance shutting down) kept on the decision
    holding it: when it fails, ``finish`` writes one interruption decision for the node, the other kept on it (so a
    failure of that one writes it), never two live decisions of one node."""
    command = await approved(either, "d1", "n1")
    first, second = (dataclasses.replace(proposed(i, ("n1", "default"), now=NOW, method="interruption",
                                                  reason="Interrupted", text=i), explanation={"text": i})
                     for i in ("i1", "i2"))
    for n, spot in enumerate((first, second)):
        assert (await either.interrupt(message_id=f"m{n}", consumer="interruptions", decision=spot,
                                       now=NOW)).outcome == "busy"
    assert (await either.start(command, NOW))[0] is Start.EXECUTE
    assert await either.finish(command, State.FAILED, NOW + timedelta(minutes=2))
    assert [await either.state(d) for d in ("i1", "i2")] == [State.APPROVED, None]
    assert await either.live_nodes() == {"n1": "i1"}
    [written] = [d for d in await either.approved() if d.id == "i1"]
    assert [d.id for d in noted_interruptions(written.explanation)] == ["i2"]


async def test_budgets_are_taken_in_the_ledger_and_a_full_one_rejects(either: AnyStore) -> None:
    """``approve`` counts the pool's ledger rows against what the budget allows, frees those of ended decisions and of
    leases run out, and rejects (with the reason) what does not fit or what another live decision holds."""
    await approved(either, "d1", "n1")
    await either.propose(proposed("d2", "n2", now=NOW))
    full = await either.approve("d2", node_pools={"n2": "default"}, reason="Empty", allowed={"default": 1},
                                counted=(), now=NOW)
    assert (full.approved, full.rejected) == (False, True) and "allows 1 disruptions" in full.reason
    assert await either.state("d2") is State.REJECTED
    await either.propose(proposed("d3", "n3", now=NOW))
    counted = await either.approve("d3", node_pools={"n3": "default"}, reason="Empty", allowed={"default": 1},
                                   counted=("n1",), now=NOW)  # n1 is counted by the snapshot already
    assert counted.approved
    await either.propose(proposed("d4", "n1", now=NOW))
    held = await either.approve("d4", node_pools={"n1": "default"}, reason="Empty", allowed={"default": 9},
                                counted=(), now=NOW)
    assert not held.approved and "live decision d1" in held.reason
    await either.propose(proposed("d5", "n5", now=NOW))
    later = NOW + timedelta(seconds=either.ledger_ttl)  # every lease ran out: the budget is free again
    assert (await either.approve("d5", node_pools={"n5": "default"}, reason="Empty", allowed={"default": 1},
                                 counted=(), now=later)).approved
    assert [(e.node, e.decision_id) for e in await either.ledger()] == [("n5", "d5")]
    gone = await either.approve("nope", node_pools={"n9": "default"}, reason="Empty", allowed={"default": 1},
                                counted=(), now=NOW)
    assert (gone.approved, gone.reason) == (False, "the decision is gone")


async def test_proposals_are_due_at_their_approve_at_in_order(either: AnyStore) -> None:
    soon, later = NOW + timedelta(seconds=15), NOW + timedelta(seconds=30)
    await either.propose(dataclasses.replace(proposed("b", "n2", now=NOW), approve_at=later))
    await either.propose(dataclasses.replace(proposed("a", "n1", now=NOW), approve_at=soon))
    await either.propose(dataclasses.replace(proposed("c", "n3", now=NOW), approve_at=soon))
    assert await either.next_due() == soon
    assert [d.id for d in await either.due(NOW)] == []
    assert [d.id for d in await either.due(soon)] == ["a", "c"]
    assert [d.id for d in await either.due(later)] == ["a", "c", "b"]
    assert await either.live_nodes() == {"n1": "a", "n2": "b", "n3": "c"}
    assert await either.live_nodes(exclude="a", states=(State.PROPOSED,)) == {"n2": "b", "n3": "c"}
    await either.reject("a", "stale", NOW)
    assert not await either.reject("a", "again", NOW)
    assert [d.id for d in await either.due(later)] == ["c", "b"]


async def test_a_decision_reads_back_as_its_row_keeps_it(either: AnyStore) -> None:
    """What a decision keeps once written is the row's: savings to a millionth, a replacement without its hostname,
    the explanation as JSON gives it back."""
    replaced = dataclasses.replace(
        proposed("d1", "n1", now=NOW, savings=0.123456789), action="replace",
        replacements=(Replacement("default", ("m5.large",), "on-demand", ("us-east-1a",), 0.0961234567, "host-1"),),
        explanation={"text": "cheaper", "pods": ("a", "b")})
    await either.propose(replaced)
    (due,) = await either.due(NOW)
    assert due.savings == 0.123457
    assert due.replacements == (Replacement("default", ("m5.large",), "on-demand", ("us-east-1a",), 0.0961234567),)
    assert due.explanation == {"text": "cheaper", "pods": ["a", "b"]}


async def test_a_shadow_store_sends_nothing_and_takes_no_budget(either: AnyStore) -> None:
    """A shadow store (docs/shadow.md) proposes and approves as a real one, but its decisions are shadow ones: no
    message goes out, no ledger row is taken, and a real store never sees them live (nor they a real one's)."""
    shadow: AnyStore = (DecisionStore(either.engine, either.cluster, private=True, shadow=True)
                        if isinstance(either, DecisionStore) else MemoryStore(either.cluster, shadow=True))
    await approved(shadow, "s1", "n1")
    assert await shadow.live_nodes() == {"n1": "s1"} and await shadow.ledger() == []
    publish = Published()
    assert await shadow.relay(PLANNER, publish, lambda: NOW) == 0 and publish.runs == []
    if isinstance(either, DecisionStore):  # one database: the real store does not see the shadow decision
        assert await either.live_nodes() == {}


async def test_the_write_count_moves_with_every_call_that_may_write(either: AnyStore) -> None:
    """The embedded mode's write count (``ebb_embedded.store.WriteCount`` on SQLite, ``MemoryStore.revision``):
    whether each call moves it is the same on both stores (a read never does; a call that ran a write does, even
    one that changed nothing), so a run reads the store at the same moments on either."""
    count = WriteCount(either.engine) if isinstance(either, DecisionStore) else either.revision
    command = command_of("d1", "n1")
    step = DisruptionEvent.step("d1", "n1", "Tainted", "tainted", NOW)
    interruption = proposed("i1", "n7", now=NOW, method="interruption", reason="Interrupted")
    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "propose": lambda: either.propose(proposed("d1", "n1", now=NOW)),
        "propose d2": lambda: either.propose(proposed("d2", "n2", now=NOW)),
        "read": either.live_nodes,
        "due": lambda: either.due(NOW),
        "approve": lambda: either.approve("d1", node_pools={"n1": "default"}, reason="Empty",
                                          allowed={"default": 5}, counted=(), now=NOW),
        "approve again": lambda: either.approve("d1", node_pools={"n1": "default"}, reason="Empty",
                                                allowed={"default": 5}, counted=(), now=NOW),
        "reject": lambda: either.reject("d2", "stale", NOW),
        "reject again": lambda: either.reject("d2", "stale", NOW),
        "start": lambda: either.start(command, NOW),
        "resume": lambda: either.start(command, NOW),
        "no steps": lambda: either.record_steps([]),
        "step": lambda: either.record_steps([step]),
        "step again": lambda: either.record_steps([step]),
        "finish": lambda: either.finish(command, State.SUCCEEDED, NOW),
        "finish again": lambda: either.finish(command, State.SUCCEEDED, NOW),
        "duplicate": lambda: either.start(command, NOW),
        "hold": lambda: either.create_hold(scope_kind="node", scope="n1", reason="x", expires_at=None, now=NOW,
                                           hold_id="h1"),
        "holds": lambda: either.list_holds(NOW),
        "unhold": lambda: either.delete_hold("h1"),
        "unhold again": lambda: either.delete_hold("h1"),
        "demand": lambda: either.save_demand(()),
        "interrupt": lambda: either.interrupt(message_id="m1", consumer="c", decision=interruption, now=NOW),
        "interrupt again": lambda: either.interrupt(message_id="m1", consumer="c", decision=interruption, now=NOW),
        "counts": either.decision_counts,
    }
    moved = []
    for name, call in calls.items():
        before = count()
        await call()
        if count() != before:
            moved.append(name)
    assert moved == ["propose", "propose d2", "approve", "reject", "start", "step", "step again", "finish",
                     "finish again", "hold", "unhold", "unhold again", "demand", "interrupt"]
    assert await either.decision_counts() == {("succeeded", "emptiness"): 1, ("rejected", "emptiness"): 1,
                                              ("approved", "interruption"): 1}


async def test_a_removal_is_kept_once_per_node_and_hour(either: AnyStore) -> None:
    """``record_removal`` (a shadow planner's): each replica and each new leader tells a removal again; a removal of
    the same node within ``SAME_REMOVAL`` of one kept is the same one."""
    from ebb.adapters.store.models import ShadowRemoval

    def removal(node: str, minutes: float) -> ShadowRemoval:
        return ShadowRemoval(node=node, removed_at=NOW + timedelta(minutes=minutes), removed_by="karpenter",
                             reason="Empty", detail="", nodepool="default", instance_type="m5.large", verdict="",
                             verdict_inner="", verdict_text="")

    assert await either.record_removal(removal("n1", 0))
    assert not await either.record_removal(removal("n1", 30))
    assert await either.record_removal(removal("n2", 30))
    assert await either.record_removal(removal("n1", 90))

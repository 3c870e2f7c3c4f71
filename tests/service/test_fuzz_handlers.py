"""Hostile records that decode, through the services' real bus handlers (issue 13: fuzzing): cluster objects
to the consolidation-planner and the decisions-api, commands to the termination-executor, interruptions to
the planner.

Records that decode still carry whatever a broken watcher or a hostile producer put in the object: the
hostile clusters of tests/kit/hostile.py (one to three fields of a valid cluster replaced by
None, bools, huge or negative numbers, NaN, odd strings, lists, mappings) are published on
ebb.cluster.objects to a running planner (``app.run`` on the InMemoryBus and SQLite,
tests/kit/planner.py's ``Running``). The planner must neither crash nor stop consuming: a sentinel object
published after them is applied, the planner task is still running, and with the valid cluster published
again it applies it and runs its passes. Objects the contract refuses at the producer (a NaN is no JSON)
are counted and skipped.

Commands (decisions absent or in any state, missing or repeated nodes, duplicates) go through the
executor's handler, store and a fake apiserver: the consumer is never stuck, no decision is left executing,
and only commands of decisions never approved are dead-lettered. Interruptions (every kind and instance
state, managed, unmanaged and unknown nodes, duplicates) go to a running planner: all consumed, none
dead-lettered, at most one decision per message and never two live ones on a node. The hostile clusters
also go to the decisions-api (its lifespan and consumers running): its live endpoints answer 200, 404 or
503, never a 500, and once the valid cluster is published again they serve it.

The inputs tried are printed (``pytest -s``)."""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr, ValidationError

from ebb.adapters.bus import InMemoryBus, RetryPolicy
from ebb.adapters.clock import ManualClock
from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.migrate import upgrade_async
from ebb.contracts import (
    TOPIC_CLUSTER_OBJECTS,
    TOPIC_DISRUPTION_COMMANDS,
    TOPIC_INTERRUPTIONS,
    ClusterObject,
    ContractError,
    DeadLetter,
    DisruptionCommand,
    Interruption,
    dlq_topic,
    from_kafka,
)
from ebb.contracts.messages import InterruptionKind
from ebb.core.decision import State
from ebb_decisions_api.settings import Settings as ApiSettings
from ebb_termination_executor.executor import Executor
from tests.kit.builders import node
from tests.kit.decisions_api import AUTH as API_AUTH
from tests.kit.decisions_api import TOKEN as API_TOKEN
from tests.kit.decisions_api import running
from tests.kit.executor import NOW, FakeApi, command, drainer, pod
from tests.kit.hostile import hostile_clusters, valid_cluster
from tests.kit.messages import cluster_object
from tests.kit.planner import Running, interruption
from tests.kit.planner import cluster as planner_cluster
from tests.kit.waiting import eventually

EXAMPLES = int(os.environ.get("EBB_FUZZ_PLANNER_EXAMPLES", "15"))
TRIED: Counter[str] = Counter()


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{Path(tmp_path_factory.mktemp('fuzz-planner')) / 'ebb.db'}"
    asyncio.run(upgrade_async(url))
    yield url
    print("\nbus handler fuzzing: inputs tried", dict(TRIED))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(documents=hostile_clusters())
def test_the_planner_survives_hostile_objects(migrated: str, documents: list[dict[str, Any]]) -> None:
    TRIED["clusters"] += 1
    asyncio.run(_plan(migrated, documents))


async def _plan(url: str, documents: list[dict[str, Any]]) -> None:
    bus = InMemoryBus()
    async with Running(bus, url) as running:
        for doc in documents:
            try:
                message = cluster_object(doc)
                await bus.publish(TOPIC_CLUSTER_OBJECTS, message)
            except (ContractError, ValidationError, KeyError, TypeError, AttributeError):
                TRIED["objects refused by the contract"] += 1
            else:
                TRIED["objects published"] += 1
        await bus.publish(TOPIC_CLUSTER_OBJECTS, cluster_object(node("sentinel")))
        planner = await eventually("the planner", lambda: running.planner)
        await eventually("the sentinel applied", lambda: planner.objects.get("Node", "", "sentinel"))
        assert running.task is not None and not running.task.done(), "the planner stopped"
        for doc in valid_cluster():
            await bus.publish(TOPIC_CLUSTER_OBJECTS, cluster_object(doc))
        await eventually("the valid cluster applied", lambda: planner.objects.get("Node", "", "d") == node(
            "d", pool="other") or None)
        passes = "ebb_voluntary_disruption_decision_evaluation_duration_seconds_count"
        await eventually("a pass on the valid cluster", lambda: running.metric(
            passes, reason="", consolidation_type="") > 0 or None)
        assert not running.task.done(), "the planner stopped"


# -- the termination-executor's handler of ebb.disruption.commands ---------------------------------------------

#: what the store holds for a command's decision id
DECISION_STATES = ["absent", *(s.value for s in State)]


@st.composite
def command_streams(draw: st.DrawFn) -> tuple[dict[str, str], list[DisruptionCommand]]:
    """Commands as a broken planner or a replayed topic could send them: for decisions that are absent or in
    any state, on existing, missing or repeated nodes, with or without replacements, each possibly sent
    twice."""
    # decision ids are unique across the examples, which share one database
    run = uuid.uuid4().hex[:8]
    states = {f"d-{run}-{i}": draw(st.sampled_from(DECISION_STATES)) for i in range(draw(st.integers(1, 4)))}
    commands: list[DisruptionCommand] = []
    for decision_id in states:
        nodes = tuple(draw(st.lists(st.sampled_from(["n1", "n2", "missing"]), min_size=1, max_size=3, unique=True)))
        sent = command(nodes, decision_id=decision_id, replacements=draw(st.booleans()))
        commands += [sent] * draw(st.integers(1, 2))
    return states, draw(st.permutations(commands))


@settings(max_examples=EXAMPLES * 2, deadline=None, suppress_health_check=list(HealthCheck))
@given(stream=command_streams())
def test_the_executor_handles_or_dead_letters_every_command(
        migrated: str, stream: tuple[dict[str, str], list[DisruptionCommand]]) -> None:
    TRIED["command streams"] += 1
    TRIED["commands"] += len(stream[1])
    asyncio.run(_execute(migrated, *stream))


def letter_decision(letter: DeadLetter) -> str:
    original = from_kafka(letter.topic, *letter.original())
    assert isinstance(original, DisruptionCommand)
    return original.decision_id


async def _execute(url: str, states: dict[str, str], commands: list[DisruptionCommand]) -> None:
    store = DecisionStore.from_url(url, f"fuzz-{uuid.uuid4().hex[:8]}")
    try:
        for decision_id, state in states.items():
            if state != "absent":
                await store.add_decision(decision_id=decision_id, method="emptiness", reason="Empty",
                                         action="delete", nodes=["n1"], replacements=[], created_at=NOW,
                                         state=state)
        clock = ManualClock()
        api = FakeApi(clock)
        for name in ("n1", "n2"):
            api.add_node(name)
        api.add_pods(pod("a", "n1"), pod("b", "n2"))
        bus = InMemoryBus(partitions=1, retry=RetryPolicy(max_attempts=2, initial=0.0, maximum=0.0))
        executor = Executor(bus, store, drainer(api, clock), clock=lambda: NOW)
        for sent in commands:
            await bus.publish(TOPIC_DISRUPTION_COMMANDS, sent)
        stop = asyncio.Event()
        consumer = asyncio.create_task(bus.consume([TOPIC_DISRUPTION_COMMANDS], "executor", executor.handle,
                                                   stop=stop))
        for _ in range(1000):
            if not bus.lag("executor", TOPIC_DISRUPTION_COMMANDS) or consumer.done():
                break
            await asyncio.sleep(0.005)
        stop.set()
        await consumer  # raises HandlerFailed when a command crashed the consumer
        assert bus.lag("executor", TOPIC_DISRUPTION_COMMANDS) == 0
        dead = [from_kafka(r.topic, r.key, r.value, r.headers)
                for r in bus.records(dlq_topic(TOPIC_DISRUPTION_COMMANDS))]
        letters = len(dead)
        for letter in dead:
            assert isinstance(letter, DeadLetter)
            # only commands of decisions never approved are refused
            assert states[letter_decision(letter)] == "proposed", letter.error
            TRIED["commands dead-lettered (decision not approved)"] += 1
        assert executor.succeeded + executor.failed + executor.rolled_back + executor.duplicates + letters <= len(
            commands)
        for decision_id in states:
            assert await store.state(decision_id) is not State.EXECUTING, f"{decision_id} left executing"
    finally:
        await store.close()


async def test_a_command_for_a_decision_never_approved_is_dead_lettered(store: DecisionStore) -> None:
    """Found by the test above: the store's start raised IllegalTransition (proposed -> executing), the bus
    retried it and the consumer stopped with HandlerFailed, on the same command after every restart. It is a
    poison message now: dead-lettered, the decision left proposed, and the next command executed."""
    await store.add_decision(decision_id="d-proposed", method="emptiness", reason="Empty", action="delete",
                             nodes=["n1"], replacements=[], created_at=NOW, state="proposed")
    await store.add_decision(decision_id="d-approved", method="emptiness", reason="Empty", action="delete",
                             nodes=["n2"], replacements=[], created_at=NOW, state="approved")
    clock = ManualClock()
    api = FakeApi(clock)
    for name in ("n1", "n2"):
        api.add_node(name)
    bus = InMemoryBus(partitions=1)
    executor = Executor(bus, store, drainer(api, clock), clock=lambda: NOW)
    await bus.publish(TOPIC_DISRUPTION_COMMANDS, command(("n1",), decision_id="d-proposed"))
    await bus.publish(TOPIC_DISRUPTION_COMMANDS, command(("n2",), decision_id="d-approved"))
    stop = asyncio.Event()
    consumer = asyncio.create_task(bus.consume([TOPIC_DISRUPTION_COMMANDS], "executor", executor.handle, stop=stop))
    await eventually("the approved command executed", lambda: executor.succeeded or None)
    stop.set()
    await consumer
    (letter,) = [from_kafka(r.topic, r.key, r.value, r.headers)
                 for r in bus.records(dlq_topic(TOPIC_DISRUPTION_COMMANDS))]
    assert isinstance(letter, DeadLetter) and letter.cause == "poison" and "proposed" in letter.error
    assert (await store.state("d-proposed"), await store.state("d-approved")) == (State.PROPOSED, State.SUCCEEDED)
    assert "n1" in api.nodes and not any(call[1] == "n1" for call in api.calls)


# -- the planner's handler of ebb.interruptions ------------------------------------------------------------------


@st.composite
def interruption_streams(draw: st.DrawFn) -> list[Interruption]:
    """Interruptions of every kind and instance state, for managed, unmanaged and unknown nodes, some sent
    twice (the same message id) and some for a node already interrupted."""
    sent: list[Interruption] = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(get_args(InterruptionKind)))
        state = draw(st.sampled_from([None, "stopping", "stopped", "shutting-down", "terminated", "running"]))
        message = interruption(draw(st.sampled_from(["n1", "n2", "ghost", "foreign"])), kind,
                               draw(st.sampled_from(["", "instance-action=terminate"])),
                               **({"instance_state": state} if state and kind == "state-change" else {}))
        sent += [message] * draw(st.integers(1, 2))
    return draw(st.permutations(sent))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(stream=interruption_streams())
def test_the_planner_applies_each_interruption_once_and_keeps_consuming(
        migrated: str, stream: list[Interruption]) -> None:
    TRIED["interruption streams"] += 1
    TRIED["interruptions"] += len(stream)
    asyncio.run(_interrupt(migrated, stream))


async def _interrupt(template: str, stream: list[Interruption]) -> None:
    # a database of its own (a copy of the migrated one): decisions left approved by another example would
    # hold n1 and n2 ("already being disrupted")
    path = Path(template.removeprefix("sqlite:///"))
    copy = path.with_name(f"{uuid.uuid4().hex[:8]}.db")
    shutil.copyfile(path, copy)
    url = f"sqlite:///{copy}"
    bus = InMemoryBus()
    for doc in [*planner_cluster(), node("foreign", pool=None, cpu="1")]:
        await bus.publish(TOPIC_CLUSTER_OBJECTS, cluster_object(doc))
    cluster_name = f"fuzz-{uuid.uuid4().hex[:8]}"
    async with Running(bus, url, delay=3600, cluster=cluster_name,
                       group=f"planner-{cluster_name}") as running:
        for message in stream:
            await bus.publish(TOPIC_INTERRUPTIONS, message)
        group = f"planner-{cluster_name}-interruptions"
        await eventually("every interruption consumed", lambda: bus.lag(group, TOPIC_INTERRUPTIONS) == 0 or None)
        assert running.task is not None and not running.task.done(), "the planner stopped"
        # this stream's (the examples share one database, and Running's store is always cluster "unit")
        ids = {str(m.id) for m in stream}
        interrupted = [d for d in await running.decisions() if d.method == "interruption"
                       and d.explanation["interruption"]["messageId"] in ids]
        # one decision per interruption message at most, and never two live ones on a node
        assert len(interrupted) == len({d.id for d in interrupted}) <= len({m.id for m in stream})
        live = [d.nodes[0]["name"] for d in interrupted if d.state in ("proposed", "approved", "executing")]
        assert len(live) == len(set(live)), live
        TRIED["interruption decisions"] += len(interrupted)
        assert running.planner is not None
        TRIED["interrupted (planner count)"] += running.planner.interrupted
        assert {d.nodes[0]["name"] for d in interrupted} <= {"n1", "n2"}
        assert len(dead_letters := bus.records(dlq_topic(TOPIC_INTERRUPTIONS))) == 0, dead_letters


# -- the decisions-api's consumer of ebb.cluster.objects ------------------------------------------------------


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(documents=hostile_clusters())
def test_the_api_answers_on_hostile_objects_and_keeps_consuming(migrated: str,
                                                                 documents: list[dict[str, Any]]) -> None:
    TRIED["api clusters"] += 1
    asyncio.run(_serve(migrated, documents))


async def _serve(url: str, documents: list[dict[str, Any]]) -> None:
    bus = InMemoryBus()
    published: list[ClusterObject] = []
    for doc in documents:
        try:
            message = cluster_object(doc)
            await bus.publish(TOPIC_CLUSTER_OBJECTS, message)
        except (ContractError, ValidationError, KeyError, TypeError, AttributeError):
            TRIED["api objects refused by the contract"] += 1
        else:
            published.append(message)
    store = DecisionStore.from_url(url, "fuzz-api")
    settings_ = ApiSettings(token=SecretStr(API_TOKEN), database_url="sqlite://", cluster="fuzz-api")
    try:
        async with running(settings_, store, bus) as (_, client):
            await eventually("ready or refusing the snapshot", lambda: _probe(client, "/readyz", {200, 503}))
            for path in ("/v1/nodes/a/explain", "/v1/nodepools/default/budgets", "/v1/nodes/nope/explain"):
                status = await _probe(client, path, {200, 404, 503})
                TRIED[f"api {status}"] += 1
            plan = await client.post("/v1/plan", params={"now": "2026-11-23T18:30:00Z"}, headers=API_AUTH)
            assert plan.status_code in {200, 422, 503}, plan.text
            # the consumer goes on: the hostile objects deleted (an invalid object left in the state keeps the
            # snapshot invalid, by design) and the valid cluster published, the valid cluster is served
            valid = [cluster_object(doc) for doc in valid_cluster()]
            for gone in {m.key(): m for m in published}.values():
                if gone.key() not in {v.key() for v in valid}:
                    await bus.publish(TOPIC_CLUSTER_OBJECTS, gone.model_copy(update={"object": None}))
            for doc in valid_cluster():
                await bus.publish(TOPIC_CLUSTER_OBJECTS, cluster_object(doc))
            await eventually("the valid cluster served", lambda: _probe(client, "/v1/nodes/a/explain", {200}))
    finally:
        await store.close()


async def _probe(client: httpx.AsyncClient, path: str, allowed: set[int]) -> int | None:
    response = await client.get(path, params={"now": "2026-11-23T18:30:00Z"}, headers=API_AUTH)
    assert response.status_code < 500 or response.status_code == 503, (path, response.status_code, response.text)
    return response.status_code if response.status_code in allowed else None

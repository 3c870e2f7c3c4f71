"""The in-memory bus (embedded mode) keeps the bus semantics of DESIGN §2: per-key order, at-least-once
delivery with commit after the handler, DLQ for malformed records and poison messages, retries of
transient errors, graceful stop."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest

from ebb.adapters.bus import (
    BusError,
    Delivery,
    HandlerFailed,
    InMemoryBus,
    PoisonMessage,
    RetryPolicy,
)
from ebb.contracts import (
    ClusterObject,
    ContractError,
    DeadLetter,
    DisruptionEvent,
    from_kafka,
    to_kafka,
)

EVENTS = "ebb.disruption.events"
T0 = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)
FAST = RetryPolicy(initial=0.005, multiplier=2, maximum=0.02, max_attempts=4)


def event(node: str, minute: int) -> DisruptionEvent:
    return DisruptionEvent(decision_id="d-1", node=node, phase="Proposed", message="",
                           at=T0 + timedelta(minutes=minute))


async def until(condition: Callable[[], bool]) -> None:
    """Poll ``condition`` for up to 5 s."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition not met in 5 s")


class Consumer:
    """A consume loop running as a task, stopped with its event."""

    def __init__(self, bus: InMemoryBus, topics: list[str], group: str,
                 handler: Callable[[Delivery], Awaitable[None]]) -> None:
        self.stop = asyncio.Event()
        self.task = asyncio.create_task(bus.consume(topics, group, handler, stop=self.stop))

    async def close(self) -> None:
        self.stop.set()
        await asyncio.wait_for(self.task, timeout=5)


async def test_per_key_order_is_kept() -> None:
    bus = InMemoryBus(partitions=4)
    nodes = [f"node-{i}" for i in range(6)]
    for minute in range(20):
        for node in nodes:
            await bus.publish(EVENTS, event(node, minute))
    seen: dict[str, list[datetime]] = {n: [] for n in nodes}
    rng = random.Random(7)

    async def handler(delivery: Delivery) -> None:
        await asyncio.sleep(rng.random() / 1000)  # partitions interleave
        assert isinstance(delivery.message, DisruptionEvent)
        assert delivery.key == delivery.message.node
        seen[delivery.message.node].append(delivery.message.at)

    consumer = Consumer(bus, [EVENTS], "planner", handler)
    await until(lambda: sum(map(len, seen.values())) == 120)
    await consumer.close()
    for node in nodes:
        assert seen[node] == sorted(seen[node]) and len(seen[node]) == 20
    assert bus.lag("planner", EVENTS) == 0
    # the records of one key share a partition
    partitions = {r.key: r.partition for r in bus.records(EVENTS)}
    assert all(r.partition == partitions[r.key] for r in bus.records(EVENTS))


async def test_malformed_record_goes_to_the_dlq_and_is_committed() -> None:
    bus = InMemoryBus(partitions=1)
    bus.append(EVENTS, b"node-a", b'{"node": "node-a"}', [("content-type", b"application/json")])
    await bus.publish(EVENTS, event("node-a", 1))
    handled: list[Delivery] = []

    async def handler(delivery: Delivery) -> None:
        handled.append(delivery)

    consumer = Consumer(bus, [EVENTS], "planner", handler)
    await until(lambda: len(handled) == 1)
    await consumer.close()
    assert handled[0].offset == 1
    assert bus.committed("planner", EVENTS, 0) == 2
    [record] = bus.records(EVENTS + ".dlq")
    letter = from_kafka(EVENTS + ".dlq", record.key, record.value, record.headers)
    assert isinstance(letter, DeadLetter)
    assert (letter.topic, letter.partition, letter.offset, letter.cause) == (EVENTS, 0, 0, "malformed")
    assert "missing header(s) ce_specversion, ce_id, ce_source, ce_type" in letter.error
    assert letter.group == "planner"
    assert letter.original() == (b"node-a", b'{"node": "node-a"}', [("content-type", b"application/json")])

    # the DLQ itself is a topic like the others
    letters: list[Delivery] = []

    async def collect(delivery: Delivery) -> None:
        letters.append(delivery)

    operator = Consumer(bus, [EVENTS + ".dlq"], "operator", collect)
    await until(lambda: len(letters) == 1)
    await operator.close()
    assert letters[0].message == letter


async def test_poison_message_goes_to_the_dlq() -> None:
    bus = InMemoryBus(partitions=1)
    await bus.publish(EVENTS, event("node-a", 1))
    await bus.publish(EVENTS, event("node-b", 2))
    handled: list[str] = []

    async def handler(delivery: Delivery) -> None:
        assert isinstance(delivery.message, DisruptionEvent)
        if delivery.message.node == "node-a":
            raise PoisonMessage("node-a is not in the snapshot")
        handled.append(delivery.message.node)

    consumer = Consumer(bus, [EVENTS], "planner", handler)
    await until(lambda: handled == ["node-b"])
    await consumer.close()
    [record] = bus.records(EVENTS + ".dlq")
    letter = from_kafka(EVENTS + ".dlq", record.key, record.value, record.headers)
    assert isinstance(letter, DeadLetter)
    assert letter.cause == "poison"
    assert letter.error == "PoisonMessage: node-a is not in the snapshot"
    assert bus.lag("planner", EVENTS) == 0


async def test_transient_errors_are_retried_with_backoff() -> None:
    bus = InMemoryBus(partitions=1, retry=FAST)
    message = event("node-a", 1)
    await bus.publish(EVENTS, message)
    attempts: list[tuple[int, float]] = []

    async def handler(delivery: Delivery) -> None:
        attempts.append((delivery.attempt, asyncio.get_running_loop().time()))
        if delivery.attempt < 3:
            raise ConnectionError("database unavailable")
        assert delivery.message == message

    consumer = Consumer(bus, [EVENTS], "planner", handler)
    await until(lambda: bus.lag("planner", EVENTS) == 0)
    await consumer.close()
    assert [a for a, _ in attempts] == [1, 2, 3]
    assert attempts[1][1] - attempts[0][1] >= FAST.delay(1) * 0.9
    assert attempts[2][1] - attempts[1][1] >= FAST.delay(2) * 0.9
    assert bus.records(EVENTS + ".dlq") == []


async def test_exhausted_retries_fail_the_loop_without_commit() -> None:
    bus = InMemoryBus(partitions=1, retry=FAST)
    await bus.publish(EVENTS, event("node-a", 1))
    calls = 0

    async def broken(delivery: Delivery) -> None:
        nonlocal calls
        calls += 1
        raise ConnectionError("still down")

    with pytest.raises(HandlerFailed, match="failed 4 times"):
        await asyncio.wait_for(bus.consume([EVENTS], "planner", broken, stop=asyncio.Event()), timeout=5)
    assert calls == FAST.max_attempts
    assert bus.committed("planner", EVENTS, 0) == 0
    assert bus.records(EVENTS + ".dlq") == []

    # restarted, the group gets the record again (at least once)
    handled: list[Delivery] = []

    async def fixed(delivery: Delivery) -> None:
        handled.append(delivery)

    consumer = Consumer(bus, [EVENTS], "planner", fixed)
    await until(lambda: len(handled) == 1)
    await consumer.close()
    assert bus.committed("planner", EVENTS, 0) == 1


async def test_stop_during_backoff_leaves_the_record_uncommitted() -> None:
    bus = InMemoryBus(partitions=1, retry=RetryPolicy(initial=30, max_attempts=5))
    await bus.publish(EVENTS, event("node-a", 1))
    calls = 0

    async def handler(delivery: Delivery) -> None:
        nonlocal calls
        calls += 1
        raise ConnectionError("down")

    consumer = Consumer(bus, [EVENTS], "planner", handler)
    await until(lambda: calls == 1)
    began = asyncio.get_running_loop().time()
    await consumer.close()  # does not wait out the 30 s backoff
    assert asyncio.get_running_loop().time() - began < 1
    assert bus.committed("planner", EVENTS, 0) == 0


async def test_stop_lets_the_running_handler_finish_and_commit() -> None:
    bus = InMemoryBus(partitions=1)
    await bus.publish(EVENTS, event("node-a", 1))
    await bus.publish(EVENTS, event("node-a", 2))
    started, release = asyncio.Event(), asyncio.Event()
    finished: list[int] = []

    async def handler(delivery: Delivery) -> None:
        started.set()
        await release.wait()
        finished.append(delivery.offset)

    consumer = Consumer(bus, [EVENTS], "planner", handler)
    await asyncio.wait_for(started.wait(), 5)
    consumer.stop.set()
    release.set()
    await asyncio.wait_for(consumer.task, 5)
    assert finished == [0]
    assert bus.committed("planner", EVENTS, 0) == 1


async def test_idle_consumer_stops_promptly_and_groups_are_independent() -> None:
    bus = InMemoryBus()
    seen: dict[str, int] = {"a": 0, "b": 0}

    def counting(group: str) -> Callable[[Delivery], Awaitable[None]]:
        async def handler(delivery: Delivery) -> None:
            seen[group] += 1

        return handler

    first, second = Consumer(bus, [EVENTS], "a", counting("a")), Consumer(bus, [EVENTS], "b", counting("b"))
    await asyncio.sleep(0.01)
    await bus.publish(EVENTS, event("node-a", 1))  # wakes consumers that wait for records
    await until(lambda: seen == {"a": 1, "b": 1})
    await asyncio.gather(first.close(), second.close())


async def test_one_consumer_per_group_and_known_topics_only() -> None:
    bus = InMemoryBus()

    async def handler(delivery: Delivery) -> None:
        return None

    consumer = Consumer(bus, [EVENTS], "planner", handler)
    await asyncio.sleep(0.01)
    with pytest.raises(BusError, match="already consumes"):
        await bus.consume([EVENTS], "planner", handler, stop=asyncio.Event())
    await consumer.close()
    with pytest.raises(ContractError, match="unknown topic"):
        await bus.consume(["ebb.nope"], "planner", handler, stop=asyncio.Event())
    with pytest.raises(ContractError, match="does not belong on topic"):
        await bus.publish("ebb.interruptions", event("node-a", 1))


async def test_compacted_topic_keeps_the_latest_record_per_object() -> None:
    bus = InMemoryBus(partitions=2, clock=lambda: T0)
    for version in range(5):
        await bus.publish(
            "ebb.cluster.objects",
            ClusterObject(
                kind="Node", namespace="", name="node-a", resource_version=str(version), object={"v": version}
            ),
        )
    await bus.publish(
        "ebb.cluster.objects", ClusterObject(kind="Pod", namespace="default", name="web", resource_version="1",
                                             object={"spec": {}}),
    )
    await bus.publish(
        "ebb.cluster.objects", ClusterObject(kind="Pod", namespace="default", name="web", resource_version="2",
                                             object=None),
    )
    snapshot: dict[str, ClusterObject] = {}

    async def rebuild(delivery: Delivery) -> None:
        assert isinstance(delivery.message, ClusterObject)
        assert delivery.time == T0
        snapshot[delivery.key] = delivery.message

    consumer = Consumer(bus, ["ebb.cluster.objects"], "watcher-replica", rebuild)
    await until(lambda: bus.lag("watcher-replica", "ebb.cluster.objects") == 0)
    await consumer.close()
    assert len(bus.records("ebb.cluster.objects")) == 2
    assert snapshot["Node//node-a"].resource_version == "4"
    assert snapshot["Pod/default/web"].deleted


async def test_published_records_are_cloudevents_in_binary_mode() -> None:
    bus = InMemoryBus(source="/ebb/planner", clock=lambda: T0)
    message = event("node-a", 1)
    await bus.publish(EVENTS, message)
    [record] = bus.records(EVENTS)
    assert (record.key, record.value, list(record.headers)) == to_kafka(message, source="/ebb/planner", time=T0)

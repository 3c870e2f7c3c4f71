"""The Kafka bus on a real broker (DESIGN §2): CloudEvents in binary content mode, DLQ for a
malformed record produced directly with aiokafka, commit after handle (a consumer that dies before
committing gets the record again). Each test uses its own topic prefix."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from ebb.adapters.bus import Delivery, KafkaBus, PoisonMessage
from ebb.contracts import (
    ClusterObject,
    DeadLetter,
    DisruptionEvent,
    Interruption,
    from_kafka,
)

from .conftest import KafkaServer

pytestmark = pytest.mark.integration

INTERRUPTIONS = "ebb.interruptions"
T0 = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)


@pytest.fixture
async def bus(kafka_server: KafkaServer) -> AsyncIterator[KafkaBus]:
    async with KafkaBus(
        kafka_server.bootstrap, prefix=f"t{uuid.uuid4().hex[:10]}.", source="/ebb/test", poll_timeout=0.1
    ) as bus:
        yield bus


async def until(condition: Callable[[], bool], seconds: float = 20) -> None:
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"condition not met in {seconds} s")


def consume(bus: KafkaBus, topics: list[str], group: str,
            handler: Callable[[Delivery], Awaitable[None]]) -> tuple[asyncio.Event, asyncio.Task[None]]:
    stop = asyncio.Event()
    return stop, asyncio.create_task(bus.consume(topics, group, handler, stop=stop))


async def committed(bus: KafkaBus, group: str, topic: str) -> int:
    admin = AIOKafkaAdminClient(bootstrap_servers=bus.bootstrap_servers)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return sum(o.offset for tp, o in offsets.items() if tp.topic == bus.physical(topic) and o.offset > 0)


async def test_publish_and_consume_cloudevents_in_binary_mode(bus: KafkaBus) -> None:
    sent = [
        Interruption(node="node-a", kind="spot-interruption", instance_id="i-0abc", deadline=T0, detail=""),
        DisruptionEvent(decision_id="d-1", node="node-a", phase="Tainted", message="", at=T0),
        ClusterObject(kind="Node", namespace="", name="node-a", resource_version="7", object={"metadata": {}}),
        ClusterObject(kind="Node", namespace="", name="node-a", resource_version="8", object=None),
    ]
    for message in sent:
        await bus.publish(message.TOPIC, message)
    topics = [INTERRUPTIONS, "ebb.disruption.events", "ebb.cluster.objects"]
    got: list[Delivery] = []

    async def handler(delivery: Delivery) -> None:
        got.append(delivery)

    stop, task = consume(bus, topics, "everyone", handler)
    await until(lambda: len(got) == len(sent))
    stop.set()
    await asyncio.wait_for(task, 10)
    assert {d.message.id for d in got} == {m.id for m in sent}
    objects = [d.message for d in got if d.topic == "ebb.cluster.objects"]
    assert objects == sent[2:]  # one key: in order, the tombstone last
    assert all(d.source == "/ebb/test" for d in got)

    # on the broker: ce_ headers, JSON value; the deletion is a real tombstone (null value)
    raw = AIOKafkaConsumer(
        bus.physical("ebb.cluster.objects"), bootstrap_servers=bus.bootstrap_servers, auto_offset_reset="earliest"
    )
    await raw.start()
    try:
        records = []
        while len(records) < 2:
            batch = await asyncio.wait_for(raw.getmany(timeout_ms=500), 10)
            records += [r for rs in batch.values() for r in rs]
    finally:
        await raw.stop()
    upsert, tombstone = sorted(records, key=lambda r: r.offset)
    headers = dict(upsert.headers)
    assert headers["ce_type"] == b"sh.ebb.object.upserted.v1"
    assert headers["ce_specversion"] == b"1.0"
    assert headers["content-type"] == b"application/json"
    assert {"ce_id", "ce_source", "ce_time", "ce_subject"} <= headers.keys()
    assert upsert.key == b"Node//node-a"
    assert tombstone.value is None
    assert dict(tombstone.headers)["ce_type"] == b"sh.ebb.object.deleted.v1"


async def test_malformed_record_and_poison_message_go_to_the_dlq(bus: KafkaBus) -> None:
    await bus.ensure_topics([INTERRUPTIONS])
    producer = AIOKafkaProducer(bootstrap_servers=bus.bootstrap_servers)
    await producer.start()
    try:
        await producer.send_and_wait(bus.physical(INTERRUPTIONS), key=b"node-a", value=b"not json at all",
                                     headers=[("ce_type", b"sh.ebb.interruption.received.v1")])
    finally:
        await producer.stop()
    poison = Interruption(node="node-a", kind="rebalance", instance_id="i-poison", deadline=None, detail="")
    good = Interruption(node="node-a", kind="spot-interruption", instance_id="i-good", deadline=T0, detail="")
    await bus.publish(INTERRUPTIONS, poison)
    await bus.publish(INTERRUPTIONS, good)
    handled: list[Delivery] = []

    async def handler(delivery: Delivery) -> None:
        if delivery.message.id == poison.id:
            raise PoisonMessage("cannot apply")
        handled.append(delivery)

    stop, task = consume(bus, [INTERRUPTIONS], "planner", handler)
    await until(lambda: len(handled) == 1)
    stop.set()
    await asyncio.wait_for(task, 10)
    assert handled[0].message == good
    assert await committed(bus, "planner", INTERRUPTIONS) == 3

    letters: list[DeadLetter] = []

    async def collect(delivery: Delivery) -> None:
        assert isinstance(delivery.message, DeadLetter)
        letters.append(delivery.message)

    stop, task = consume(bus, [INTERRUPTIONS + ".dlq"], "operator", collect)
    await until(lambda: len(letters) == 2)
    stop.set()
    await asyncio.wait_for(task, 10)
    malformed, poisoned = sorted(letters, key=lambda letter: letter.offset)
    assert malformed.cause == "malformed" and malformed.topic == INTERRUPTIONS
    assert "missing header(s) ce_specversion, ce_id, ce_source" in malformed.error
    assert malformed.original() == (b"node-a", b"not json at all", [("ce_type", b"sh.ebb.interruption.received.v1")])
    assert poisoned.cause == "poison" and poisoned.error == "PoisonMessage: cannot apply"
    key, value, headers = poisoned.original()
    assert from_kafka(INTERRUPTIONS, key, value, [(n, v or b"") for n, v in headers]) == poison


async def test_a_consumer_that_dies_before_committing_gets_the_record_again(bus: KafkaBus) -> None:
    message = Interruption(node="node-b", kind="scheduled-change", instance_id="i-0b", deadline=T0, detail="")
    await bus.publish(INTERRUPTIONS, message)
    started = asyncio.Event()

    async def crashes(delivery: Delivery) -> None:
        started.set()
        await asyncio.Event().wait()  # the process dies here, mid-handler

    _, task = consume(bus, [INTERRUPTIONS], "executor", crashes)
    await asyncio.wait_for(started.wait(), 20)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await committed(bus, "executor", INTERRUPTIONS) == 0

    again: list[Delivery] = []

    async def handler(delivery: Delivery) -> None:
        again.append(delivery)

    stop, task = consume(bus, [INTERRUPTIONS], "executor", handler)
    await until(lambda: len(again) == 1)
    stop.set()
    await asyncio.wait_for(task, 10)
    assert again[0].message == message
    assert await committed(bus, "executor", INTERRUPTIONS) == again[0].offset + 1


async def test_a_batch_is_committed_up_to_the_last_record_handled(bus: KafkaBus) -> None:
    # one node: one key, one partition, one fetched batch
    messages = [Interruption(node="node-c", kind="rebalance", instance_id=f"i-{i}", deadline=T0 + timedelta(seconds=i),
                             detail="") for i in range(5)]
    for message in messages:
        await bus.publish(INTERRUPTIONS, message)
    seen: list[Delivery] = []
    stuck = asyncio.Event()

    async def handler(delivery: Delivery) -> None:
        seen.append(delivery)
        if len(seen) == 4:
            stuck.set()
            await asyncio.Event().wait()  # the fourth never finishes: the consumer is cancelled here

    _, task = consume(bus, [INTERRUPTIONS], "batch", handler)
    await asyncio.wait_for(stuck.wait(), 20)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    first = seen[0].offset
    assert await committed(bus, "batch", INTERRUPTIONS) == first + 3  # the three handled, not the fourth

    rest: list[Delivery] = []

    async def again(delivery: Delivery) -> None:
        rest.append(delivery)

    stop, task = consume(bus, [INTERRUPTIONS], "batch", again)
    await until(lambda: len(rest) == 2)
    stop.set()
    await asyncio.wait_for(task, 10)
    assert [d.message for d in rest] == messages[3:]
    assert await committed(bus, "batch", INTERRUPTIONS) == first + 5

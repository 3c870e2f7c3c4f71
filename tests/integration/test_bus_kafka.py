"""The Kafka bus on a real broker: the shared bus contract (``bus_conformance``; each bus on topics of its own
prefix), and what only the Kafka bus does (topics created under the prefix with the contract's cleanup policy
and their DLQ, connecting on first use)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from ebb.adapters.bus import Bus, Delivery, KafkaBus, RawRecord, RetryPolicy
from tests.kit.bus_conformance import EVENTS, OBJECTS, BusConformance, Raw, event
from tests.kit.servers import KafkaServer

pytestmark = pytest.mark.integration


def new_prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}."


class TestKafkaBus(BusConformance):
    patience = 30.0
    prompt = 5.0

    @pytest.fixture(autouse=True)
    def _broker(self, kafka_server: KafkaServer) -> None:
        self.bootstrap = kafka_server.bootstrap

    @contextlib.asynccontextmanager
    async def open_bus(self, *, partitions: int = 3, retry: RetryPolicy | None = None, source: str = "/ebb/test",
                       clock: Callable[[], datetime] | None = None) -> AsyncIterator[Bus]:
        async with KafkaBus(self.bootstrap, prefix=new_prefix(), source=source, partitions=partitions, retry=retry,
                            clock=clock, poll_timeout=0.1) as bus:
            yield bus

    async def append_raw(self, bus: Bus, topic: str, record: Raw) -> None:
        assert isinstance(bus, KafkaBus)
        await bus.ensure_topics([topic])
        key, value, headers = record
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(bus.physical(topic), key=key, value=value, headers=list(headers))
        finally:
            await producer.stop()

    async def raw_records(self, bus: Bus, topic: str) -> list[RawRecord]:
        assert isinstance(bus, KafkaBus)
        ends = await bus.end_offsets(topic)
        partitions = [TopicPartition(bus.physical(topic), n) for n in ends]
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            records: list[RawRecord] = []
            remaining = [tp for tp in partitions if ends[tp.partition] > 0]
            while remaining:
                for fetched in (await consumer.getmany(*remaining, timeout_ms=500)).values():
                    records += [RawRecord(topic, r.partition, r.offset, r.key, r.value, tuple(r.headers))
                                for r in fetched if r.offset < ends[r.partition]]
                remaining = [tp for tp in remaining if await consumer.position(tp) < ends[tp.partition]]
        finally:
            await consumer.stop()
        return sorted(records, key=lambda r: (r.partition, r.offset))

    async def committed(self, bus: Bus, group: str, topic: str) -> dict[int, int]:
        assert isinstance(bus, KafkaBus)
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        await admin.start()
        try:
            offsets = await admin.list_consumer_group_offsets(group)
        finally:
            await admin.close()
        physical = bus.physical(topic)
        return {tp.partition: o.offset for tp, o in offsets.items() if tp.topic == physical and o.offset >= 0}


async def test_topics_are_created_under_the_prefix_with_their_dlq_and_cleanup_policy(kafka_server: KafkaServer) -> None:
    prefix = new_prefix()
    async with KafkaBus(kafka_server.bootstrap, prefix=prefix, partitions=2) as bus:
        await bus.ensure_topics([OBJECTS, EVENTS])
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_server.bootstrap)
    await admin.start()
    try:
        names = sorted(t for t in await admin.list_topics() if t.startswith(prefix))
        assert names == sorted(prefix + t for t in (OBJECTS, OBJECTS + ".dlq", EVENTS, EVENTS + ".dlq"))
        described = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, prefix + t)
                                                  for t in (OBJECTS, EVENTS)])
        policies = {resource[3]: {entry[0]: entry[1] for entry in resource[4]}["cleanup.policy"]
                    for response in described for resource in response.resources}
        assert policies == {prefix + OBJECTS: "compact", prefix + EVENTS: "delete"}
        partitions = {entry["topic"]: len(entry["partitions"]) for entry in await admin.describe_topics(names)}
        assert set(partitions.values()) == {2}
    finally:
        await admin.close()


async def test_a_bus_connects_on_first_use(kafka_server: KafkaServer) -> None:
    bus = KafkaBus(kafka_server.bootstrap, prefix=new_prefix())  # never started
    try:
        message = event("node-a", 1)
        await bus.publish(EVENTS, message)
        assert sum((await bus.end_offsets(EVENTS)).values()) == 1
    finally:
        await bus.close()


async def test_a_consumer_of_a_topic_it_just_created_gets_its_first_records_at_once(kafka_server: KafkaServer) -> None:
    """Each bus consumes a topic that its ``consume`` creates, and a record is published on it right away: every
    consumer gets it within seconds. A consumer that subscribed while the new topic was not yet in the broker's
    metadata would be assigned none of its partitions until aiokafka's next metadata refresh (5 minutes): seen
    with the consolidation-planner's consumer of ebb.interruptions on a fresh installation. Several buses at
    once, as the services start, so the window is hit."""
    received: dict[str, list[str]] = {}
    stop, everyone = asyncio.Event(), asyncio.Event()
    async with contextlib.AsyncExitStack() as stack:
        buses = [await stack.enter_async_context(KafkaBus(kafka_server.bootstrap, prefix=new_prefix(),
                                                          poll_timeout=0.1)) for _ in range(4)]

        def handler_of(bus: KafkaBus) -> Callable[[Delivery], Awaitable[None]]:
            async def handle(delivery: Delivery) -> None:
                received.setdefault(bus.prefix, []).append(delivery.message.key())
                if len(received) == len(buses):
                    everyone.set()

            return handle

        consumers = [asyncio.create_task(bus.consume([EVENTS], "first-records", handler_of(bus), stop=stop))
                     for bus in buses]
        try:
            await asyncio.sleep(1.0)  # the consumers created their topics and subscribed
            for bus in buses:
                await bus.publish(EVENTS, event("node-a", 1))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(everyone.wait(), 20)
            assert sorted(received) == sorted(bus.prefix for bus in buses), received
            assert all(keys == ["node-a"] for keys in received.values()), received
        finally:
            stop.set()
            await asyncio.gather(*consumers)


async def test_a_batch_has_several_records_in_flight_and_returns_once_all_are_acknowledged(
        kafka_server: KafkaServer) -> None:
    """``publish_many`` hands every record to the producer before awaiting any acknowledgement (the in-flight
    window of the cluster-watcher); when it returns, every future is resolved and the records are readable."""
    async with KafkaBus(kafka_server.bootstrap, prefix=new_prefix(), partitions=3) as bus:
        producer = await bus._connected()
        futures: list[asyncio.Future[object]] = []
        outstanding: list[int] = []
        send = producer.send

        async def observed_send(*args: object, **kwargs: object) -> asyncio.Future[object]:
            outstanding.append(sum(1 for f in futures if not f.done()))
            future: asyncio.Future[object] = await send(*args, **kwargs)
            futures.append(future)
            return future

        producer.send = observed_send  # type: ignore[method-assign]
        await bus.publish_many(EVENTS, [event(f"node-{i % 7}", i) for i in range(500)])
        assert len(futures) == 500 and all(f.done() and f.exception() is None for f in futures)
        assert max(outstanding) > 1  # later records were sent while earlier ones awaited their ack
        assert sum((await bus.end_offsets(EVENTS)).values()) == 500

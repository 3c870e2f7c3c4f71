"""Where a topic ends now, and a handler that skips what came before: for a consumer that first loads a
snapshot of a compacted topic (``ebb.adapters.compacted.seed_snapshot``) and then follows the topic.

A consumer group that has no committed offsets starts at the beginning of the topic (``earliest``), and a
group that was stopped starts at its last commit: either way it delivers again records the snapshot already
holds a newer version of, and applying them sets the snapshot back (a deleted node reappears until its
tombstone comes round again). Taking the end offsets *before* the snapshot is read, and skipping the
records before them, makes the consumer apply only what is newer than the snapshot::

    ends = await end_offsets(bus, TOPIC_CLUSTER_OBJECTS)
    await seed_snapshot(store, bus)
    await bus.consume([TOPIC_CLUSTER_OBJECTS], group,
                      skipping_before(TOPIC_CLUSTER_OBJECTS, ends, store.handle), stop=stop)

Malformed records before the ends still go to the DLQ (decoding comes before the handler), as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from ebb.adapters.bus.base import Bus, Delivery, Handler
from ebb.adapters.bus.kafka import KafkaBus
from ebb.adapters.bus.memory import InMemoryBus


async def end_offsets(bus: Bus, topic: str, *, within: float = 60.0) -> dict[int, int]:
    """Per partition of ``topic``, the offset its next record will get; empty for a bus of another kind
    (nothing is skipped then)."""
    if isinstance(bus, InMemoryBus):
        return bus.end_offsets(topic)
    if isinstance(bus, KafkaBus):
        return await asyncio.wait_for(_kafka_end_offsets(bus, topic), within)
    return {}


def skipping_before(topic: str, ends: Mapping[int, int], handler: Handler) -> Handler:
    """``handler`` for the records of ``topic`` at or after ``ends`` (per partition) and for every record of
    other topics (a consumer may read several); the earlier records of ``topic`` are acknowledged and
    skipped."""

    async def handle(delivery: Delivery) -> None:
        if delivery.topic == topic and delivery.offset < ends.get(delivery.partition, 0):
            return
        await handler(delivery)

    return handle


async def _kafka_end_offsets(bus: KafkaBus, topic: str) -> dict[int, int]:
    await bus.ensure_topics([topic])
    physical = bus.physical(topic)
    numbers = await _partitions(bus, physical)
    consumer = AIOKafkaConsumer(bootstrap_servers=bus.bootstrap_servers, client_id=bus.client_id,
                                enable_auto_commit=False, **bus.client_options)
    await consumer.start()
    try:
        partitions = [TopicPartition(physical, n) for n in numbers]
        ends = await consumer.end_offsets(partitions)
        return {tp.partition: int(offset) for tp, offset in ends.items()}
    finally:
        await consumer.stop()


async def _partitions(bus: KafkaBus, physical: str) -> list[int]:
    """The partition numbers of a topic, from the brokers' metadata (retried while a topic just created is
    not yet known everywhere)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bus.bootstrap_servers, client_id=bus.client_id,
                                **bus.client_options)
    await admin.start()
    try:
        for _ in range(100):
            for entry in await admin.describe_topics([physical]):
                if entry.get("topic") == physical and not entry.get("error_code") and entry.get("partitions"):
                    return sorted(int(p["partition"]) for p in entry["partitions"])
            await asyncio.sleep(0.1)
    finally:
        await admin.close()
    raise RuntimeError(f"no partitions known for {physical}")

"""Reading a compacted topic from its beginning to its current end: the latest message per key.

The cluster-watcher uses it on start to learn what it published before a restart (so that its first
list also tombstones objects deleted while it was down, and does not republish unchanged ones). Works
on both bus implementations; records that do not decode are skipped (the DLQ is the consumers' job).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from ebb.adapters.bus import Bus, InMemoryBus, KafkaBus, RawRecord
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, ClusterObject, ContractError, Message, from_kafka

log = logging.getLogger("ebb.compacted")


async def read_latest(bus: Bus, topic: str, *, within: float = 60.0) -> dict[str, Message]:
    """The latest message per key of ``topic`` (tombstones included), read up to the end offsets taken
    when the read starts. An empty mapping for a bus of another kind."""
    if isinstance(bus, InMemoryBus):
        records: Iterable[RawRecord] = bus.records(topic)
    elif isinstance(bus, KafkaBus):
        records = await asyncio.wait_for(_kafka_records(bus, topic), within)
    else:
        return {}
    latest: dict[str, Message] = {}
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        try:
            message = from_kafka(topic, record.key, record.value, record.headers)
        except ContractError as e:
            log.warning("skipping a record of %s at %d/%d: %s", topic, record.partition, record.offset, e)
            continue
        latest[message.key()] = message
    return latest


async def seed_snapshot(store: SnapshotStore, bus: Bus) -> int:
    """Load ``ebb.cluster.objects`` as it is now (the compacted topic holds the whole cluster) into
    ``store``; returns how many objects it holds."""
    for message in (await read_latest(bus, TOPIC_CLUSTER_OBJECTS)).values():
        if isinstance(message, ClusterObject):
            store.apply(message)
    return len(store)


async def _kafka_records(bus: KafkaBus, topic: str) -> list[RawRecord]:
    await bus.ensure_topics([topic])
    physical = bus.physical(topic)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bus.bootstrap_servers,
        client_id=bus.client_id,
        enable_auto_commit=False,
        **bus.client_options,
    )
    await consumer.start()
    try:
        numbers = await _partitions(bus, physical)
        partitions = [TopicPartition(physical, n) for n in sorted(numbers)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        end = await consumer.end_offsets(partitions)
        out: list[RawRecord] = []
        remaining = {tp for tp in partitions if await consumer.position(tp) < end[tp]}
        while remaining:
            batch = await consumer.getmany(*remaining, timeout_ms=500)
            for tp, records in batch.items():
                out.extend(
                    RawRecord(topic, r.partition, r.offset, r.key, r.value, tuple(r.headers))
                    for r in records
                    if r.offset < end[tp]
                )
            remaining = {tp for tp in remaining if await consumer.position(tp) < end[tp]}
        return out
    finally:
        await consumer.stop()


async def _partitions(bus: KafkaBus, physical: str) -> list[int]:
    """The partition numbers of a topic, from the brokers' metadata (retried while a topic just created
    is not yet known everywhere)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bus.bootstrap_servers, client_id=bus.client_id,
                                **bus.client_options)
    await admin.start()
    try:
        for _ in range(100):
            described = await admin.describe_topics([physical])
            for entry in described:
                if entry.get("topic") == physical and not entry.get("error_code") and entry.get("partitions"):
                    return sorted(int(p["partition"]) for p in entry["partitions"])
            await asyncio.sleep(0.1)
    finally:
        await admin.close()
    raise RuntimeError(f"no partitions known for {physical}")

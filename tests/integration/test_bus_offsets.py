"""``end_offsets`` and ``skipping_before`` on a real Kafka: a compacted topic keeps superseded records for
a while, so a new consumer group started after a snapshot was loaded would deliver a deleted node's old
record again; skipping up to the ends taken before the snapshot keeps the snapshot from going back."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from ebb.adapters.bus import Delivery, KafkaBus, end_offsets, skipping_before
from ebb.adapters.compacted import seed_snapshot
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, ClusterObject

from .conftest import KafkaServer

pytestmark = pytest.mark.integration


def node(name: str, version: str, *, deleted: bool = False) -> ClusterObject:
    doc = None if deleted else {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    return ClusterObject(kind="Node", namespace="", name=name, resource_version=version, object=doc)


async def test_a_new_group_after_the_snapshot_applies_only_newer_records(kafka_server: KafkaServer) -> None:
    run = uuid.uuid4().hex[:8]
    async with KafkaBus(kafka_server.bootstrap, prefix=f"bo{run}.", poll_timeout=0.1) as bus:
        await bus.publish(TOPIC_CLUSTER_OBJECTS, node("gone", "1"))
        await bus.publish(TOPIC_CLUSTER_OBJECTS, node("kept", "2"))
        await bus.publish(TOPIC_CLUSTER_OBJECTS, node("gone", "3", deleted=True))
        ends = await end_offsets(bus, TOPIC_CLUSTER_OBJECTS)
        assert sum(ends.values()) == 3 and len(ends) == bus.partitions
        store = SnapshotStore(bundled_catalog=[])
        assert await seed_snapshot(store, bus) == 1
        seen: list[str] = []
        came_back: list[str] = []

        async def handle(delivery: Delivery) -> None:
            assert isinstance(delivery.message, ClusterObject)
            seen.append(delivery.message.name)
            store.apply(delivery.message)
            if "Node//gone" in store:
                came_back.append(delivery.message.name)

        stop = asyncio.Event()
        consumer = asyncio.create_task(bus.consume([TOPIC_CLUSTER_OBJECTS], f"fresh-{run}",
                                                   skipping_before(TOPIC_CLUSTER_OBJECTS, ends, handle), stop=stop))
        await bus.publish(TOPIC_CLUSTER_OBJECTS, node("new", "4"))
        for _ in range(300):
            if seen:
                break
            await asyncio.sleep(0.1)
        stop.set()
        await asyncio.wait_for(consumer, 15)
        assert seen == ["new"] and not came_back
        assert "Node//kept" in store and "Node//new" in store and "Node//gone" not in store

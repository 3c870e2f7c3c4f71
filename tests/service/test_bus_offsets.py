"""``end_offsets`` and ``skipping_before`` on the in-memory bus: a consumer that loaded a snapshot of a
compacted topic and then follows it with a new consumer group applies only what is newer than the
snapshot, never an older version of an object over it."""

from __future__ import annotations

import asyncio

from ebb.adapters.bus import Delivery, InMemoryBus, end_offsets, skipping_before
from ebb.adapters.compacted import seed_snapshot
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, ClusterObject


def node(name: str, version: str, *, deleted: bool = False) -> ClusterObject:
    doc = None if deleted else {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name,
                                                                                  "resourceVersion": version}}
    return ClusterObject(kind="Node", namespace="", name=name, resource_version=version, object=doc)


async def test_end_offsets_of_the_memory_bus() -> None:
    bus = InMemoryBus(partitions=2)
    assert await end_offsets(bus, TOPIC_CLUSTER_OBJECTS) == {}
    for i in range(5):
        await bus.publish(TOPIC_CLUSTER_OBJECTS, node("a", str(i)))  # one key: one partition, compacted
    ends = await end_offsets(bus, TOPIC_CLUSTER_OBJECTS)
    assert sum(ends.values()) == 5 and len(bus.records(TOPIC_CLUSTER_OBJECTS)) == 1  # offsets stay


async def test_a_new_group_after_the_snapshot_never_sets_it_back() -> None:
    bus = InMemoryBus(partitions=1)
    await bus.publish(TOPIC_CLUSTER_OBJECTS, node("gone", "1"))
    await bus.publish(TOPIC_CLUSTER_OBJECTS, node("kept", "2"))
    await bus.publish(TOPIC_CLUSTER_OBJECTS, node("gone", "3", deleted=True))
    ends = await end_offsets(bus, TOPIC_CLUSTER_OBJECTS)
    store = SnapshotStore(bundled_catalog=[])
    assert await seed_snapshot(store, bus) == 1
    seen: list[str] = []

    async def handle(delivery: Delivery) -> None:
        assert isinstance(delivery.message, ClusterObject)
        seen.append(delivery.message.name)
        store.apply(delivery.message)
        assert "Node//gone" not in store, "a deleted node came back"

    stop = asyncio.Event()
    handler = skipping_before(TOPIC_CLUSTER_OBJECTS, ends, handle)
    consumer = asyncio.create_task(bus.consume([TOPIC_CLUSTER_OBJECTS], "fresh", handler, stop=stop))
    await bus.publish(TOPIC_CLUSTER_OBJECTS, node("new", "4"))
    for _ in range(200):
        if seen:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await consumer
    assert seen == ["new"]  # only what came after the snapshot
    assert bus.committed("fresh", TOPIC_CLUSTER_OBJECTS, 0) == 4  # the skipped records are committed too
    assert sorted(k for k in ("Node//kept", "Node//new", "Node//gone") if k in store) == ["Node//kept", "Node//new"]


async def test_other_topics_of_the_consumer_are_not_skipped() -> None:
    from ebb.contracts import TOPIC_INTERRUPTIONS, Interruption

    bus = InMemoryBus(partitions=1)
    await bus.publish(TOPIC_CLUSTER_OBJECTS, node("a", "1"))
    await bus.publish(TOPIC_CLUSTER_OBJECTS, node("b", "2"))
    ends = await end_offsets(bus, TOPIC_CLUSTER_OBJECTS)
    interruption = Interruption(node="a", kind="rebalance", instance_id="i-a", deadline=None, detail="")
    await bus.publish(TOPIC_INTERRUPTIONS, interruption)  # offset 0 of its own topic
    seen: list[str] = []

    async def handle(delivery: Delivery) -> None:
        seen.append(delivery.topic)

    stop = asyncio.Event()
    consumer = asyncio.create_task(bus.consume([TOPIC_CLUSTER_OBJECTS, TOPIC_INTERRUPTIONS], "g",
                                               skipping_before(TOPIC_CLUSTER_OBJECTS, ends, handle), stop=stop))
    for _ in range(200):
        if seen:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await consumer
    assert seen == [TOPIC_INTERRUPTIONS]

"""The in-memory bus (embedded mode): the shared bus contract (``bus_conformance``), and what only the
in-memory bus does (one consumer per group's partition in a process, compaction at once)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

import pytest

from ebb.adapters.bus import Bus, BusError, Delivery, InMemoryBus, RawRecord, RetryPolicy
from tests.kit.bus_conformance import EVENTS, OBJECTS, BusConformance, Raw, event, node


class TestInMemoryBus(BusConformance):
    @contextlib.asynccontextmanager
    async def open_bus(self, *, partitions: int = 3, retry: RetryPolicy | None = None, source: str = "/ebb/test",
                       clock: Callable[[], datetime] | None = None) -> AsyncIterator[Bus]:
        yield InMemoryBus(partitions=partitions, retry=retry, source=source, clock=clock)

    async def append_raw(self, bus: Bus, topic: str, record: Raw) -> None:
        assert isinstance(bus, InMemoryBus)
        bus.append(topic, *record)

    async def raw_records(self, bus: Bus, topic: str) -> list[RawRecord]:
        assert isinstance(bus, InMemoryBus)
        return sorted(bus.records(topic), key=lambda r: (r.partition, r.offset))

    async def committed(self, bus: Bus, group: str, topic: str) -> dict[int, int]:
        assert isinstance(bus, InMemoryBus)
        offsets = {n: bus.committed(group, topic, n) for n in range(bus.partitions)}
        return {n: offset for n, offset in offsets.items() if offset > 0}


async def test_a_group_has_one_consumer_per_partition_in_a_process() -> None:
    bus = InMemoryBus()

    async def handler(delivery: Delivery) -> None:
        return None

    stop = asyncio.Event()
    consumer = asyncio.create_task(bus.consume([EVENTS], "planner", handler, stop=stop))
    await asyncio.sleep(0.01)
    with pytest.raises(BusError, match="already consumes"):
        await bus.consume([EVENTS], "planner", handler, stop=asyncio.Event())
    stop.set()
    await asyncio.wait_for(consumer, 5)


async def test_the_compacted_topic_drops_superseded_records_at_once() -> None:
    bus = InMemoryBus(partitions=2)
    for version in range(5):
        await bus.publish(OBJECTS, node("node-a", str(version)))
    await bus.publish(OBJECTS, node("node-b", "1"))
    await bus.publish(OBJECTS, node("node-b", "2", deleted=True))
    assert sorted((r.key, r.value is None) for r in bus.records(OBJECTS)) == [(b"Node//node-a", False),
                                                                              (b"Node//node-b", True)]
    assert sum((await bus.end_offsets(OBJECTS)).values()) == 7  # offsets stay
    assert bus.lag("never-consumed", OBJECTS) == 7


async def test_start_at_commits_the_start_for_the_group() -> None:
    bus = InMemoryBus(partitions=1)
    await bus.publish(OBJECTS, node("a", "1"))
    await bus.publish(OBJECTS, node("b", "1"))

    async def handler(delivery: Delivery) -> None:
        raise AssertionError("nothing before the start is delivered")

    stop = asyncio.Event()
    stop.set()  # starts, positions the group, ends at once
    await bus.consume([OBJECTS], "fresh", handler, stop=stop, start_at={OBJECTS: await bus.end_offsets(OBJECTS)})
    assert bus.committed("fresh", OBJECTS, 0) == 2 and bus.lag("fresh", OBJECTS) == 0
    # a start behind the group's commits changes nothing
    await bus.consume([OBJECTS], "fresh", handler, stop=stop, start_at={OBJECTS: {0: 1}})
    assert bus.committed("fresh", OBJECTS, 0) == 2


async def _read_all(bus: InMemoryBus, group: str, topic: str, deliveries: int) -> list[Delivery]:
    """The first ``deliveries`` records of ``topic`` delivered to ``group`` (the consumer stops after the last)."""
    seen: list[Delivery] = []
    stop = asyncio.Event()

    async def handler(delivery: Delivery) -> None:
        seen.append(delivery)
        if len(seen) == deliveries:
            stop.set()

    await asyncio.wait_for(bus.consume([topic], group, handler, stop=stop), 5)
    return seen


async def test_the_groups_of_a_process_share_one_decoding_of_a_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """A record is decoded once for every group that reads it while it is among the last ``DECODED_KEPT``: the
    planner's and the ingester's consumers of ebb.cluster.objects get the same message object, equal to its own
    decoding; past that, each group decodes it again, to an equal message. A record that does not decode is
    dead-lettered for each group."""
    import ebb.adapters.bus.memory as memory

    bus = InMemoryBus(partitions=1)
    bus.append(OBJECTS, b"Node//broken", b"{}", [("ce_type", b"nonsense")])
    for name in ("a", "b", "c"):
        await bus.publish(OBJECTS, node(name, "1"))
    planner, ingester = await _read_all(bus, "planner", OBJECTS, 3), await _read_all(bus, "ingester", OBJECTS, 3)
    assert [d.key for d in planner] == [d.key for d in ingester] == ["Node//a", "Node//b", "Node//c"]
    assert all(p.message is i.message for p, i in zip(planner, ingester, strict=True))
    assert len(bus.records(f"{OBJECTS}.dlq")) == 2  # the broken record, once per group

    monkeypatch.setattr(memory, "DECODED_KEPT", 1)
    again = InMemoryBus(partitions=1)
    for name in ("a", "b"):
        await again.publish(OBJECTS, node(name, "1"))
    first, second = await _read_all(again, "planner", OBJECTS, 2), await _read_all(again, "ingester", OBJECTS, 2)
    # the planner read both before the ingester began: only b's decoding was kept, and the ingester's a pushed it out
    assert [f.message is s.message for f, s in zip(first, second, strict=True)] == [False, False]
    assert [f.message for f in first] == [s.message for s in second]


async def test_a_clocked_bus_delivers_a_cluster_object_as_its_record_decodes_without_decoding_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On a bus with a clock (the embedded mode's) a published ClusterObject, upsert or tombstone, is delivered as
    the message published, never decoded: what its record decodes to is equal in every field the handler sees
    (message, type, source, time). Another message is decoded as before; a bus without a clock decodes all."""
    import ebb.adapters.bus.memory as memory
    from ebb.adapters.bus.base import decode_record
    from ebb.contracts import Decoded, decode

    decoded: list[str] = []

    def counting(record: RawRecord) -> Decoded:
        decoded.append(record.topic)
        return decode_record(record)

    monkeypatch.setattr(memory, "decode_record", counting)
    moment = datetime(2026, 11, 23, 18, 30, 5, 250000, tzinfo=UTC)
    bus = InMemoryBus(partitions=1, clock=lambda: moment, source="/ebb/embedded")
    published = [node("a", "1"), node("b", "2"), node("c", "3", deleted=True)]
    for message in published:
        await bus.publish(OBJECTS, message)
    deliveries = await _read_all(bus, "planner", OBJECTS, 3)
    assert [d.message for d in deliveries] == published and deliveries[0].message is published[0]
    assert decoded == []
    for delivery, record in zip(deliveries, sorted(bus.records(OBJECTS), key=lambda r: r.offset), strict=True):
        from_record = decode(OBJECTS, record.key, record.value, record.headers)
        assert (delivery.message, delivery.type, delivery.source, delivery.time) == (
            from_record.message, from_record.type, from_record.source, from_record.time)
        assert delivery.message.model_dump() == from_record.message.model_dump()

    await bus.publish(EVENTS, event("node-a", 1))
    await _read_all(bus, "planner-events", EVENTS, 1)
    assert decoded == [EVENTS]
    plain = InMemoryBus(partitions=1)
    await plain.publish(OBJECTS, node("a", "1"))
    await _read_all(plain, "planner", OBJECTS, 1)
    assert decoded == [EVENTS, OBJECTS]


async def test_read_compacted_takes_the_decodings_kept_and_keeps_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedded planner's first read of the cluster's objects (``read_compacted``, right after the simulated
    cluster published them) decodes none of them: it gets the messages published, the same as decoding every
    record gives. A record whose decoding is no longer kept is decoded, to an equal message, and the read keeps
    no decoding of its own (it would push out those the groups are about to read)."""
    import ebb.adapters.bus.memory as memory
    from ebb.adapters.bus.base import decode_record, latest_per_key
    from ebb.contracts import Decoded

    decoded: list[str] = []

    def counting(record: RawRecord) -> Decoded:
        decoded.append(record.topic)
        return decode_record(record)

    monkeypatch.setattr(memory, "decode_record", counting)
    moment = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)
    bus = InMemoryBus(partitions=2, clock=lambda: moment, source="/ebb/embedded")
    published = [node("a", "1"), node("b", "2"), node("a", "3"), node("c", "4", deleted=True)]
    for message in published:
        await bus.publish(OBJECTS, message)
    latest = await bus.read_compacted(OBJECTS)
    assert decoded == []
    assert latest == latest_per_key(OBJECTS, bus.records(OBJECTS))  # what decoding every record gives
    assert latest["Node//a"] is published[2] and latest["Node//b"] is published[1]

    monkeypatch.setattr(memory, "DECODED_KEPT", 1)
    again = InMemoryBus(partitions=1, clock=lambda: moment, source="/ebb/embedded")
    for message in published[:2]:
        await again.publish(OBJECTS, message)
    assert await again.read_compacted(OBJECTS) == {"Node//a": published[0], "Node//b": published[1]}
    assert decoded == [OBJECTS]  # a's decoding was pushed out by b's
    assert len(again._decoded) == 1

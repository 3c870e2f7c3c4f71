"""The in-memory bus (embedded mode): the shared bus contract (``bus_conformance``), and what only the
in-memory bus does (one consumer per group's partition in a process, compaction at once)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import datetime

import pytest

from ebb.adapters.bus import Bus, BusError, Delivery, InMemoryBus, RawRecord, RetryPolicy
from tests.bus_conformance import EVENTS, OBJECTS, BusConformance, Raw, node


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

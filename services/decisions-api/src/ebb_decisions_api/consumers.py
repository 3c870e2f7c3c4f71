"""The API's Kafka consumers, run inside the FastAPI lifespan: the cluster objects and the disruption events.

- ``ebb.cluster.objects``: read to its end into the ``LiveState`` (``seed_snapshot``, as the planner does),
  then followed with a consumer group of this process's own (every replica needs the whole cluster). The
  group starts at the ends the partitions had just before the seed read (so nothing is missed and the
  topic is not replayed from its beginning; records between those ends and the seed's are applied again,
  which converges to the same state).
- ``ebb.disruption.events``: followed from the latest offset (subscribers want what happens from now on,
  not the topic's history) with a group of this process's own, and fanned out to the ``EventHub``.

"Start at the end" is done on Kafka by committing the new group's offsets at the partitions' ends before
it consumes; on the in-memory bus, whose groups start at the beginning, the records that were there at the
start are skipped by the handlers.

Both run under a supervisor: an error (Kafka away, a handler that kept failing) is logged and counted and
the consumer starts again after a backoff, so the REST side keeps serving the store meanwhile. Malformed
records go to ``<topic>.dlq`` (the bus does that) and consumption goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from ebb.adapters.bus import Bus, Delivery, InMemoryBus, KafkaBus
from ebb.adapters.compacted import seed_snapshot
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, TOPIC_DISRUPTION_EVENTS, ClusterObject, DisruptionEvent
from ebb_decisions_api.events import EventHub
from ebb_decisions_api.live import LiveState
from ebb_decisions_api.metrics import ApiMetrics

log = structlog.get_logger("ebb_decisions_api")

#: a consumer that ran at least this long before failing starts again after the shortest backoff
HEALTHY_RUN_SECONDS = 60.0


class Consumers:
    """The two consumers of one API process; ``start()`` in the lifespan, ``stop()`` at its end."""

    def __init__(self, bus: Bus, live: LiveState, hub: EventHub, metrics: ApiMetrics, *, group: str,
                 retry_max_seconds: float = 30.0) -> None:
        self.bus = bus
        self.live = live
        self.hub = hub
        self.metrics = metrics
        suffix = uuid.uuid4().hex[:12]
        self.objects_group = f"{group}-objects-{suffix}"
        self.events_group = f"{group}-events-{suffix}"
        self.retry_max_seconds = retry_max_seconds
        #: set once the events consumer is positioned at the topic's end: from then on every published
        #: event reaches the subscribers
        self.events_ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._bus_lock = asyncio.Lock()
        #: in-memory bus: topic -> partition -> first offset that is not history
        self._starts: dict[str, dict[int, int]] = {}

    # -- lifecycle ----------------------------------------------------------------------------------------

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._supervise("cluster-objects", self._objects), name="api-cluster-objects"),
            asyncio.create_task(self._supervise("disruption-events", self._events), name="api-disruption-events"),
        ]

    async def stop(self, grace: float = 10.0) -> None:
        """Ask the consumers to finish (a running handler completes and is committed), then wait."""
        self._stop.set()
        if not self._tasks:
            return
        _, pending = await asyncio.wait(self._tasks, timeout=grace)
        for task in pending:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        log.info("consumers stopped", objects_group=self.objects_group, events_group=self.events_group)

    async def _supervise(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        delay = 0.5
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                await run()
            except Exception as e:  # Kafka away, a handler that kept failing: start again after a backoff
                self.metrics.consumer_errors.labels(name).inc()
                log.error("consumer failed; starting it again", consumer=name, error=repr(e), retry_in=delay)
            else:
                if self._stop.is_set():
                    return
                log.warning("consumer ended unexpectedly; starting it again", consumer=name)
            if time.monotonic() - started >= HEALTHY_RUN_SECONDS:
                delay = 0.5
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=delay)
            delay = min(delay * 2, self.retry_max_seconds)

    async def _ensure_bus(self) -> None:
        if isinstance(self.bus, KafkaBus):
            async with self._bus_lock:
                await self.bus.start()  # idempotent: the producer writes dead letters

    async def _start_at_end(self, topic: str, group: str) -> dict[int, int]:
        """Make ``group``'s first read of ``topic`` start at the partitions' current ends; returns them."""
        if isinstance(self.bus, KafkaBus):
            return await commit_end_offsets(self.bus, topic, group)
        ends: dict[int, int] = {}
        if isinstance(self.bus, InMemoryBus):  # its groups start at the beginning: skip what is there now
            for record in self.bus.records(topic):
                ends[record.partition] = max(ends.get(record.partition, 0), record.offset + 1)
            self._starts[topic] = ends
        return ends

    def _history(self, delivery: Delivery) -> bool:
        """A record from before the start (in-memory bus), already seen or not wanted."""
        return delivery.offset < self._starts.get(delivery.topic, {}).get(delivery.partition, 0)

    # -- ebb.cluster.objects ------------------------------------------------------------------------------

    async def _objects(self) -> None:
        await self._ensure_bus()
        if not self.live.seeded.is_set():
            # the group starts where the seed starts reading at the latest: nothing is missed, and the topic
            # is not replayed from its beginning through the handler
            await self._start_at_end(TOPIC_CLUSTER_OBJECTS, self.objects_group)
            count = await seed_snapshot(self.live.objects, self.bus)
            self.live.seeded.set()
            self.metrics.snapshot_ready.set(1)
            self.metrics.snapshot_objects.set(count)
            log.info("cluster objects loaded", objects=count, group=self.objects_group)
        await self.bus.consume([TOPIC_CLUSTER_OBJECTS], self.objects_group, self._apply_object, stop=self._stop)

    async def _apply_object(self, delivery: Delivery) -> None:
        if self._history(delivery):
            return
        if isinstance(delivery.message, ClusterObject):
            await self.live.apply(delivery.message)
            self.metrics.consumed.labels(delivery.topic).inc()
            self.metrics.snapshot_objects.set(len(self.live.objects))

    # -- ebb.disruption.events ----------------------------------------------------------------------------

    async def _events(self) -> None:
        await self._ensure_bus()
        if not self.events_ready.is_set():
            ends = await self._start_at_end(TOPIC_DISRUPTION_EVENTS, self.events_group)
            self.events_ready.set()
            log.info("following disruption events from the latest offsets", group=self.events_group, offsets=ends)
        await self.bus.consume([TOPIC_DISRUPTION_EVENTS], self.events_group, self._deliver_event, stop=self._stop)

    async def _deliver_event(self, delivery: Delivery) -> None:
        if self._history(delivery):
            return
        if isinstance(delivery.message, DisruptionEvent):
            self.metrics.consumed.labels(delivery.topic).inc()
            self.hub.publish(delivery.message)


async def commit_end_offsets(bus: KafkaBus, topic: str, group: str, *, within: float = 30.0) -> dict[int, int]:
    """Commit ``group``'s offsets of ``topic`` at the partitions' current ends, so that the group's first
    ``consume`` starts there instead of at the beginning; returns partition -> offset."""
    await bus.ensure_topics([topic])
    physical = bus.physical(topic)
    numbers = await _partitions(bus, physical, within)
    consumer = AIOKafkaConsumer(bootstrap_servers=bus.bootstrap_servers, client_id=bus.client_id, group_id=group,
                                enable_auto_commit=False, **bus.client_options)
    await consumer.start()
    try:
        partitions = [TopicPartition(physical, n) for n in numbers]
        consumer.assign(partitions)
        ends = await consumer.end_offsets(partitions)
        await consumer.commit({tp: ends[tp] for tp in partitions})
        return {tp.partition: int(ends[tp]) for tp in partitions}
    finally:
        await consumer.stop()


async def _partitions(bus: KafkaBus, physical: str, within: float) -> list[int]:
    """The partition numbers of a topic from the brokers' metadata (retried while a topic just created is
    not known everywhere yet)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bus.bootstrap_servers, client_id=bus.client_id,
                                **bus.client_options)
    await admin.start()
    try:
        deadline = time.monotonic() + within
        while True:
            for entry in await admin.describe_topics([physical]):
                if entry.get("topic") == physical and not entry.get("error_code") and entry.get("partitions"):
                    return sorted(int(p["partition"]) for p in entry["partitions"])
            if time.monotonic() > deadline:
                raise RuntimeError(f"no partitions known for {physical}")
            await asyncio.sleep(0.1)
    finally:
        await admin.close()

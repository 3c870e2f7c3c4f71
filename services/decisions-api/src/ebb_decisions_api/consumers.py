"""The API's Kafka consumers, run inside the FastAPI lifespan: the cluster objects, the disruption events and
the leader planner's passes.

- ``ebb.cluster.objects``: read to its end into the ``LiveState`` (``seed_snapshot``, as the planner does),
  then followed with a consumer group of this process's own (every replica needs the whole cluster). The
  group starts at the ends the partitions had just before the seed read (so nothing is missed and the
  topic is not replayed from its beginning; records between those ends and the seed's are applied again,
  which converges to the same state).
- ``ebb.planner.passes``: read to its end into ``LeaderPasses`` (the latest pass of the cluster, which the
  explanations of nodes come from: ``ebb_decisions_api.passes``), then followed as the objects are.
- ``ebb.disruption.events``: followed from the latest offset (subscribers want what happens from now on,
  not the topic's history) with a group of this process's own, and fanned out to the ``EventHub``.

Both "start at the end"s are the bus's ``end_offsets`` taken once, before the first consume, and given to
every ``consume`` of the consumer as ``start_at`` (after a restart the group goes on from its commits,
which are at or past them), the same way on Kafka and on the in-memory bus.

Both run under a supervisor: an error (Kafka away, a handler that kept failing) is logged and counted and
the consumer starts again after a backoff, so the REST side keeps serving the store meanwhile. Malformed
records go to ``<topic>.dlq`` (the bus does that) and consumption goes on.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

import structlog

from ebb.adapters.bus import Bus, Delivery, Offsets
from ebb.adapters.clock import Clock, clock_of
from ebb.adapters.compacted import seed_snapshot
from ebb.contracts import (
    TOPIC_CLUSTER_OBJECTS,
    TOPIC_DISRUPTION_EVENTS,
    TOPIC_PLANNER_PASSES,
    ClusterObject,
    DisruptionEvent,
    PlannerPass,
)
from ebb_decisions_api.events import EventHub
from ebb_decisions_api.live import LiveState
from ebb_decisions_api.metrics import ApiMetrics
from ebb_decisions_api.passes import LeaderPasses

log = structlog.get_logger("ebb_decisions_api")

#: a consumer that ran at least this long before failing starts again after the shortest backoff
HEALTHY_RUN_SECONDS = 60.0


class Consumers:
    """The consumers of one API process; ``start()`` in the lifespan, ``stop()`` at its end."""

    def __init__(self, bus: Bus, live: LiveState, hub: EventHub, metrics: ApiMetrics, *, group: str,
                 retry_max_seconds: float = 30.0, clock: Clock | None = None,
                 passes: LeaderPasses | None = None) -> None:
        self.bus = bus
        #: measures the restart backoff and what counts as a healthy run
        self.clock = clock_of(clock)
        self.live = live
        self.hub = hub
        self.metrics = metrics
        suffix = uuid.uuid4().hex[:12]
        self.objects_group = f"{group}-objects-{suffix}"
        self.events_group = f"{group}-events-{suffix}"
        self.passes_group = f"{group}-passes-{suffix}"
        #: the leader planner's latest pass (None: not consumed)
        self.passes = passes
        self._passes_start: dict[str, Offsets] | None = None
        self.retry_max_seconds = retry_max_seconds
        #: set once the events consumer is positioned at the topic's end: from then on every published
        #: event reaches the subscribers
        self.events_ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        #: per consumer, where it starts (the ends before the seed read / before the events consumer started)
        self._objects_start: dict[str, Offsets] | None = None
        self._events_start: dict[str, Offsets] | None = None

    # -- lifecycle ----------------------------------------------------------------------------------------

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._supervise("cluster-objects", self._objects), name="api-cluster-objects"),
            asyncio.create_task(self._supervise("disruption-events", self._events), name="api-disruption-events"),
        ]
        if self.passes is not None:
            self._tasks.append(asyncio.create_task(self._supervise("planner-passes", self._passes),
                                                   name="api-planner-passes"))

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
            started = self.clock.monotonic()
            try:
                await run()
            except Exception as e:  # Kafka away, a handler that kept failing: start again after a backoff
                self.metrics.consumer_errors.labels(name).inc()
                log.error("consumer failed; starting it again", consumer=name, error=repr(e), retry_in=delay)
            else:
                if self._stop.is_set():
                    return
                log.warning("consumer ended unexpectedly; starting it again", consumer=name)
            if self.clock.monotonic() - started >= HEALTHY_RUN_SECONDS:
                delay = 0.5
            if await self.clock.sleep(delay, self._stop):
                return
            delay = min(delay * 2, self.retry_max_seconds)

    # -- ebb.cluster.objects ------------------------------------------------------------------------------

    async def _objects(self) -> None:
        if self._objects_start is None:
            # the group starts where the seed starts reading at the latest: nothing is missed, and the topic
            # is not replayed from its beginning through the handler
            ends = await self.bus.end_offsets(TOPIC_CLUSTER_OBJECTS)
            count = await seed_snapshot(self.live.objects, self.bus)
            self._objects_start = {TOPIC_CLUSTER_OBJECTS: ends}
            self.live.seeded.set()
            self.metrics.snapshot_ready.set(1)
            self.metrics.snapshot_objects.set(count)
            log.info("cluster objects loaded", objects=count, group=self.objects_group)
        await self.bus.consume([TOPIC_CLUSTER_OBJECTS], self.objects_group, self._apply_object, stop=self._stop,
                               start_at=self._objects_start)

    async def _apply_object(self, delivery: Delivery) -> None:
        if isinstance(delivery.message, ClusterObject):
            await self.live.apply(delivery.message)
            self.metrics.consumed.labels(delivery.topic).inc()
            self.metrics.snapshot_objects.set(len(self.live.objects))

    # -- ebb.planner.passes ---------------------------------------------------------------------------------

    async def _passes(self) -> None:
        passes = self.passes
        assert passes is not None
        if self._passes_start is None:
            ends = await self.bus.end_offsets(TOPIC_PLANNER_PASSES)
            for message in (await self.bus.read_compacted(TOPIC_PLANNER_PASSES)).values():
                if isinstance(message, PlannerPass):
                    passes.apply(message)
            self._passes_start = {TOPIC_PLANNER_PASSES: ends}
            passes.seeded.set()
            log.info("leader passes loaded", at=passes.latest.at.isoformat() if passes.latest else None,
                     group=self.passes_group)
        await self.bus.consume([TOPIC_PLANNER_PASSES], self.passes_group, self._apply_pass, stop=self._stop,
                               start_at=self._passes_start)

    async def _apply_pass(self, delivery: Delivery) -> None:
        if isinstance(delivery.message, PlannerPass) and self.passes is not None:
            self.passes.apply(delivery.message)
            self.metrics.consumed.labels(delivery.topic).inc()

    # -- ebb.disruption.events ----------------------------------------------------------------------------

    async def _events(self) -> None:
        if self._events_start is None:
            ends = await self.bus.end_offsets(TOPIC_DISRUPTION_EVENTS)
            self._events_start = {TOPIC_DISRUPTION_EVENTS: ends}
            self.events_ready.set()
            log.info("following disruption events from the latest offsets", group=self.events_group, offsets=ends)
        await self.bus.consume([TOPIC_DISRUPTION_EVENTS], self.events_group, self._deliver_event, stop=self._stop,
                               start_at=self._events_start)

    async def _deliver_event(self, delivery: Delivery) -> None:
        if isinstance(delivery.message, DisruptionEvent):
            self.metrics.consumed.labels(delivery.topic).inc()
            self.hub.publish(delivery.message)


"""The composition root: the SQS client and queue, the bus, the instance → node lookup (a snapshot of
``ebb.cluster.objects``), the probes and metrics endpoint (ready when Kafka and SQS answer and the snapshot is
loaded) and the ingest loop."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import structlog
from tenacity import RetryCallState

from ebb.adapters.aws.sqs import SqsClient, SqsQueue, sqs_client
from ebb.adapters.bus import Bus, KafkaBus
from ebb.adapters.clock import Clock, Stopped
from ebb.adapters.compacted import seed_snapshot
from ebb.adapters.health import serve_health
from ebb.adapters.metrics import register_consumer_lag
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.contracts import TOPIC_CLUSTER_OBJECTS
from ebb_interruption_ingester.ingester import Ingester, Metrics
from ebb_interruption_ingester.nodes import NodeLookup, StoreLookup
from ebb_interruption_ingester.settings import Settings

log = structlog.get_logger("ebb_interruption_ingester")


async def open_queue(settings: Settings, client: SqsClient, stop: asyncio.Event | None = None) -> SqsQueue:
    """The queue of ``settings``: its URL, or looked up by name (GetQueueUrl). A lookup that fails (SQS not
    reachable yet, the queue not created yet) is tried again with the ingester's backoff until it succeeds or
    ``stop`` is set, each failure logged: the ingester waits for SQS as every service waits for Kafka."""
    url = settings.queue_url
    if not url:
        def waiting(state: RetryCallState) -> None:
            log.warning("the queue cannot be looked up; trying again", queue=settings.queue_name,
                        error=repr(state.outcome.exception()) if state.outcome else None,
                        retry_in=round(state.upcoming_sleep, 2))

        async for attempt in settings.backoff.retrying(Clock(), stop, before_sleep=waiting):
            with attempt:
                url = str((await client.get_queue_url(QueueName=settings.queue_name))["QueueUrl"])
    return SqsQueue(client, url, wait_time_seconds=settings.wait_time_seconds,
                    max_messages=settings.max_messages, visibility_timeout=settings.visibility_timeout_seconds)


async def run(
    settings: Settings,
    stop: asyncio.Event,
    *,
    bus: Bus | None = None,
    sqs: SqsClient | None = None,
    lookup: NodeLookup | None = None,
    metrics: Metrics | None = None,
    started: asyncio.Event | None = None,
) -> None:
    """Ingest until ``stop`` is set. ``bus`` (e.g. an ``InMemoryBus``), ``sqs`` (an SQS client) and
    ``lookup`` (instance id → node) replace the ones built from ``settings``; ``started`` is set once
    the node snapshot is loaded and polling begins."""
    settings.require_queue()
    metrics = metrics or Metrics()
    async with contextlib.AsyncExitStack() as stack:
        readiness = serve_health(stack, settings, metrics.registry)
        readiness.condition("snapshot", "reading ebb.cluster.objects")
        if bus is None:
            kafka = KafkaBus(settings.kafka_bootstrap, prefix=settings.topic_prefix, source=settings.source,
                             client_id="ebb-interruption-ingester")
            readiness.probe("kafka", kafka.ping)
            bus = await stack.enter_async_context(kafka)
        register_consumer_lag(metrics.registry, bus)
        client: SqsClient = sqs if sqs is not None else await stack.enter_async_context(
            sqs_client(settings.region, endpoint_url=settings.endpoint_url,
                       read_timeout=settings.wait_time_seconds + 40)
        )
        readiness.condition("sqs", f"looking up the queue {settings.queue_name}")
        try:
            queue = await open_queue(settings, client, stop)
        except Stopped:
            return
        readiness.probe("sqs", queue.ping)
        consumer_stop = asyncio.Event()
        tasks: list[asyncio.Task[None]] = []
        if lookup is None:
            store = SnapshotStore(bundled_catalog=[])
            # the consumer starts at the ends taken before the snapshot read: it applies only what is newer
            ends = await bus.end_offsets(TOPIC_CLUSTER_OBJECTS)
            known = await seed_snapshot(store, bus)
            group = f"{settings.consumer_group}-{uuid.uuid4().hex[:12]}"
            tasks.append(asyncio.create_task(
                bus.consume([TOPIC_CLUSTER_OBJECTS], group, store.handle, stop=consumer_stop,
                            start_at={TOPIC_CLUSTER_OBJECTS: ends}),
                name="cluster-objects",
            ))
            lookup = StoreLookup(store)
            log.info("cluster objects loaded", objects=known, group=group)
            readiness.mark("snapshot", detail=f"{known} objects")
        else:
            readiness.mark("snapshot", detail="a lookup was given")
        ingester = Ingester(
            queue, bus, lookup, metrics=metrics,
            backoff=settings.backoff,
        )
        log.info("interruption-ingester starting", queue=queue.url, wait_time_seconds=queue.wait_time_seconds,
                 max_messages=queue.max_messages)
        if started is not None:
            started.set()
        loop = asyncio.create_task(ingester.run(stop), name="ingest")
        try:
            done, _ = await asyncio.wait([loop, *tasks], return_when=asyncio.FIRST_COMPLETED)
            if loop not in done:  # the cluster-objects consumer ended: without it the lookup goes stale
                stop.set()
                await loop
                for task in done:
                    task.result()
                raise RuntimeError("the ebb.cluster.objects consumer ended unexpectedly")
            loop.result()
        finally:
            consumer_stop.set()
            for task in [loop, *tasks]:
                if not task.done():
                    task.cancel()
            await asyncio.gather(loop, *tasks, return_exceptions=True)
        log.info("interruption-ingester stopped", **{r: int(metrics.count(r)) for r in
                                                    ("published", "unknown_node", "irrelevant", "malformed",
                                                     "foreign", "failed")})

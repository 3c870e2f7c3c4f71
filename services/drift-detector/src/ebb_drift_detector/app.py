"""The composition root: the bus, the snapshot store, the Kubernetes client and the detector."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import datetime

import structlog

from ebb.adapters.bus import Bus, KafkaBus, end_offsets, skipping_before
from ebb.adapters.compacted import seed_snapshot
from ebb.adapters.kube.client import kube_client
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.contracts import TOPIC_CLUSTER_OBJECTS
from ebb_drift_detector.annotator import KubeNodeAnnotator
from ebb_drift_detector.detector import Detector, NodeAnnotator, utcnow
from ebb_drift_detector.settings import Settings

log = structlog.get_logger("ebb_drift_detector")


async def run(
    settings: Settings,
    stop: asyncio.Event,
    *,
    bus: Bus | None = None,
    annotator: NodeAnnotator | None = None,
    clock: Callable[[], datetime] = utcnow,
    started: asyncio.Event | None = None,
    detector_ready: Callable[[Detector], None] | None = None,
) -> None:
    """Detect until ``stop`` is set. ``bus`` (e.g. an ``InMemoryBus``) and ``annotator`` replace the ones
    built from ``settings`` (no Kubernetes client is made when an annotator is given or annotating is
    off); ``started`` is set once the topic was read and the first findings published."""
    async with contextlib.AsyncExitStack() as stack:
        if bus is None:
            kafka = KafkaBus(settings.kafka_bootstrap, prefix=settings.topic_prefix, source=settings.source,
                             client_id="ebb-drift-detector")
            bus = await stack.enter_async_context(kafka)
        if annotator is None and settings.annotate_nodes:
            api = await stack.enter_async_context(kube_client(settings.kubeconfig, settings.kube_context))
            annotator = KubeNodeAnnotator(api)
        store = SnapshotStore()
        detector = Detector(bus, store, annotator=annotator, debounce=settings.debounce_seconds,
                            resync=settings.resync_seconds, clock=clock)
        if detector_ready is not None:
            detector_ready(detector)
        # the topic's ends before the snapshot is read: the consumer skips what the snapshot holds already
        # (a group starting at the beginning or behind would set the snapshot back for a while otherwise)
        ends = await end_offsets(bus, TOPIC_CLUSTER_OBJECTS)
        objects = await seed_snapshot(store, bus)
        await detector.recompute()
        log.info("drift-detector starting", objects=objects, nodes_with_findings=len(detector.current))
        if started is not None:
            started.set()
        consumer = asyncio.create_task(
            bus.consume([TOPIC_CLUSTER_OBJECTS], settings.group,
                        skipping_before(TOPIC_CLUSTER_OBJECTS, ends, detector.handle), stop=stop))
        loop = asyncio.create_task(detector.run(stop))
        try:
            done, _ = await asyncio.wait([consumer, loop], return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()
            await asyncio.gather(consumer, loop)
        finally:
            for task in (consumer, loop):
                task.cancel()
            await asyncio.gather(consumer, loop, return_exceptions=True)
        log.info("drift-detector stopped", passes=detector.passes, raised=detector.raised,
                 cleared=detector.cleared)

"""The composition root: the bus, the snapshot store, the Kubernetes client and the detector."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

import structlog

from ebb.adapters.bus import Bus, KafkaBus
from ebb.adapters.compacted import read_latest
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, ClusterObject
from ebb_drift_detector.annotator import KubeNodeAnnotator
from ebb_drift_detector.detector import Detector, NodeAnnotator, utcnow
from ebb_drift_detector.settings import Settings

log = structlog.get_logger("ebb_drift_detector")


@contextlib.asynccontextmanager
async def kube_client(settings: Settings) -> AsyncIterator[Any]:
    """A kubernetes-asyncio ApiClient: the configured kubeconfig, else in-cluster when running in a
    pod, else the default kubeconfig."""
    from kubernetes_asyncio import client, config

    configuration = client.Configuration()
    if not settings.kubeconfig and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        await config.load_kube_config(
            config_file=settings.kubeconfig or None,
            context=settings.kube_context or None,
            client_configuration=configuration,
        )
    async with client.ApiClient(configuration) as api:
        yield api


async def seed(store: SnapshotStore, bus: Bus) -> int:
    """Load ebb.cluster.objects from its beginning (the compacted topic holds the whole cluster)."""
    for message in (await read_latest(bus, TOPIC_CLUSTER_OBJECTS)).values():
        if isinstance(message, ClusterObject):
            store.apply(message)
    return len(store)


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
            annotator = KubeNodeAnnotator(await stack.enter_async_context(kube_client(settings)))
        store = SnapshotStore()
        detector = Detector(bus, store, annotator=annotator, debounce=settings.debounce_seconds,
                            resync=settings.resync_seconds, clock=clock)
        if detector_ready is not None:
            detector_ready(detector)
        objects = await seed(store, bus)
        await detector.recompute()
        log.info("drift-detector starting", objects=objects, nodes_with_findings=len(detector.current))
        if started is not None:
            started.set()
        consumer = asyncio.create_task(
            bus.consume([TOPIC_CLUSTER_OBJECTS], settings.group, detector.handle, stop=stop))
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

"""The composition root: the probes and metrics endpoint, the Kubernetes client, the bus, the watch loop and the
publisher. Ready (``/readyz``) when the apiserver and Kafka answer and every kind's watch loop runs, none of
them failing (in backoff: what it publishes of that kind may be stale)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from ebb.adapters.bus import Bus, KafkaBus
from ebb.adapters.health import Readiness, serve_health
from ebb.adapters.kube import KubeWatcher, kinds_named
from ebb.adapters.kube.client import kube_client, ping_apiserver
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, ClusterObject
from ebb_cluster_watcher.metrics import Metrics
from ebb_cluster_watcher.publisher import Publisher
from ebb_cluster_watcher.settings import Settings

log = structlog.get_logger("ebb_cluster_watcher")


def build_watcher(settings: Settings, api_client: Any, bus: Bus,
                  on_failing: Callable[[Mapping[str, str]], None] | None = None,
                  metrics: Metrics | None = None) -> tuple[KubeWatcher, Publisher]:
    publisher = Publisher(bus, metrics=metrics)
    kinds = kinds_named(settings.kinds)
    watched = tuple(spec.kind for spec in kinds)
    watcher = KubeWatcher(
        api_client,
        kinds,
        publisher,
        watch_timeout=settings.watch_timeout_seconds,
        missing_kind_retry=settings.missing_kind_retry_seconds,
        page_size=settings.page_size,
        on_failing=on_failing,
        on_synced=lambda kind: publisher.synced(kind, watched),
    )
    return watcher, publisher


def watching(readiness: Readiness, kinds: int,
             metrics: Metrics | None = None) -> Callable[[Mapping[str, str]], None]:
    """Marks the ``watching`` condition: not ready while a kind's list/watch fails (what is published of it may
    be stale), naming each such kind and why; and tells ``metrics``."""
    def mark(failing: Mapping[str, str]) -> None:
        if metrics is not None:
            metrics.kinds_failing(failing)
        if failing:
            readiness.mark("watching", ok=False,
                           detail="; ".join(f"{kind}: {why}" for kind, why in sorted(failing.items())))
        else:
            readiness.mark("watching", detail=f"{kinds} kinds")

    return mark


async def seed_from_topic(watcher: KubeWatcher, bus: Bus) -> int:
    """Seed the watcher with what is on ``ebb.cluster.objects`` already (published before a restart);
    returns how many objects were seeded."""
    seeded = 0
    for message in (await bus.read_compacted(TOPIC_CLUSTER_OBJECTS)).values():
        if isinstance(message, ClusterObject) and message.object is not None:
            seeded += watcher.seed(message.kind, message.namespace, message.name, message.object)
    return seeded


async def run(
    settings: Settings,
    stop: asyncio.Event,
    *,
    bus: Bus | None = None,
    api_client: Any = None,
    started: asyncio.Event | None = None,
) -> None:
    """Watch and publish until ``stop`` is set. ``bus`` (e.g. an ``InMemoryBus``) and ``api_client``
    replace the ones built from ``settings``; ``started`` is set once every kind's watch loop runs."""
    async with contextlib.AsyncExitStack() as stack:
        metrics = Metrics(settings.kinds)
        readiness = serve_health(stack, settings, metrics.registry)
        readiness.condition("watching", "reading what was published before")
        if api_client is None:
            api_client = await stack.enter_async_context(
                kube_client(settings.kubeconfig, settings.kube_context, component="ebb-cluster-watcher"))
            api = api_client
            readiness.probe("apiserver", lambda: ping_apiserver(api))
        if bus is None:
            kafka = KafkaBus(settings.kafka_bootstrap, prefix=settings.topic_prefix, source=settings.source,
                             client_id="ebb-cluster-watcher")
            readiness.probe("kafka", kafka.ping)
            bus = await stack.enter_async_context(kafka)
        mark_watching = watching(readiness, len(settings.kinds), metrics)
        watcher, publisher = build_watcher(settings, api_client, bus, mark_watching, metrics)
        seeded = await seed_from_topic(watcher, bus)
        log.info("cluster-watcher starting", kinds=list(settings.kinds), known_objects=seeded)
        mark_watching({})
        if started is not None:
            started.set()
        await watcher.run(stop)
        log.info("cluster-watcher stopped", published=publisher.published, tombstones=publisher.tombstones)

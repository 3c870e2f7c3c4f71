"""The composition root: the bus, the snapshot store, the decisions store, the Lease and the planner."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

import structlog

from ebb.adapters.bus import Bus, KafkaBus
from ebb.adapters.compacted import read_latest
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, ClusterObject
from ebb.core.methods.base import EngineOptions
from ebb_consolidation_planner.leader import Leadership, LeaseElector
from ebb_consolidation_planner.metrics import Metrics
from ebb_consolidation_planner.planner import Planner, utcnow
from ebb_consolidation_planner.settings import Settings
from ebb_consolidation_planner.store import PlannerStore

log = structlog.get_logger("ebb_consolidation_planner")


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


async def seed(objects: SnapshotStore, bus: Bus) -> int:
    """Load ebb.cluster.objects from its beginning (the compacted topic holds the whole cluster)."""
    for message in (await read_latest(bus, TOPIC_CLUSTER_OBJECTS)).values():
        if isinstance(message, ClusterObject):
            objects.apply(message)
    return len(objects)


async def run(
    settings: Settings,
    stop: asyncio.Event,
    *,
    bus: Bus | None = None,
    store: PlannerStore | None = None,
    leader: Leadership | None = None,
    metrics: Metrics | None = None,
    clock: Callable[[], datetime] = utcnow,
    started: asyncio.Event | None = None,
    planner_ready: Callable[[Planner], None] | None = None,
) -> None:
    """Plan until ``stop`` is set. ``bus`` (e.g. an ``InMemoryBus``), ``store`` and ``leader`` replace the
    ones built from ``settings`` (no Kubernetes client is made when a leader is given); ``started`` is set
    once the topic was read and the loops run."""
    async with contextlib.AsyncExitStack() as stack:
        if bus is None:
            kafka = KafkaBus(settings.kafka_bootstrap, prefix=settings.topic_prefix, source=settings.source,
                             client_id="ebb-consolidation-planner")
            bus = await stack.enter_async_context(kafka)
        if store is None:
            store = PlannerStore.from_url(settings.database_url, cluster=settings.cluster,
                                          ledger_ttl=settings.ledger_ttl_seconds)
            stack.push_async_callback(store.close)
        if leader is None:
            api = await stack.enter_async_context(kube_client(settings))
            leader = LeaseElector(api, name=settings.lease_name, namespace=settings.lease_namespace,
                                  identity=settings.holder_identity(), duration=settings.lease_duration_seconds,
                                  renew=settings.lease_renew_seconds)
        metrics = metrics or Metrics()
        if settings.metrics_port:
            from prometheus_client import start_http_server

            server, _thread = start_http_server(settings.metrics_port, settings.metrics_address,
                                                registry=metrics.registry)
            stack.callback(server.server_close)  # callbacks run last first: shut down, then close
            stack.callback(server.shutdown)
        objects = SnapshotStore()
        planner = Planner(bus, objects, store, leader, metrics=metrics, debounce=settings.debounce_seconds,
                          interval=settings.pass_interval_seconds,
                          validation_delay=settings.validation_delay_seconds,
                          options=EngineOptions(spot_to_spot=settings.spot_to_spot), clock=clock)
        if planner_ready is not None:
            planner_ready(planner)
        count = await seed(objects, bus)
        planner.changed.set()
        group = f"{settings.group}-{uuid.uuid4().hex[:12]}"
        log.info("consolidation-planner starting", objects=count, group=group)
        consumer_stop = asyncio.Event()
        tasks = [
            asyncio.create_task(bus.consume([TOPIC_CLUSTER_OBJECTS], group, planner.handle, stop=consumer_stop),
                                name="cluster-objects"),
            asyncio.create_task(leader.run(stop), name="leader"),
            asyncio.create_task(planner.run(stop), name="planner"),
        ]
        if started is not None:
            started.set()
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
            if not stop.is_set():
                raise RuntimeError(f"the {next(iter(done)).get_name()} task ended unexpectedly")
            await asyncio.gather(*tasks[1:])
        finally:
            stop.set()
            consumer_stop.set()
            for task in tasks:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        log.info("consolidation-planner stopped", passes=planner.passes, proposed=planner.proposed,
                 approved=planner.approved, rejected=planner.rejected)

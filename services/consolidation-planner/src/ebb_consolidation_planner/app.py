"""The composition root: the bus, the snapshot store, the decisions store, the Lease and the planner."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from datetime import datetime

import structlog

from ebb.adapters.bus import Bus, KafkaBus
from ebb.adapters.compacted import seed_snapshot
from ebb.adapters.kube.client import kube_client
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.contracts import TOPIC_CLUSTER_OBJECTS
from ebb.core.methods.base import EngineOptions
from ebb_consolidation_planner.leader import Leadership, LeaseElector
from ebb_consolidation_planner.metrics import Metrics
from ebb_consolidation_planner.planner import Planner, utcnow
from ebb_consolidation_planner.settings import Settings
from ebb_consolidation_planner.store import PlannerStore

log = structlog.get_logger("ebb_consolidation_planner")


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
            api = await stack.enter_async_context(kube_client(settings.kubeconfig, settings.kube_context))
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
        count = await seed_snapshot(objects, bus)
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

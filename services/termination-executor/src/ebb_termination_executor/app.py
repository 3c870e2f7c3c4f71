"""The composition root: the Kubernetes client, the bus, the store, the drainer and the executor."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

import structlog

from ebb.adapters.bus import Bus, KafkaBus
from ebb.adapters.kube.drain import Drainer, EvictionBackoff, KubeNodeApi, NodeApi
from ebb.contracts import TOPIC_DISRUPTION_COMMANDS
from ebb_termination_executor.executor import Executor, stop_aware_sleep, utcnow
from ebb_termination_executor.settings import Settings
from ebb_termination_executor.store import ExecutorStore

log = structlog.get_logger("ebb_termination_executor")


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


def build_executor(
    settings: Settings,
    node_api: NodeApi,
    bus: Bus,
    store: ExecutorStore,
    stop: asyncio.Event,
    *,
    clock: Callable[[], datetime] = utcnow,
) -> Executor:
    drainer = Drainer(
        node_api,
        eviction_deadline=settings.eviction_deadline_seconds,
        backoff=EvictionBackoff(
            initial=settings.eviction_backoff_initial_seconds, maximum=settings.eviction_backoff_max_seconds
        ),
        poll_interval=settings.poll_interval_seconds,
        terminating_is_gone=settings.terminating_is_gone,
        sleep=stop_aware_sleep(stop),
    )
    return Executor(bus, store, drainer, clock=clock)


async def run(
    settings: Settings,
    stop: asyncio.Event,
    *,
    bus: Bus | None = None,
    node_api: NodeApi | None = None,
    store: ExecutorStore | None = None,
    clock: Callable[[], datetime] | None = None,
    started: asyncio.Event | None = None,
) -> Executor:
    """Consume ``ebb.disruption.commands`` and execute them until ``stop`` is set. ``bus``, ``node_api``
    and ``store`` replace the ones built from ``settings``; ``started`` is set when consuming starts."""
    async with contextlib.AsyncExitStack() as stack:
        if node_api is None:
            node_api = KubeNodeApi(await stack.enter_async_context(kube_client(settings)))
        if bus is None:
            kafka = KafkaBus(settings.kafka_bootstrap, prefix=settings.topic_prefix, source=settings.source,
                             client_id="ebb-termination-executor")
            bus = await stack.enter_async_context(kafka)
        if store is None:
            store = ExecutorStore.from_url(settings.database_url, cluster=settings.cluster, consumer=settings.group)
            stack.push_async_callback(store.close)
        executor = build_executor(settings, node_api, bus, store, stop, clock=clock or utcnow)
        log.info("termination-executor starting", group=settings.group, cluster=settings.cluster)
        if started is not None:
            started.set()
        await bus.consume([TOPIC_DISRUPTION_COMMANDS], settings.group, executor.handle, stop=stop)
        log.info("termination-executor stopped", succeeded=executor.succeeded, failed=executor.failed,
                 duplicates=executor.duplicates)
        return executor


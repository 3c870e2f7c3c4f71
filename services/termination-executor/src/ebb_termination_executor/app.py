"""The composition root: the Kubernetes client, the bus, the store, the provider (``PROVIDER``: none, kwok or
karpenter; ``ebb.adapters.provider``), the drainer under the provider's taint, the executor, the outbox relay that
publishes its steps (``ebb.adapters.store.outbox``), and with the kwok provider the loop that drains deleted Nodes
carrying ebb's finalizer (``ebb_termination_executor.finalizer``).

In shadow mode (``Settings.mode``, docs/shadow.md) none of it is made: the process serves its health endpoints
and waits for ``stop``, with no Kubernetes client and no consumer of ebb.disruption.commands, so it can write
nothing to the cluster whatever reaches the topic."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from datetime import datetime
from typing import Any

import structlog

from ebb.adapters.bus import Bus, RetryPolicy
from ebb.adapters.catalog import bundled_catalog
from ebb.adapters.clock import Clock, clock_of
from ebb.adapters.engine_options import read_provider
from ebb.adapters.health import serve_health
from ebb.adapters.kube.client import kube_client, ping_apiserver
from ebb.adapters.kube.drain import Drainer, EvictionBackoff
from ebb.adapters.kube.events import EventRecorder, kube_sink
from ebb.adapters.kube.karpenter import KarpenterProvider, KubeNodeClaimApi
from ebb.adapters.kube.launch import KwokLauncher, catalog_types
from ebb.adapters.kube.node_api import KubeNodeApi, NodeApi
from ebb.adapters.kube.node_provider import NodeProvider
from ebb.adapters.metrics import register_consumer_lag
from ebb.adapters.provider import Provider
from ebb.adapters.store.outbox import OutboxRelay
from ebb.adapters.store.port import EXECUTOR, Store
from ebb.contracts import TOPIC_DISRUPTION_COMMANDS
from ebb_termination_executor.executor import Executor, utcnow
from ebb_termination_executor.finalizer import Finalizer
from ebb_termination_executor.metrics import Metrics
from ebb_termination_executor.settings import Settings

#: the suffix of the consumer group that executes the interruptions' commands (`Executor.handle_interruptions`)
INTERRUPTIONS_GROUP = "-interruptions"

log = structlog.get_logger("ebb_termination_executor")


def build_executor(
    settings: Settings,
    node_api: NodeApi,
    bus: Bus,
    store: Store,
    stop: asyncio.Event,
    *,
    clock: Clock | Callable[[], datetime] = utcnow,
    metrics: Metrics | None = None,
    provider: Provider | None = None,
    recorder: EventRecorder | None = None,
) -> Executor:
    """The drainer (under the provider's taint) and the executor; every wait on ``clock`` (cut short by
    ``stop``). Without ``provider``: ``none`` on ``node_api`` (Nodes deleted, no replacements)."""
    metrics = metrics or Metrics()
    clock = clock_of(clock)
    provider = provider or NodeProvider("none", node_api)
    drainer = Drainer(
        node_api,
        disruption_taint=provider.disruption_taint,
        eviction_deadline=settings.eviction_deadline_seconds,
        backoff=EvictionBackoff(
            initial=settings.eviction_backoff_initial_seconds, maximum=settings.eviction_backoff_max_seconds
        ),
        poll_interval=settings.poll_interval_seconds,
        min_drain_time=settings.min_drain_seconds,
        terminating_is_gone=settings.terminating_is_gone,
        clock=clock,
        stop=stop,
        on_eviction=metrics.eviction,
    )
    return Executor(bus, store, drainer, clock=clock, failure_hold=settings.failure_hold_seconds, metrics=metrics,
                    provider=provider, ready_timeout=settings.replacement_ready_timeout_seconds,
                    retire_timeout=settings.retire_timeout_seconds, max_age=settings.max_command_age_seconds,
                    recorder=recorder)


def with_configured_provider(settings: Settings) -> Settings:
    """``settings`` with the provider the cluster-wide engine options name (``settings.engine_options``: the
    ConfigMap ebb-engine-options the planner reads too), where they name one."""
    provider = read_provider(settings.engine_options, settings.provider)
    if provider == settings.provider:
        return settings
    return settings.model_copy(update={"provider": provider})


def provider_of(settings: Settings, node_api: NodeApi, api_client: Any, clock: Clock) -> Provider:
    """The provider ``settings.provider`` names, on ``node_api`` (and the ApiClient for kwok and karpenter)."""
    if settings.provider == "karpenter":
        # no catalog: the bundled one's allocatable is not what Karpenter computes (on AWS it also takes off the
        # VM memory overhead), and requests above Karpenter's allocatable would rule the chosen type out
        return KarpenterProvider(node_api, KubeNodeClaimApi(api_client))
    if settings.provider == "kwok":
        return NodeProvider("kwok", node_api, KwokLauncher(api_client, catalog_types(bundled_catalog()), clock),
                            nodepools=KubeNodeClaimApi(api_client).read_nodepool)
    return NodeProvider("none", node_api)


async def run(
    settings: Settings,
    stop: asyncio.Event,
    *,
    bus: Bus | None = None,
    node_api: NodeApi | None = None,
    store: Store | None = None,
    clock: Clock | Callable[[], datetime] | None = None,
    started: asyncio.Event | None = None,
    metrics: Metrics | None = None,
    provider: Provider | None = None,
    recorder: EventRecorder | None = None,
    store_private: bool = False,
) -> Executor | None:
    """Consume ``ebb.disruption.commands`` and execute them until ``stop`` is set. ``bus``, ``node_api``,
    ``store`` and ``provider`` replace the ones built from ``settings``; ``started`` is set when consuming
    starts. ``clock`` (default: the system clock) gives "now" and times every wait. ``store_private``: no other
    process writes to ``store`` (the embedded mode), so the outbox relay never polls it and keeps what it sent.
    In shadow mode nothing is consumed or written and None is returned at ``stop``."""
    the_clock = clock_of(clock)
    metrics = metrics or Metrics()
    settings = with_configured_provider(settings)
    async with contextlib.AsyncExitStack() as stack:
        readiness = serve_health(stack, settings, metrics.registry)
        if settings.mode == "shadow":
            log.info("termination-executor starting", mode="shadow", cluster=settings.cluster,
                     detail="shadow mode: no command is consumed, nothing is written to the cluster")
            readiness.condition("consuming", "shadow mode: consuming nothing")
            readiness.mark("consuming", detail="shadow mode: consuming nothing")
            if started is not None:
                started.set()
            await stop.wait()
            return None
        readiness.condition("consuming", "starting")
        api: Any = None
        if node_api is None or (provider is None and settings.provider != "none"):
            api = await stack.enter_async_context(
                kube_client(settings.kubeconfig, settings.kube_context, component="ebb-termination-executor"))
            readiness.probe("apiserver", lambda: ping_apiserver(api))
        if node_api is None:
            node_api = KubeNodeApi(api)
            if recorder is None and settings.events_enabled:
                recorder = EventRecorder(kube_sink(api), component=settings.events_component,
                                         instance=socket.gethostname(), namespace=settings.events_namespace,
                                         qps=settings.events_qps, clock=the_clock)
        if provider is None:
            provider = provider_of(settings, node_api, api, the_clock)
        if bus is None:
            # a command's handler is retried until it succeeds (0.1 s doubling to 10 s): a command is idempotent and
            # resumes where it stopped, and what fails it for long is an apiserver or database outage, which giving
            # up (HandlerFailed: the process exits and is restarted) would only turn into a crash loop; a command
            # that can never run is a PoisonMessage (dead-lettered) at once
            from ebb.adapters.bus import KafkaBus  # aiokafka: the distributed mode only

            kafka = KafkaBus(settings.kafka_bootstrap, prefix=settings.topic_prefix, source=settings.source,
                             client_id="ebb-termination-executor", retry=RetryPolicy(max_attempts=None))
            readiness.probe("kafka", kafka.ping)
            bus = await stack.enter_async_context(kafka)
        if store is None:
            from ebb.adapters.store.decision_store import DecisionStore  # SQLAlchemy: only for a database

            store = DecisionStore.from_url(settings.database_url, settings.cluster, consumer=settings.group)
            stack.push_async_callback(store.close)
            readiness.probe("postgresql", store.ping)
        register_consumer_lag(metrics.registry, bus)
        executor = build_executor(settings, node_api, bus, store, stop, clock=the_clock, metrics=metrics,
                                  provider=provider, recorder=recorder)
        if settings.launcher is not None:
            log.warning("EBB_TERMINATION_EXECUTOR_LAUNCHER is deprecated: set EBB_TERMINATION_EXECUTOR_PROVIDER",
                        launcher=settings.launcher, provider=settings.provider)
        log.info("termination-executor starting", group=settings.group, cluster=settings.cluster,
                 provider=provider.name, taint=dict(provider.disruption_taint))
        readiness.mark("consuming", detail=f"group {settings.group}")
        if started is not None:
            started.set()
        writer = asyncio.create_task(recorder.run(stop)) if recorder is not None else None
        # the steps of every command go out through the outbox (at once what this process wrote, within
        # relay_poll_seconds what an executor that stopped left); the embedded mode's store is this process's alone
        relay = OutboxRelay(store, bus, EXECUTOR, clock=the_clock,
                            poll=None if store_private else settings.relay_poll_seconds,
                            keep_sent=None if store_private else settings.outbox_keep_seconds)
        relaying = asyncio.create_task(relay.run(stop))
        finalizing = None
        if provider.name == "kwok" and isinstance(node_api, KubeNodeApi):
            # the nodes ebb launches carry ebb.sh/termination: `kubectl delete node` waits for ebb's drain
            finalizer = Finalizer(executor.drainer, provider, node_api.list_nodes,
                                  interval=settings.finalizer_interval_seconds, metrics=metrics, recorder=recorder)
            finalizing = asyncio.create_task(finalizer.run())
        # two consumers of the commands, each with its own `concurrency` slots: the interruptions' commands never
        # wait behind commands that wait for replacements or PDBs (the cloud takes an interrupted node in 2 minutes)
        consumers = [
            asyncio.create_task(bus.consume([TOPIC_DISRUPTION_COMMANDS], settings.group, executor.handle_others,
                                            stop=stop, concurrency=settings.concurrency), name="commands"),
            asyncio.create_task(bus.consume([TOPIC_DISRUPTION_COMMANDS], f"{settings.group}{INTERRUPTIONS_GROUP}",
                                            executor.handle_interruptions, stop=stop,
                                            concurrency=settings.concurrency), name="interruptions"),
        ]
        try:
            done, _ = await asyncio.wait(consumers, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
        finally:
            # a consumer ended: stopping, or its handler failed (HandlerFailed) and the process must exit to be
            # restarted with the command redelivered; the other consumer, the finalizer and the event writer end with
            # it (before, they kept a process whose consumer had died alive for ever: found by the chaos run)
            stop.set()
            await asyncio.gather(*consumers, return_exceptions=True)
            if finalizing is not None:
                await asyncio.gather(finalizing, return_exceptions=True)
            if writer is not None:
                await asyncio.gather(writer, return_exceptions=True)
            await asyncio.gather(relaying, return_exceptions=True)
        log.info("termination-executor stopped", succeeded=executor.succeeded, failed=executor.failed,
                 duplicates=executor.duplicates)
        return executor


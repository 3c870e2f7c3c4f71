"""The decisions-api application: /v1 (bearer token), /healthz, /readyz, /metrics, /docs and the console, /ui.

``create_app`` is the composition root: the store (``ebb.adapters.store.decision_store.DecisionStore``, the
one the planner and the executor use too), the bus (Kafka from the settings, or an injected one such as
``InMemoryBus``), the live cluster state rebuilt from ebb.cluster.objects (``LiveState``), the
disruption-event fan-out (``EventHub``) and the consumers that feed both, which run inside the FastAPI
lifespan and stop with it. It puts them in one ``ApiContext`` (``ebb_decisions_api.context``) that the routes
receive through FastAPI's dependency injection, and includes the routes, one ``APIRouter`` per resource
(``ebb_decisions_api.routes``), and the console's pages over them (``ebb_decisions_api.console``). CPU-bound
work (parsing, engine passes) runs in worker threads, at most ``max_concurrent_passes`` at once, so the event
loop keeps answering probes and streams.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import datetime

import anyio
import structlog
from fastapi import Depends, FastAPI

from ebb.adapters.bus import Bus, KafkaBus
from ebb.adapters.clock import clock_of
from ebb.adapters.engine_options import read_engine_options
from ebb.adapters.metrics import register_consumer_lag
from ebb.adapters.store.decision_store import DecisionStore
from ebb.core.conflicts import ConflictSettings
from ebb.core.methods.base import EngineOptions
from ebb_decisions_api import console, errors
from ebb_decisions_api.consumers import Consumers
from ebb_decisions_api.context import UNAUTHORIZED, ApiContext, require_token
from ebb_decisions_api.events import EventHub
from ebb_decisions_api.live import LiveState
from ebb_decisions_api.metrics import ApiMetrics, MetricsMiddleware
from ebb_decisions_api.passes import LeaderPasses
from ebb_decisions_api.routes import budgets, decisions, events, explain, holds, ops, plan, shadow
from ebb_decisions_api.schemas import utc_now
from ebb_decisions_api.settings import Settings

log = structlog.get_logger("ebb_decisions_api")

#: the routers under /v1 (behind the bearer token), in the order of the OpenAPI document's paths
V1_ROUTERS = (plan.router, holds.router, decisions.router, explain.router, budgets.router, events.router,
              shadow.router)


def token_problem(settings: Settings) -> str | None:
    """What is wrong with the settings' tokens (the service does not start then), or None."""
    if settings.token is None or not settings.token.get_secret_value():
        return "EBB_DECISIONS_API_TOKEN is required: every /v1 request must carry it as a bearer token"
    if settings.read_token is not None and settings.read_token.get_secret_value() in (
            "", settings.token.get_secret_value()):
        return ("EBB_DECISIONS_API_READ_TOKEN must be unset or a token of its own: empty, or the same as "
                "EBB_DECISIONS_API_TOKEN, it would not say which role a request has")
    return None


def create_app(settings: Settings, store: DecisionStore | None = None, *, bus: Bus | None = None,
               options: EngineOptions | None = None, clock: Callable[[], datetime] = utc_now,
               metrics: ApiMetrics | None = None) -> FastAPI:
    """The API for ``settings``. Without a ``store`` one is built from ``settings.database_url``
    (and closed at shutdown); a given store is the caller's to close. Without a ``bus`` a
    ``KafkaBus`` is built from the settings (it connects when the consumers first use it, and is closed at
    shutdown); a given bus (an ``InMemoryBus`` in tests and the embedded mode, or a ``KafkaBus``) is the caller's.
    ``options`` are the engine options of live plans and explanations at a given time (default: the cluster-wide
    object at ``settings.engine_options`` over the settings' ``spot_to_spot`` and ``provider``, as the planner
    reads them); an explanation without a time is the leader planner's (ebb.planner.passes). ``clock`` is "now"
    when a request gives none (the embedded mode's simulated time). ``metrics`` holds the API's collectors (default:
    a registry of their own; the embedded mode passes the one its services share)."""
    if (problem := token_problem(settings)) is not None or settings.token is None:
        raise ValueError(problem)
    read_token = settings.read_token.get_secret_value() if settings.read_token is not None else None
    owned_store = store is None
    if store is None:
        store = DecisionStore.from_url(settings.database_url, settings.cluster)
    owned_bus: KafkaBus | None = None
    if bus is None:
        owned_bus = KafkaBus(settings.kafka_bootstrap, prefix=settings.topic_prefix, source=settings.source,
                             client_id="ebb-decisions-api")
        bus = owned_bus
    metrics = metrics or ApiMetrics()
    register_consumer_lag(metrics.registry, bus)
    limiter = anyio.CapacityLimiter(settings.max_concurrent_passes)
    engine_options = options or read_engine_options(settings.engine_options, EngineOptions(
        spot_to_spot=settings.spot_to_spot, require_nodeclaim=settings.provider == "karpenter"))
    conflict_settings = ConflictSettings("karpenter" if engine_options.require_nodeclaim else settings.provider,
                                         settings.interruption_ingester) if settings.check_conflicts else None
    if options is None:  # as the planner's: a NodePool that conflicts with Karpenter is refused (ebb.core.conflicts)
        engine_options = replace(engine_options, refuse_conflicts=conflict_settings)
    live = LiveState(store, limiter, clock)
    hub = EventHub(settings.sse_queue_size, metrics)
    passes = LeaderPasses(settings.cluster)
    consumers = Consumers(bus, live, hub, metrics, group=settings.group,
                          retry_max_seconds=settings.kafka_retry_max_seconds, clock=clock_of(clock), passes=passes)
    context = ApiContext(
        settings=settings,
        token=settings.token.get_secret_value().encode(),
        read_token=read_token.encode() if read_token is not None else None,
        store=store,
        live=live,
        hub=hub,
        consumers=consumers,
        metrics=metrics,
        limiter=limiter,
        engine_options=engine_options,
        conflict_settings=conflict_settings,
        clock=clock,
        passes=passes,
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        consumers.start()
        log.info("decisions-api started", cluster=settings.cluster, objects_group=consumers.objects_group,
                 events_group=consumers.events_group)
        try:
            yield
        finally:
            hub.close()
            await consumers.stop()
            if owned_bus is not None:
                await owned_bus.close()
            if owned_store:
                await context.store.close()
            log.info("decisions-api stopped")

    app = FastAPI(
        title="ebb decisions-api",
        version="1",
        summary="ebb's disruption decisions, holds, explanations, budgets, event stream and dry-run planner over REST.",
        lifespan=lifespan,
    )
    app.state.context = context
    # the parts by name, for the tests that drive the app (the routes read the context)
    app.state.store = store
    app.state.metrics = metrics
    app.state.live = live
    app.state.events = hub
    app.state.consumers = consumers
    app.state.passes = passes
    app.state.bus = bus
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    errors.install(app)

    app.include_router(ops.router)
    for router in V1_ROUTERS:
        app.include_router(router, dependencies=[Depends(require_token)], responses=UNAUTHORIZED)
    app.include_router(console.router)
    return app

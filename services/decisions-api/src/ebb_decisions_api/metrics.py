"""Prometheus metrics of the API: request count and latency by method, route template and status; the live
state's consumers (messages applied, objects held, whether the snapshot is loaded) and the event stream
(subscribers, events sent, subscribers dropped for falling behind). All names start with ``ebb_api_``; the
registry also has ``ebb_build_info`` and, given the bus, ``ebb_consumer_lag`` (``ebb.adapters.metrics``). In the
embedded mode the registry is the one every service of the process shares, so ``/metrics`` serves them all."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ebb.adapters.metrics import register_build_info


class ApiMetrics:
    """The API's collectors, in a registry of their own (one per app, so tests can build several)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        register_build_info(self.registry)
        self.requests = Counter(
            "ebb_api_requests_total",
            "HTTP requests answered by the decisions-api.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "ebb_api_request_duration_seconds",
            "Time to answer an HTTP request of the decisions-api.",
            ["method", "route"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
        )
        self.consumed = Counter(
            "ebb_api_consumed_messages_total",
            "Messages the decisions-api applied from the topics it consumes.",
            ["topic"],
            registry=self.registry,
        )
        self.consumer_errors = Counter(
            "ebb_api_consumer_errors_total",
            "Times a consumer of the decisions-api stopped on an error and was restarted.",
            ["consumer"],
            registry=self.registry,
        )
        self.snapshot_objects = Gauge(
            "ebb_api_snapshot_objects",
            "Cluster objects held in the live snapshot.",
            registry=self.registry,
        )
        self.snapshot_ready = Gauge(
            "ebb_api_snapshot_ready",
            "1 once ebb.cluster.objects was read to its end at startup, else 0.",
            registry=self.registry,
        )
        self.sse_subscribers = Gauge(
            "ebb_api_sse_subscribers",
            "Clients connected to GET /v1/events.",
            registry=self.registry,
        )
        self.sse_events = Counter(
            "ebb_api_sse_events_total",
            "Disruption events sent to GET /v1/events subscribers.",
            registry=self.registry,
        )
        self.sse_overflows = Counter(
            "ebb_api_sse_overflows_total",
            "GET /v1/events subscribers closed because they fell too far behind.",
            registry=self.registry,
        )


class MetricsMiddleware:
    """Pure ASGI middleware (no body buffering). The route label is the matched route's template
    (``/v1/decisions/{decision_id}``), never the raw path, so ids do not explode the label set."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            method = str(scope.get("method", ""))
            self.metrics.requests.labels(method, template, str(status)).inc()
            self.metrics.duration.labels(method, template).observe(time.perf_counter() - start)

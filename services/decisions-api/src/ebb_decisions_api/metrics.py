"""Prometheus metrics of the API: request count and latency by method, route template and status."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class ApiMetrics:
    """The API's collectors, in a registry of their own (one per app, so tests can build several)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
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

"""A service's probes and metrics on one port: ``/healthz`` (the process answers), ``/readyz`` (every dependency
answered its last probe and the service has started) and ``/metrics`` (Prometheus).

What "ready" means is decided here once for the four services without a web framework (the cluster-watcher, the
consolidation-planner, the termination-executor and the interruption-ingester; the decisions-api has its own
routes): a service registers a probe per server it needs (Kafka, PostgreSQL, the apiserver, SQS) and the
conditions only it knows (the snapshot is loaded, the consumer runs). A probe loop on the service's event loop
runs each probe every ``interval`` seconds, cut off after ``timeout``; the HTTP server runs on a thread of its own
and answers from the last results, so ``/healthz`` and ``/readyz`` answer while the event loop is busy (a long
planner pass). Results older than ``stale_after`` (the loop has not run the probes for that long) make the service
not ready, naming it. A server that goes away turns the service not ready, not crashed: each service waits for
its servers and resumes (docs/reliability.md). ``ebb_dependency_ready{dependency}`` and ``ebb_service_ready``
carry the same on ``/metrics``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import structlog
from prometheus_client import CollectorRegistry, Gauge, make_wsgi_app
from pydantic import Field
from pydantic_settings import BaseSettings

log = structlog.get_logger("ebb.health")

#: a probe: returns when the server answers, raises (or takes longer than the timeout) when it does not
Probe = Callable[[], Awaitable[object]]

#: a WSGI ``start_response``
StartResponse = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class Check:
    """The last word on one dependency or condition: ``ok``, and why not."""

    ok: bool
    detail: str
    #: ``time.monotonic()`` when it was found
    at: float


class HealthSettings(BaseSettings):
    """The settings of a service's probes and metrics endpoint (each service's ``Settings`` inherits them, under
    its own ``EBB_<SERVICE>_`` prefix)."""

    #: the port of /healthz, /readyz and /metrics (0: none, and no probes run)
    metrics_port: int = Field(default=0, ge=0, le=65535)
    metrics_address: str = "0.0.0.0"
    #: how long a dependency may take to answer its readiness probe
    probe_timeout_seconds: float = Field(default=2.0, gt=0)
    #: how often the dependencies are probed
    probe_interval_seconds: float = Field(default=5.0, gt=0)
    #: probes not run for this long (the event loop busy or stuck) make the service not ready
    probe_stale_after_seconds: float = Field(default=120.0, gt=0)


class Readiness:
    """The readiness of one service: probes of its servers, run by ``run``, and conditions it sets itself.
    Thread-safe: the HTTP server's thread reads what the event loop writes."""

    def __init__(self, *, timeout: float = 2.0, interval: float = 5.0, stale_after: float = 60.0,
                 registry: CollectorRegistry | None = None) -> None:
        self.timeout = timeout
        self.interval = interval
        self.stale_after = stale_after
        self._probes: dict[str, Probe] = {}
        self._checks: dict[str, Check] = {}
        self._lock = threading.Lock()
        self._probed_at: float | None = None
        self._dependency_gauge: Gauge | None = None
        self._service_gauge: Gauge | None = None
        if registry is not None:
            self._dependency_gauge = Gauge("ebb_dependency_ready", "1 when the dependency answered its last probe "
                                           "(or the condition holds), else 0", ["dependency"], registry=registry)
            self._service_gauge = Gauge("ebb_service_ready", "1 when every dependency and condition is ready",
                                        registry=registry)

    def probe(self, name: str, probe: Probe) -> None:
        """Probe the server ``name`` with ``probe``; not ready until its first probe succeeds."""
        self._probes[name] = probe
        self._set(name, Check(False, "not probed yet", time.monotonic()))

    def condition(self, name: str, detail: str = "starting") -> None:
        """A condition the service reports itself (``mark``); not ready until it is marked ok."""
        self._set(name, Check(False, detail, time.monotonic()))

    def mark(self, name: str, ok: bool = True, detail: str = "ok") -> None:
        self._set(name, Check(ok, detail, time.monotonic()))

    def _set(self, name: str, check: Check) -> None:
        with self._lock:
            self._checks[name] = check
        if self._dependency_gauge is not None:
            self._dependency_gauge.labels(name).set(1 if check.ok else 0)
        if self._service_gauge is not None:
            self._service_gauge.set(1 if self.report()[0] else 0)

    async def probe_once(self) -> None:
        """Run every probe once, concurrently, each cut off after ``timeout``."""
        names = list(self._probes)
        results = await asyncio.gather(*(self._run_probe(self._probes[n]) for n in names))
        for name, failure in zip(names, results, strict=True):
            self._set(name, Check(failure is None, failure or "ok", time.monotonic()))
        with self._lock:
            self._probed_at = time.monotonic()
        if self._service_gauge is not None:
            self._service_gauge.set(1 if self.report()[0] else 0)

    async def _run_probe(self, probe: Probe) -> str | None:
        """None when ``probe`` answered within the timeout, else what went wrong."""
        try:
            async with asyncio.timeout(self.timeout):
                await probe()
        except TimeoutError:
            return f"no answer within {self.timeout:g} s"
        except Exception as e:  # any failure of a probe is the answer "not ready", reported with its cause
            return f"{type(e).__name__}: {e}"[:300]
        return None

    async def run(self, stop: asyncio.Event) -> None:
        """Probe every ``interval`` seconds until ``stop``; a change of a dependency's state is logged."""
        last: dict[str, bool] = {}
        while not stop.is_set():
            await self.probe_once()
            with self._lock:
                current = {n: self._checks[n] for n in self._probes}
            for name, check in current.items():
                if last.get(name) != check.ok:
                    if check.ok:
                        log.info("dependency ready", dependency=name)
                    elif name in last:
                        log.warning("dependency not ready", dependency=name, detail=check.detail)
                    last[name] = check.ok
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval):
                    await stop.wait()

    def report(self, now: float | None = None) -> tuple[bool, dict[str, Any]]:
        """Whether the service is ready, and the body of ``/readyz``: each check's state and detail."""
        now = time.monotonic() if now is None else now
        with self._lock:
            checks = dict(self._checks)
            probed_at = self._probed_at
        body: dict[str, Any] = {name: {"ready": c.ok, "detail": c.detail} for name, c in sorted(checks.items())}
        ready = all(c.ok for c in checks.values())
        if self._probes and probed_at is not None and now - probed_at > self.stale_after:
            ready = False
            body["probes"] = {"ready": False, "detail": f"not run for {now - probed_at:.0f} s (the event loop is "
                                                        f"busy or stuck)"}
        return ready, {"status": "ready" if ready else "unavailable", "checks": body}


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # the signature of the base class
        """Probes every few seconds are not worth a log line each."""


def health_app(readiness: Readiness, registry: CollectorRegistry) -> Callable[[dict[str, Any], StartResponse],
                                                                             Iterable[bytes]]:
    """The WSGI application of ``/healthz``, ``/readyz`` and ``/metrics``."""
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            return metrics(environ, start_response)  # type: ignore[no-any-return]
        if path == "/healthz":
            return _json(start_response, "200 OK", {"status": "ok"})
        if path == "/readyz":
            ready, body = readiness.report()
            return _json(start_response, "200 OK" if ready else "503 Service Unavailable", body)
        return _json(start_response, "404 Not Found", {"error": f"no {path}: /healthz, /readyz and /metrics"})

    return app


def _json(start_response: StartResponse, status: str, body: dict[str, Any]) -> list[bytes]:
    data = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


def serve_health(stack: contextlib.AsyncExitStack, settings: HealthSettings, registry: CollectorRegistry) -> Readiness:
    """The service's ``Readiness``, served with ``registry`` on ``/healthz``, ``/readyz`` and ``/metrics`` at
    ``settings.metrics_address:metrics_port`` (a thread) and probed (a task) until ``stack`` closes. With port 0
    nothing is served or probed (the embedded mode and the service tests run the services without a port) and the
    probes and conditions registered are only kept."""
    if not settings.metrics_port:
        return Readiness(timeout=settings.probe_timeout_seconds, interval=settings.probe_interval_seconds,
                         stale_after=settings.probe_stale_after_seconds)
    readiness = Readiness(timeout=settings.probe_timeout_seconds, interval=settings.probe_interval_seconds,
                          stale_after=settings.probe_stale_after_seconds, registry=registry)
    address = settings.metrics_address
    server = make_server(address, settings.metrics_port, health_app(readiness, registry), server_class=_Server,
                         handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, name="ebb-health", daemon=True)
    thread.start()
    stack.callback(server.server_close)  # callbacks run last first: shut down, then close the socket
    stack.callback(server.shutdown)
    probes_stop = asyncio.Event()
    task = asyncio.create_task(readiness.run(probes_stop), name="readiness-probes")

    async def stop_probes() -> None:
        probes_stop.set()
        await asyncio.gather(task, return_exceptions=True)

    stack.push_async_callback(stop_probes)
    log.info("serving /healthz, /readyz and /metrics", address=address, port=server.server_port)
    return readiness

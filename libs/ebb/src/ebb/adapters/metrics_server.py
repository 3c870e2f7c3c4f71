"""The Prometheus ``/metrics`` endpoint of a service without a web framework (prometheus-client's own
server, on a thread), bound to the service's lifetime through its exit stack."""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, start_http_server


def serve_metrics(stack: contextlib.AsyncExitStack | contextlib.ExitStack, registry: CollectorRegistry, port: int,
                  address: str = "0.0.0.0") -> None:
    """Serve ``registry`` on ``address:port`` until ``stack`` closes (nothing when ``port`` is 0)."""
    if not port:
        return
    server, _thread = start_http_server(port, address, registry=registry)
    stack.callback(server.server_close)  # callbacks run last first: shut down, then close the socket
    stack.callback(server.shutdown)

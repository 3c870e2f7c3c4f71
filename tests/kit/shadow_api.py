"""What the tests of ``ebb shadow report`` share (the CLI's in tests/cli, the HTML page's in tests/browser): a real
decisions-api served on a local port (uvicorn in a thread of its own, so a test whose thread runs another event
loop, as pytest-playwright's does, can use it) over a SQLite store a shadow planner filled, a removal as the shadow
planner keeps it, and an hour's recording of a small cluster for ``--trace``."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import uvicorn
from pydantic import SecretStr

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.store.models import ShadowRemoval
from ebb.core.recording import Recorder
from ebb_cli.record_cmd import trace_text
from ebb_decisions_api.app import create_app
from ebb_decisions_api.settings import Settings
from tests.kit.builders import NOW, catalog, disruption_policy, node, nodepool, pod


@contextlib.contextmanager
def served(database_url: str, *, token: str, now: datetime, cluster: str = "c") -> Iterator[str]:
    """The decisions-api of ``cluster`` on ``database_url``, its clock stopped at ``now``: its URL while it runs."""
    settings = Settings(token=SecretStr(token), database_url=database_url, cluster=cluster)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(settings, bus=InMemoryBus(), clock=lambda: now),
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the API did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def removal(node: str, at: datetime, *, by: str = "karpenter", reason: str = "Underutilized", verdict: str = "",
            verdict_text: str = "", nodepool: str = "default", price: str = "0.096") -> ShadowRemoval:
    """A removal of ``node`` at ``at`` as a shadow planner keeps it, ebb's verdict (a cause, or none: no pass saw
    the node) an hour before."""
    return ShadowRemoval(node=node, removed_at=at, nodepool=nodepool, instance_type="m5.large", removed_by=by,
                         reason=reason, detail="", verdict=verdict, verdict_inner="", verdict_text=verdict_text,
                         verdict_at=at - timedelta(hours=1) if verdict else None, price=Decimal(price))


def recording(path: Path) -> Path:
    """An hour's recording, written at ``path``, of a cluster with ebb's DisruptionPolicy: two half-empty nodes, a
    Job's pods arriving and finishing."""
    start = [nodepool(), catalog(), node("n0"), node("n1"), pod("web-a", "n0", cpu="500m"),
             pod("web-b", "n1", cpu="500m"),
             disruption_policy("default", consolidationPolicy="WhenEmptyOrUnderutilized", consolidateAfter="0s",
                               budgets=[{"nodes": "100%"}])]
    recorder = Recorder(start=NOW, documents=start)
    for i in range(2):
        recorder.observe(NOW + timedelta(seconds=60), "Pod", "default", f"job-{i}",
                         pod(f"job-{i}", None, phase="Pending", owner=("Job", "batch"), cpu="1"))
        recorder.observe(NOW + timedelta(seconds=900), "Pod", "default", f"job-{i}",
                         pod(f"job-{i}", "n0", phase="Succeeded", owner=("Job", "batch"), cpu="1"))
    trace = recorder.trace(NOW + timedelta(hours=1), name="recorded")
    path.write_text(trace_text(trace, path))
    return path

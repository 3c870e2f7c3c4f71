"""The probes and metrics endpoint of the services without a web framework (``ebb.adapters.health``): what
``/readyz`` says for each dependency and condition, that ``/healthz`` and ``/readyz`` answer while the event loop
is busy, and each service's endpoint on its real composition root (in-memory bus, fakes for the rest). The same
against real servers that stop and start again: tests/integration/test_server_restarts.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.health import HealthSettings, Readiness, serve_health
from ebb_cluster_watcher import app as watcher_app
from ebb_interruption_ingester import app as ingester_app
from ebb_interruption_ingester.ingester import Metrics as IngesterMetrics
from tests.kit.ingester import FakeSqs
from tests.kit.ingester import settings as ingester_settings
from tests.kit.waiting import eventually


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def health_settings(**overrides: Any) -> HealthSettings:
    values: dict[str, Any] = {"metrics_port": free_port(), "metrics_address": "127.0.0.1",
                              "probe_interval_seconds": 0.05, "probe_timeout_seconds": 0.2}
    return HealthSettings(**(values | overrides))


class Dependency:
    """A server that answers, fails or hangs, as the test says."""

    def __init__(self) -> None:
        self.state = "up"
        self.calls = 0

    async def ping(self) -> None:
        self.calls += 1
        if self.state == "down":
            raise ConnectionRefusedError("connection refused")
        if self.state == "hanging":
            await asyncio.sleep(3600)


async def get(port: int, path: str) -> tuple[int, dict[str, Any]]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        response = await client.get(path)
    return response.status_code, response.json() if path != "/metrics" else {"text": response.text}


async def until_ready(port: int, ready: bool, within: float = 5.0) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        status, body = await get(port, "/readyz")
        if (status == 200) == ready:
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"/readyz still {status}: {body}")
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def served(settings: HealthSettings, registry: CollectorRegistry | None = None) -> AsyncIterator[Readiness]:
    async with contextlib.AsyncExitStack() as stack:
        yield serve_health(stack, settings, registry or CollectorRegistry())


# -- Readiness, without HTTP ---------------------------------------------------------------------------------


async def test_not_ready_until_every_probe_answered_and_every_condition_holds() -> None:
    readiness = Readiness(timeout=0.1)
    kafka, postgres = Dependency(), Dependency()
    readiness.probe("kafka", kafka.ping)
    readiness.probe("postgresql", postgres.ping)
    readiness.condition("snapshot", "reading ebb.cluster.objects")
    ready, body = readiness.report()
    assert not ready and body["checks"]["kafka"] == {"ready": False, "detail": "not probed yet"}

    await readiness.probe_once()
    ready, body = readiness.report()
    assert not ready and body["status"] == "unavailable"
    assert body["checks"]["kafka"]["ready"] and body["checks"]["postgresql"]["ready"]
    assert body["checks"]["snapshot"] == {"ready": False, "detail": "reading ebb.cluster.objects"}

    readiness.mark("snapshot", detail="12 objects")
    assert readiness.report() == (True, {"status": "ready", "checks": {
        "kafka": {"ready": True, "detail": "ok"}, "postgresql": {"ready": True, "detail": "ok"},
        "snapshot": {"ready": True, "detail": "12 objects"}}})


def test_the_cluster_watcher_is_not_ready_while_a_kind_is_failing() -> None:
    """What it publishes of a kind in backoff may be stale (its pods, after an apiserver restart)."""
    readiness = Readiness()
    mark = watcher_app.watching(readiness, 9)
    mark({})
    assert readiness.report()[1]["checks"]["watching"] == {"ready": True, "detail": "9 kinds"}
    mark({"Pod": "list/watch failed 3 times", "Node": "list/watch failed 1 times"})
    assert readiness.report() == (False, {"status": "unavailable", "checks": {"watching": {
        "ready": False, "detail": "Node: list/watch failed 1 times; Pod: list/watch failed 3 times"}}})
    mark({})
    assert readiness.report()[0]


@pytest.mark.parametrize(("state", "detail"), [
    ("down", "ConnectionRefusedError: connection refused"),
    ("hanging", "no answer within 0.1 s"),
])
async def test_a_dependency_that_fails_or_hangs_makes_the_service_not_ready_naming_it(state: str,
                                                                                     detail: str) -> None:
    readiness = Readiness(timeout=0.1)
    kafka, postgres = Dependency(), Dependency()
    readiness.probe("kafka", kafka.ping)
    readiness.probe("postgresql", postgres.ping)
    await readiness.probe_once()
    assert readiness.report()[0]

    postgres.state = state
    await readiness.probe_once()
    ready, body = readiness.report()
    assert not ready
    assert body["checks"]["postgresql"] == {"ready": False, "detail": detail}
    assert body["checks"]["kafka"]["ready"]  # the others are still reported as they are

    postgres.state = "up"
    await readiness.probe_once()
    assert readiness.report()[0]  # back without anything else done


async def test_probes_not_run_for_too_long_make_the_service_not_ready() -> None:
    readiness = Readiness(timeout=0.1, stale_after=30)
    readiness.probe("kafka", Dependency().ping)
    await readiness.probe_once()
    assert readiness.report()[0]
    ready, body = readiness.report(now=time.monotonic() + 31)
    assert not ready
    assert body["checks"]["probes"]["detail"].startswith("not run for 31 s")


async def test_the_probe_loop_runs_until_stopped_and_logs_only_changes() -> None:
    readiness = Readiness(timeout=0.1, interval=0.01)
    kafka = Dependency()
    readiness.probe("kafka", kafka.ping)
    stop = asyncio.Event()
    task = asyncio.create_task(readiness.run(stop))
    await eventually("three calls to Kafka", lambda: kafka.calls >= 3, 5, interval=0.01)
    stop.set()
    await asyncio.wait_for(task, 1)
    assert readiness.report()[0]


# -- the endpoint -------------------------------------------------------------------------------------------


async def test_the_endpoint_serves_healthz_readyz_and_metrics() -> None:
    settings = health_settings()
    registry = CollectorRegistry()
    async with served(settings, registry) as readiness:
        kafka = Dependency()
        readiness.probe("kafka", kafka.ping)
        readiness.condition("snapshot")
        port = settings.metrics_port
        assert await get(port, "/healthz") == (200, {"status": "ok"})
        body = await until_ready(port, False)
        assert body["checks"]["snapshot"] == {"ready": False, "detail": "starting"}

        readiness.mark("snapshot")
        body = await until_ready(port, True)
        assert body == {"status": "ready", "checks": {"kafka": {"ready": True, "detail": "ok"},
                                                      "snapshot": {"ready": True, "detail": "ok"}}}
        _, metrics = await get(port, "/metrics")
        assert 'ebb_dependency_ready{dependency="kafka"} 1.0' in metrics["text"]
        assert "ebb_service_ready 1.0" in metrics["text"]

        kafka.state = "down"
        body = await until_ready(port, False)
        assert body["checks"]["kafka"] == {"ready": False, "detail": "ConnectionRefusedError: connection refused"}
        _, metrics = await get(port, "/metrics")
        assert 'ebb_dependency_ready{dependency="kafka"} 0.0' in metrics["text"]
        assert "ebb_service_ready 0.0" in metrics["text"]
        status, body = await get(port, "/nothing")
        assert status == 404 and "/readyz" in body["error"]
    with pytest.raises(httpx.ConnectError):  # closed with the stack
        await get(port, "/healthz")


async def test_the_endpoint_answers_while_the_event_loop_is_busy() -> None:
    settings = health_settings()
    async with served(settings) as readiness:
        readiness.probe("kafka", Dependency().ping)
        await until_ready(settings.metrics_port, True)
        answers: list[tuple[str, int]] = []

        def probe_from_a_kubelet() -> None:
            for path in ("/healthz", "/readyz"):
                with urllib.request.urlopen(f"http://127.0.0.1:{settings.metrics_port}{path}", timeout=2) as r:
                    answers.append((path, r.status))

        kubelet = threading.Thread(target=probe_from_a_kubelet)
        kubelet.start()
        time.sleep(0.5)  # noqa: ASYNC251  # the point: a planner pass holding the event loop
        kubelet.join(timeout=5)
        assert answers == [("/healthz", 200), ("/readyz", 200)]


def test_no_port_serves_nothing_and_probes_nothing() -> None:
    async def scenario() -> None:
        settings = health_settings(metrics_port=0)
        kafka = Dependency()
        async with served(settings) as readiness:
            readiness.probe("kafka", kafka.ping)
            await asyncio.sleep(0.2)
        assert kafka.calls == 0

    asyncio.run(scenario())


# -- a service's endpoint on its composition root -----------------------------------------------------------


async def test_the_ingester_is_not_ready_while_sqs_is_away() -> None:
    port = free_port()
    settings = ingester_settings(metrics_port=port, metrics_address="127.0.0.1", probe_interval_seconds=0.05,
                                 probe_timeout_seconds=0.5)
    sqs, bus = FakeSqs(), InMemoryBus()
    stop, started = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(ingester_app.run(settings, stop, bus=bus, sqs=sqs, metrics=IngesterMetrics(),
                                                started=started))
    try:
        await asyncio.wait_for(started.wait(), 5)
        body = await until_ready(port, True)
        assert set(body["checks"]) == {"sqs", "snapshot"}  # the bus was given: no Kafka to probe
        sqs.down = True
        body = await until_ready(port, False)
        assert body["checks"]["sqs"] == {"ready": False, "detail": "ConnectionError: SQS is away"}
        assert not task.done()  # not ready, not crashed
        sqs.down = False
        await until_ready(port, True)
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)


async def test_the_ingester_waits_for_its_queue_to_be_found() -> None:
    """SQS not reachable at start (or the queue not created yet): GetQueueUrl is tried again with backoff, the
    ingester not ready meanwhile, naming the queue; then it runs, the same process."""
    port = free_port()
    settings = ingester_settings(queue_url="", queue_name="ebb-interruptions", metrics_port=port,
                                 metrics_address="127.0.0.1", probe_interval_seconds=0.05, backoff_initial_seconds=0.3,
                                 backoff_max_seconds=0.3)
    sqs, bus = FakeSqs(), InMemoryBus()
    sqs.url_failures = [ConnectionError("SQS is away")] * 4
    stop, started = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(ingester_app.run(settings, stop, bus=bus, sqs=sqs, metrics=IngesterMetrics(),
                                                started=started))
    try:
        body = await until_ready(port, False)
        assert body["checks"]["sqs"] == {"ready": False, "detail": "looking up the queue ebb-interruptions"}
        assert not started.is_set()
        await asyncio.wait_for(started.wait(), 10)
        assert sqs.url_failures == []
        await until_ready(port, True)
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)


async def test_an_ingester_stopped_while_looking_up_its_queue_ends() -> None:
    settings = ingester_settings(queue_url="", queue_name="missing", backoff_initial_seconds=5,
                                 backoff_max_seconds=5)
    sqs = FakeSqs()
    sqs.url_failures = [ConnectionError("SQS is away")] * 10
    stop = asyncio.Event()
    task = asyncio.create_task(ingester_app.run(settings, stop, bus=InMemoryBus(), sqs=sqs,
                                                metrics=IngesterMetrics()))
    await eventually("a GetQueueUrl failure consumed", lambda: len(sqs.url_failures) == 9, 5, interval=0.01)
    stop.set()
    await asyncio.wait_for(task, 2)  # cut short in its wait, no error


def test_readyz_is_json_even_on_503() -> None:
    """A kubelet only reads the status; an operator reads the body: it must parse whatever the state."""
    async def scenario() -> None:
        settings = health_settings()
        async with served(settings) as readiness:
            readiness.condition("snapshot")
            await asyncio.sleep(0.1)
            try:
                await asyncio.to_thread(urllib.request.urlopen, f"http://127.0.0.1:{settings.metrics_port}/readyz")
            except urllib.error.HTTPError as e:
                assert e.code == 503
                assert json.loads(e.read())["checks"]["snapshot"]["ready"] is False
            else:
                raise AssertionError("ready without the condition")

    asyncio.run(scenario())

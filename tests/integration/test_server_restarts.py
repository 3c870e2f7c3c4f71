"""A service outliving a restart of its PostgreSQL (issue 13, server restarts; the first of them): the
decisions-api on a private PostgreSQL (``restartable.PrivatePostgres``) that is stopped and started again with the
same data. While it is down the process stays up and ``/readyz`` answers 503 naming the database; once it is back
the API is ready again and answers from the same data, with no restart of the service (SQLAlchemy's
``pool_pre_ping`` replaces the connections the shutdown closed).

And a service started while Kafka is down (a private broker, ``restartable.PrivateKafka``): the cluster-watcher
stays up, logging that Kafka cannot be reached, and once Kafka is up it starts and publishes the cluster, with
no restart of the process (``KafkaBus`` waits for Kafka; before, it exited with ``KafkaConnectionError``, which
the chaos run found). Restarts of Kafka, PostgreSQL and the apiserver under running services are in the chaos
run (tests/integration/test_chaos.py).

Each of these services says so on ``/readyz`` (``ebb.adapters.health``): the cluster-watcher 503 naming Kafka
while Kafka is down, then 200; the consolidation-planner and the termination-executor 503 naming PostgreSQL while
their database is down, then 200, the same processes all along."""

from __future__ import annotations

import asyncio
import functools
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes_asyncio import client
from pydantic import SecretStr

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.migrate import upgrade_async
from ebb.contracts import TOPIC_CLUSTER_OBJECTS
from ebb_decisions_api.app import create_app
from ebb_decisions_api.settings import Settings
from tests.kit.decisions_api import AUTH, TOKEN, documents, publish
from tests.kit.restartable import PrivateKafka, PrivatePostgres
from tests.kit.servers import KafkaServer, KubernetesCluster, PostgresServer
from tests.kit.system import (
    Servers,
    ServiceProcess,
    SystemSettings,
    TopicReader,
    delete_nodes,
    free_port,
    kwok_node,
    service_env,
)
from tests.kit.waiting import eventually

pytestmark = pytest.mark.integration


def _private_postgres() -> PrivatePostgres:
    root = Path(tempfile.mkdtemp(prefix="ebb-restart-pg-"))  # under /tmp: the postgres user must reach it
    root.chmod(0o755)
    server = PrivatePostgres(root / "pg")
    server.start()
    return server


@pytest.fixture
async def postgres() -> AsyncIterator[PrivatePostgres]:
    server = await asyncio.to_thread(_private_postgres)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.close)
        await asyncio.to_thread(shutil.rmtree, server.root.parent, True)


async def _readyz(client: httpx.AsyncClient) -> tuple[int, dict[str, Any]]:
    response = await client.get("/readyz")
    return response.status_code, response.json()


async def test_the_decisions_api_waits_out_a_postgresql_restart(postgres: PrivatePostgres,
                                                                 postgres_server: PostgresServer) -> None:
    # (postgres_server is not used: asking for it has the fixture install PostgreSQL's binaries when run alone)
    await upgrade_async(postgres.url)
    store = DecisionStore.from_url(postgres.url, "restarts")
    await store.create_hold(scope_kind="cluster", scope="", reason="kept across the restart", expires_at=None,
                            now=datetime.now(UTC))
    bus = InMemoryBus()
    await publish(bus, documents("empty-node.yaml"))
    app = create_app(Settings(token=SecretStr(TOKEN), database_url=postgres.url, cluster="restarts",
                              ready_timeout_seconds=2), store, bus=bus)
    try:
        async with app.router.lifespan_context(app), httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
            await eventually("ready", lambda: _ready(client), within=30)
            holds = (await client.get("/v1/holds", headers=AUTH)).json()
            assert [h["reason"] for h in holds["items"]] == ["kept across the restart"]

            await asyncio.to_thread(postgres.stop)
            status, body = await _readyz(client)
            assert status == 503 and "database" in body  # not ready, naming the dependency
            assert (await client.get("/healthz")).status_code == 200  # and the process is up

            await asyncio.to_thread(postgres.start)
            await eventually("ready again", lambda: _ready(client), within=30)
            holds = (await client.get("/v1/holds", headers=AUTH)).json()
            assert [h["reason"] for h in holds["items"]] == ["kept across the restart"]  # the same data
    finally:
        await store.close()


async def _ready(client: httpx.AsyncClient) -> bool:
    return (await client.get("/readyz")).status_code == 200


def _stopped_kafka() -> PrivateKafka:
    root = Path(tempfile.mkdtemp(prefix="ebb-restart-kafka-"))
    kafka = PrivateKafka(root / "kafka")
    kafka.start()  # formatted once, then down: the service starts before it is back
    kafka.stop()
    return kafka


async def test_a_service_started_while_kafka_is_down_waits_for_it(kubernetes_cluster: KubernetesCluster,
                                                                  kube_api: Any, tmp_path: Path,
                                                                  kafka_server: KafkaServer) -> None:
    # (kafka_server is not used: asking for it has the fixture install Kafka's jars when this test runs alone)
    kafka = await asyncio.to_thread(_stopped_kafka)
    settings = SystemSettings(run=uuid.uuid4().hex[:8], queue_url="")
    node = f"restart-{settings.run}"
    core = client.CoreV1Api(kube_api)
    await core.create_node(kwok_node(node, "restarts", settings.run))  # something for the watcher to publish
    servers = Servers(kafka_bootstrap=kafka.bootstrap, database_url="", kubeconfig=str(kubernetes_cluster.kubeconfig),
                      aws_endpoint="")
    port = free_port()
    watcher = ServiceProcess("cluster-watcher", "ebb_cluster_watcher",
                             {**service_env("cluster-watcher", servers, settings), **probes("CLUSTER_WATCHER", port)},
                             tmp_path)
    try:
        await watcher.start()
        await eventually("the watcher saying Kafka cannot be reached", lambda: watcher.logged("cannot be reached"),
                         within=60, on_timeout=watcher.tail)
        await asyncio.sleep(5)
        watcher.check_running()  # waiting, not exited
        assert not watcher.logged("cluster-watcher starting")
        status, body = await service_readyz(port)
        assert status == 503, body  # not ready, naming Kafka; the apiserver answers
        assert body["checks"]["kafka"]["ready"] is False and body["checks"]["apiserver"]["ready"] is True
        assert body["checks"]["watching"]["ready"] is False

        await asyncio.to_thread(kafka.start)
        await eventually("the watcher started", lambda: watcher.logged("cluster-watcher starting"), within=90,
                         on_timeout=watcher.tail)
        await eventually("the watcher ready", lambda: service_ready(port), within=30, on_timeout=watcher.tail)
        async with TopicReader(kafka.bootstrap, settings.prefix, [TOPIC_CLUSTER_OBJECTS]) as reader:
            await eventually("the node published", lambda: any(
                r.key == f"Node//{node}".encode() and r.value for r in reader.on(TOPIC_CLUSTER_OBJECTS)),
                within=60, on_timeout=watcher.tail)
        assert watcher.starts == 1  # the same process all along
        assert await watcher.stop() == 0
    finally:
        await watcher.kill()
        await delete_nodes(kube_api, [node])
        await asyncio.to_thread(kafka.close)
        await asyncio.to_thread(shutil.rmtree, kafka.root.parent, True)


def probes(service: str, port: int) -> dict[str, str]:
    """The environment of ``service``'s probes and metrics endpoint on ``port``, probed often."""
    prefix = f"EBB_{service}_"
    return {prefix + "METRICS_PORT": str(port), prefix + "METRICS_ADDRESS": "127.0.0.1",
            prefix + "PROBE_INTERVAL_SECONDS": "0.5", prefix + "PROBE_TIMEOUT_SECONDS": "2"}


async def service_readyz(port: int) -> tuple[int, dict[str, Any]]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
        return await _readyz(client)


async def service_ready(port: int) -> bool:
    try:
        return (await service_readyz(port))[0] == 200
    except httpx.TransportError:  # not listening yet
        return False


async def test_the_planner_and_the_executor_are_not_ready_while_postgresql_is_down(
        postgres: PrivatePostgres, postgres_server: PostgresServer, kafka_server: KafkaServer,
        kubernetes_cluster: KubernetesCluster, tmp_path: Path) -> None:
    # (postgres_server is not used: asking for it has the fixture install PostgreSQL's binaries when run alone)
    await upgrade_async(postgres.url)
    settings = SystemSettings(run=uuid.uuid4().hex[:8], queue_url="")
    servers = Servers(kafka_bootstrap=kafka_server.bootstrap, database_url=postgres.url,
                      kubeconfig=str(kubernetes_cluster.kubeconfig), aws_endpoint="")
    ports = {"consolidation-planner": free_port(), "termination-executor": free_port()}
    services = [ServiceProcess(name, module, {**service_env(name, servers, settings),
                                              **probes(name.upper().replace("-", "_"), ports[name])}, tmp_path)
                for name, module in (("consolidation-planner", "ebb_consolidation_planner"),
                                     ("termination-executor", "ebb_termination_executor"))]
    try:
        for service in services:
            await service.start()
        for service in services:
            port = ports[service.name]
            await eventually(f"the {service.name} ready", functools.partial(service_ready, port), within=90,
                             on_timeout=service.tail)
            _, body = await service_readyz(port)
            assert {"kafka", "postgresql", "apiserver"} <= set(body["checks"]), body

        await asyncio.to_thread(postgres.stop)
        for service in services:
            port = ports[service.name]
            await eventually(f"the {service.name} not ready", functools.partial(_not_ready, port), within=30,
                             on_timeout=service.tail)
            status, body = await service_readyz(port)
            assert status == 503 and body["checks"]["postgresql"]["ready"] is False, body
            assert body["checks"]["kafka"]["ready"] and body["checks"]["apiserver"]["ready"], body
        await asyncio.sleep(3)
        for service in services:
            service.check_running()  # not ready, not crashed

        await asyncio.to_thread(postgres.start)
        for service in services:
            await eventually(f"the {service.name} ready again", functools.partial(service_ready, ports[service.name]),
                             within=60, on_timeout=service.tail)
            assert service.starts == 1  # the same process all along
        for service in services:
            assert await service.stop() == 0
    finally:
        for service in services:
            await service.kill()


async def _not_ready(port: int) -> bool:
    return (await service_readyz(port))[0] == 503

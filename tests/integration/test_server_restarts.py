"""A service outliving a restart of its PostgreSQL (issue 13, server restarts; the first of them): the
decisions-api on a private PostgreSQL (``restartable.PrivatePostgres``) that is stopped and started again with the
same data. While it is down the process stays up and ``/readyz`` answers 503 naming the database; once it is back
the API is ready again and answers from the same data, with no restart of the service (SQLAlchemy's
``pool_pre_ping`` replaces the connections the shutdown closed).

And a service started while Kafka is down (a private broker, ``restartable.PrivateKafka``): the cluster-watcher
stays up, logging that Kafka cannot be reached, and once Kafka is up it starts and publishes the cluster, with
no restart of the process (``KafkaBus`` waits for Kafka; before, it exited with ``KafkaConnectionError``, which
the chaos run found). Restarts of Kafka, PostgreSQL and the apiserver under running services are in the chaos
run (tests/integration/test_chaos.py)."""

from __future__ import annotations

import asyncio
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
from tests.service.test_api_service import AUTH, TOKEN, documents, publish

from .conftest import KafkaServer, KubernetesCluster, PostgresServer
from .restartable import PrivateKafka, PrivatePostgres
from .system import (
    Servers,
    ServiceProcess,
    SystemSettings,
    TopicReader,
    delete_nodes,
    eventually,
    kwok_node,
    service_env,
)

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
    watcher = ServiceProcess("cluster-watcher", "ebb_cluster_watcher",
                             service_env("cluster-watcher", servers, settings), tmp_path)
    try:
        await watcher.start()
        await eventually("the watcher saying Kafka cannot be reached", lambda: watcher.logged("cannot be reached"),
                         within=60, on_timeout=watcher.tail)
        await asyncio.sleep(5)
        watcher.check_running()  # waiting, not exited
        assert not watcher.logged("cluster-watcher starting")

        await asyncio.to_thread(kafka.start)
        await eventually("the watcher started", lambda: watcher.logged("cluster-watcher starting"), within=90,
                         on_timeout=watcher.tail)
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

"""ebb.planner.passes on a real Kafka and PostgreSQL: the leader planner's pass reaches the decisions-api, which
answers "why not this node?" with it, demand window included; and a pass larger than Kafka's default record limit
(a big cluster's: every node with its cause) is created, published, read back and consumed whole. Every topic is
under a prefix of this test's own and every row under a cluster name of its own."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from ebb.adapters.bus import Delivery, KafkaBus
from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.migrate import upgrade_async
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, TOPIC_PLANNER_PASSES, ClusterObject, PlannerPass
from ebb.core.engine import run_pass
from ebb.core.findings import findings
from ebb.core.methods.base import EngineOptions
from ebb.core.model import DemandSample
from ebb_consolidation_planner import app as planner_app
from ebb_consolidation_planner.leadership import AlwaysLeader
from ebb_consolidation_planner.settings import Settings as PlannerSettings
from ebb_decisions_api.app import create_app
from ebb_decisions_api.settings import Settings as ApiSettings
from tests.kit.builders import catalog, node, nodepool, pod, snapshot
from tests.kit.planner import kinds_synced
from tests.kit.servers import KafkaServer, PostgresServer
from tests.kit.waiting import eventually

pytestmark = pytest.mark.integration

NOW = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)
TOKEN = "passes-" + uuid.uuid4().hex
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PEAK = DemandSample("default", NOW - timedelta(minutes=30), 3000, 0)


def cluster() -> list[dict[str, Any]]:
    """``idle`` (2 cpu) is empty, ``busy`` runs 1.5 cpu, and NodePool default keeps the last hour's peak."""
    return [catalog(), nodepool(disruption={"demandWindow": "1h"}), node("idle"), node("busy"),
            pod("web", "busy", cpu="1500m")]


def cluster_object(doc: dict[str, Any]) -> ClusterObject:
    meta = doc["metadata"]
    return ClusterObject(kind=doc["kind"], namespace=meta.get("namespace", ""), name=meta["name"],
                         resource_version="1", object=doc)


@contextlib.asynccontextmanager
async def planner_running(settings: PlannerSettings, store: DecisionStore) -> AsyncIterator[None]:
    stop, started = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(planner_app.run(settings, stop, store=store, leader=AlwaysLeader(),
                                               clock=lambda: NOW, started=started))
    try:
        await asyncio.wait_for(started.wait(), 120)
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)


async def test_the_api_explains_a_node_as_the_leader_planner_decided_on_kafka(
        kafka_server: KafkaServer, postgres_server: PostgresServer) -> None:
    await upgrade_async(postgres_server.url)
    prefix = f"passes{uuid.uuid4().hex[:10]}."
    store = DecisionStore.from_url(postgres_server.url, f"passes-{uuid.uuid4().hex[:12]}")
    try:
        await store.save_demand((PEAK,))  # an earlier leader's record
        async with KafkaBus(kafka_server.bootstrap, prefix=prefix, poll_timeout=0.1) as bus:
            for doc in cluster():
                await bus.publish(TOPIC_CLUSTER_OBJECTS, cluster_object(doc))
            for message in kinds_synced():  # as the cluster-watcher says once it listed each kind
                await bus.publish(TOPIC_CLUSTER_OBJECTS, message)
        planner_settings = PlannerSettings(kafka_bootstrap=kafka_server.bootstrap, topic_prefix=prefix,
                                           database_url=postgres_server.url, cluster=store.cluster,
                                           group=f"planner-{prefix}", debounce_seconds=0.0, pass_interval_seconds=1.0,
                                           validation_delay_seconds=600.0, engine_options="")
        api_settings = ApiSettings(kafka_bootstrap=kafka_server.bootstrap, topic_prefix=prefix,
                                   database_url=postgres_server.url, cluster=store.cluster, group=f"api-{prefix}",
                                   token=SecretStr(TOKEN), engine_options="")
        app = create_app(api_settings, store, clock=lambda: NOW)
        async with planner_running(planner_settings, store), app.router.lifespan_context(app), httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://api", timeout=30) as client:
            async def explained() -> dict[str, Any] | None:
                response = await client.get("/v1/nodes/idle/explain", headers=AUTH)
                return response.json() if response.status_code == 200 else None

            answer = await eventually("the API's answer from the leader's pass", explained, within=120)
    finally:
        await store.close()
    options = EngineOptions()
    with_record = replace(snapshot(*cluster()), demand=(PEAK,))
    [planned] = [b for b in run_pass(options.view_of(with_record, NOW), options).blocked if b.node == "idle"]
    assert "demandWindow (1h)" in planned.reason
    assert answer["source"] == "planner-pass" and answer["pass"]["at"] == "2026-11-23T18:30:00Z"
    assert answer["blocked"] == {"method": planned.method, "reason": planned.reason}
    assert answer["cause"] == str(planned.cause.kind)


async def test_a_pass_larger_than_kafkas_default_record_limit_goes_through(kafka_server: KafkaServer) -> None:
    options = EngineOptions()
    view = options.view_of(snapshot(*cluster()), NOW)
    small = PlannerPass.of_pass(cluster="big", view=view, result=run_pass(view, options), found=findings(view),
                                revision=1, demand=())
    entry = small.blocked[0].model_dump()
    many = [{**entry, "node": f"node-{i:05d}"} for i in range(8000)]
    big = PlannerPass.model_validate({**small.model_dump(), "blocked": many})
    assert len(big.model_dump_json()) > 2 * 1024 * 1024
    prefix = f"bigpass{uuid.uuid4().hex[:10]}."
    async with KafkaBus(kafka_server.bootstrap, prefix=prefix, poll_timeout=0.1) as bus:
        await bus.publish(TOPIC_PLANNER_PASSES, big)
        read = await bus.read_compacted(TOPIC_PLANNER_PASSES)
        assert read == {"big": big}
        got: list[PlannerPass] = []
        stop = asyncio.Event()

        async def collect(delivery: Delivery) -> None:
            if isinstance(delivery.message, PlannerPass):
                got.append(delivery.message)
                stop.set()

        await asyncio.wait_for(bus.consume([TOPIC_PLANNER_PASSES], f"big-{prefix}", collect, stop=stop), 60)
    assert got == [big]

"""decisions-api against a real PostgreSQL and Kafka: auth, probes, metrics, the dry-run planner, holds, and
decisions with filters, cursor pagination and timelines (the app in-process on the httpx ASGI transport, the
live state on an InMemoryBus); then the live state on real Kafka, with the app in a real uvicorn server and
its own KafkaBus built from the settings: explanations of objects published to the compacted
ebb.cluster.objects (before and after the start), server-sent events of what is published to
ebb.disruption.events (never the history), and malformed records dead-lettered to ``<topic>.dlq`` while the
API keeps serving. Every row is written under a cluster name of this test run's own and every topic under a
prefix of its own, so other tests' rows and records never show."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import uvicorn
import yaml
from aiokafka import AIOKafkaProducer
from fastapi import FastAPI
from pydantic import SecretStr
from sse_starlette.sse import AppStatus

from ebb.adapters.bus import Delivery, KafkaBus
from ebb.adapters.bus.memory import InMemoryBus
from ebb.adapters.snapshot_files import load_snapshot
from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.migrate import upgrade_async
from ebb.contracts import (
    TOPIC_CLUSTER_OBJECTS,
    TOPIC_DISRUPTION_EVENTS,
    ClusterObject,
    DeadLetter,
    DisruptionEvent,
)
from ebb.core.methods.base import EngineOptions
from ebb.core.plan import make_plan, plan_json
from ebb_decisions_api.app import create_app
from ebb_decisions_api.settings import Settings
from tests.kit.servers import KafkaServer, PostgresServer
from tests.kit.waiting import eventually

T = TypeVar("T")

pytestmark = pytest.mark.integration

SCENARIO = Path("/work/shared/scenarios/replace-cheaper.yaml")
SCENARIO_TEXT = SCENARIO.read_text()
TOKEN = "test-token-" + uuid.uuid4().hex
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NOW = "2026-11-23T18:30:00Z"


@pytest.fixture(scope="module")
async def store(postgres_server: PostgresServer) -> AsyncIterator[DecisionStore]:
    await upgrade_async(postgres_server.url)
    store = DecisionStore.from_url(postgres_server.url, f"api-test-{uuid.uuid4().hex[:12]}")
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture(scope="module")
async def client(postgres_server: PostgresServer, store: DecisionStore) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(database_url=postgres_server.url, token=SecretStr(TOKEN), cluster=store.cluster)
    bus = InMemoryBus()
    # the live cluster state has the NodePool the holds test pauses (a hold on an unknown pool is refused)
    for doc in SCENARIO_DOCS:
        if doc["kind"] == "NodePool":
            await bus.publish(TOPIC_CLUSTER_OBJECTS, cluster_object(doc))
    app = create_app(settings, store, bus=bus)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://decisions-api") as c:
        await eventually("ready", lambda: _ready(c, ""))
        yield c


async def test_auth_probes_metrics_docs(client: httpx.AsyncClient) -> None:
    for method, path in (("GET", "/v1/holds"), ("GET", "/v1/decisions"), ("POST", "/v1/plan"),
                         ("POST", "/v1/holds"), ("DELETE", "/v1/holds/x"), ("GET", "/v1/decisions/x"),
                         ("GET", "/v1/nodes/x/explain"), ("GET", "/v1/nodepools/x/budgets"), ("GET", "/v1/events")):
        missing = await client.request(method, path)
        assert missing.status_code == 401, (method, path, missing.text)
        assert missing.headers["www-authenticate"] == "Bearer"
        wrong = await client.request(method, path, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401, (method, path, wrong.text)
    basic = await client.get("/v1/holds", headers={"Authorization": "Basic dXNlcjpwYXNz"})
    assert basic.status_code == 401

    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready", "conflicts": []}

    assert (await client.get("/v1/holds", headers=AUTH)).status_code == 200
    metrics = await client.get("/metrics")
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    assert 'ebb_api_requests_total{method="GET",route="/v1/holds",status="401"}' in text
    assert 'ebb_api_requests_total{method="GET",route="/v1/holds",status="200"} 1.0' in text
    assert 'ebb_api_requests_total{method="GET",route="/v1/decisions/{decision_id}",status="401"}' in text
    assert 'ebb_api_request_duration_seconds_bucket{le="0.005",method="GET",route="/healthz"}' in text
    assert "ebb_api_request_duration_seconds_count" in text

    docs = await client.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
    openapi = (await client.get("/openapi.json")).json()
    assert {"/v1/plan", "/v1/holds", "/v1/holds/{hold_id}", "/v1/decisions", "/v1/decisions/{decision_id}",
            "/v1/nodes/{name}/explain", "/v1/nodepools/{name}/budgets", "/v1/events"} <= set(openapi["paths"])


async def test_plan_equals_the_cli_json(client: httpx.AsyncClient) -> None:
    text = SCENARIO_TEXT
    now = datetime.fromisoformat(NOW)
    snapshot = load_snapshot([str(SCENARIO)])
    expected = json.loads(json.dumps(plan_json(make_plan(snapshot, now))))
    assert expected["commands"], "the scenario is meant to produce a command"

    for content_type in ("application/yaml", "text/plain"):
        response = await client.post("/v1/plan", params={"now": NOW}, content=text,
                                     headers={**AUTH, "Content-Type": content_type})
        assert response.status_code == 200, response.text
        assert response.json() == expected

    stable = json.loads(json.dumps(plan_json(make_plan(snapshot, now, until_stable=True,
                                                       options=EngineOptions(spot_to_spot=True)))))
    response = await client.post("/v1/plan", params={"now": NOW, "untilStable": "true", "spotToSpot": "true"},
                                 content=text, headers={**AUTH, "Content-Type": "application/yaml"})
    assert response.status_code == 200, response.text
    assert response.json() == stable and "steps" in stable

    # JSON: an array of documents, and an envelope carrying the options in the body
    import yaml

    documents = [d for d in yaml.safe_load_all(text) if d]
    response = await client.post("/v1/plan", params={"now": NOW}, json=documents, headers=AUTH)
    assert response.json() == expected
    response = await client.post("/v1/plan", json={"documents": documents, "now": NOW, "untilStable": True,
                                                   "spotToSpot": True}, headers=AUTH)
    assert response.json() == stable


async def test_plan_rejects_bad_input_naming_the_field(client: httpx.AsyncClient) -> None:
    yaml_headers = {**AUTH, "Content-Type": "application/yaml"}
    bad_node = SCENARIO_TEXT.replace("cpu: '8'", "cpu: 'eight'", 1)
    response = await client.post("/v1/plan", params={"now": NOW}, content=bad_node, headers=yaml_headers)
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["type"] == "snapshot_error"
    assert error["document"] == "Node big" and error["field"].startswith("status.capacity")
    assert error["loc"] == ["body", "Node big", error["field"]]

    response = await client.post("/v1/plan", content="kind: [unclosed", headers=yaml_headers)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body"]
    assert "not valid YAML" in response.json()["detail"][0]["msg"]

    response = await client.post("/v1/plan", params={"now": "yesterday"}, content="{}", headers=yaml_headers)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "now"]

    response = await client.post("/v1/plan", json={"documents": [], "until": True}, headers=AUTH)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "until"]

    response = await client.post("/v1/plan", json=[{"apiVersion": "v1", "kind": "Node", "metadata": {}}],
                                 headers=AUTH)
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == "metadata.name"


async def test_holds(client: httpx.AsyncClient) -> None:
    soon = datetime.now(UTC) + timedelta(hours=2)
    created = []
    for body in (
        {"scope": "cluster", "reason": "quarter close", "expiresAt": soon.isoformat()},
        {"scope": "nodePool", "target": "default", "reason": "load test"},
        {"scope": "node", "target": "big", "reason": "debugging", "expiresAt": soon.isoformat()},
    ):
        response = await client.post("/v1/holds", json=body, headers=AUTH)
        assert response.status_code == 201, response.text
        hold = response.json()
        assert hold["scope"] == body["scope"] and hold["target"] == body.get("target")
        assert hold["reason"] == body["reason"] and hold["active"] is True and hold["kind"] == "manual"
        created.append(hold)
    assert created[1]["expiresAt"] is None
    assert datetime.fromisoformat(created[0]["expiresAt"]) == soon

    listed = (await client.get("/v1/holds", headers=AUTH)).json()["items"]
    assert [h["id"] for h in listed] == [h["id"] for h in created]

    # an expired hold (written directly: the API refuses past expiries) shows only on request
    store: DecisionStore = client._transport.app.state.store  # type: ignore[attr-defined]
    past = datetime.now(UTC) - timedelta(minutes=1)
    old = await store.create_hold(scope_kind="node", scope="gone", reason="old", expires_at=past,
                                  now=past - timedelta(hours=1))
    assert old.id not in {h["id"] for h in (await client.get("/v1/holds", headers=AUTH)).json()["items"]}
    everything = (await client.get("/v1/holds", params={"includeExpired": "true"}, headers=AUTH)).json()["items"]
    assert {h["id"]: h["active"] for h in everything}[old.id] is False
    assert len(everything) == 4

    assert (await client.delete(f"/v1/holds/{created[1]['id']}", headers=AUTH)).status_code == 204
    assert (await client.delete(f"/v1/holds/{created[1]['id']}", headers=AUTH)).status_code == 404
    listed = (await client.get("/v1/holds", headers=AUTH)).json()["items"]
    assert [h["id"] for h in listed] == [created[0]["id"], created[2]["id"]]

    def field_of(response: httpx.Response) -> list[Any]:
        assert response.status_code == 422, response.text
        return [e["loc"] for e in response.json()["detail"]]

    future = soon.isoformat()
    cases: list[tuple[dict[str, Any], list[Any]]] = [
        ({"scope": "pool", "target": "x", "reason": "r"}, ["body", "scope"]),
        ({"scope": "node", "reason": "r"}, ["body", "target"]),
        ({"scope": "nodePool", "target": "no-such-pool", "reason": "r"}, ["body", "target"]),
        ({"scope": "nodePool", "target": "", "reason": "r"}, ["body", "target"]),
        ({"scope": "cluster", "target": "x", "reason": "r"}, ["body", "target"]),
        ({"scope": "cluster", "reason": ""}, ["body", "reason"]),
        ({"scope": "cluster"}, ["body", "reason"]),
        ({"scope": "cluster", "reason": "r", "expiresAt": "tomorrow"}, ["body", "expiresAt"]),
        ({"scope": "cluster", "reason": "r", "expiresAt": "2030-01-01T00:00:00"}, ["body", "expiresAt"]),
        ({"scope": "cluster", "reason": "r", "expiresAt": past.isoformat()}, ["body", "expiresAt"]),
        ({"scope": "cluster", "reason": "r", "expiresAt": future, "owner": "me"}, ["body", "owner"]),
    ]
    for body, loc in cases:
        assert loc in field_of(await client.post("/v1/holds", json=body, headers=AUTH)), body
    assert len((await client.get("/v1/holds", headers=AUTH)).json()["items"]) == 2


async def test_decisions_filters_pages_and_timeline(client: httpx.AsyncClient, store: DecisionStore) -> None:
    base = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    states = ["proposed", "approved", "executing", "succeeded", "failed"]
    methods = ["emptiness", "single-node-consolidation", "drift"]
    reasons = {"emptiness": "Empty", "single-node-consolidation": "Underutilized", "drift": "Drifted"}
    ids = []
    for i in range(25):
        method = methods[i % 3]
        pool = "spot" if i % 2 else "default"
        decision_id = f"d-{i:02d}-{uuid.uuid4().hex[:6]}"
        ids.append(decision_id)
        await store.add_decision(
            decision_id=decision_id,
            method=method,
            reason=reasons[method],
            action="delete" if method == "emptiness" else "replace",
            nodes=[{"name": f"node-{i}", "nodePool": pool, "instanceType": "m5.large"}],
            replacements=[] if method == "emptiness" else [{"nodePool": pool, "instanceTypes": ["m5.large"]}],
            savings=0.0125 * i,
            state=states[i % 5],
            # two decisions share each timestamp, so the cursor must break ties by id
            created_at=base + timedelta(minutes=i // 2),
            explanation={"why": f"decision {i}"},
        )
    newest_first = sorted(ids, key=lambda d: (base + timedelta(minutes=int(d[2:4]) // 2), d), reverse=True)

    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 7}
        if cursor:
            params["cursor"] = cursor
        page = (await client.get("/v1/decisions", params=params, headers=AUTH)).json()
        pages += 1
        seen += [d["id"] for d in page["items"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == newest_first and pages == 4

    async def ids_for(**params: Any) -> list[str]:
        response = await client.get("/v1/decisions", params={"limit": 500, **params}, headers=AUTH)
        assert response.status_code == 200, response.text
        return [d["id"] for d in response.json()["items"]]

    assert await ids_for(state="failed") == [d for d in newest_first if int(d[2:4]) % 5 == 4]
    assert await ids_for(method="drift") == [d for d in newest_first if int(d[2:4]) % 3 == 2]
    assert await ids_for(reason="Empty") == [d for d in newest_first if int(d[2:4]) % 3 == 0]
    assert await ids_for(nodepool="spot") == [d for d in newest_first if int(d[2:4]) % 2 == 1]
    assert await ids_for(node="node-7") == [ids[7]]
    assert await ids_for(node="node-99") == []
    assert await ids_for(since=(base + timedelta(minutes=10)).isoformat()) == newest_first[:5]
    assert await ids_for(method="drift", nodepool="default") == [
        d for d in newest_first if int(d[2:4]) % 3 == 2 and int(d[2:4]) % 2 == 0
    ]
    filtered = (await client.get("/v1/decisions", params={"nodepool": "spot", "limit": 5}, headers=AUTH)).json()
    more = (await client.get("/v1/decisions", params={"nodepool": "spot", "limit": 5,
                                                      "cursor": filtered["nextCursor"]}, headers=AUTH)).json()
    assert [d["id"] for d in filtered["items"] + more["items"]] == (await ids_for(nodepool="spot"))[:10]

    for params, loc in (({"limit": 501}, ["query", "limit"]), ({"limit": 0}, ["query", "limit"]),
                        ({"state": "done"}, ["query", "state"]), ({"cursor": "not-a-cursor"}, ["query", "cursor"]),
                        ({"since": "last week"}, ["query", "since"])):
        response = await client.get("/v1/decisions", params=params, headers=AUTH)
        assert response.status_code == 422, params
        assert response.json()["detail"][0]["loc"] == loc

    target = ids[6]
    for n, kind in enumerate(("Proposed", "Approved", "Tainted", "Evicted", "Terminated")):
        await store.add_decision_event(decision_id=target, event_id=f"{target}-e{n}", type=kind,
                                       at=base + timedelta(minutes=3, seconds=10 * n),
                                       node="node-6" if n >= 2 else None, detail={"step": n})
    detail = (await client.get(f"/v1/decisions/{target}", headers=AUTH)).json()
    assert detail["id"] == target and detail["state"] == "approved" and detail["method"] == "emptiness"
    assert detail["savingsPerHour"] == pytest.approx(0.075)
    assert detail["nodes"] == [{"name": "node-6", "nodePool": "default", "instanceType": "m5.large"}]
    assert detail["explanation"] == {"why": "decision 6"}
    assert datetime.fromisoformat(detail["createdAt"]) == base + timedelta(minutes=3)
    assert [e["type"] for e in detail["timeline"]] == ["Proposed", "Approved", "Tainted", "Evicted", "Terminated"]
    assert detail["timeline"][2] == {"type": "Tainted", "at": "2026-11-20T12:03:20Z", "node": "node-6",
                                     "eventId": f"{target}-e2", "detail": {"step": 2}}
    assert (await client.get(f"/v1/decisions/{ids[0]}", headers=AUTH)).json()["timeline"] == []
    missing = await client.get("/v1/decisions/d-unknown", headers=AUTH)
    assert missing.status_code == 404 and "d-unknown" in missing.json()["detail"]


# -- the live state on real Kafka ------------------------------------------------------------------------------


async def _ready(client: httpx.AsyncClient, base: str) -> bool:
    return (await client.get(f"{base}/readyz")).status_code == 200


def cluster_object(doc: dict[str, Any]) -> ClusterObject:
    meta = doc["metadata"]
    return ClusterObject(kind=doc["kind"], namespace=meta.get("namespace", ""), name=meta["name"],
                         resource_version="1", object=doc)


def disruption_event(node: str, phase: str = "Tainted", decision: str = "dec-kafka") -> DisruptionEvent:
    return DisruptionEvent(decision_id=decision, node=node, phase=phase, message=f"{phase} {node}",  # type: ignore[arg-type]
                           at=datetime(2026, 11, 23, 18, 31, tzinfo=UTC))


def frame(e: DisruptionEvent) -> str:
    return f"id: {e.id}\nevent: {e.phase}\ndata: {e.model_dump_json()}\n\n"


class Stream:
    """An open GET /v1/events response, read frame by frame (a frame ends with a blank line)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._chunks = response.aiter_text()
        self._buffer = ""

    async def event_frame(self, within: float = 20.0) -> str:
        """The next frame that is not a keep-alive comment."""
        async with asyncio.timeout(within):
            while True:
                while "\n\n" not in self._buffer:
                    self._buffer += await anext(self._chunks)
                text, self._buffer = self._buffer.split("\n\n", 1)
                if not text.startswith(": keep-alive"):
                    return text + "\n\n"


@contextlib.asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[str]:
    """The app in a real uvicorn server (lifespan on) on a free port of 127.0.0.1; yields its base URL."""
    # sse-starlette ends every stream of the process once any uvicorn server saw a signal: not this one's
    AppStatus.should_exit = False
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning", timeout_graceful_shutdown=5))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async def started() -> bool:
            if task.done():
                task.result()
                raise AssertionError("uvicorn stopped")
            return server.started

        await eventually("uvicorn started", started)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 30)
        sock.close()


class KafkaApi:
    """The API on real Kafka (its own KafkaBus from the settings) and PostgreSQL, served by uvicorn."""

    def __init__(self, base: str, prefix: str, bus: KafkaBus, kafka: KafkaServer) -> None:
        self.base = base
        self.prefix = prefix
        self.bus = bus
        self.kafka = kafka

    async def raw(self, topic: str, key: bytes, value: bytes) -> None:
        """A record that breaks the contract, straight to the broker."""
        producer = AIOKafkaProducer(bootstrap_servers=self.kafka.bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(self.prefix + topic, value=value, key=key,
                                         headers=[("ce_specversion", b"1.0")])
        finally:
            await producer.stop()

    async def dead_letters(self, topic: str, count: int) -> list[DeadLetter]:
        """The first ``count`` letters of ``<topic>.dlq``."""
        letters: list[DeadLetter] = []
        stop = asyncio.Event()

        async def collect(delivery: Delivery) -> None:
            if isinstance(delivery.message, DeadLetter):
                letters.append(delivery.message)
            if len(letters) >= count:
                stop.set()

        await asyncio.wait_for(self.bus.consume([f"{topic}.dlq"], f"dlq-reader-{uuid.uuid4().hex[:8]}", collect,
                                                stop=stop), 60)
        return letters


SCENARIO_DOCS = [d for d in yaml.safe_load_all(SCENARIO_TEXT) if d]


@pytest.fixture(scope="module")
async def kafka_api(kafka_server: KafkaServer, postgres_server: PostgresServer) -> AsyncIterator[KafkaApi]:
    # A cluster of its own in the store: the holds test_holds leaves behind (they expire two hours after the
    # wall clock) must not hold the nodes these tests explain at the fixed NOW.
    await upgrade_async(postgres_server.url)
    store = DecisionStore.from_url(postgres_server.url, f"api-kafka-{uuid.uuid4().hex[:12]}")
    prefix = f"api{uuid.uuid4().hex[:10]}."
    try:
        async with KafkaBus(kafka_server.bootstrap, prefix=prefix, poll_timeout=0.1) as bus:
            # before the API starts: the cluster (read at startup from the compacted topic) and an old event
            for doc in SCENARIO_DOCS:
                await bus.publish(TOPIC_CLUSTER_OBJECTS, cluster_object(doc))
            await bus.publish(TOPIC_DISRUPTION_EVENTS, disruption_event("big", phase="Proposed"))
            settings = Settings(database_url=postgres_server.url, token=SecretStr(TOKEN), cluster=store.cluster,
                                kafka_bootstrap=kafka_server.bootstrap, topic_prefix=prefix,
                                group=f"api-test-{prefix}", sse_keepalive_seconds=1)
            app = create_app(settings, store)
            async with serving(app) as base, httpx.AsyncClient(timeout=30) as client:
                await eventually("ready", lambda: _ready(client, base), within=60)
                yield KafkaApi(base, prefix, bus, kafka_server)
    finally:
        await store.close()


async def test_explain_on_objects_published_to_kafka(kafka_api: KafkaApi) -> None:
    async with httpx.AsyncClient(base_url=kafka_api.base, headers=AUTH, timeout=30) as client:
        nodes = [d["metadata"]["name"] for d in SCENARIO_DOCS if d["kind"] == "Node"]
        expected = json.loads(json.dumps(plan_json(make_plan(load_snapshot([str(SCENARIO)]),
                                                             datetime.fromisoformat(NOW)))))
        disrupted = {n for c in expected["commands"] for n in c["nodes"]}
        for name in nodes:
            response = await client.get(f"/v1/nodes/{name}/explain", params={"now": NOW})
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["disrupted"] is (name in disrupted), body
            if name in disrupted:
                assert body["command"]["nodes"] == next(c["nodes"] for c in expected["commands"]
                                                        if name in c["nodes"])
            else:
                assert body["blocked"] == next({"method": b["method"], "reason": b["reason"]}
                                               for b in expected["blocked"] if b["node"] == name)
        # the live plan is the CLI's plan of the same objects
        assert (await client.post("/v1/plan", params={"now": NOW})).json() == expected

        # an object published after the start is applied too
        extra = next(d for d in SCENARIO_DOCS if d["kind"] == "Node")
        extra = {**extra, "metadata": {**extra["metadata"], "name": "late-node"}}
        await kafka_api.bus.publish(TOPIC_CLUSTER_OBJECTS, cluster_object(extra))

        async def explained() -> dict[str, Any] | None:
            response = await client.get("/v1/nodes/late-node/explain", params={"now": NOW})
            return response.json() if response.status_code == 200 else None

        late = await eventually("the late node applied", explained)
        assert late["node"] == "late-node"
        pool = late["nodePool"]
        budgets = await client.get(f"/v1/nodepools/{pool}/budgets", params={"now": NOW})
        assert budgets.status_code == 200 and budgets.json()["nodes"]["total"] == len(nodes) + 1
        assert (await client.get("/v1/nodes/nowhere/explain", params={"now": NOW})).status_code == 404


async def test_events_from_kafka_reach_subscribers(kafka_api: KafkaApi) -> None:
    async with httpx.AsyncClient(timeout=30) as client, \
            client.stream("GET", f"{kafka_api.base}/v1/events", headers=AUTH) as everything, \
            client.stream("GET", f"{kafka_api.base}/v1/events", params={"node": "small"}, headers=AUTH) as filtered:
        assert everything.status_code == 200 and filtered.status_code == 200
        assert everything.headers["content-type"] == "text/event-stream"
        sent = [disruption_event("big"), disruption_event("small", phase="Evicted")]
        for e in sent:
            await kafka_api.bus.publish(TOPIC_DISRUPTION_EVENTS, e)
        stream = Stream(everything)
        # the old event published before the start never comes; per node in order, across nodes in any order
        assert {await stream.event_frame() for _ in sent} == {frame(e) for e in sent}
        assert await Stream(filtered).event_frame() == frame(sent[1])


async def test_malformed_records_go_to_the_dlq_and_the_api_keeps_serving(kafka_api: KafkaApi) -> None:
    await kafka_api.raw(TOPIC_CLUSTER_OBJECTS, b"Node//garbage", b"{not a cloudevent")
    await kafka_api.raw(TOPIC_DISRUPTION_EVENTS, b"big", b"[1, 2]")
    (objects_letter,) = await kafka_api.dead_letters(TOPIC_CLUSTER_OBJECTS, 1)
    assert objects_letter.topic == TOPIC_CLUSTER_OBJECTS and objects_letter.cause == "malformed"
    (events_letter,) = await kafka_api.dead_letters(TOPIC_DISRUPTION_EVENTS, 1)
    assert events_letter.topic == TOPIC_DISRUPTION_EVENTS and events_letter.cause == "malformed"

    async with httpx.AsyncClient(timeout=30) as client:
        assert await _ready(client, kafka_api.base)
        async with client.stream("GET", f"{kafka_api.base}/v1/events", params={"decision": "dec-after"},
                                 headers=AUTH) as response:
            after = disruption_event("big", decision="dec-after")
            await kafka_api.bus.publish(TOPIC_DISRUPTION_EVENTS, after)
            assert await Stream(response).event_frame() == frame(after)
        explained = await client.get(f"{kafka_api.base}/v1/nodes/big/explain", params={"now": NOW}, headers=AUTH)
        assert explained.status_code == 200

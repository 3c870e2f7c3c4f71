"""decisions-api without PostgreSQL and Kafka: settings, startup checks, readiness, the plan endpoint's worker
thread and size limit, the store paths on SQLite (embedded mode's database), and the live state on the
InMemoryBus: explanations, budgets and plans on the objects of ebb.cluster.objects, server-sent events of
ebb.disruption.events (exact wire format, filters, keep-alive, a slow subscriber, disconnects), malformed
records dead-lettered while the API keeps serving, and ``python -m ebb_decisions_api`` stopping on SIGTERM.
The SSE tests run the app in a real uvicorn server on a free port (httpx's ASGI transport buffers whole
responses). The PostgreSQL and Kafka behaviour is covered in tests/integration/test_decisions_api.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from pydantic import SecretStr
from sse_starlette.sse import AppStatus

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.snapshot_files import load_snapshot
from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.migrate import upgrade_async
from ebb.contracts import (
    TOPIC_CLUSTER_OBJECTS,
    TOPIC_DISRUPTION_EVENTS,
    DeadLetter,
    DisruptionEvent,
    from_kafka,
)
from ebb.core.plan import make_plan, only_nodes, plan_json
from ebb_decisions_api.app import create_app
from ebb_decisions_api.events import EventHub
from ebb_decisions_api.routes import plan as plan_route
from ebb_decisions_api.settings import Settings
from tests.kit.decisions_api import AUTH, SCENARIOS, TOKEN, documents, publish, running
from tests.kit.waiting import eventually

#: nothing listens on port 1: every query fails at once
UNREACHABLE = "postgresql+asyncpg://ebb@127.0.0.1:1/ebb"
NOW = "2026-11-23T18:30:00Z"


def _client(settings: Settings, store: DecisionStore | None = None) -> httpx.AsyncClient:
    """A client of an app whose lifespan does not run (no consumers): the store paths only."""
    app = create_app(settings, store, bus=InMemoryBus())
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api")


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EBB_DECISIONS_API_TOKEN", "s3cret")
    monkeypatch.setenv("EBB_DECISIONS_API_DATABASE_URL", "postgresql://ebb@db:5432/ebb")
    monkeypatch.setenv("EBB_DECISIONS_API_PORT", "9000")
    monkeypatch.setenv("EBB_DECISIONS_API_HOST", "127.0.0.1")
    monkeypatch.setenv("EBB_DECISIONS_API_CLUSTER", "prod-eu")
    settings = Settings()
    assert settings.token is not None and settings.token.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(settings)
    assert (settings.database_url, settings.port, settings.host, settings.cluster) == (
        "postgresql://ebb@db:5432/ebb", 9000, "127.0.0.1", "prod-eu")


def test_a_token_is_required() -> None:
    with pytest.raises(ValueError, match="TOKEN"):
        create_app(Settings(token=None, database_url=UNREACHABLE))
    with pytest.raises(ValueError, match="TOKEN"):
        create_app(Settings(token=SecretStr(""), database_url=UNREACHABLE))
    env = {k: v for k, v in os.environ.items() if not k.startswith("EBB_DECISIONS_API_")}
    result = subprocess.run([sys.executable, "-m", "ebb_decisions_api"], env=env, capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 2 and "EBB_DECISIONS_API_TOKEN" in result.stderr


async def test_not_ready_while_the_database_is_down() -> None:
    store = DecisionStore.from_url(UNREACHABLE)
    try:
        async with _client(Settings(token=SecretStr(TOKEN), database_url=UNREACHABLE), store) as client:
            assert (await client.get("/healthz")).status_code == 200
            ready = await client.get("/readyz")
            assert ready.status_code == 503
            body = ready.json()
            assert body["status"] == "unavailable" and body["database"]
            assert (body["snapshot"], body["events"]) == ("loading", "starting")
    finally:
        await store.close()


async def test_requests_are_counted_by_their_route_template() -> None:
    """The request metrics name the matched route's full template (``/v1/...``, ids left out), whichever router
    the route is in; a path no route serves is ``unmatched``."""
    store = DecisionStore.from_url(UNREACHABLE)
    try:
        async with _client(Settings(token=SecretStr(TOKEN), database_url=UNREACHABLE), store) as client:
            assert (await client.get("/healthz")).status_code == 200
            assert (await client.get("/v1/decisions/dec-1")).status_code == 401
            assert (await client.get("/v1/nodepools/default/budgets")).status_code == 401
            assert (await client.request("OPTIONS", "/v1/holds", headers=AUTH)).status_code == 405
            assert (await client.get("/v2/nothing")).status_code == 404
            metrics = (await client.get("/metrics")).text
    finally:
        await store.close()
    counted = {line.rsplit(" ", 1)[0] for line in metrics.splitlines() if line.startswith("ebb_api_requests_total{")}
    assert counted == {
        'ebb_api_requests_total{method="GET",route="/healthz",status="200"}',
        'ebb_api_requests_total{method="GET",route="/v1/decisions/{decision_id}",status="401"}',
        'ebb_api_requests_total{method="GET",route="/v1/nodepools/{name}/budgets",status="401"}',
        'ebb_api_requests_total{method="OPTIONS",route="/v1/holds",status="405"}',
        'ebb_api_requests_total{method="GET",route="unmatched",status="404"}',
    }


async def test_plan_runs_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    started, release = threading.Event(), threading.Event()

    def slow_plan(*args: Any) -> dict[str, Any]:
        started.set()
        assert release.wait(10)
        return {"now": "x", "commands": [], "blocked": [], "budgets": [], "cost": {"before": 0.0, "after": 0.0}}

    monkeypatch.setattr(plan_route, "run_plan", slow_plan)
    store = DecisionStore.from_url(UNREACHABLE)
    try:
        async with _client(Settings(token=SecretStr(TOKEN), database_url=UNREACHABLE), store) as client:
            planning = asyncio.create_task(client.post("/v1/plan", content="kind: List\nitems: []\n",
                                                       headers={**AUTH, "Content-Type": "application/yaml"}))
            assert await asyncio.to_thread(started.wait, 10)
            # the plan is still running in its thread, and the loop answers other requests
            assert (await client.get("/healthz")).status_code == 200
            assert not planning.done()
            release.set()
            response = await planning
            assert response.status_code == 200 and response.json()["commands"] == []
    finally:
        release.set()
        await store.close()


async def test_plan_size_limit_and_content_type() -> None:
    store = DecisionStore.from_url(UNREACHABLE)
    settings = Settings(token=SecretStr(TOKEN), database_url=UNREACHABLE, max_plan_bytes=1024)
    try:
        async with _client(settings, store) as client:
            big = await client.post("/v1/plan", content="#" * 2048, headers={**AUTH, "Content-Type": "text/plain"})
            assert big.status_code == 413
            odd = await client.post("/v1/plan", content=b"x", headers={**AUTH, "Content-Type": "image/png"})
            assert odd.status_code == 422 and odd.json()["detail"][0]["loc"] == ["header", "content-type"]
            # no snapshot in the body: a plan on the live state, which is not loaded (no lifespan here)
            empty = await client.post("/v1/plan", content=b"", headers={**AUTH, "Content-Type": "text/plain"})
            assert empty.status_code == 503 and "loading" in empty.json()["detail"]
    finally:
        await store.close()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[DecisionStore]:
    url = f"sqlite:///{tmp_path / 'ebb.db'}"
    await upgrade_async(url)
    store = DecisionStore.from_url(url, "embedded")
    try:
        yield store
    finally:
        await store.close()


async def test_holds_and_decisions_on_sqlite(sqlite_store: DecisionStore) -> None:
    store = sqlite_store
    async with running(Settings(token=SecretStr(TOKEN), database_url="sqlite://"), store, InMemoryBus()) as (_, client):
        await eventually("ready", lambda: _ready(client))
        hold = (await client.post("/v1/holds", json={"scope": "node", "target": "n1", "reason": "r"},
                                  headers=AUTH)).json()
        assert [h["id"] for h in (await client.get("/v1/holds", headers=AUTH)).json()["items"]] == [hold["id"]]
        assert (await client.delete(f"/v1/holds/{hold['id']}", headers=AUTH)).status_code == 204

        base = datetime(2026, 11, 20, tzinfo=UTC)
        for i in range(6):
            nodes: list[Any] = [{"name": f"n{i}", "nodePool": "spot" if i % 2 else "default"}]
            await store.add_decision(decision_id=f"d{i}", method="emptiness", reason="Empty", action="delete",
                                     nodes=nodes if i != 5 else ["n5"], replacements=[], created_at=base
                                     + timedelta(minutes=i // 2), state="proposed")
        await store.add_decision_event(decision_id="d1", event_id="e1", type="Proposed", at=base)
        first = (await client.get("/v1/decisions", params={"limit": 4}, headers=AUTH)).json()
        rest = (await client.get("/v1/decisions", params={"cursor": first["nextCursor"]}, headers=AUTH)).json()
        assert [d["id"] for d in first["items"] + rest["items"]] == ["d5", "d4", "d3", "d2", "d1", "d0"]
        assert rest["nextCursor"] is None
        spot = (await client.get("/v1/decisions", params={"nodepool": "spot"}, headers=AUTH)).json()["items"]
        assert [d["id"] for d in spot] == ["d3", "d1"]
        for node, expected in (("n2", ["d2"]), ("n5", ["d5"])):
            items = (await client.get("/v1/decisions", params={"node": node}, headers=AUTH)).json()["items"]
            assert [d["id"] for d in items] == expected
        detail = (await client.get("/v1/decisions/d1", headers=AUTH)).json()
        assert detail["createdAt"] == "2026-11-20T00:00:00Z"
        assert [e["type"] for e in detail["timeline"]] == ["Proposed"]


# -- the live state on the InMemoryBus ------------------------------------------------------------------------


async def _ready(client: httpx.AsyncClient) -> bool:
    return (await client.get("/readyz")).status_code == 200


def event(node: str, phase: str = "Tainted", decision: str = "dec-1", message: str = "tainted") -> DisruptionEvent:
    return DisruptionEvent(decision_id=decision, node=node, phase=phase, message=message,  # type: ignore[arg-type]
                           at=datetime(2026, 11, 23, 18, 30, 5, tzinfo=UTC))


def frame(e: DisruptionEvent) -> str:
    """The wire contract of one event on GET /v1/events."""
    return f"id: {e.id}\nevent: {e.phase}\ndata: {e.model_dump_json()}\n\n"


@contextlib.asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[str]:
    """The app in a real uvicorn server (lifespan on) on a free port of 127.0.0.1; yields its base URL."""
    # sse-starlette ends every stream of the process once any uvicorn server saw a signal: not this one's
    AppStatus.should_exit = False
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning", timeout_graceful_shutdown=5))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await eventually("uvicorn started", lambda: _started(server, task))
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 15)
        sock.close()


async def _started(server: uvicorn.Server, task: asyncio.Task[None]) -> bool:
    if task.done():
        task.result()
        raise AssertionError("uvicorn stopped")
    return server.started


class Stream:
    """An open GET /v1/events response, read frame by frame (a frame ends with a blank line)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._chunks = response.aiter_text()
        self._buffer = ""
        self.ended = False

    async def frame(self, within: float = 5.0) -> str | None:
        """The next frame (with its blank line), or None when the server ended the stream."""
        async with asyncio.timeout(within):
            while "\n\n" not in self._buffer:
                try:
                    self._buffer += await anext(self._chunks)
                except StopAsyncIteration:
                    self.ended = True
                    return None
        text, self._buffer = self._buffer.split("\n\n", 1)
        return text + "\n\n"

    async def event_frame(self, within: float = 5.0) -> str | None:
        """The next frame that is not a keep-alive comment."""
        while True:
            text = await self.frame(within)
            if text is None or not text.startswith(": keep-alive"):
                return text


@contextlib.asynccontextmanager
async def subscribe(client: httpx.AsyncClient, base: str, **params: str) -> AsyncIterator[Stream]:
    async with client.stream("GET", f"{base}/v1/events", params=params, headers=AUTH) as response:
        assert response.status_code == 200
        yield Stream(response)


@pytest.fixture
async def live_app(sqlite_store: DecisionStore) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient, InMemoryBus]]:
    bus = InMemoryBus()
    await publish(bus, documents("empty-node.yaml"))
    settings = Settings(token=SecretStr(TOKEN), database_url="sqlite://", cluster=sqlite_store.cluster)
    async with running(settings, sqlite_store, bus) as (app, client):
        await eventually("ready", lambda: _ready(client))
        yield app, client, bus


async def test_not_ready_until_the_snapshot_is_loaded(sqlite_store: DecisionStore) -> None:
    bus = InMemoryBus()
    app = create_app(Settings(token=SecretStr(TOKEN), database_url="sqlite://"), sqlite_store, bus=bus)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        before = await client.get("/readyz")
        assert before.status_code == 503 and before.json()["snapshot"] == "loading"
        assert "database" not in before.json()
        explain = await client.get("/v1/nodes/idle/explain", headers=AUTH)
        assert explain.status_code == 503 and "loading" in explain.json()["detail"]
        # the store's holds are listed, and the list says the cluster's Hold objects are not known yet
        stored = (await client.post("/v1/holds", json={"scope": "cluster", "reason": "early"}, headers=AUTH)).json()
        early = (await client.get("/v1/holds", headers=AUTH)).json()
        assert [h["id"] for h in early["items"]] == [stored["id"]] and early["clusterHolds"] == "loading"
        # a hold the store does not have may be a Hold object of the cluster: no 404 until the state says
        unknown = await client.delete("/v1/holds/kernel-upgrade", headers=AUTH)
        assert unknown.status_code == 503 and unknown.headers["retry-after"] == "5"
        assert "cluster state is loading" in unknown.json()["detail"]
        async with app.router.lifespan_context(app):
            await eventually("ready", lambda: _ready(client))
            assert (await client.get("/v1/holds", headers=AUTH)).json()["clusterHolds"] == "listed"
            assert (await client.delete("/v1/holds/kernel-upgrade", headers=AUTH)).status_code == 404
            metrics = (await client.get("/metrics")).text
            assert "ebb_api_snapshot_ready 1.0" in metrics
        # after shutdown the consumers are gone; nothing hangs


async def test_explain_a_disrupted_a_blocked_and_an_unknown_node(
        live_app: tuple[FastAPI, httpx.AsyncClient, InMemoryBus]) -> None:
    _, client, _ = live_app
    idle = await client.get("/v1/nodes/idle/explain", params={"now": NOW}, headers=AUTH)
    assert idle.status_code == 200, idle.text
    body = idle.json()
    assert body["node"] == "idle" and body["nodePool"] == "default" and body["now"] == NOW
    assert body["disrupted"] is True and body["blocked"] is None and body["state"] == "would-be-disrupted"
    assert body["command"]["method"] == "emptiness" and body["command"]["nodes"] == ["idle"]
    assert body["summary"].startswith("emptiness would delete it now (Empty)")
    assert [b["reason"] for b in body["budgets"]] == ["Expired", "Drifted", "Empty", "Underutilized"]
    assert {b["allowed"] for b in body["budgets"]} == {2}
    assert body["decisions"] == [] and body["liveDecision"] is None and body["holds"] == [] and body["paused"] is None

    busy = (await client.get("/v1/nodes/busy/explain", params={"now": NOW}, headers=AUTH)).json()
    assert busy["disrupted"] is False and busy["command"] is None and busy["state"] == "not-disrupted"
    assert busy["blocked"]["method"] == "single-node-consolidation"
    assert "do not fit on the other nodes" in busy["blocked"]["reason"]
    assert busy["summary"] == f"not disrupted now: {busy['blocked']['reason']}"

    assert (body["source"], body["pass"], body["cause"]) == ("on-demand", None, None)
    assert busy["source"] == "on-demand" and busy["cause"] == "no-replacement"

    missing = await client.get("/v1/nodes/nope/explain", params={"now": NOW}, headers=AUTH)
    assert missing.status_code == 404
    assert missing.json()["detail"] == "no node 'nope' in the live cluster state (2 nodes known)"
    # without a moment the answer is the leader planner's last pass, and no planner has published one here
    no_pass = await client.get("/v1/nodes/idle/explain", headers=AUTH)
    assert no_pass.status_code == 503 and no_pass.headers["Retry-After"] == "5"
    assert "no pass has been published yet" in no_pass.json()["detail"] and "?now=" in no_pass.json()["detail"]
    assert (await client.get("/v1/nodes/idle/explain")).status_code == 401
    bad = await client.get("/v1/nodes/idle/explain", params={"now": "soon"}, headers=AUTH)
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "now"]


async def test_a_hold_on_a_nodepool_the_cluster_does_not_have_is_refused(
        live_app: tuple[FastAPI, httpx.AsyncClient, InMemoryBus]) -> None:
    """It would pause nothing and say so nowhere (201 before): 422 naming the field and the known pools."""
    _, client, _ = live_app
    unknown = await client.post("/v1/holds", json={"scope": "nodePool", "target": "no-such-pool", "reason": "r"},
                                headers=AUTH)
    assert unknown.status_code == 422, unknown.text
    (detail,) = unknown.json()["detail"]
    assert detail["loc"] == ["body", "target"] and "no NodePool 'no-such-pool'" in detail["msg"]
    assert "known: default" in detail["msg"]
    known = await client.post("/v1/holds", json={"scope": "nodePool", "target": "default", "reason": "r"},
                              headers=AUTH)
    assert known.status_code == 201, known.text
    assert (await client.delete(f"/v1/holds/{known.json()['id']}", headers=AUTH)).status_code == 204


async def test_explain_sees_holds_and_live_decisions_from_the_store(
        live_app: tuple[FastAPI, httpx.AsyncClient, InMemoryBus], sqlite_store: DecisionStore) -> None:
    _, client, _ = live_app
    hold = (await client.post("/v1/holds", json={"scope": "node", "target": "idle", "reason": "debugging"},
                              headers=AUTH)).json()
    await client.post("/v1/holds", json={"scope": "node", "target": "busy", "reason": "other node"}, headers=AUTH)
    held = (await client.get("/v1/nodes/idle/explain", params={"now": NOW}, headers=AUTH)).json()
    assert held["disrupted"] is False
    assert f"hold {hold['id']}" in held["blocked"]["reason"] and "debugging" in held["blocked"]["reason"]
    assert held["paused"] is not None and "debugging" in held["paused"]
    assert [h["id"] for h in held["holds"]] == [hold["id"]]
    assert (await client.delete(f"/v1/holds/{hold['id']}", headers=AUTH)).status_code == 204

    await sqlite_store.add_decision(
        decision_id="dec-live", method="emptiness", reason="Empty", action="delete",
        nodes=[{"name": "idle", "nodePool": "default", "instanceType": "m5.large"}], replacements=[],
        created_at=datetime(2026, 11, 23, 18, 0, tzinfo=UTC), state="approved")
    await sqlite_store.add_decision(
        decision_id="dec-old", method="emptiness", reason="Empty", action="delete",
        nodes=[{"name": "idle", "nodePool": "default", "instanceType": "m5.large"}], replacements=[],
        created_at=datetime(2026, 11, 22, 18, 0, tzinfo=UTC), state="rejected")
    live = (await client.get("/v1/nodes/idle/explain", params={"now": NOW}, headers=AUTH)).json()
    assert live["disrupted"] is False and live["state"] == "being-disrupted"
    assert live["liveDecision"]["id"] == "dec-live" and live["liveDecision"]["state"] == "approved"
    assert live["summary"] == "decision dec-live (approved) is disrupting it: emptiness, Empty, delete"
    assert "already being disrupted" in live["blocked"]["reason"]
    assert [d["id"] for d in live["decisions"]] == ["dec-live", "dec-old"]
    # the live decision's node counts against the pool's budget
    budgets = (await client.get("/v1/nodepools/default/budgets", params={"now": NOW}, headers=AUTH)).json()
    assert budgets["nodes"] == {"total": 2, "disrupting": ["idle"], "notReady": []}
    assert {r["reason"]: r["allowed"] for r in budgets["reasons"]} == dict.fromkeys(
        ("Expired", "Drifted", "Empty", "Underutilized"), 1)


async def test_hold_objects_of_the_cluster_are_shown_beside_the_stores(
        live_app: tuple[FastAPI, httpx.AsyncClient, InMemoryBus]) -> None:
    """An ebb.sh/v1 Hold object on ebb.cluster.objects (the cluster-watcher watches them) pauses its node in the
    explanations and is listed with the store's holds as kind ``object``, created when the apiserver says; an
    expired one only with includeExpired; deleting one over the API is a 409 that says to use kubectl."""
    _, client, bus = live_app
    stored = (await client.post("/v1/holds", json={"scope": "node", "target": "busy", "reason": "over REST"},
                                headers=AUTH)).json()
    await publish(bus, [
        {"apiVersion": "ebb.sh/v1", "kind": "Hold",
         "metadata": {"name": "kernel-upgrade", "creationTimestamp": "2026-11-23T18:00:00Z"},
         "spec": {"scope": "node", "node": "idle", "reason": "kernel upgrade", "expiresAt": "2099-01-01T00:00:00Z"}},
        {"apiVersion": "ebb.sh/v1", "kind": "Hold", "metadata": {"name": "long-gone"},
         "spec": {"scope": "cluster", "reason": "last year", "expiresAt": "2020-01-01T00:00:00Z"}}])

    async def listed() -> list[dict[str, Any]] | None:
        items: list[dict[str, Any]] = (await client.get("/v1/holds", headers=AUTH)).json()["items"]
        return items if len(items) == 2 else None

    items = await eventually("the Hold object listed", listed)
    assert (await client.get("/v1/holds", headers=AUTH)).json()["clusterHolds"] == "listed"
    assert [(h["id"], h["kind"]) for h in items] == [(stored["id"], "manual"), ("kernel-upgrade", "object")]
    assert items[1] == {"id": "kernel-upgrade", "scope": "node", "target": "idle", "reason": "kernel upgrade",
                        "kind": "object", "createdBy": None, "createdAt": "2026-11-23T18:00:00Z",
                        "expiresAt": "2099-01-01T00:00:00Z", "active": True}
    every = (await client.get("/v1/holds", params={"includeExpired": "true"}, headers=AUTH)).json()["items"]
    gone = next(h for h in every if h["id"] == "long-gone")
    assert (gone["active"], gone["createdAt"], gone["scope"], gone["target"]) == (False, None, "cluster", None)

    held = (await client.get("/v1/nodes/idle/explain", params={"now": NOW}, headers=AUTH)).json()
    assert "hold kernel-upgrade" in held["blocked"]["reason"] and "kernel upgrade" in held["blocked"]["reason"]
    assert [h["id"] for h in held["holds"]] == ["kernel-upgrade"]
    busy = (await client.get("/v1/nodes/busy/explain", params={"now": NOW}, headers=AUTH)).json()
    assert [h["id"] for h in busy["holds"]] == [stored["id"]]

    refused = await client.delete("/v1/holds/kernel-upgrade", headers=AUTH)
    assert refused.status_code == 409 and "kubectl delete hold kernel-upgrade" in refused.json()["detail"]
    assert (await client.delete("/v1/holds/no-such-hold", headers=AUTH)).status_code == 404
    assert (await client.delete(f"/v1/holds/{stored['id']}", headers=AUTH)).status_code == 204


async def test_nodepool_budgets_with_schedule_windows(
        live_app: tuple[FastAPI, httpx.AsyncClient, InMemoryBus]) -> None:
    _, client, bus = live_app
    pool = next(d for d in documents("empty-node.yaml") if d["kind"] == "NodePool")
    pool["spec"]["disruption"]["budgets"] = [
        {"nodes": "100%"},
        {"nodes": "0", "schedule": "0 18 * * *", "duration": "2h", "reasons": ["Empty"]},
        {"nodes": "1", "schedule": "0 2 * * *", "duration": "1h"},
    ]
    await publish(bus, [pool])

    async def report() -> dict[str, Any] | None:
        body: dict[str, Any] = (await client.get("/v1/nodepools/default/budgets", params={"now": NOW},
                                                 headers=AUTH)).json()
        return body if len(body["budgets"]) == 3 else None

    body = await eventually("the new NodePool applied", report)
    assert body["nodePool"] == "default" and body["now"] == NOW
    assert body["nodes"] == {"total": 2, "disrupting": [], "notReady": []}
    allowed = {r["reason"]: r["allowed"] for r in body["reasons"]}
    assert allowed == {"Expired": 2, "Drifted": 2, "Empty": 0, "Underutilized": 2}
    always, evening, night = body["budgets"]
    assert always["active"] is True and always["limit"] == 2 and always["allowed"] == 2
    assert always["windowEnd"] is None and always["nextWindowStart"] is None
    assert evening["active"] is True and evening["reasons"] == ["Empty"]
    assert (evening["windowStart"], evening["windowEnd"]) == ("2026-11-23T18:00:00Z", "2026-11-23T20:00:00Z")
    # open now, and the next one tomorrow
    assert (evening["nextWindowStart"], evening["nextWindowEnd"]) == ("2026-11-24T18:00:00Z", "2026-11-24T20:00:00Z")
    assert night["active"] is False and night["allowed"] == 1
    assert (night["nextWindowStart"], night["nextWindowEnd"]) == ("2026-11-24T02:00:00Z", "2026-11-24T03:00:00Z")
    assert body["paused"] is None and body["holds"] == []

    # the explanation of the empty node says the budget stopped it
    idle = (await client.get("/v1/nodes/idle/explain", params={"now": NOW}, headers=AUTH)).json()
    assert idle["disrupted"] is False and "budget" in idle["blocked"]["reason"]

    missing = await client.get("/v1/nodepools/spot/budgets", headers=AUTH)
    assert missing.status_code == 404
    assert missing.json()["detail"] == "no NodePool 'spot' in the live cluster state (known: default)"

    # an invalid budget fails closed, and says why
    pool["spec"]["disruption"]["budgets"] = [{"nodes": "ten"}]
    await publish(bus, [pool])

    async def invalid() -> dict[str, Any] | None:
        body: dict[str, Any] = (await client.get("/v1/nodepools/default/budgets", params={"now": NOW},
                                                 headers=AUTH)).json()
        return body if len(body["budgets"]) == 1 else None

    body = await eventually("the invalid budget applied", invalid)
    assert {(r["allowed"], r["invalid"]) for r in body["reasons"]} == {(0, True)}
    (budget,) = body["budgets"]
    assert "not a count or a percentage" in budget["error"] and budget["limit"] is None and budget["active"] is False


async def test_plan_on_the_live_state_equals_the_cli(
        live_app: tuple[FastAPI, httpx.AsyncClient, InMemoryBus]) -> None:
    _, client, _ = live_app
    snapshot = load_snapshot([str(SCENARIOS / "empty-node.yaml")])
    now = datetime.fromisoformat(NOW)
    expected = json.loads(json.dumps(plan_json(make_plan(snapshot, now))))
    stable = json.loads(json.dumps(plan_json(make_plan(snapshot, now, until_stable=True))))
    assert expected["commands"]

    empty = await client.post("/v1/plan", params={"now": NOW}, headers=AUTH)
    assert empty.status_code == 200, empty.text
    assert empty.json() == expected
    envelope = await client.post("/v1/plan", json={"now": NOW, "untilStable": True}, headers=AUTH)
    assert envelope.status_code == 200, envelope.text
    assert envelope.json() == stable
    # ?node= cuts the plan as `ebb plan --node` does, on the live state and on an upload; an unknown node is a 422
    for name in (n.name for n in snapshot.nodes):
        want = json.loads(json.dumps(plan_json(only_nodes(make_plan(snapshot, now), snapshot, [name]))))
        cut = await client.post("/v1/plan", params={"now": NOW, "node": name}, headers=AUTH)
        assert cut.status_code == 200, cut.text
        assert cut.json() == want and {b["node"] for b in want["blocked"]} <= {name}
    uploaded_cut = await client.post("/v1/plan", params={"now": NOW, "node": "nope"},
                                     content=(SCENARIOS / "empty-node.yaml").read_bytes(),
                                     headers={**AUTH, "Content-Type": "application/yaml"})
    assert uploaded_cut.status_code == 422, uploaded_cut.text
    (detail,) = uploaded_cut.json()["detail"]
    assert detail["loc"] == ["query", "node"] and "no Node nope in the snapshot" in detail["msg"], detail
    # an uploaded snapshot is still planned as uploaded
    uploaded = await client.post("/v1/plan", params={"now": NOW}, json={"documents": []}, headers=AUTH)
    assert uploaded.status_code == 200 and uploaded.json()["commands"] == []
    # bad envelopes name the field
    for body, loc in (({"now": NOW, "untilStabel": True}, ["body", "untilStabel"]),
                      ({"now": "yesterday"}, ["body", "now"]),
                      ({"untilStable": "yes"}, ["body", "untilStable"])):
        response = await client.post("/v1/plan", json=body, headers=AUTH)
        assert response.status_code == 422, body
        assert response.json()["detail"][0]["loc"] == loc
    broken = await client.post("/v1/plan", content=b"{not json", headers={**AUTH, "Content-Type": "application/json"})
    assert broken.status_code == 422 and broken.json()["detail"][0]["loc"] == ["body"]
    # a request the simulator cannot hold (a plain-text 500 before) is a 422 naming the document and field
    huge = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "huge", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1e30"}}}]},
            "status": {"phase": "Pending"}}
    response = await client.post("/v1/plan", params={"now": NOW}, json=[huge], headers=AUTH)
    assert response.status_code == 422, response.text
    (detail,) = response.json()["detail"]
    assert "Pod default/huge" in json.dumps(detail) and "too large" in json.dumps(detail)
    holds = await client.post("/v1/holds", content=b"{not json", headers={**AUTH, "Content-Type": "application/json"})
    assert holds.status_code == 422 and holds.json()["detail"][0]["loc"][0] == "body"


async def test_malformed_records_are_dead_lettered_and_the_api_keeps_serving(
        live_app: tuple[FastAPI, httpx.AsyncClient, InMemoryBus]) -> None:
    app, client, bus = live_app
    bus.append(TOPIC_CLUSTER_OBJECTS, b"Node//garbage", b"{not a cloudevent", [("ce_specversion", b"1.0")])
    bus.append(TOPIC_DISRUPTION_EVENTS, b"idle", b"[]", [])

    async def dead_letters(topic: str) -> list[DeadLetter] | None:
        records = bus.records(f"{topic}.dlq")
        letters = [m for r in records if isinstance(m := from_kafka(f"{topic}.dlq", r.key, r.value, r.headers),
                                                    DeadLetter)]
        return letters or None

    (objects_letter,) = await eventually("the object dead-lettered", lambda: dead_letters(TOPIC_CLUSTER_OBJECTS))
    (events_letter,) = await eventually("the event dead-lettered", lambda: dead_letters(TOPIC_DISRUPTION_EVENTS))
    assert objects_letter.topic == TOPIC_CLUSTER_OBJECTS and objects_letter.cause == "malformed"
    assert events_letter.topic == TOPIC_DISRUPTION_EVENTS and events_letter.cause == "malformed"

    # still serving, and still applying what comes next
    assert (await client.get("/readyz")).status_code == 200
    node = next(d for d in documents("empty-node.yaml") if d["metadata"]["name"] == "idle")
    node = {**node, "metadata": {**node["metadata"], "name": "idle-2"}}
    await publish(bus, [node])

    async def explained() -> bool:
        return (await client.get("/v1/nodes/idle-2/explain", params={"now": NOW}, headers=AUTH)).status_code == 200

    await eventually("the next object applied", explained)
    assert app.state.events is not None


async def test_an_invalid_object_makes_the_live_endpoints_say_so(
        live_app: tuple[FastAPI, httpx.AsyncClient, InMemoryBus]) -> None:
    _, client, bus = live_app
    node = next(d for d in documents("empty-node.yaml") if d["metadata"]["name"] == "idle")
    broken = json.loads(json.dumps(node))
    broken["status"]["capacity"]["cpu"] = "eight"
    await publish(bus, [broken])

    async def unavailable() -> dict[str, Any] | None:
        response = await client.get("/v1/nodes/busy/explain", params={"now": NOW}, headers=AUTH)
        return response.json() if response.status_code == 503 else None

    detail = (await eventually("the invalid object applied", unavailable))["detail"]
    assert detail.startswith("the live cluster snapshot is invalid: Node idle") and "cpu" in detail
    assert (await client.post("/v1/plan", headers=AUTH)).status_code == 503
    # the store paths still answer, and fixing the object fixes the live ones
    holds = await client.get("/v1/holds", headers=AUTH)
    assert holds.status_code == 200 and holds.json() == {"items": [], "clusterHolds": "invalid"}
    assert (await client.delete("/v1/holds/kernel-upgrade", headers=AUTH)).status_code == 503
    await publish(bus, [node])

    async def explained() -> bool:
        return (await client.get("/v1/nodes/busy/explain", params={"now": NOW}, headers=AUTH)).status_code == 200

    await eventually("the fixed object applied", explained)


# -- GET /v1/events --------------------------------------------------------------------------------------------


@pytest.fixture
async def sse_app(sqlite_store: DecisionStore) -> AsyncIterator[tuple[FastAPI, str, InMemoryBus]]:
    bus = InMemoryBus()
    # history: published before the API started, never streamed
    await bus.publish(TOPIC_DISRUPTION_EVENTS, event("old", phase="Proposed", message="history"))
    settings = Settings(token=SecretStr(TOKEN), database_url="sqlite://", cluster=sqlite_store.cluster,
                        sse_keepalive_seconds=0.3, sse_queue_size=4)
    app = create_app(settings, sqlite_store, bus=bus)
    async with serving(app) as base, httpx.AsyncClient(timeout=10) as client:
        await eventually("ready", lambda: _ready_at(client, base))
        yield app, base, bus


async def _ready_at(client: httpx.AsyncClient, base: str) -> bool:
    return (await client.get(f"{base}/readyz")).status_code == 200


async def test_events_stream_the_exact_wire_format(sse_app: tuple[FastAPI, str, InMemoryBus]) -> None:
    app, base, bus = sse_app
    hub: EventHub = app.state.events
    async with httpx.AsyncClient(timeout=10) as client:
        unauthorised = await client.get(f"{base}/v1/events")
        assert unauthorised.status_code == 401
        async with subscribe(client, base) as stream:
            assert stream.response.headers["content-type"] == "text/event-stream"
            assert stream.response.headers["cache-control"] == "no-store"
            assert len(hub) == 1
            sent = [event("idle", phase="Tainted", message="tainted karpenter.sh/disrupted"),
                    event("idle", phase="Evicted", message="pod default/web-1 evicted\nsecond line")]
            for e in sent:
                await bus.publish(TOPIC_DISRUPTION_EVENTS, e)
            for e in sent:
                text = await stream.event_frame()
                assert text == frame(e)
                data = json.loads(text.split("data: ", 1)[1])
                assert set(data) == {"id", "decisionId", "node", "phase", "message", "at"}
                assert data["id"] == str(e.id) and data["decisionId"] == "dec-1"
                assert data["at"] == "2026-11-23T18:30:05Z"
            # idle: keep-alive comments
            assert await stream.frame(within=3) == ": keep-alive\n\n"
        # the client went away: its subscription is gone
        await eventually("the subscriber removed", lambda: _is(len(hub) == 0))
        metrics = (await client.get(f"{base}/metrics")).text
        assert "ebb_api_sse_events_total 2.0" in metrics and "ebb_api_sse_subscribers 0.0" in metrics


async def _is(value: bool) -> bool:
    return value


async def test_events_filters(sse_app: tuple[FastAPI, str, InMemoryBus]) -> None:
    _, base, bus = sse_app
    a1, b1, a2, b2 = (event("node-a", decision="dec-1"), event("node-b", decision="dec-1"),
                      event("node-a", decision="dec-2"), event("node-b", decision="dec-2"))
    async with httpx.AsyncClient(timeout=10) as client, subscribe(client, base, node="node-a") as by_node, \
            subscribe(client, base, decision="dec-2") as by_decision, \
            subscribe(client, base, node="node-b", decision="dec-1") as both, subscribe(client, base) as everything:
        for e in (a1, b1, a2, b2):
            await bus.publish(TOPIC_DISRUPTION_EVENTS, e)
        assert [await by_node.event_frame() for _ in range(2)] == [frame(a1), frame(a2)]
        assert [await by_decision.event_frame() for _ in range(2)] == [frame(a2), frame(b2)]
        assert await both.event_frame() == frame(b1)
        received = {await everything.event_frame() for _ in range(4)}
        assert received == {frame(e) for e in (a1, b1, a2, b2)}
        # nothing more for the filtered ones (the history event "old" never comes either)
        for stream in (by_node, by_decision, both):
            assert await stream.frame(within=2) == ": keep-alive\n\n"


async def test_a_slow_subscriber_is_closed_with_a_final_comment(sse_app: tuple[FastAPI, str, InMemoryBus]) -> None:
    app, base, bus = sse_app
    hub: EventHub = app.state.events
    async with httpx.AsyncClient(timeout=10) as client:
        async with subscribe(client, base) as slow, subscribe(client, base, node="elsewhere") as other:
            # six events at once, without yielding to the event loop: the queue (4) overflows on the fifth
            burst = [event("idle", message=f"step {i}") for i in range(6)]
            for e in burst:
                hub.publish(e)
            assert [await slow.event_frame() for _ in range(4)] == [frame(e) for e in burst[:4]]
            final = await slow.frame()
            assert final is not None and final.startswith(": closed: this subscriber fell too far behind")
            assert await slow.frame() is None and slow.ended
            # the other subscriber is still there and still served
            assert len(hub) == 1
            late = event("elsewhere")
            await bus.publish(TOPIC_DISRUPTION_EVENTS, late)
            assert await other.event_frame() == frame(late)
        metrics = (await client.get(f"{base}/metrics")).text
        assert "ebb_api_sse_overflows_total 1.0" in metrics


async def test_the_server_command_stops_on_sigterm(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ebb.db'}"
    await upgrade_async(url)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EBB_")}
    env.update({"EBB_DECISIONS_API_TOKEN": TOKEN, "EBB_DECISIONS_API_DATABASE_URL": url,
                "EBB_DECISIONS_API_HOST": "127.0.0.1", "EBB_DECISIONS_API_PORT": str(port),
                # no Kafka: the consumers retry in the background while the REST side serves the store
                "EBB_DECISIONS_API_KAFKA_BOOTSTRAP": "127.0.0.1:1", "EBB_DECISIONS_API_KAFKA_RETRY_MAX_SECONDS": "1"})
    process = await asyncio.create_subprocess_exec(sys.executable, "-m", "ebb_decisions_api", env=env,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:

            async def up() -> bool:
                with contextlib.suppress(httpx.TransportError):
                    return (await client.get("/healthz")).status_code == 200
                return False

            await eventually("the server up", up, within=30)
            ready = await client.get("/readyz")
            assert ready.status_code == 503 and ready.json()["snapshot"] == "loading"
            assert (await client.get("/v1/holds", headers=AUTH)).json() == {"items": [], "clusterHolds": "loading"}
            # an open event stream does not keep the server from stopping: it ends
            async with client.stream("GET", "/v1/events", headers=AUTH) as response:
                assert response.status_code == 200
                started = asyncio.get_running_loop().time()
                process.send_signal(signal.SIGTERM)
                received = ""
                async with asyncio.timeout(20):
                    async for text in response.aiter_text():
                        received += text
                assert received.endswith(": closed: the server is shutting down\n\n"), received
                assert asyncio.get_running_loop().time() - started < 10
        _, err = await asyncio.wait_for(process.communicate(), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    stderr = err.decode()
    assert process.returncode == 0, stderr
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert {"decisions-api started", "decisions-api stopped"} <= {line.get("event") for line in lines}, stderr


READ_TOKEN = "read-only-token"
READER = {"Authorization": f"Bearer {READ_TOKEN}"}


@pytest.mark.parametrize(("read_token", "problem"), [
    ("", "EBB_DECISIONS_API_READ_TOKEN must be unset or a token of its own"),
    (TOKEN, "EBB_DECISIONS_API_READ_TOKEN must be unset or a token of its own"),
])
def test_a_read_token_must_be_a_token_of_its_own(read_token: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        create_app(Settings(token=SecretStr(TOKEN), read_token=SecretStr(read_token), database_url=UNREACHABLE))


@pytest.mark.parametrize(("headers", "method", "path", "expected"), [
    # the read token reads: every GET, and the dry run
    (READER, "GET", "/v1/decisions", {200}),
    (READER, "GET", "/v1/holds", {200}),
    (READER, "POST", "/v1/plan", {200}),
    # ... and may not write: 403, the write token's routes named in the answer
    (READER, "POST", "/v1/holds", {403}),
    (READER, "DELETE", "/v1/holds/hold-1", {403}),
    # the write token does both
    (AUTH, "GET", "/v1/decisions", {200}),
    (AUTH, "POST", "/v1/holds", {201}),
    (AUTH, "DELETE", "/v1/holds/hold-1", {404}),
    # an unknown token is neither
    ({"Authorization": "Bearer nope"}, "GET", "/v1/decisions", {401}),
    ({"Authorization": "Bearer nope"}, "POST", "/v1/holds", {401}),
])
async def test_the_read_token_reads_and_only_the_write_token_writes(
        sqlite_store: DecisionStore, headers: dict[str, str], method: str, path: str, expected: set[int]) -> None:
    settings = Settings(token=SecretStr(TOKEN), read_token=SecretStr(READ_TOKEN), database_url="sqlite://",
                        cluster=sqlite_store.cluster)
    body: dict[str, Any] = {}
    if path == "/v1/plan":
        body = {"content": "kind: List\nitems: []\n", "params": {"now": "2026-11-23T18:30:00Z"}}
        headers = {**headers, "Content-Type": "application/yaml"}
    elif (method, path) == ("POST", "/v1/holds"):
        body = {"json": {"scope": "cluster", "reason": "freeze", "expiresAt": "2099-01-01T00:00:00Z"}}
    async with running(settings, sqlite_store, InMemoryBus()) as (_, client):
        response = await client.request(method, path, headers=headers, **body)
    assert response.status_code in expected, response.text
    if response.status_code == 403:
        assert "needs the write token" in response.json()["detail"]


def test_the_live_state_records_pods_leaving_nodes_at_the_apis_clock() -> None:
    """The explanations' consolidateAfter counts a pod that left a node without a NodeClaim, as the planner's passes
    do, at the API's clock: the embedded mode's is simulated, not the wall clock."""
    from typing import cast

    import anyio

    from ebb.contracts import ClusterObject
    from ebb_decisions_api.live import LiveState
    from tests.kit.builders import node, nodepool, pod

    at = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)
    live = LiveState(cast(DecisionStore, None), anyio.CapacityLimiter(1), lambda: at)
    for doc in (nodepool(), node("n1"), pod("p1", "n1")):
        meta = doc["metadata"]
        live.objects.apply(ClusterObject(kind=doc["kind"], namespace=meta.get("namespace", ""), name=meta["name"],
                                         resource_version="1", object=doc))
    live.objects.apply(ClusterObject(kind="Pod", namespace="default", name="p1", resource_version="2", object=None))
    assert live.objects.snapshot().pod_events == (("n1", at),)

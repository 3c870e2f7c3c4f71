"""decisions-api without PostgreSQL: settings, startup checks, readiness when the store is down, the
plan endpoint's worker thread and size limit, and the store paths on SQLite (embedded mode's database).
The PostgreSQL behaviour is covered in tests/integration/test_decisions_api.py."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from ebb.adapters.store.migrate import upgrade_async
from ebb.adapters.store.repository import Repository
from ebb_decisions_api import app as app_module
from ebb_decisions_api.app import create_app
from ebb_decisions_api.settings import Settings

TOKEN = "service-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: nothing listens on port 1: every query fails at once
UNREACHABLE = "postgresql+asyncpg://ebb@127.0.0.1:1/ebb"


def _client(settings: Settings, repository: Repository | None = None) -> httpx.AsyncClient:
    app = create_app(settings, repository)
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
        create_app(Settings(token="", database_url=UNREACHABLE))
    env = {k: v for k, v in os.environ.items() if not k.startswith("EBB_DECISIONS_API_")}
    result = subprocess.run([sys.executable, "-m", "ebb_decisions_api"], env=env, capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 2 and "EBB_DECISIONS_API_TOKEN" in result.stderr


async def test_not_ready_while_the_database_is_down() -> None:
    repository = Repository.from_url(UNREACHABLE)
    try:
        async with _client(Settings(token=TOKEN, database_url=UNREACHABLE), repository) as client:
            assert (await client.get("/healthz")).status_code == 200
            ready = await client.get("/readyz")
            assert ready.status_code == 503 and ready.json()["status"] == "unavailable"
    finally:
        await repository.close()


async def test_plan_runs_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    started, release = threading.Event(), threading.Event()

    def slow_plan(*args: Any) -> dict[str, Any]:
        started.set()
        assert release.wait(10)
        return {"now": "x", "commands": [], "blocked": [], "budgets": [], "cost": {"before": 0.0, "after": 0.0}}

    monkeypatch.setattr(app_module, "run_plan", slow_plan)
    repository = Repository.from_url(UNREACHABLE)
    try:
        async with _client(Settings(token=TOKEN, database_url=UNREACHABLE), repository) as client:
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
        await repository.close()


async def test_plan_size_limit_and_content_type() -> None:
    repository = Repository.from_url(UNREACHABLE)
    settings = Settings(token=TOKEN, database_url=UNREACHABLE, max_plan_bytes=1024)
    try:
        async with _client(settings, repository) as client:
            big = await client.post("/v1/plan", content="#" * 2048, headers={**AUTH, "Content-Type": "text/plain"})
            assert big.status_code == 413
            odd = await client.post("/v1/plan", content=b"x", headers={**AUTH, "Content-Type": "image/png"})
            assert odd.status_code == 422 and odd.json()["detail"][0]["loc"] == ["header", "content-type"]
            empty = await client.post("/v1/plan", content=b"", headers={**AUTH, "Content-Type": "text/plain"})
            assert empty.status_code == 422 and empty.json()["detail"][0]["loc"] == ["body"]
    finally:
        await repository.close()


@pytest.fixture
async def sqlite_repository(tmp_path: Path) -> AsyncIterator[Repository]:
    url = f"sqlite:///{tmp_path / 'ebb.db'}"
    await upgrade_async(url)
    repository = Repository.from_url(url, cluster="embedded")
    try:
        yield repository
    finally:
        await repository.close()


async def test_holds_and_decisions_on_sqlite(sqlite_repository: Repository) -> None:
    repo = sqlite_repository
    async with _client(Settings(token=TOKEN, database_url="sqlite://"), repo) as client:
        assert (await client.get("/readyz")).status_code == 200
        hold = (await client.post("/v1/holds", json={"scope": "node", "target": "n1", "reason": "r"},
                                  headers=AUTH)).json()
        assert [h["id"] for h in (await client.get("/v1/holds", headers=AUTH)).json()["items"]] == [hold["id"]]
        assert (await client.delete(f"/v1/holds/{hold['id']}", headers=AUTH)).status_code == 204

        base = datetime(2026, 11, 20, tzinfo=UTC)
        for i in range(6):
            nodes: list[Any] = [{"name": f"n{i}", "nodePool": "spot" if i % 2 else "default"}]
            await repo.add_decision(decision_id=f"d{i}", method="emptiness", reason="Empty", action="delete",
                                    nodes=nodes if i != 5 else ["n5"], replacements=[], created_at=base
                                    + timedelta(minutes=i // 2), state="proposed")
        await repo.add_decision_event(decision_id="d1", event_id="e1", type="Proposed", at=base)
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

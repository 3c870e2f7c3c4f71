"""Bad input never crashes and nothing is silent: a small valid cluster (a NodePool with budgets, Nodes,
Pods, a PodDisruptionBudget, a catalog) with one to three of its fields replaced by hostile values (None,
bools, huge or negative integers, NaN and infinite floats, odd strings, lists, mappings) either parses
and plans without an exception, or is refused with a SnapshotError naming the document and the field,
which `ebb plan` reports with exit 2 and POST /v1/plan with 422. Anything else (a TypeError from a
field whose shape the parser trusted, a 500) is a defect the table in
tests/unit/test_snapshot_parser.py then pins by example.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from pydantic import SecretStr

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.store.decision_store import DecisionStore
from ebb.core.plan import make_plan
from ebb.core.snapshot import SnapshotError, parse_documents
from ebb_decisions_api.app import create_app
from ebb_decisions_api.settings import Settings
from tests.kit.hostile import (
    hostile_clusters,
    valid_cluster,
)

NOW = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)
TOKEN = "hostile-input-token"



def test_the_unmutated_cluster_plans() -> None:
    """The generator's starting point is valid, so the refusals below come from the hostile fields."""
    make_plan(parse_documents(valid_cluster()), NOW, until_stable=True)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_clusters())
def test_the_parser_refuses_or_the_plan_runs(documents: list[dict[str, Any]]) -> None:
    try:
        snapshot = parse_documents(documents)
    except SnapshotError as exc:
        assert exc.document and exc.field, exc  # the document and the field are named
        return
    make_plan(snapshot, NOW, until_stable=True)


async def _post_plan(body: str) -> httpx.Response:
    """The plan endpoint of an app without lifespan (no consumers): an uploaded snapshot needs no store."""
    store = DecisionStore.from_url("sqlite://")
    app = create_app(Settings(token=SecretStr(TOKEN), database_url="sqlite://"), store, bus=InMemoryBus())
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
            return await client.post("/v1/plan", params={"now": "2026-11-23T18:30:00Z"}, content=body, headers={
                "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    finally:
        await store.close()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_clusters())
def test_post_plan_answers_200_or_422(documents: list[dict[str, Any]]) -> None:
    # json.dumps writes NaN and Infinity, which the API's JSON reader accepts like Python's
    response = asyncio.run(_post_plan(json.dumps(documents)))
    assert response.status_code in (200, 422), response.text

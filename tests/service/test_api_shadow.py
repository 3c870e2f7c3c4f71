"""decisions-api on SQLite, shadow mode (docs/shadow.md): ``GET /v1/decisions?shadow=`` lists shadow decisions apart
from real ones and marks them in the JSON; ``GET /v1/shadow/report`` serves the comparison of what the shadow planner
kept for the period, and refuses a period that is none."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.migrate import upgrade_async
from ebb.adapters.store.models import ShadowRemoval
from ebb_decisions_api.app import create_app
from ebb_decisions_api.settings import Settings
from tests.kit.builders import proposed
from tests.kit.decisions_api import AUTH, TOKEN

T0 = datetime(2026, 11, 20, tzinfo=UTC)


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[DecisionStore, DecisionStore]]:
    """The API's store and a shadow planner's, on one database."""
    url = f"sqlite:///{tmp_path / 'ebb.db'}"
    await upgrade_async(url)
    api, planner = DecisionStore.from_url(url, "c"), DecisionStore.from_url(url, "c", shadow=True)
    try:
        yield api, planner
    finally:
        await api.close()
        await planner.close()


def client(store: DecisionStore) -> httpx.AsyncClient:
    app = create_app(Settings(token=SecretStr(TOKEN), database_url="sqlite://", cluster="c"), store,
                     bus=InMemoryBus(), clock=lambda: T0 + timedelta(hours=10))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api")


async def test_shadow_decisions_are_listed_marked_and_reported(stores: tuple[DecisionStore, DecisionStore]) -> None:
    api, planner = stores
    # a real decision, and the shadow planner's: one approved (n1, kept by Karpenter), one proposed (n2)
    await api.add_decision(decision_id="real", method="emptiness", reason="Empty", action="delete",
                           nodes=[{"name": "n0", "nodePool": "default"}], replacements=[], created_at=T0)
    await planner.propose(proposed("s1", "n1", now=T0 + timedelta(hours=1), savings=0.25))
    approval = await planner.approve("s1", node_pools={"n1": "default"}, reason="Empty", allowed={"default": 1},
                                     counted=(), now=T0 + timedelta(hours=2))
    assert approval.approved
    await planner.propose(proposed("s2", "n2", now=T0 + timedelta(hours=3)))
    # Karpenter removed n2 (ebb had proposed it) and n3 (ebb: a PDB blocks it)
    for node, hours, verdict in (("n2", 4, "disrupt"), ("n3", 5, "pdb-blocks")):
        assert await planner.record_removal(ShadowRemoval(
            node=node, removed_at=T0 + timedelta(hours=hours), nodepool="default", instance_type="m5.large",
            removed_by="karpenter", reason="Underutilized", detail="", verdict=verdict, verdict_inner="",
            verdict_text=f"{node}: why", verdict_at=T0 + timedelta(hours=hours - 1), price=Decimal("0.1")))
    for seconds in (0, 5, -30):  # kept once, as seen by another replica a moment before or after too
        assert not await planner.record_removal(ShadowRemoval(
            node="n3", removed_at=T0 + timedelta(hours=5, seconds=seconds), removed_by="karpenter", reason="",
            detail="", verdict="", verdict_inner="", verdict_text="", nodepool="", instance_type=""))
    async with client(api) as http:
        shadow = (await http.get("/v1/decisions", params={"shadow": "true"}, headers=AUTH)).json()["items"]
        assert [(d["id"], d["shadow"], d["state"]) for d in shadow] == [("s2", True, "proposed"),
                                                                         ("s1", True, "approved")]
        real = (await http.get("/v1/decisions", params={"shadow": "false"}, headers=AUTH)).json()["items"]
        assert [(d["id"], d["shadow"]) for d in real] == [("real", False)]
        assert len((await http.get("/v1/decisions", headers=AUTH)).json()["items"]) == 3
        assert (await http.get("/v1/decisions/s1", headers=AUTH)).json()["shadow"] is True

        response = await http.get("/v1/shadow/report", params={"since": "1d"}, headers=AUTH)
        assert response.status_code == 200
        report = response.json()
        assert report["until"] == (T0 + timedelta(hours=10)).isoformat()
        assert report["since"] == (T0 + timedelta(hours=10) - timedelta(days=1)).isoformat()
        counts = report["counts"]
        assert (counts["karpenterRemovals"], counts["both"], counts["karpenterOnly"], counts["ebbOnly"]) == (2, 1, 1, 1)
        assert counts["karpenterOnlyByCategory"] == {"pdb": 1}
        [alone] = report["karpenterOnly"]
        assert alone["node"] == "n3" and alone["ebb"]["category"] == "pdb" and alone["ebb"]["reason"] == "n3: why"
        [ebb_only] = report["ebbOnly"]
        # 0.25/h from its approval (2 h) to the end of the period (10 h)
        assert ebb_only["id"] == "s1" and ebb_only["kept"] == ["n1"] and ebb_only["saved"] == pytest.approx(2.0)
        [both] = report["both"]
        assert both["node"] == "n2" and both["decision"]["id"] == "s2" and both["ebbAheadSeconds"] == 3600.0

        # a period that ends before anything happened
        early = (await http.get("/v1/shadow/report", params={"since": "1h", "until": "2026-11-20T00:30:00Z"},
                                headers=AUTH)).json()
        assert early["counts"]["shadowDecisions"] == 0 and early["counts"]["karpenterRemovals"] == 0
        refused = await http.get("/v1/shadow/report", params={"since": "a week"}, headers=AUTH)
        assert refused.status_code == 422
        assert (await http.get("/v1/shadow/report")).status_code == 401

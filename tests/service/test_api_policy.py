"""decisions-api next to Karpenter, on the InMemoryBus: a DisruptionPolicy among the cluster objects is the
policy explanations, budgets and live plans use and name, and with ``provider=karpenter`` (set as the planner's)
a node without a NodeClaim is explained as such, as ``ebb plan --provider karpenter`` would. With another provider
the NodeClaims are a conflict with Karpenter (``ebb.core.conflicts``): /readyz lists it and every node of the
NodePool is explained as refused, as the planner refuses it; the provider's own rule is checked with the check off."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any, Literal

import httpx
import pytest
from pydantic import SecretStr

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.store.decision_store import DecisionStore
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, ClusterObject
from ebb.core.methods.base import EngineOptions
from ebb.core.plan import make_plan, plan_json
from ebb_decisions_api.app import create_app
from ebb_decisions_api.settings import Settings
from tests.kit.builders import catalog, disruption_policy, node, nodeclaim, nodepool, pod, snapshot

TOKEN = "policy-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NOW = "2026-11-23T18:30:00Z"
NO_NODECLAIM = "it has no NodeClaim: with the karpenter provider ebb retires nodes by deleting their NodeClaim"


def _cluster() -> list[dict[str, Any]]:
    """Karpenter's NodePool with its own disruption off, ebb's DisruptionPolicy for it, an empty node with a
    NodeClaim, an empty one without, and a busy one."""
    return [nodepool(budgets=[{"nodes": "0"}], expire_after="Never"),
            disruption_policy(consolidationPolicy="WhenEmpty", budgets=[{"nodes": "2"}]),
            node("claimed"), nodeclaim("claim-claimed", "claimed"), node("unclaimed"),
            node("busy"), nodeclaim("claim-busy", "busy"), pod("web", "busy"), catalog()]


def _object(doc: dict[str, Any]) -> ClusterObject:
    meta = doc["metadata"]
    return ClusterObject(kind=doc["kind"], namespace=meta.get("namespace", ""), name=meta["name"],
                         resource_version="1", object=doc)


@contextlib.asynccontextmanager
async def _api(store: DecisionStore, provider: Literal["none", "kwok", "karpenter"], *,
               check_conflicts: bool = True) -> AsyncIterator[httpx.AsyncClient]:
    bus = InMemoryBus()
    for doc in _cluster():
        await bus.publish(TOPIC_CLUSTER_OBJECTS, _object(doc))
    settings = Settings(token=SecretStr(TOKEN), database_url="sqlite://", cluster=store.cluster, provider=provider,
                        check_conflicts=check_conflicts)
    app = create_app(settings, store, bus=bus)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        for _ in range(500):
            if (await client.get("/readyz")).status_code == 200:
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the API did not become ready")
        yield client


def test_the_provider_setting_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EBB_DECISIONS_API_PROVIDER", "karpenter")
    assert Settings(token=SecretStr(TOKEN)).provider == "karpenter"
    monkeypatch.setenv("EBB_DECISIONS_API_PROVIDER", "aws")
    with pytest.raises(ValueError, match="provider"):
        Settings(token=SecretStr(TOKEN))


# (provider, node "unclaimed": disrupted with "claimed", or its blocked reason)
PROVIDERS: list[tuple[Literal["none", "kwok", "karpenter"], str | None]] = [
    ("none", None),
    ("kwok", None),
    ("karpenter", NO_NODECLAIM),
]


@pytest.mark.parametrize(("provider", "unclaimed"), PROVIDERS)
async def test_explanations_follow_the_policy_and_the_provider(
        store: DecisionStore, provider: Literal["none", "kwok", "karpenter"], unclaimed: str | None) -> None:
    # with none or kwok the NodeClaims would be a conflict that refuses the pool (the next test): off here
    async with _api(store, provider, check_conflicts=provider == "karpenter") as client:
        claimed = (await client.get("/v1/nodes/claimed/explain", params={"now": NOW}, headers=AUTH)).json()
        assert claimed["disrupted"] is True, claimed
        assert claimed["policy"] == "DisruptionPolicy default"
        assert {b["allowed"] for b in claimed["budgets"]} == {2}
        # next to Karpenter the node without a NodeClaim is not in the budget's total (Karpenter manages it not)
        total = 2 if provider == "karpenter" else 3
        assert {b["detail"] for b in claimed["budgets"]} == {
            f"budget nodes=2 of DisruptionPolicy default allows 2 of {total} nodes (0 deleting, 0 NotReady)"}

        busy = (await client.get("/v1/nodes/busy/explain", params={"now": NOW}, headers=AUTH)).json()
        assert busy["blocked"]["reason"] == ("DisruptionPolicy default's consolidationPolicy is WhenEmpty: only "
                                             "empty nodes are consolidated")

        other = (await client.get("/v1/nodes/unclaimed/explain", params={"now": NOW}, headers=AUTH)).json()
        if unclaimed is None:
            assert other["disrupted"] is True, other
        else:
            assert other["disrupted"] is False
            assert other["blocked"] == {"method": "all", "reason": unclaimed}

        live = (await client.post("/v1/plan", params={"now": NOW}, headers=AUTH)).json()
        in_key_order = sorted(_cluster(), key=lambda d: _object(d).key())  # as the API's snapshot store holds them
        expected = plan_json(make_plan(snapshot(*in_key_order), datetime.fromisoformat(NOW),
                                       options=EngineOptions(require_nodeclaim=provider == "karpenter")))
        assert live == json.loads(json.dumps(expected))


@pytest.mark.parametrize("provider", ["none", "kwok"])
async def test_nodeclaims_without_the_karpenter_provider_are_a_conflict(
        store: DecisionStore, provider: Literal["none", "kwok"]) -> None:
    async with _api(store, provider) as client:
        ready = (await client.get("/readyz")).json()
        claimed = (await client.get("/v1/nodes/claimed/explain", params={"now": NOW}, headers=AUTH)).json()
    assert ready["status"] == "ready"
    [conflict] = ready["conflicts"]
    assert (conflict["kind"], conflict["nodePool"], conflict["object"]) == (
        "NodeClaimsWithoutKarpenterProvider", "default", "NodeClaim claim-busy, claim-claimed")
    assert f"ebb's provider is {provider}, not karpenter" in conflict["message"]
    assert claimed["disrupted"] is False
    assert claimed["blocked"]["reason"] == ("ebb disrupts no node of NodePool default until this conflict is fixed: "
                                            + conflict["message"])


async def test_readyz_lists_no_conflict_when_there_is_none(store: DecisionStore) -> None:
    async with _api(store, "karpenter") as client:
        ready = (await client.get("/readyz")).json()
    assert ready == {"status": "ready", "conflicts": []}


async def test_the_budgets_report_names_the_policy(store: DecisionStore) -> None:
    async with _api(store, "karpenter") as client:
        report = (await client.get("/v1/nodepools/default/budgets", params={"now": NOW}, headers=AUTH)).json()
    assert report["policy"] == "DisruptionPolicy default"
    assert [(b["nodes"], b["allowed"]) for b in report["budgets"]] == [("2", 2)]
